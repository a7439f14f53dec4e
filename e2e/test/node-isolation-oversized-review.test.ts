/**
 * Issue 21, hole 3: no Pod opts out of node isolation by its size (webhook engine), on the real
 * API server.
 *
 * The API server writes the AdmissionReview with Go's JSON encoder, which escapes `<`, `>` and `&`
 * as `\u003c` (one byte of the request becomes six of the review). A Pod of 0.75 MB of `<` in its
 * args, sent as raw JSON (JSON.stringify does not escape `<`), is well under etcd's request limit
 * (1.5 MiB in the harness) and the API server's (3 MiB), but its review is over 4.5 MB:
 *
 * - with the webhook's default body limit (sized from the API server's request limit and that
 *   worst case) the Pod is patched like any other;
 * - with a limit set below that size, the webhook answers 413 (the API server then admits the Pod
 *   unpatched, failurePolicy Ignore), which the API server counts in
 *   apiserver_admission_webhook_fail_open_count{name="node-isolation.kubeplus.io"}, the series the
 *   KubeplusIsolationWebhookFailingOpen alert reads (issue 34), and the webhook counts as a
 *   fail-open in its own series.
 */
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import {
  type Cluster,
  connectE2eCluster,
  deleteNamespace,
  type RunningWebhook,
  registerWebhook,
  startWebhook,
  testPod,
  unregisterWebhook,
} from '@kubeplus-isolation/e2e';
import { CoreV1Api, type KubeConfig, type V1Pod } from '@kubernetes/client-node';
import { uniqueName } from './support/names.js';
import {
  admissionCounts,
  createIsolatedNamespace,
  poolMandate,
  waitForWebhookActive,
} from './support/node-isolation.js';

/** 0.75 MB of `<`: stored as 0.75 MB, sent to the webhook as 4.5 MB of `\u003c`. */
const ESCAPED_BYTES = 750_000;
/** The webhook's limit before issue 21 (4 MiB). */
const OLD_LIMIT = 4 * 1024 * 1024;

function oversizedPod(name: string, bytes = ESCAPED_BYTES): V1Pod {
  const pod = testPod(name);
  const [container] = pod.spec?.containers ?? [];
  if (container === undefined) throw new Error('testPod has no container');
  container.args = ['<'.repeat(bytes)];
  return pod;
}

describe('node isolation (issue 21, hole 3): a Pod cannot opt out by the size of its review', () => {
  let cluster: Cluster;
  let kc: KubeConfig;
  let core: CoreV1Api;
  const mandate = poolMandate(uniqueName('size-pool'));
  const webhooks: RunningWebhook[] = [];
  const configs: string[] = [];
  let ns = '';

  async function serve(extraArgs: readonly string[]): Promise<RunningWebhook> {
    for (const name of configs.splice(0)) await unregisterWebhook(kc, name);
    for (const w of webhooks.splice(0)) await w.stop();
    const webhook = await startWebhook(cluster, { extraArgs });
    webhooks.push(webhook);
    const name = uniqueName('e2e-oversized-review');
    await registerWebhook(kc, { url: webhook.url, caPem: webhook.caPem, name });
    configs.push(name);
    await waitForWebhookActive(kc, ns, mandate.nodeSelector);
    return webhook;
  }

  beforeAll(async () => {
    cluster = await connectE2eCluster();
    kc = cluster.kc;
    core = kc.makeApiClient(CoreV1Api);
    ns = await createIsolatedNamespace(kc, 'e2e-ni-size', mandate);
  });

  afterAll(async () => {
    for (const name of configs) await unregisterWebhook(kc, name);
    if (ns) await deleteNamespace(kc, ns);
    for (const w of webhooks) await w.stop();
  });

  test('a Pod whose review exceeds the old 4 MiB limit (`<` escaped sixfold) is patched with the default limit', async () => {
    const webhook = await serve([]);
    const before = await admissionCounts(kc, webhook);
    const pod = await core.createNamespacedPod({ namespace: ns, body: oversizedPod('escaped-big') });
    const after = await admissionCounts(kc, webhook);
    // It really is an oversized review: 6 bytes per `<` are over the old limit.
    expect(6 * ESCAPED_BYTES).toBeGreaterThan(OLD_LIMIT);
    expect(pod.spec?.containers[0]?.args?.[0]?.length).toBe(ESCAPED_BYTES);
    expect(pod.spec?.nodeSelector).toMatchObject(mandate.nodeSelector);
    expect(pod.spec?.tolerations).toEqual(
      expect.arrayContaining([expect.objectContaining(mandate.tolerations[0] ?? {})]),
    );
    expect((after.webhookByResult.patched ?? 0) - (before.webhookByResult.patched ?? 0)).toBe(1);
    expect(after.apiServerFailOpen - before.apiServerFailOpen).toBe(0);
  });

  test('a request the webhook answers with a 4xx (413 under a lower --max-body-bytes) is counted as a fail-open', async () => {
    const webhook = await serve(['--max-body-bytes=1048576']);
    const before = await admissionCounts(kc, webhook);
    const pod = await core.createNamespacedPod({ namespace: ns, body: oversizedPod('escaped-refused', 300_000) });
    const after = await admissionCounts(kc, webhook);
    // The API server admitted it unpatched (failurePolicy Ignore), and counted it where the
    // KubeplusIsolationWebhookFailingOpen alert reads: its own fail-open count of this webhook ...
    expect(pod.spec?.nodeSelector).toBeUndefined();
    expect(after.apiServerFailOpen - before.apiServerFailOpen).toBe(1);
    expect(after.apiServerCalls - before.apiServerCalls).toBeGreaterThanOrEqual(1);
    // ... and the webhook counted it too: admissions_total{result="failopen"}, and by reason in
    // failopen_total.
    expect((after.webhookByResult.failopen ?? 0) - (before.webhookByResult.failopen ?? 0)).toBe(1);
    expect((after.failOpenByReason.bad_request ?? 0) - (before.failOpenByReason.bad_request ?? 0)).toBe(1);
  });
});
