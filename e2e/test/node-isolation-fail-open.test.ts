import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import {
  type Cluster,
  connectE2eCluster,
  deleteNamespace,
  type FakeNodes,
  type RunningWebhook,
  registerWebhook,
  startFakeNodes,
  startWebhook,
  testPod,
  unregisterWebhook,
  waitForPodBound,
} from '@kubeplus-isolation/e2e';
import { AdmissionregistrationV1Api, CoreV1Api, type KubeConfig } from '@kubernetes/client-node';
import { uniqueName } from './support/names.js';
import {
  admissionCounts,
  createIsolatedNamespace,
  placement,
  poolMandate,
  waitForWebhookActive,
} from './support/node-isolation.js';

/**
 * Seed 1: `failurePolicy: Ignore` — with the webhook down, Pods in isolated namespaces are still
 * admitted (fail open), without the mandate. Its own webhook process and registration, since
 * this suite stops the webhook.
 */
describe('node isolation (seed 1): fail open when the webhook is down', () => {
  let cluster: Cluster;
  let kc: KubeConfig;
  let core: CoreV1Api;
  let webhook: RunningWebhook | undefined;
  let nodes: FakeNodes | undefined;
  const pool = uniqueName('team-a-pool');
  const mandate = poolMandate(pool);
  const pinned = uniqueName('fo-pool-node');
  const free = uniqueName('fo-free-node');
  const configName = uniqueName('e2e-node-isolation-fail-open');
  let ns = '';

  beforeAll(async () => {
    cluster = await connectE2eCluster();
    kc = cluster.kc;
    core = kc.makeApiClient(CoreV1Api);
    webhook = await startWebhook(cluster);
    nodes = await startFakeNodes(kc, [pinned, free]);
    await nodes.taint(pinned, { key: 'dedicated', value: pool, effect: 'NoSchedule' });
    await nodes.label(pinned, { pool });
    ns = await createIsolatedNamespace(kc, 'e2e-ni-fail-open', mandate);
    await registerWebhook(kc, { url: webhook.url, caPem: webhook.caPem, name: configName });
    await waitForWebhookActive(kc, ns, mandate.nodeSelector);
  });

  afterAll(async () => {
    await unregisterWebhook(kc, configName);
    if (ns) await deleteNamespace(kc, ns);
    await nodes?.stop();
    await webhook?.stop();
  });

  test('while the webhook runs, Pods are patched and placed on the pool node', async () => {
    await core.createNamespacedPod({ namespace: ns, body: testPod('while-up') });
    const pod = await waitForPodBound(kc, ns, 'while-up');
    expect(placement(pod)).toMatchObject({ nodeName: pinned, nodeSelector: mandate.nodeSelector });
  });

  test('with the webhook stopped, Pods are still admitted, unpatched, and the API server counts a fail-open', async () => {
    const registered = await kc
      .makeApiClient(AdmissionregistrationV1Api)
      .readMutatingWebhookConfiguration({ name: configName });
    expect(registered.webhooks?.[0]?.failurePolicy).toBe('Ignore');
    await webhook?.stop();
    webhook = undefined;

    const before = await admissionCounts(kc, undefined);
    const pod = await core.createNamespacedPod({ namespace: ns, body: testPod('while-down') });
    expect(placement(pod)).toMatchObject({ nodeSelector: undefined, tolerations: [] });
    const after = await admissionCounts(kc, undefined);
    expect(after.apiServerFailOpen).toBe(before.apiServerFailOpen + 1);
    // Placement is lost meanwhile, as the seed accepts: the Pod goes to an ordinary node.
    const bound = await waitForPodBound(kc, ns, 'while-down');
    expect(bound.spec?.nodeName).not.toBe(pinned);
  });
});
