/**
 * Fault: SIGTERM to the webhook while many keep-alive clients POST AdmissionReviews back to back
 * (as API server replicas do), plus slow clients whose requests are still being uploaded when
 * the server stops accepting.
 *
 * Expected (services/webhook README, "Shutdown"): /readyz fails at once; requests are served
 * for --shutdown-delay with `Connection: close`, so every client finishes its current
 * request and reconnects; then the listener closes and in-flight requests finish; the process
 * exits 0 within shutdown-delay + shutdown-timeout. No request that reached the webhook may
 * fail: no reset or hang-up once the TLS connection is up, no 5xx, no review without the patch.
 * A connection refused or reset before its TLS handshake completed (the listener closed with it
 * still in the kernel's accept queue) carried nothing of a request: it is counted, not failed —
 * the shutdown delay exists so that, behind a Service, no new connection arrives by then.
 */
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import {
  type Cluster,
  connectE2eCluster,
  deleteNamespace,
  type RunningWebhook,
  sleep,
  startWebhook,
  waitFor,
} from '@kubeplus-isolation/e2e';
import { uniqueName } from '../support/names.js';
import { createIsolatedNamespace, poolMandate } from '../support/node-isolation.js';
import {
  getStatus,
  patchOf,
  podReview,
  postReview,
  type ReviewReply,
  startLoad,
  summarize,
} from './support/webhook-client.js';

const CLIENTS = 16;
const SLOW_CLIENTS = 4;
const SHUTDOWN_DELAY_MS = 1_000;
const SHUTDOWN_TIMEOUT_MS = 5_000;
/** Each slow request is uploaded over this long, starting during the delay: it spans the close. */
const UPLOAD_MS = 1_500;

describe('fault: SIGTERM to the webhook under load', () => {
  let cluster: Cluster;
  let webhook: RunningWebhook | undefined;
  let ns = '';
  const pool = uniqueName('term-pool');

  beforeAll(async () => {
    cluster = await connectE2eCluster();
    ns = await createIsolatedNamespace(cluster.kc, 'faults-sigterm', poolMandate(pool));
    webhook = await startWebhook(cluster, {
      extraArgs: [`--shutdown-delay=${SHUTDOWN_DELAY_MS}ms`, `--shutdown-timeout=${SHUTDOWN_TIMEOUT_MS}ms`],
    });
    // The informer has synced (ready), but make sure it has this namespace: a patched review.
    await waitFor(
      `the webhook to patch Pods of ${ns}`,
      async () => patchOf(await postReview(webhook?.url ?? '', cluster.caPem, podReview(ns, 'probe'))).length > 0,
      { timeoutMs: 30_000 },
    );
  });

  afterAll(async () => {
    await webhook?.stop();
    if (ns) await deleteNamespace(cluster.kc, ns);
  });

  test('no in-flight request fails, and the process exits 0 within its bound', async () => {
    const w = webhook as RunningWebhook;
    const readyUrl = w.url.replace('/mutate/pods', '/readyz');
    const hasPatch = (reply: ReviewReply): string | undefined =>
      patchOf(reply).some((op) => op.path === '/spec/nodeSelector') ? undefined : 'no node-isolation patch';
    const load = startLoad({
      url: w.url,
      caPem: cluster.caPem,
      namespace: ns,
      clients: CLIENTS,
      check: hasPatch,
      stopOnRefused: true,
    });
    // Settled at once (an Error value on failure), so a failure is asserted, not an unhandled rejection.
    let slow: Promise<ReviewReply | Error>[] = [];
    let termAt = 0;
    let readyDuringDrain: number | undefined;
    try {
      await waitFor('the load to get going (200 answered reviews)', async () => load.outcomes.length >= 200, {
        timeoutMs: 60_000,
        intervalMs: 20,
      });
      termAt = performance.now();
      expect(w.signal('SIGTERM')).toBe(true);
      await sleep(200);
      readyDuringDrain = (await getStatus(readyUrl, cluster.caPem)).status;
      // Slow requests on new connections, accepted during the delay, still uploading at the close.
      slow = Array.from({ length: SLOW_CLIENTS }, (_, i) =>
        postReview(w.url, cluster.caPem, podReview(ns, `slow-${i}`), { uploadMs: UPLOAD_MS }).catch(
          (error: Error) => error,
        ),
      );
      const exit = await waitFor(
        `the webhook to exit after SIGTERM (bound: shutdown delay ${SHUTDOWN_DELAY_MS} ms + timeout ${SHUTDOWN_TIMEOUT_MS} ms, plus start-up slack)`,
        async () => w.process.exited(),
        { timeoutMs: SHUTDOWN_DELAY_MS + SHUTDOWN_TIMEOUT_MS + 10_000, intervalMs: 50 },
      );
      expect(exit).toEqual({ code: 0, signal: null });
    } finally {
      await load.stop();
    }
    const slowReplies = await Promise.all(slow);
    const summary = summarize(load.outcomes);
    const afterTerm = load.outcomes.filter((o) => o.startedAt > termAt);
    process.stderr.write(
      `[faults] sigterm: ${summary.ok} ok (${afterTerm.filter((o) => o.result === 'ok').length} sent after SIGTERM), ${summary.notAccepted} connections not accepted once the listener closed, ${summary.failed} failed\n`,
    );
    expect(summary.failures).toEqual([]);
    expect(summary.failed).toBe(0);
    // Served after SIGTERM (the delay), with `Connection: close` so each client reconnects: once
    // a client got one, every later answer to it says so too (the drain never reverts).
    const drained = afterTerm.filter((o) => o.result === 'ok');
    expect(drained.filter((o) => o.reply?.connection === 'close').length).toBeGreaterThan(0);
    for (let c = 0; c < CLIENTS; c++) {
      const mine = load.outcomes.filter((o) => o.client === c && o.result === 'ok');
      const first = mine.findIndex((o) => o.reply?.connection === 'close');
      if (first >= 0)
        expect(mine.slice(first).map((o) => o.reply?.connection)).toEqual(mine.slice(first).map(() => 'close'));
    }
    expect(readyDuringDrain).toBe(503);
    // Every slow request, in flight when the listener closed, was answered in full.
    expect(
      slowReplies.map((r) =>
        r instanceof Error ? r.message : { status: r.status, patched: hasPatch(r) === undefined },
      ),
    ).toEqual(Array.from({ length: SLOW_CLIENTS }, () => ({ status: 200, patched: true })));
    const log = w.logTail(200);
    expect(log).toContain('shutdown complete');
    expect(log).toMatch(/"connections":"drained"/);
  });
});
