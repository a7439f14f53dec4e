/**
 * client-node's Watch as the shared list/watch loop's transport (`ListWatchLoop` in
 * @kubeplus-isolation/service): the informers' watches (informer-sources.ts) and the audit's Pod
 * watch (pod-watch.ts).
 */
import { WatchIdleError, type WatchStream } from '@kubeplus-isolation/service';
import type { Watch } from '@kubernetes/client-node';

/** client-node's Watch ends a watch that received nothing this long (its `requestTimeoutMs`). */
const CLIENT_NODE_WATCH_IDLE_MS = 30_000;

/** What of client-node's Watch the transport uses (a fake in tests). */
export type WatchClient = Pick<Watch, 'watch'>;

/**
 * One watch over client-node's Watch, as the shared loop's transport: `connected` once the server
 * answered, `closed` exactly once — with the signal's reason when the loop ends it. client-node's
 * own inactivity timeout (a TimeoutError) is an idle watch, reopened from its resourceVersion.
 */
export function watchOnce(
  watch: WatchClient,
  path: string,
  params: Record<string, string | boolean>,
  stream: WatchStream,
  signal: AbortSignal,
): void {
  let done = false;
  let controller: AbortController | undefined;
  const finish = (err: unknown): void => {
    if (done) return;
    done = true;
    signal.removeEventListener('abort', onAbort);
    stream.closed(err);
  };
  const onAbort = (): void => {
    controller?.abort();
    finish(signal.reason);
  };
  if (signal.aborted) {
    finish(signal.reason);
    return;
  }
  signal.addEventListener('abort', onAbort, { once: true });
  watch
    .watch(
      path,
      params,
      (type: string, obj: unknown) => {
        if (!done) stream.event(type, obj);
      },
      (err: unknown) => {
        if (err === null || err === undefined) finish(undefined);
        else if (err instanceof Error && err.name === 'TimeoutError')
          finish(new WatchIdleError(CLIENT_NODE_WATCH_IDLE_MS));
        else finish(err);
      },
    )
    .then(
      (c) => {
        controller = c;
        if (done) c.abort();
        else stream.connected();
      },
      (err: unknown) => finish(err),
    );
}
