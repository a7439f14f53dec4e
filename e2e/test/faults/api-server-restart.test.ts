/**
 * Fault: kube-apiserver and etcd go down (SIGKILL, as in a control-plane node crash) and come
 * back, on a control plane of this suite's own — restarting the shared one would break the
 * other suites.
 *
 * The webhook runs with --max-informer-staleness=2s: its /readyz must fail while its
 * namespace watch is down, and recover. The operator runs with leader election (timings long
 * enough to ride out the outage, so this is about its informers, not a handover). Right after
 * the API server is back — before either component has reconnected — the suite changes things
 * both must notice through their informers (not through a live lookup):
 *
 * - an existing isolated namespace gets a new mandate: the webhook must apply the new one;
 * - another isolated namespace is unlabeled: the webhook must stop patching its Pods;
 * - an instance gets its isolation annotations: the operator must isolate it;
 * - an instance's namespace loses the isolation label: the operator must restore it.
 */
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import {
  type ControlPlane,
  createTestNamespace,
  type RunningOperator,
  type RunningWebhook,
  registerWebhook,
  startControlPlane,
  startOperator,
  startWebhook,
  testPod,
  waitFor,
} from '@kubeplus-isolation/e2e';
import { NODE_ISOLATION_ENABLED_LABEL, NODE_ISOLATION_RESOLVED_ANNOTATION } from '@kubeplus-isolation/spec';
import { CoreV1Api, NodeV1Api } from '@kubernetes/client-node';
import { uniqueName } from '../support/names.js';
import {
  createInstanceKind,
  type InstanceKind,
  instanceAnnotations,
  instanceApi,
  mandateOf,
  mergePatch,
} from './support/operator.js';
import { getStatus, patchOf, podReview, postReview } from './support/webhook-client.js';

/** /readyz of a local service: status and reason (HTTPS when a CA is given). */
async function readyz(url: string, caPem?: string): Promise<{ status: number; body: string }> {
  if (caPem !== undefined) return getStatus(url, caPem);
  const res = await fetch(url, { signal: AbortSignal.timeout(5_000) });
  return { status: res.status, body: await res.text() };
}

describe('fault: kube-apiserver and etcd restart under the webhook and the operator', () => {
  let cp: ControlPlane | undefined;
  let webhook: RunningWebhook | undefined;
  let operator: RunningOperator | undefined;
  let kind: InstanceKind;
  let platform = '';
  let operatorReadyz = '';
  const id = uniqueName('ar');
  const oldPool = `${id}-old`;
  const newPool = `${id}-new`;
  let remandated = '';
  let unlabeled = '';
  const tampered = `${id}-tampered`;
  const late = `${id}-late`;
  const outage: { webhookUnready?: string; operatorReadyz?: number } = {};

  beforeAll(async () => {
    cp = await startControlPlane({ log: (m) => process.stderr.write(`[faults ${id}] ${m}\n`) });
    const kc = cp.kc;
    kind = await createInstanceKind(kc, `${id}.faults.e2e.kubeplus.io`);
    platform = await createTestNamespace(kc, `${id}-platform`);
    const isolated = (pool: string) => ({
      labels: { [NODE_ISOLATION_ENABLED_LABEL]: 'true' },
      annotations: { [NODE_ISOLATION_RESOLVED_ANNOTATION]: JSON.stringify(mandateOf(pool)) },
    });
    remandated = await createTestNamespace(kc, `${id}-remandated`, isolated(oldPool));
    unlabeled = await createTestNamespace(kc, `${id}-unlabeled`, isolated(oldPool));

    webhook = await startWebhook(cp, { extraArgs: ['--max-informer-staleness=2s'] });
    await registerWebhook(kc, { url: webhook.url, caPem: webhook.caPem });
    operator = await startOperator(cp, {
      name: `${id}-operator`,
      leaderElection: {
        namespace: platform,
        id: `${id}-operator`,
        identity: `${id}-operator`,
        // Long enough to keep the Lease across the outage (renewals fail meanwhile).
        lease: { durationS: 60, renewDeadlineS: 45, retryPeriodS: 1, drainTimeoutS: 2, shutdownTimeoutS: 50 },
      },
      args: [`--instance-kinds=${kind.group}`, `--platform-namespace=${platform}`],
    });
    operatorReadyz = operator.readyzUrl;
    const api = instanceApi(kc, kind);
    await api.create(platform, { name: tampered, pool: `${id}-tampered-pool` });
    await api.create(platform, { name: late });
  }, 180_000);

  afterAll(async () => {
    await operator?.stop();
    await webhook?.stop();
    await cp?.stop();
  });

  test('before the outage: the webhook patches, the operator has isolated the first instance', async () => {
    const core = (cp as ControlPlane).kc.makeApiClient(CoreV1Api);
    await waitFor(
      `Pods in ${remandated} to get pool ${oldPool} through the API server`,
      async (observe) => {
        const pod = await core.createNamespacedPod({ namespace: remandated, body: testPod('probe'), dryRun: 'All' });
        observe(pod.spec?.nodeSelector);
        return pod.spec?.nodeSelector?.pool === oldPool;
      },
      { timeoutMs: 30_000 },
    );
    await waitFor(
      `the operator to create namespace ${tampered}, labeled`,
      async () =>
        (await core.readNamespace({ name: tampered })).metadata?.labels?.[NODE_ISOLATION_ENABLED_LABEL] === 'true',
      { timeoutMs: 60_000 },
    );
  });

  test('etcd and kube-apiserver killed: the webhook reports not ready once its cache is stale', async () => {
    const c = cp as ControlPlane;
    const w = webhook as RunningWebhook;
    const readyUrl = w.url.replace('/mutate/pods', '/readyz');
    expect((await readyz(readyUrl, w.caPem)).status).toBe(200);
    await c.stopComponent('kube-apiserver', { signal: 'SIGKILL' });
    await c.stopComponent('etcd', { signal: 'SIGKILL' });
    const unready = await waitFor(
      'the webhook /readyz to fail (namespace watch down for more than 2 s)',
      async (observe) => {
        const r = await readyz(readyUrl, w.caPem);
        observe(r);
        return r.status === 503 ? r.body : undefined;
      },
      { timeoutMs: 30_000, intervalMs: 250 },
    );
    outage.webhookUnready = unready;
    expect(unready).toMatch(/namespace watch disconnected/);
    // Not ready is not dead: liveness and admission still answer (fail-open decisions from the cache).
    const reply = await postReview(w.url, w.caPem, podReview(remandated, 'during-outage'));
    expect(reply.status).toBe(200);
    expect(patchOf(reply)).toEqual(expect.arrayContaining([expect.objectContaining({ path: '/spec/nodeSelector' })]));
    outage.operatorReadyz = (await readyz(operatorReadyz)).status;
    expect(w.process.exited()).toBeUndefined();
    expect(operator?.process.exited()).toBeUndefined();
  });

  test('back up: changes made right away reach both components through their informers', async () => {
    const c = cp as ControlPlane;
    const kc = c.kc;
    await c.startComponent('etcd');
    await c.startComponent('kube-apiserver');
    const core = kc.makeApiClient(CoreV1Api);
    // At once, while the webhook and operator are still backing off from the outage.
    await core.patchNamespace(
      {
        name: remandated,
        body: {
          metadata: { annotations: { [NODE_ISOLATION_RESOLVED_ANNOTATION]: JSON.stringify(mandateOf(newPool)) } },
        },
      },
      mergePatch,
    );
    await core.patchNamespace(
      { name: unlabeled, body: { metadata: { labels: { [NODE_ISOLATION_ENABLED_LABEL]: null } } } },
      mergePatch,
    );
    await core.patchNamespace(
      { name: tampered, body: { metadata: { labels: { [NODE_ISOLATION_ENABLED_LABEL]: null } } } },
      mergePatch,
    );
    await instanceApi(kc, kind).annotate(
      platform,
      late,
      instanceAnnotations({ name: late, pool: `${id}-late-pool`, sandbox: { level: 'kata', enforce: true } }),
    );

    const w = webhook as RunningWebhook;
    const readyUrl = w.url.replace('/mutate/pods', '/readyz');
    await waitFor(
      'the webhook /readyz to recover (watch reconnected after its backoff)',
      async (observe) => {
        const r = await readyz(readyUrl, w.caPem);
        observe(r);
        return r.status === 200;
      },
      { timeoutMs: 90_000, intervalMs: 250 },
    );
    // The webhook: the new mandate is served from the cache (the API server's own path), and
    // the unlabeled namespace is gone from it (asked directly: the API server no longer calls).
    await waitFor(
      `Pods in ${remandated} to get the new pool ${newPool}`,
      async (observe) => {
        const pod = await core.createNamespacedPod({ namespace: remandated, body: testPod('probe'), dryRun: 'All' });
        observe(pod.spec?.nodeSelector);
        return pod.spec?.nodeSelector?.pool === newPool;
      },
      { timeoutMs: 30_000 },
    );
    await waitFor(
      `the webhook to stop patching Pods of the unlabeled namespace ${unlabeled}`,
      async (observe) => {
        const reply = await postReview(w.url, w.caPem, podReview(unlabeled, 'after-unlabel'));
        observe(reply.body.response);
        return patchOf(reply).length === 0 && reply.body.response?.allowed === true;
      },
      { timeoutMs: 30_000 },
    );
    // The operator: the late instance isolated, the tampered namespace restored.
    await waitFor(
      `the operator to isolate ${late} (namespace labeled with its mandate, RuntimeClass created)`,
      async (observe) => {
        const ns = await core.readNamespace({ name: late }).catch(() => undefined);
        const rc = await kc
          .makeApiClient(NodeV1Api)
          .readRuntimeClass({ name: `kubeplus-sandbox-${late}` })
          .catch(() => undefined);
        observe({ labels: ns?.metadata?.labels, handler: rc?.handler });
        return (
          ns?.metadata?.labels?.[NODE_ISOLATION_ENABLED_LABEL] === 'true' &&
          JSON.stringify(JSON.parse(ns.metadata.annotations?.[NODE_ISOLATION_RESOLVED_ANNOTATION] ?? 'null')) ===
            JSON.stringify(mandateOf(`${id}-late-pool`)) &&
          rc?.handler === 'kata'
        );
      },
      { timeoutMs: 60_000 },
    );
    await waitFor(
      `the operator to restore the isolation label of ${tampered}`,
      async () =>
        (await core.readNamespace({ name: tampered })).metadata?.labels?.[NODE_ISOLATION_ENABLED_LABEL] === 'true',
      { timeoutMs: 60_000 },
    );
    await waitFor('the operator /readyz to be 200', async () => (await readyz(operatorReadyz)).status === 200, {
      timeoutMs: 30_000,
    });
    // Neither process restarted: their informers recovered in place.
    expect(w.process.exited()).toBeUndefined();
    expect(operator?.process.exited()).toBeUndefined();
    process.stderr.write(
      `[faults] ${id}: during the outage the webhook said ${outage.webhookUnready}; operator /readyz was ${outage.operatorReadyz}\n`,
    );
  });
});
