/**
 * KubePlus's namespace at start and while running (the pure rule: packages/spec
 * platform-namespace.ts). `--platform-namespace` set: that, never re-checked. Empty (the chart's
 * default): found from the MutatingWebhookConfigurations, with one LIST at start; then a watch of
 * them re-decides after every change (once the change is fully applied to the cache), and a
 * different answer ends the run (`platform-namespace-changed`), so the restarted operator starts
 * from the new namespace with nothing carried over (level-triggered: no hidden state).
 */

import { describeError } from '@kubeplus-isolation/service';
import {
  choosePlatformNamespace,
  discoverPlatformNamespace,
  type PlatformNamespaceChoice,
  type WebhookConfigurationShape,
} from '@kubeplus-isolation/spec';
import type { InformerSource } from '../runtime/informer.js';

/** The reason the run ends when KubePlus's namespace changed under it (logged, and in the error). */
export const PLATFORM_NAMESPACE_CHANGED = 'platform-namespace-changed';

/**
 * The platform namespace in force: the flag, else discovered from one LIST (`list`). A LIST that
 * fails is an error (the caller exits 1 and is restarted): falling back to `kubeplus` while
 * KubePlus may run elsewhere would take an instance's own namespace (e.g. `default`) for its
 * tenant's.
 */
export async function resolvePlatformNamespace(
  flag: string,
  list: () => Promise<readonly WebhookConfigurationShape[]>,
): Promise<PlatformNamespaceChoice> {
  if (flag !== '') return choosePlatformNamespace(flag, undefined);
  let configurations: readonly WebhookConfigurationShape[];
  try {
    configurations = await list();
  } catch (err) {
    throw new Error(
      `cannot list MutatingWebhookConfigurations to find KubePlus's namespace (set --platform-namespace, or grant list and watch on mutatingwebhookconfigurations): ${describeError(err, 500)}`,
      { cause: err },
    );
  }
  return choosePlatformNamespace(undefined, discoverPlatformNamespace(configurations));
}

export interface PlatformNamespaceWatch {
  stop(): Promise<void>;
}

/**
 * Watches the webhook configurations (`source`, not yet started) and calls `changed` once when the
 * namespace they name is no longer `current`. Each change schedules one decision over the whole
 * cache after the current burst of events (a relist applies adds before deletes: a half-applied
 * list is never judged); nothing is judged before the first list is complete.
 */
export function watchPlatformNamespace(
  source: InformerSource<WebhookConfigurationShape & { metadata?: { name?: string } }>,
  current: string,
  changed: (next: PlatformNamespaceChoice) => void,
  /** The list or watch failed (it is retried); the namespace in force stays. */
  onError?: (err: unknown) => void,
): PlatformNamespaceWatch {
  let synced = false;
  let scheduled: ReturnType<typeof setTimeout> | undefined;
  let done = false;
  const decide = (): void => {
    scheduled = undefined;
    if (done || !synced) return;
    const next = choosePlatformNamespace(undefined, discoverPlatformNamespace(source.list()));
    if (next.namespace === current) return;
    done = true;
    changed(next);
  };
  const schedule = (): void => {
    if (scheduled === undefined && !done) scheduled = setTimeout(decide, 0);
  };
  // Each connect follows a complete list (the first, or a relist after the watch broke).
  source.on('connect', () => {
    synced = true;
    schedule();
  });
  for (const verb of ['add', 'update', 'delete'] as const) source.on(verb, schedule);
  if (onError !== undefined) source.on('error', onError);
  void source.start();
  return {
    async stop() {
      done = true;
      if (scheduled !== undefined) clearTimeout(scheduled);
      await source.stop();
    },
  };
}
