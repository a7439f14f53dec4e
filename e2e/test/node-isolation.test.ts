import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import {
  type ApiProxy,
  type Cluster,
  connectE2eCluster,
  createTestNamespace,
  deleteNamespace,
  type FakeNodes,
  type RunningWebhook,
  registerWebhook,
  startApiProxy,
  startFakeNodes,
  startWebhook,
  testPod,
  unregisterWebhook,
  waitFor,
  waitForPodBound,
} from '@kubeplus-isolation/e2e';
import { NODE_ISOLATION_ENABLED_LABEL } from '@kubeplus-isolation/spec';
import {
  AdmissionregistrationV1Api,
  AppsV1Api,
  CoreV1Api,
  CustomObjectsApi,
  type KubeConfig,
  PatchStrategy,
  setHeaderOptions,
  type V1Deployment,
  type V1Pod,
} from '@kubernetes/client-node';
import {
  type ChainController,
  deleteChainCrds,
  installChainCrds,
  startChainController,
} from './support/chain-controller.js';
import { uniqueName } from './support/names.js';
import {
  admissionCounts,
  createIsolatedNamespace,
  isolationMetadata,
  placement,
  poolMandate,
  waitForWebhookActive,
  withoutDefaultTolerations,
} from './support/node-isolation.js';
import { startTestWebhook, type TestWebhook } from './support/test-webhook.js';

/**
 * Seed 1 (dedicated-mode node isolation) acceptance criteria, each against the real control plane:
 * the real webhook process (services/webhook/dist/main.js) registered from the chart's
 * webhook-entry.json, the real kube-controller-manager creating Pods and the real scheduler
 * binding them to fake nodes. Namespaces are labeled and annotated here as the operator would do
 * it (the operator's suite proves the operator does).
 *
 * The webhook reaches the API server through an in-test recording proxy (startApiProxy), so the
 * suite sees every API call the webhook makes and can hold back its informer's watch events.
 */

const mergePatch = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);

/** Non-informer API calls: anything but the list/watch of the namespace collection. */
function perRequestCalls(proxy: ApiProxy, since: number): string[] {
  return proxy
    .requests(since)
    .filter((r) => !(r.method === 'GET' && r.path === '/api/v1/namespaces'))
    .map((r) => `${r.method} ${r.url}`);
}

function plainDeployment(name: string, replicas: number): V1Deployment {
  const labels = { app: name };
  return {
    metadata: { name, labels },
    spec: {
      replicas,
      selector: { matchLabels: labels },
      template: { metadata: { labels }, spec: { containers: [{ name: 'main', image: 'registry.k8s.io/pause:3.10' }] } },
    },
  };
}

/** Waits until `count` Pods labelled app=<app> exist in `namespace` and all are bound; returns them. */
async function boundPodsOf(kc: KubeConfig, namespace: string, app: string, count: number): Promise<V1Pod[]> {
  const core = kc.makeApiClient(CoreV1Api);
  return waitFor(
    `${count} Pods of ${namespace}/${app} to be created by the controllers and bound by the scheduler`,
    async (observe) => {
      const pods = (await core.listNamespacedPod({ namespace, labelSelector: `app=${app}` })).items;
      observe(pods.map((p) => ({ ...placement(p), conditions: p.status?.conditions })));
      return pods.length === count && pods.every((p) => p.spec?.nodeName) ? pods : undefined;
    },
    { timeoutMs: 90_000, intervalMs: 500 },
  );
}

describe('node isolation (seed 1): the webhook on the real API server', () => {
  let cluster: Cluster;
  let kc: KubeConfig;
  let core: CoreV1Api;
  let apps: AppsV1Api;
  let proxy: ApiProxy | undefined;
  let webhook: RunningWebhook | undefined;
  let nodes: FakeNodes | undefined;
  const pool = uniqueName('team-a-pool');
  const mandate = poolMandate(pool);
  const pinned = uniqueName('ni-pool-node');
  const others = [uniqueName('ni-free-node'), uniqueName('ni-free-node')];
  const configName = uniqueName('e2e-node-isolation');
  const namespaces: string[] = [];
  let isolated = '';
  let plain = '';

  const trackNamespace = (ns: string): string => {
    namespaces.push(ns);
    return ns;
  };

  beforeAll(async () => {
    cluster = await connectE2eCluster();
    kc = cluster.kc;
    core = kc.makeApiClient(CoreV1Api);
    apps = kc.makeApiClient(AppsV1Api);
    proxy = await startApiProxy(cluster);
    webhook = await startWebhook(cluster, { kubeconfigPath: proxy.kubeconfigPath, extraArgs: ['--log-level=debug'] });
    // The seed's pool: one tainted, labeled node; two ordinary nodes any unrestricted Pod may use.
    nodes = await startFakeNodes(kc, [pinned, ...others]);
    await nodes.taint(pinned, { key: 'dedicated', value: pool, effect: 'NoSchedule' });
    await nodes.label(pinned, { pool, disktype: 'ssd' });
    isolated = trackNamespace(await createIsolatedNamespace(kc, 'e2e-ni-isolated', mandate));
    plain = trackNamespace(await createTestNamespace(kc, 'e2e-ni-plain'));
    await registerWebhook(kc, { url: webhook.url, caPem: webhook.caPem, name: configName });
    await waitForWebhookActive(kc, isolated, mandate.nodeSelector);
  });

  afterAll(async () => {
    await unregisterWebhook(kc, configName);
    await Promise.all(namespaces.map((ns) => deleteNamespace(kc, ns)));
    await nodes?.stop();
    await webhook?.stop();
    await proxy?.close();
  });

  test('a Pod in a namespace without the label never reaches the webhook; one in a labeled namespace does', async () => {
    const before = await admissionCounts(kc, webhook);
    const bypassing = await core.createNamespacedPod({ namespace: plain, body: testPod('unlabeled-namespace') });
    const afterPlain = await admissionCounts(kc, webhook);
    // The webhook records its metrics before it answers, so a call would already be counted here.
    expect({ webhook: afterPlain.webhookTotal, apiServer: afterPlain.apiServerCalls }).toEqual({
      webhook: before.webhookTotal,
      apiServer: before.apiServerCalls,
    });
    expect(bypassing.spec?.nodeSelector).toBeUndefined();

    const through = await core.createNamespacedPod({ namespace: isolated, body: testPod('labeled-namespace') });
    const afterIsolated = await admissionCounts(kc, webhook);
    expect({ webhook: afterIsolated.webhookTotal, apiServer: afterIsolated.apiServerCalls }).toEqual({
      webhook: before.webhookTotal + 1,
      apiServer: before.apiServerCalls + 1,
    });
    expect(through.spec?.nodeSelector).toEqual(mandate.nodeSelector);

    // The webhook's request log (debug: every admission) names the isolated namespace, never the plain one.
    const log = webhook?.logTail(100_000) ?? '';
    expect(log).toContain(`"namespace":"${isolated}"`);
    expect(log).not.toContain(plain);
  });

  test('a chart-set nodeSelector is merged (isolation keys win) and tolerations are appended after the Pod’s own', async () => {
    const ownToleration = { key: 'chart-toleration', operator: 'Exists', effect: 'NoSchedule' };
    const created = await core.createNamespacedPod({
      namespace: isolated,
      body: testPod('chart-set-placement', {
        nodeSelector: { pool: 'chart-chosen-pool', disktype: 'ssd' },
        tolerations: [ownToleration],
      }),
    });
    const stored = await core.readNamespacedPod({ namespace: isolated, name: created.metadata?.name ?? '' });
    expect(stored.spec?.nodeSelector).toEqual({ pool, disktype: 'ssd' });
    // The Pod's own toleration first and kept, the mandated one appended once; the API server's
    // own defaults (DefaultTolerationSeconds) are left alone too.
    expect(withoutDefaultTolerations(stored.spec?.tolerations)).toEqual([ownToleration, ...mandate.tolerations]);
    expect(stored.spec?.tolerations?.map((t) => t.key)).toEqual(
      expect.arrayContaining(['node.kubernetes.io/not-ready', 'node.kubernetes.io/unreachable']),
    );
    const bound = await waitForPodBound(kc, isolated, stored.metadata?.name ?? '');
    expect(bound.spec?.nodeName).toBe(pinned);
  });

  test('without isolation the same Pods would use the ordinary nodes (control for the placement tests)', async () => {
    await apps.createNamespacedDeployment({ namespace: plain, body: plainDeployment('unisolated', 4) });
    const pods = await boundPodsOf(kc, plain, 'unisolated', 4);
    for (const pod of pods) {
      expect(placement(pod)).toMatchObject({ nodeSelector: undefined, tolerations: [] });
      expect(others).toContain(pod.spec?.nodeName);
    }
  });

  test('Pods of a plain Deployment are patched and bound only to the tainted, labeled node, with no API call by the webhook', async () => {
    const mark = proxy?.mark() ?? 0;
    const before = await admissionCounts(kc, webhook);
    await apps.createNamespacedDeployment({ namespace: isolated, body: plainDeployment('plain-deployment', 4) });
    const pods = await boundPodsOf(kc, isolated, 'plain-deployment', 4);
    for (const pod of pods) {
      expect(placement(pod)).toEqual({
        name: pod.metadata?.name,
        nodeName: pinned,
        nodeSelector: mandate.nodeSelector,
        tolerations: mandate.tolerations,
      });
      expect(pod.metadata?.ownerReferences?.[0]?.kind).toBe('ReplicaSet');
    }
    const after = await admissionCounts(kc, webhook);
    expect(after.webhookByResult.patched).toBe((before.webhookByResult.patched ?? 0) + 4);
    // No traversal, no lookup: the webhook answered every admission from its namespace cache.
    expect(perRequestCalls(proxy as ApiProxy, mark)).toEqual([]);
  });

  describe('Pods made through a multi-level custom-resource chain', () => {
    const group = `${uniqueName('chain')}.e2e.kubeplus.io`;
    let controller: ChainController | undefined;
    let chainNs = '';

    beforeAll(async () => {
      await installChainCrds(kc, group);
      chainNs = trackNamespace(await createIsolatedNamespace(kc, 'e2e-ni-chain', mandate));
      controller = await startChainController(kc, group, chainNs);
    });

    afterAll(async () => {
      await controller?.stop();
      await deleteNamespace(kc, chainNs);
      await deleteChainCrds(kc, group);
    });

    test('are patched exactly like a plain Deployment’s and bound only to the pool node, with no API call by the webhook', async () => {
      const mark = proxy?.mark() ?? 0;
      const before = await admissionCounts(kc, webhook);
      await kc.makeApiClient(CustomObjectsApi).createNamespacedCustomObject({
        group,
        version: 'v1',
        namespace: chainNs,
        plural: 'appstacks',
        body: { apiVersion: `${group}/v1`, kind: 'AppStack', metadata: { name: 'agent' }, spec: { replicas: 3 } },
      });
      const pods = await boundPodsOf(kc, chainNs, 'agent-tier-app', 3).catch(async (error: unknown) => {
        throw new Error(`${(error as Error).message}\n  the chain: ${await controller?.describe()}`);
      });
      expect(controller?.errors).toEqual([]);
      for (const pod of pods) {
        expect(placement(pod)).toEqual({
          name: pod.metadata?.name,
          nodeName: pinned,
          nodeSelector: mandate.nodeSelector,
          tolerations: mandate.tolerations,
        });
      }

      // The chain really is Pod → ReplicaSet → Deployment → AppTier → AppStack.
      const rsName = pods[0]?.metadata?.ownerReferences?.[0]?.name ?? '';
      const rs = await apps.readNamespacedReplicaSet({ namespace: chainNs, name: rsName });
      const deployment = await apps.readNamespacedDeployment({
        namespace: chainNs,
        name: rs.metadata?.ownerReferences?.[0]?.name ?? '',
      });
      const tierRef = deployment.metadata?.ownerReferences?.[0];
      const tier = (await kc.makeApiClient(CustomObjectsApi).getNamespacedCustomObject({
        group,
        version: 'v1',
        namespace: chainNs,
        plural: 'apptiers',
        name: tierRef?.name ?? '',
      })) as { metadata?: { ownerReferences?: { kind: string; name: string }[] } };
      expect([
        pods[0]?.metadata?.ownerReferences?.[0]?.kind,
        rs.metadata?.ownerReferences?.[0]?.kind,
        tierRef?.kind,
        tier.metadata?.ownerReferences?.[0],
      ]).toEqual(['ReplicaSet', 'Deployment', 'AppTier', expect.objectContaining({ kind: 'AppStack', name: 'agent' })]);

      // Same work per Pod as for the plain Deployment: one cache read, one patch, zero API calls —
      // so admission latency cannot depend on the depth of the chain (no timing asserted).
      const after = await admissionCounts(kc, webhook);
      expect(after.webhookByResult.patched).toBe((before.webhookByResult.patched ?? 0) + 3);
      expect(after.webhookTotal).toBe(before.webhookTotal + 3);
      expect(perRequestCalls(proxy as ApiProxy, mark)).toEqual([]);
    });
  });

  test('a freshly labeled namespace works at once: a cache miss is answered by one live lookup', async () => {
    // Deterministic, not a race: the proxy holds back the webhook's namespace list/watch responses
    // while the namespace is labeled and the Pod created, so the informer cannot have seen the label.
    const fresh = trackNamespace(await createTestNamespace(kc, 'e2e-ni-fresh'));
    const p = proxy as ApiProxy;
    const hold = p.hold((r) => r.method === 'GET' && r.path === '/api/v1/namespaces');
    try {
      const before = await admissionCounts(kc, webhook);
      const mark = p.mark();
      await core.patchNamespace({ name: fresh, body: { metadata: isolationMetadata(mandate) } }, mergePatch);
      const pod = await core.createNamespacedPod({ namespace: fresh, body: testPod('right-after-labeling') });
      expect(placement(pod)).toMatchObject({ nodeSelector: mandate.nodeSelector, tolerations: mandate.tolerations });

      const after = await admissionCounts(kc, webhook);
      expect(after.liveLookupsByResult.found).toBe((before.liveLookupsByResult.found ?? 0) + 1);
      expect(perRequestCalls(p, mark)).toEqual([`GET /api/v1/namespaces/${fresh}`]);
      // The informer's event for the label was still sitting in the proxy when the Pod was admitted.
      const held = hold.held();
      expect(held.some((h) => h.request.watch && h.data.includes(`"name":"${fresh}"`))).toBe(true);
    } finally {
      hold.release();
    }
  });

  test('an invalid resolved annotation admits the Pod unpatched, with a warning and the annotation_invalid reason', async () => {
    const broken = trackNamespace(
      await createIsolatedNamespace(kc, 'e2e-ni-invalid', '{"nodeSelector": {"pool": 42}, "tolerations": ['),
    );
    const before = await admissionCounts(kc, webhook);
    const res = await core.createNamespacedPodWithHttpInfo({ namespace: broken, body: testPod('with-broken-mandate') });
    expect(res.data.spec?.nodeSelector).toBeUndefined();
    expect(withoutDefaultTolerations(res.data.spec?.tolerations)).toEqual([]);
    expect(res.headers.warning ?? '').toContain('kubeplus node isolation was not applied (annotation_invalid)');
    const after = await admissionCounts(kc, webhook);
    expect(after.failOpenByReason.annotation_invalid).toBe((before.failOpenByReason.annotation_invalid ?? 0) + 1);
    expect(after.webhookByResult.failopen).toBe((before.webhookByResult.failopen ?? 0) + 1);
  });

  describe('reinvocation by a later mutating webhook', () => {
    // Webhook configurations are called in order of their names: this one runs after ours, and
    // changing the Pod makes the API server call ours again (reinvocationPolicy: IfNeeded).
    const laterConfig = `zz-${uniqueName('e2e-later-webhook')}`;
    const marker = uniqueName('reinvoke');
    const laterToleration = { key: 'added-by-a-later-webhook', operator: 'Exists', effect: 'NoExecute' };
    let later: TestWebhook | undefined;
    let reinvokeNs = '';

    beforeAll(async () => {
      expect(laterConfig > configName).toBe(true);
      later = await startTestWebhook(await cluster.issueServingCert(['127.0.0.1']), () => [
        { op: 'add', path: '/spec/tolerations/-', value: laterToleration },
      ]);
      reinvokeNs = trackNamespace(
        await createIsolatedNamespace(kc, 'e2e-ni-reinvoke', mandate, { 'e2e.kubeplus.io/reinvoke': marker }),
      );
      await kc.makeApiClient(AdmissionregistrationV1Api).createMutatingWebhookConfiguration({
        body: {
          metadata: { name: laterConfig },
          webhooks: [
            {
              name: 'later.e2e.kubeplus.io',
              clientConfig: { url: later.url, caBundle: Buffer.from(cluster.caPem).toString('base64') },
              rules: [{ apiGroups: [''], apiVersions: ['v1'], operations: ['CREATE'], resources: ['pods'] }],
              namespaceSelector: { matchLabels: { 'e2e.kubeplus.io/reinvoke': marker } },
              failurePolicy: 'Fail',
              sideEffects: 'None',
              admissionReviewVersions: ['v1'],
              reinvocationPolicy: 'Never',
            },
          ],
        },
      });
      await waitFor(
        'the API server to call the later test webhook',
        async () => {
          const pod = await core.createNamespacedPod({ namespace: reinvokeNs, body: testPod('probe'), dryRun: 'All' });
          return pod.spec?.tolerations?.some((t) => t.key === laterToleration.key);
        },
        { timeoutMs: 30_000, intervalMs: 200 },
      );
    });

    afterAll(async () => {
      await unregisterWebhook(kc, laterConfig);
      await later?.close();
    });

    test('ours is called again, changes nothing the second time, and the stored Pod has no duplicate toleration', async () => {
      const before = await admissionCounts(kc, webhook);
      const seenBefore = later?.reviews.length ?? 0;
      const created = await core.createNamespacedPod({ namespace: reinvokeNs, body: testPod('reinvoked') });
      const stored = await core.readNamespacedPod({ namespace: reinvokeNs, name: created.metadata?.name ?? '' });
      const after = await admissionCounts(kc, webhook);

      // The later webhook saw our patch already applied, and ran once.
      const seen = later?.reviews.slice(seenBefore) ?? [];
      expect(seen).toHaveLength(1);
      expect(seen[0]?.object.spec?.nodeSelector).toEqual(mandate.nodeSelector);
      // Ours ran twice for the one Pod: first patched, then (reinvoked) nothing left to do.
      expect({
        calls: after.webhookTotal - before.webhookTotal,
        patched: (after.webhookByResult.patched ?? 0) - (before.webhookByResult.patched ?? 0),
        unchanged: (after.webhookByResult.unchanged ?? 0) - (before.webhookByResult.unchanged ?? 0),
        apiServerCalls: after.apiServerCalls - before.apiServerCalls,
      }).toEqual({ calls: 2, patched: 1, unchanged: 1, apiServerCalls: 2 });
      expect(withoutDefaultTolerations(stored.spec?.tolerations)).toEqual([...mandate.tolerations, laterToleration]);
      expect(stored.spec?.nodeSelector).toEqual(mandate.nodeSelector);
    });
  });

  test('deleting the namespace takes its label with it: no unlabeling step exists or is needed', async () => {
    const doomed = await createIsolatedNamespace(kc, 'e2e-ni-doomed', mandate);
    const pod = await core.createNamespacedPod({ namespace: doomed, body: testPod('doomed') });
    expect(pod.spec?.nodeSelector).toEqual(mandate.nodeSelector);
    await waitForPodBound(kc, doomed, 'doomed');
    await deleteNamespace(kc, doomed);
    await expect(core.readNamespace({ name: doomed })).rejects.toMatchObject({ code: 404 });
    const labeled = await core.listNamespace({ labelSelector: `${NODE_ISOLATION_ENABLED_LABEL}=true` });
    expect(labeled.items.map((n) => n.metadata?.name)).not.toContain(doomed);
    await expect(core.readNamespacedPod({ namespace: doomed, name: 'doomed' })).rejects.toMatchObject({ code: 404 });
  });
});
