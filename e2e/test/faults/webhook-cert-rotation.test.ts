/**
 * Fault: the webhook's serving certificate and key are replaced on disk (a new pair from the
 * cluster CA, as cert-manager or the chart's renewal would issue) while clients keep calling.
 *
 * Three kinds of clients run through the rotation: keep-alive clients (their open connections
 * keep the old certificate, which stays valid), clients opening a new TLS connection per
 * request (they must switch to the new certificate once it is live, and never back), and the
 * API server itself creating Pods through the registration (caBundle = the CA). Expected: no
 * TLS or connection error and no missing patch anywhere, the reload counted as a success, and
 * after it every new connection presents the new certificate.
 */
import { renameSync, writeFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import {
  type Cluster,
  connectE2eCluster,
  deleteNamespace,
  type RunningWebhook,
  registerWebhook,
  scrapeMetrics,
  startWebhook,
  sumMetric,
  testPod,
  unregisterWebhook,
  waitFor,
} from '@kubeplus-isolation/e2e';
import { CoreV1Api } from '@kubernetes/client-node';
import { uniqueName } from '../support/names.js';
import { createIsolatedNamespace, poolMandate, waitForWebhookActive } from '../support/node-isolation.js';
import {
  fingerprintOf,
  patchOf,
  podReview,
  postReview,
  type ReviewReply,
  startLoad,
  summarize,
} from './support/webhook-client.js';

const KEEP_ALIVE_CLIENTS = 8;
const NEW_CONNECTION_CLIENTS = 4;
/** New-connection requests that must have seen the new certificate before the load stops. */
const AFTER_ROTATION = 100;

describe('fault: certificate rotation under load', () => {
  let cluster: Cluster;
  let webhook: RunningWebhook | undefined;
  let ns = '';
  const configName = uniqueName('faults-rotation');
  const pool = uniqueName('rot-pool');
  const mandate = poolMandate(pool);

  beforeAll(async () => {
    cluster = await connectE2eCluster();
    ns = await createIsolatedNamespace(cluster.kc, 'faults-rotation', mandate);
    // Poll the files often too, besides watching them: the rotation is seen either way.
    webhook = await startWebhook(cluster, { extraArgs: ['--tls-reload-interval=500ms'] });
    await registerWebhook(cluster.kc, { url: webhook.url, caPem: webhook.caPem, name: configName });
    await waitForWebhookActive(cluster.kc, ns, mandate.nodeSelector);
  });

  afterAll(async () => {
    await unregisterWebhook(cluster.kc, configName);
    await webhook?.stop();
    if (ns) await deleteNamespace(cluster.kc, ns);
  });

  test('no TLS error during the reload; new connections see the new certificate', async () => {
    const w = webhook as RunningWebhook;
    const core = cluster.kc.makeApiClient(CoreV1Api);
    const oldFingerprint = (await postReview(w.url, cluster.caPem, podReview(ns, 'before'))).fingerprint256;
    const hasPatch = (reply: ReviewReply): string | undefined =>
      patchOf(reply).some((op) => op.path === '/spec/nodeSelector') ? undefined : 'no node-isolation patch';
    const keepAlive = startLoad({
      url: w.url,
      caPem: cluster.caPem,
      namespace: ns,
      clients: KEEP_ALIVE_CLIENTS,
      check: hasPatch,
    });
    const fresh = startLoad({
      url: w.url,
      caPem: cluster.caPem,
      namespace: ns,
      clients: NEW_CONNECTION_CLIENTS,
      keepAlive: false,
      check: hasPatch,
    });
    // The API server as a client, through the registration: dry-run creates, back to back.
    const viaApiServer: { name: string; pool?: string; error?: string }[] = [];
    let stopApi = false;
    const apiLoop = (async () => {
      for (let i = 0; !stopApi; i++) {
        try {
          const pod = await core.createNamespacedPod({ namespace: ns, body: testPod(`rot-${i}`), dryRun: 'All' });
          viaApiServer.push({ name: `rot-${i}`, pool: pod.spec?.nodeSelector?.pool });
        } catch (error) {
          viaApiServer.push({ name: `rot-${i}`, error: (error as Error).message });
        }
      }
    })();

    let newFingerprint = '';
    let switchedAt = 0;
    try {
      await waitFor('the load to get going', async () => keepAlive.outcomes.length + fresh.outcomes.length >= 200, {
        timeoutMs: 60_000,
        intervalMs: 20,
      });
      expect(fresh.outcomes.every((o) => o.reply?.fingerprint256 === oldFingerprint)).toBe(true);

      // Rotate: a new key pair from the same CA, each file replaced atomically (rename).
      const next = await cluster.issueServingCert(['127.0.0.1', 'localhost']);
      newFingerprint = fingerprintOf(next.certPem);
      expect(newFingerprint).not.toBe(oldFingerprint);
      writeFileSync(`${w.tlsKeyFile}.new`, next.keyPem, { mode: 0o600 });
      writeFileSync(`${w.tlsCertFile}.new`, next.certPem, { mode: 0o600 });
      renameSync(`${w.tlsKeyFile}.new`, w.tlsKeyFile);
      renameSync(`${w.tlsCertFile}.new`, w.tlsCertFile);

      switchedAt = await waitFor(
        'a new connection to present the new certificate',
        async (observe) => {
          const reply = await postReview(w.url, cluster.caPem, podReview(ns, 'probe'));
          observe(reply.fingerprint256);
          return reply.fingerprint256 === newFingerprint ? performance.now() : undefined;
        },
        { timeoutMs: 30_000, intervalMs: 100 },
      );
      await waitFor(
        `${AFTER_ROTATION} new-connection requests after the switch`,
        async () => fresh.outcomes.filter((o) => o.startedAt > switchedAt).length >= AFTER_ROTATION,
        { timeoutMs: 60_000, intervalMs: 20 },
      );
    } finally {
      stopApi = true;
      await Promise.all([keepAlive.stop(), fresh.stop(), apiLoop]);
    }

    const all = [...keepAlive.outcomes, ...fresh.outcomes];
    const summary = summarize(all);
    process.stderr.write(
      `[faults] rotation: ${summary.ok} direct requests ok (${fresh.outcomes.length} on new connections), ${viaApiServer.length} Pods through the API server, ${summary.failed} failed\n`,
    );
    // No TLS (or any other) error, for any client, at any time.
    expect(summary.failures).toEqual([]);
    expect(summary.notAccepted).toBe(0);
    // The API server trusted both certificates: every Pod patched, none failed open.
    expect(viaApiServer.filter((p) => p.pool !== pool)).toEqual([]);
    // After the switch, every new connection presented the new certificate — never the old one again.
    const late = fresh.outcomes.filter((o) => o.startedAt > switchedAt);
    expect(late.length).toBeGreaterThanOrEqual(AFTER_ROTATION);
    expect([...new Set(late.map((o) => o.reply?.fingerprint256))]).toEqual([newFingerprint]);
    // Old keep-alive connections went on with the old certificate, unharmed.
    expect(keepAlive.outcomes.some((o) => o.startedAt > switchedAt && o.reply?.fingerprint256 === oldFingerprint)).toBe(
      true,
    );
    const metrics = await scrapeMetrics(w.metricsUrl);
    expect(sumMetric(metrics, 'kubeplus_webhook_tls_reloads_total', { result: 'success' })).toBeGreaterThanOrEqual(1);
    expect(w.logTail(2_000)).toContain('TLS certificate reloaded');
  });
});
