import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import {
  type Cluster,
  connectE2eCluster,
  createTestNamespace,
  deleteNamespace,
  type FakeNodes,
  isApiStatus,
  loadCrds,
  loadKubeConfig,
  NODE_LEASE_NAMESPACE,
  podCondition,
  sandboxCrdsDir,
  servedSandboxVersions,
  sleep,
  startFakeNodes,
  testPod,
  waitFor,
  waitForPodBound,
  waitForPodUnschedulable,
  writeServiceAccountKubeconfig,
} from '@kubeplus-isolation/e2e';
import {
  AdmissionregistrationV1Api,
  ApiextensionsV1Api,
  AuthenticationV1Api,
  CoordinationV1Api,
  CoreV1Api,
  CustomObjectsApi,
  type KubeConfig,
  type V1Node,
  VersionApi,
} from '@kubernetes/client-node';
import { uniqueName } from './support/names.js';
import { NEWEST, testIf } from './support/versions.js';

const ready = (node: V1Node): string | undefined => node.status?.conditions?.find((c) => c.type === 'Ready')?.status;
const taintKeys = (node: V1Node): string[] => (node.spec?.taints ?? []).map((t) => `${t.key}:${t.effect}`);

describe('e2e harness: a real control plane with fake nodes', () => {
  let cluster: Cluster;
  let kc: KubeConfig;
  let core: CoreV1Api;
  let nodes: FakeNodes | undefined;
  let silent: FakeNodes | undefined;
  let namespace: string | undefined;
  let nodesUpAt = 0;
  const id = uniqueName('cp');
  const plainNodes = [`${id}-a`, `${id}-b`];
  const dedicatedNode = `${id}-dedicated`;
  const silentNode = `${id}-silent`;
  const pool = `${id}-pool`;
  const dedicatedTaint = { key: 'dedicated', value: pool, effect: 'NoSchedule' };

  beforeAll(async () => {
    cluster = await connectE2eCluster();
    kc = cluster.kc;
    core = kc.makeApiClient(CoreV1Api);
    nodes = await startFakeNodes(kc, [...plainNodes, dedicatedNode]);
    // A node whose heartbeats stop: the negative control for the node-lifecycle check below.
    // Tainted so no Pod is ever bound to it: nothing would finish such a Pod's deletion, and its
    // namespace would never go (seen on 1.34, whose scheduler picked it for an untolerating Pod).
    silent = await startFakeNodes(kc, [silentNode], {
      labels: { pool: `${id}-nobody` },
      taints: [{ key: 'kubeplus.io/silent', effect: 'NoSchedule' }],
    });
    await silent.stop({ deleteNodes: false });
    nodesUpAt = Date.now();
    await nodes.taint(dedicatedNode, dedicatedTaint);
    await nodes.label(dedicatedNode, { pool });
    namespace = await createTestNamespace(kc, 'e2e-control-plane');
  });

  afterAll(async () => {
    if (namespace) await deleteNamespace(kc, namespace);
    await nodes?.stop();
    await core?.deleteNode({ name: silentNode }).catch((error: unknown) => {
      if (!isApiStatus(error, 404)) throw error;
    });
  });

  testIf(NEWEST, 'kubernetes-versions.test.ts checks each minor against its own table')(
    'serves Kubernetes v1.36 with MutatingAdmissionPolicy at admissionregistration.k8s.io/v1',
    async () => {
      const version = await kc.makeApiClient(VersionApi).getCode();
      expect(version.gitVersion).toMatch(/^v1\.36\./);
      const resources = await kc.makeApiClient(AdmissionregistrationV1Api).getAPIResources();
      expect(resources.resources.map((r) => r.name)).toEqual(
        expect.arrayContaining([
          'mutatingadmissionpolicies',
          'mutatingadmissionpolicybindings',
          'mutatingwebhookconfigurations',
        ]),
      );
    },
  );

  test('fake nodes are Ready, schedulable, with capacity and a kube-node-lease Lease', async () => {
    const coordination = kc.makeApiClient(CoordinationV1Api);
    for (const name of plainNodes) {
      const node = await core.readNode({ name });
      expect(ready(node)).toBe('True');
      expect(taintKeys(node)).toEqual([]);
      expect(node.status?.allocatable).toMatchObject({ cpu: '32', memory: '256Gi', pods: '110' });
      const lease = await coordination.readNamespacedLease({ name, namespace: NODE_LEASE_NAMESPACE });
      expect(lease.spec?.holderIdentity).toBe(name);
      expect(lease.metadata?.ownerReferences?.[0]).toMatchObject({ kind: 'Node', name, uid: node.metadata?.uid });
    }
  });

  test('the real scheduler binds a Pod to an untainted fake node', async () => {
    const ns = namespace as string;
    await core.createNamespacedPod({ namespace: ns, body: testPod('plain') });
    const pod = await waitForPodBound(kc, ns, 'plain');
    expect(plainNodes).toContain(pod.spec?.nodeName);
    expect(podCondition(pod, 'PodScheduled')?.status).toBe('True');
    expect(pod.status?.phase).toBe('Pending'); // nothing runs it
  });

  test('a Pod selecting the dedicated pool lands there only with the matching toleration', async () => {
    const ns = namespace as string;
    const toleration = { key: 'dedicated', operator: 'Equal', value: pool, effect: 'NoSchedule' };
    const tolerating = ['tolerating-0', 'tolerating-1', 'tolerating-2'];
    for (const name of tolerating) {
      await core.createNamespacedPod({
        namespace: ns,
        body: testPod(name, { nodeSelector: { pool }, tolerations: [toleration] }),
      });
    }
    await core.createNamespacedPod({ namespace: ns, body: testPod('intolerant', { nodeSelector: { pool } }) });

    for (const name of tolerating) {
      expect((await waitForPodBound(kc, ns, name)).spec?.nodeName).toBe(dedicatedNode);
    }
    const intolerant = await waitForPodUnschedulable(kc, ns, 'intolerant');
    expect(intolerant.spec?.nodeName).toBeUndefined();
    expect(intolerant.status?.phase).toBe('Pending');
    // The dedicated node (and the silent one, tainted too) refuse it for its taint.
    expect(podCondition(intolerant, 'PodScheduled')?.message).toMatch(/\d node\(s\) had untolerated taint/);
  });

  test('the Agent Sandbox CRDs are Established without a conversion webhook and serve every version of the pinned release', async () => {
    const ns = namespace as string;
    const extensions = kc.makeApiClient(ApiextensionsV1Api);
    const fixtures = loadCrds(sandboxCrdsDir());
    expect(fixtures.map((crd) => crd.metadata?.name).sort()).toEqual([
      'sandboxclaims.extensions.agents.x-k8s.io',
      'sandboxes.agents.x-k8s.io',
      'sandboxtemplates.extensions.agents.x-k8s.io',
      'sandboxwarmpools.extensions.agents.x-k8s.io',
    ]);
    for (const fixture of fixtures) {
      const served = await extensions.readCustomResourceDefinition({ name: fixture.metadata?.name as string });
      expect(served.spec.conversion?.strategy).toBe('None');
      expect(served.status?.conditions?.find((c) => c.type === 'Established')?.status).toBe('True');
      // The schemas made it through the client's (de)serialization intact.
      expect(served.spec.versions.map((v) => v.schema)).toEqual(fixture.spec.versions.map((v) => v.schema));
    }

    const objects = kc.makeApiClient(CustomObjectsApi);
    const sandbox = (name: string, apiVersion: string, runtimeClassName: string) => ({
      apiVersion,
      kind: 'Sandbox',
      metadata: { name },
      spec: {
        podTemplate: {
          spec: { runtimeClassName, containers: [{ name: 'agent', image: 'registry.k8s.io/pause:3.10' }] },
        },
      },
    });
    const group = 'agents.x-k8s.io';
    // v1.0.x serves v1beta1 only; v0.5.x (the floor run's) v1beta1 and v1alpha1.
    const served = servedSandboxVersions(fixtures);
    expect(served[0]).toBe('v1beta1');
    expect(served.every((v) => ['v1beta1', 'v1alpha1'].includes(v))).toBe(true);
    for (const [version, runtimeClassName] of served.map((v, i) => [v, i === 0 ? 'kata' : 'runsc'] as const)) {
      const name = `sandbox-${version}`;
      await objects.createNamespacedCustomObject({
        group,
        version,
        namespace: ns,
        plural: 'sandboxes',
        body: sandbox(name, `${group}/${version}`, runtimeClassName),
      });
      // Read through the other version, where there is one: strategy None converts by rewriting apiVersion only.
      const other = served.find((v) => v !== version) ?? version;
      const read = (await objects.getNamespacedCustomObject({
        group,
        version: other,
        namespace: ns,
        plural: 'sandboxes',
        name,
      })) as {
        apiVersion: string;
        spec: { podTemplate: { spec: { runtimeClassName: string } } };
      };
      expect(read.apiVersion).toBe(`${group}/${other}`);
      expect(read.spec.podTemplate.spec.runtimeClassName).toBe(runtimeClassName);
    }
    // The schema is enforced (podTemplate is required), so the CRD is not a pass-through.
    await expect(
      objects.createNamespacedCustomObject({
        group,
        version: 'v1beta1',
        namespace: ns,
        plural: 'sandboxes',
        body: { apiVersion: `${group}/v1beta1`, kind: 'Sandbox', metadata: { name: 'no-template' }, spec: {} },
      }),
    ).rejects.toMatchObject({ code: 422 });
  });

  test('a TokenRequest token authenticates as its ServiceAccount, which RBAC then restricts', async () => {
    const ns = namespace as string;
    const path = await writeServiceAccountKubeconfig(cluster, {
      namespace: ns,
      serviceAccount: 'e2e-reader',
      path: `${cluster.dir}/${ns}-e2e-reader.kubeconfig`,
    });
    const saKc = loadKubeConfig(path);
    const review = await saKc.makeApiClient(AuthenticationV1Api).createSelfSubjectReview({ body: {} });
    expect(review.status?.userInfo?.username).toBe(`system:serviceaccount:${ns}:e2e-reader`);
    expect(review.status?.userInfo?.groups).toEqual(
      expect.arrayContaining(['system:serviceaccounts', `system:serviceaccounts:${ns}`]),
    );
    await expect(saKc.makeApiClient(CoreV1Api).listNode()).rejects.toMatchObject({ code: 403 });
  });

  test('deleting a namespace holding a bound Pod completes (fake nodes finish graceful Pod deletion)', async () => {
    const doomed = await createTestNamespace(kc, 'e2e-doomed');
    await core.createNamespacedPod({ namespace: doomed, body: testPod('bound') });
    await waitForPodBound(kc, doomed, 'bound');
    await deleteNamespace(kc, doomed, 90_000);
    await expect(core.readNamespace({ name: doomed })).rejects.toMatchObject({ code: 404 });
  });

  test('heartbeating nodes stay Ready and untainted past node-monitor-grace-period; a silent one does not', async () => {
    const grace = cluster.state.nodeMonitorGracePeriodSeconds;
    expect(grace).toBe(40);
    // Well past the grace period plus one node-monitor-period (5s), counted from the nodes' start.
    const until = nodesUpAt + (grace + 12) * 1000;
    if (Date.now() < until) await sleep(until - Date.now());

    const silentNow = await waitFor(
      `the node controller to mark ${silentNode} unreachable`,
      async (observe) => {
        const node = await core.readNode({ name: silentNode });
        observe({ ready: ready(node), taints: taintKeys(node) });
        return ready(node) === 'Unknown' && taintKeys(node).includes('node.kubernetes.io/unreachable:NoSchedule')
          ? node
          : undefined;
      },
      { timeoutMs: 30_000 },
    );
    expect(ready(silentNow)).toBe('Unknown');

    for (const name of [...plainNodes, dedicatedNode]) {
      const node = await core.readNode({ name });
      expect({ name, ready: ready(node) }).toEqual({ name, ready: 'True' });
      expect({ name, taints: taintKeys(node) }).toEqual({
        name,
        taints: name === dedicatedNode ? ['dedicated:NoSchedule'] : [],
      });
      const heartbeat = node.status?.conditions?.find((c) => c.type === 'Ready')?.lastHeartbeatTime;
      expect(Date.now() - new Date(heartbeat as Date).getTime()).toBeLessThan(25_000);
    }
  });
});
