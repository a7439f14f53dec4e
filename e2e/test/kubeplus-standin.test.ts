/**
 * The KubePlus STAND-IN itself (e2e/src/kubeplus-standin/standin.ts; not KubePlus), on the real
 * control plane with a fake node: each behaviour of its contract (restated in
 * e2e/src/kubeplus-standin/contract.ts) observed on the real API server, so the suites that run
 * this project beside it (kubeplus-flow.test.ts) run beside what KubePlus does:
 *
 * - registered as KubePlus's webhook: through a Service in KubePlus's namespace, failurePolicy Fail;
 * - an instance CREATE: namespace `<instance>` (quoted release-name annotation, managedby label,
 *   both NetworkPolicies) exists before the instance is stored; `accountidentity` is the creator;
 *   `helm install` runs and `status.helmrelease` is written;
 * - `accountidentity` is whoever updated last; UPDATEs are refused while its webhook is down;
 * - refusals: namespace Terminating (CREATE and UPDATE), a release of another Kind, a name too long;
 * - a failed install deletes the namespace; a DELETE without status is refused unless labeled `delete`;
 * - a DELETE runs `helm delete`, then deletes the namespace.
 *
 * Its own namespace stands for KubePlus's here (the flow suite uses `default`, KubePlus's README's).
 */
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import {
  ACCOUNT_IDENTITY_ANNOTATION,
  type Cluster,
  connectE2eCluster,
  createTestNamespace,
  deleteNamespace,
  FAILING_CHART,
  type FakeNodes,
  isApiStatus,
  KUBEPLUS_MANAGED_BY_LABEL,
  type KubePlusStandIn,
  loadKubeConfig,
  NETWORK_POLICY_NAMES,
  RELEASE_NAME_ANNOTATION,
  STANDIN_GROUP,
  STANDIN_SERVICE,
  STANDIN_USER,
  STANDIN_VERSION,
  STANDIN_WEBHOOK_CONFIGURATION,
  STANDIN_WEBHOOK_NAME,
  startFakeNodes,
  startKubePlusStandIn,
  waitFor,
} from '@kubeplus-isolation/e2e';
import {
  AdmissionregistrationV1Api,
  AppsV1Api,
  BatchV1Api,
  CoreV1Api,
  CustomObjectsApi,
  type KubeConfig,
  NetworkingV1Api,
  PatchStrategy,
  setHeaderOptions,
  type V1Namespace,
  Watch,
} from '@kubernetes/client-node';
import { uniqueName } from './support/names.js';

const mergePatch = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);
const WEBAPP = { kind: 'WebApp', plural: 'webapps' } as const;
const BROKEN = { kind: 'BrokenApp', plural: 'brokenapps', chart: FAILING_CHART } as const;

interface Instance {
  metadata: {
    name: string;
    resourceVersion: string;
    labels?: Record<string, string>;
    annotations?: Record<string, string>;
  };
  status?: { helmrelease?: string };
}

describe('KubePlus stand-in (not KubePlus) on the real control plane', () => {
  let cluster: Cluster;
  let kc: KubeConfig;
  let nodes: FakeNodes | undefined;
  let kubeplus: KubePlusStandIn | undefined;
  let kubeplusNs = '';
  const node = uniqueName('kpi-standin-node');
  const users: Record<'alice' | 'bob', KubeConfig> = {} as Record<'alice' | 'bob', KubeConfig>;
  const held: string[] = [];

  const custom = (who: KubeConfig = kc) => who.makeApiClient(CustomObjectsApi);
  const ref = (plural: string, name: string) => ({
    group: STANDIN_GROUP,
    version: STANDIN_VERSION,
    plural,
    namespace: kubeplusNs,
    name,
  });
  const createInstance = async (kind: { kind: string; plural: string }, name: string, who: KubeConfig = kc) =>
    (await custom(who).createNamespacedCustomObject({
      group: STANDIN_GROUP,
      version: STANDIN_VERSION,
      plural: kind.plural,
      namespace: kubeplusNs,
      body: { apiVersion: `${STANDIN_GROUP}/${STANDIN_VERSION}`, kind: kind.kind, metadata: { name }, spec: {} },
    })) as Instance;
  const getInstance = async (plural: string, name: string) =>
    (await custom().getNamespacedCustomObject(ref(plural, name))) as Instance;
  const patchInstance = async (plural: string, name: string, body: unknown, who: KubeConfig = kc) =>
    (await custom(who).patchNamespacedCustomObject({ ...ref(plural, name), body }, mergePatch)) as Instance;
  const readNs = (name: string): Promise<V1Namespace | undefined> =>
    kc
      .makeApiClient(CoreV1Api)
      .readNamespace({ name })
      .catch((error: unknown) => {
        if (isApiStatus(error, 404)) return undefined;
        throw error;
      });
  const apiError = async (call: Promise<unknown>): Promise<{ code: number; message: string }> => {
    try {
      await call;
    } catch (error) {
      const e = error as { code?: number; body?: unknown };
      const body = typeof e.body === 'string' ? (JSON.parse(e.body) as { message?: string }) : undefined;
      return { code: e.code ?? 0, message: body?.message ?? String(error) };
    }
    throw new Error('expected the API server to refuse the request');
  };
  /** A namespace held Terminating by a ConfigMap with a finalizer (released in afterAll). */
  const terminatingNamespace = async (name: string): Promise<void> => {
    const core = kc.makeApiClient(CoreV1Api);
    await core.createNamespace({ body: { metadata: { name } } });
    held.push(name);
    await core.createNamespacedConfigMap({
      namespace: name,
      body: { metadata: { name: 'hold', finalizers: ['kubeplus-standin.e2e/hold'] } },
    });
    await core.deleteNamespace({ name });
    await waitFor(
      `namespace ${name} to be Terminating`,
      async () => (await readNs(name))?.status?.phase === 'Terminating',
      {
        timeoutMs: 30_000,
      },
    );
  };

  beforeAll(async () => {
    cluster = await connectE2eCluster();
    kc = cluster.kc;
    for (const user of ['alice', 'bob'] as const) {
      const path = cluster.writeKubeconfig(
        `${cluster.dir}/${uniqueName(`standin-${user}`)}.kubeconfig`,
        user,
        await cluster.issueClientCert(user, ['system:masters']),
      );
      users[user] = loadKubeConfig(path);
    }
    nodes = await startFakeNodes(kc, [node]);
    kubeplusNs = await createTestNamespace(kc, 'kpi-standin-kubeplus');
    kubeplus = await startKubePlusStandIn({ cluster, kubeplusNamespace: kubeplusNs, kinds: [WEBAPP, BROKEN] });
  });

  afterAll(async () => {
    const core = kc.makeApiClient(CoreV1Api);
    for (const ns of held) {
      await core
        .patchNamespacedConfigMap({ namespace: ns, name: 'hold', body: { metadata: { finalizers: null } } }, mergePatch)
        .catch(() => undefined);
    }
    await kubeplus?.cleanup();
    await Promise.all([...held, kubeplusNs].filter((ns) => ns !== '').map((ns) => deleteNamespace(kc, ns)));
    await nodes?.stop();
  });

  test('its webhook is registered as KubePlus’s: a Service in KubePlus’s namespace, failurePolicy Fail, timeout 30 s', async () => {
    const config = await kc
      .makeApiClient(AdmissionregistrationV1Api)
      .readMutatingWebhookConfiguration({ name: STANDIN_WEBHOOK_CONFIGURATION });
    const [webhook] = config.webhooks ?? [];
    expect(webhook?.name).toBe(STANDIN_WEBHOOK_NAME);
    expect(webhook?.clientConfig.service).toMatchObject({ namespace: kubeplusNs, name: STANDIN_SERVICE });
    expect(webhook?.clientConfig.url).toBeUndefined();
    // Unset in what the stand-in sent: the API server's default.
    expect(webhook?.failurePolicy).toBe('Fail');
    expect(webhook?.timeoutSeconds).toBe(30);
    expect(webhook?.sideEffects).toBe('None');
    expect((await readNs(kubeplusNs))?.metadata?.labels?.[KUBEPLUS_MANAGED_BY_LABEL]).toBe('kubeplus');
  });

  describe('an instance of WebApp', () => {
    const name = uniqueName('shop');
    const release = `webapp-${name}`;

    test('CREATE: namespace <instance> exists (annotated, labeled, its NetworkPolicies) before the instance is stored; accountidentity is the creator', async () => {
      const core = kc.makeApiClient(CoreV1Api);
      const before = await core.listNamespace({ fieldSelector: `metadata.name=${name}` });
      expect(before.items).toEqual([]);
      const added: string[] = [];
      const watch = await new Watch(kc).watch(
        '/api/v1/namespaces',
        { fieldSelector: `metadata.name=${name}`, resourceVersion: before.metadata?.resourceVersion },
        (type, ns: V1Namespace) => {
          if (type === 'ADDED') added.push(ns.metadata?.resourceVersion ?? '');
        },
        () => undefined,
      );
      let created: Instance;
      try {
        created = await createInstance(WEBAPP, name, users.alice);
        await waitFor('the watch to see the namespace ADDED', async () => added.length > 0, { timeoutMs: 10_000 });
      } finally {
        watch.abort();
      }
      // One etcd: resource versions are its revisions, so the namespace was written first.
      expect(Number(added[0])).toBeLessThan(Number(created.metadata.resourceVersion));
      expect(created.metadata.annotations?.[ACCOUNT_IDENTITY_ANNOTATION]).toBe('alice');
      expect(created.metadata.labels?.['created-by']).toBe('kubeplus');
      const ns = await readNs(name);
      expect(ns?.metadata?.annotations?.[RELEASE_NAME_ANNOTATION]).toBe(`"${release}"`);
      expect(ns?.metadata?.labels?.[KUBEPLUS_MANAGED_BY_LABEL]).toBe('kubeplus');
      const policies = await kc.makeApiClient(NetworkingV1Api).listNamespacedNetworkPolicy({ namespace: name });
      expect(policies.items.map((p) => p.metadata?.name).sort()).toEqual([...NETWORK_POLICY_NAMES].sort());
    });

    test('helm install runs into it at once, and status.helmrelease is "<namespace>:<release>\\n<NOTES>"', async () => {
      await kubeplus?.idle();
      const install = kubeplus?.events.find((e) => e.type === 'helm' && e.release === release);
      expect(install).toMatchObject({ verb: 'install', namespace: name, ok: true });
      expect(
        (await kc.makeApiClient(AppsV1Api).readNamespacedDeployment({ namespace: name, name: 'web' })).spec?.replicas,
      ).toBe(3);
      await kc.makeApiClient(BatchV1Api).readNamespacedJob({ namespace: name, name: 'setup' });
      await kc.makeApiClient(CoreV1Api).readNamespacedPod({ namespace: name, name: 'bare' });
      await custom().getNamespacedCustomObject({
        group: 'agents.x-k8s.io',
        version: 'v1beta1',
        plural: 'sandboxes',
        namespace: name,
        name: 'agent',
      });
      const instance = await getInstance(WEBAPP.plural, name);
      expect(instance.status?.helmrelease).toBe(
        `${name}:${release}\n${release} installed into ${name}: Deployment web, Job setup, Pod bare, Sandbox agent.`,
      );
      // The status write is a full UPDATE through its own webhook, as the stand-in's user.
      expect(instance.metadata.annotations?.[ACCOUNT_IDENTITY_ANNOTATION]).toBe(STANDIN_USER);
      expect(kubeplus?.admissions().filter((a) => a.name === name && a.operation === 'UPDATE')).toEqual([
        expect.objectContaining({ user: STANDIN_USER, allowed: true }),
      ]);
    });

    test('accountidentity is rewritten to whoever updated last', async () => {
      const byBob = await patchInstance(WEBAPP.plural, name, { metadata: { labels: { touched: 'bob' } } }, users.bob);
      expect(byBob.metadata.annotations?.[ACCOUNT_IDENTITY_ANNOTATION]).toBe('bob');
      const byAlice = await patchInstance(
        WEBAPP.plural,
        name,
        { metadata: { labels: { touched: 'alice' } } },
        users.alice,
      );
      expect(byAlice.metadata.annotations?.[ACCOUNT_IDENTITY_ANNOTATION]).toBe('alice');
      // A user setting it themselves is overwritten too.
      const forged = await patchInstance(
        WEBAPP.plural,
        name,
        { metadata: { annotations: { [ACCOUNT_IDENTITY_ANNOTATION]: 'mallory' } } },
        users.bob,
      );
      expect(forged.metadata.annotations?.[ACCOUNT_IDENTITY_ANNOTATION]).toBe('bob');
    });

    test('while its webhook is down, every UPDATE of the instance is refused (failurePolicy Fail)', async () => {
      await kubeplus?.stop();
      try {
        const refused = await apiError(patchInstance(WEBAPP.plural, name, { metadata: { labels: { down: 'yes' } } }));
        expect(refused.code).toBe(500);
        expect(refused.message).toContain(`failed calling webhook "${STANDIN_WEBHOOK_NAME}"`);
        expect((await getInstance(WEBAPP.plural, name)).metadata.labels?.down).toBeUndefined();
      } finally {
        await kubeplus?.resume();
      }
      await waitFor(
        'the stand-in webhook to answer again',
        () => patchInstance(WEBAPP.plural, name, { metadata: { labels: { down: 'no' } } }),
        { timeoutMs: 30_000 },
      );
    });

    test('DELETE runs helm delete, then deletes the namespace named in status.helmrelease', async () => {
      await custom().deleteNamespacedCustomObject(ref(WEBAPP.plural, name));
      await kubeplus?.idle();
      const after = kubeplus?.events.filter(
        (e) =>
          (e.type === 'helm' && e.verb === 'delete' && e.release === release) ||
          (e.type === 'namespace' && e.namespace === name && e.action === 'deleted'),
      );
      expect(after?.map((e) => e.type)).toEqual(['helm', 'namespace']);
      expect(after?.[0]).toMatchObject({ ok: true });
      await waitFor(`namespace ${name} to be gone`, async () => (await readNs(name)) === undefined, {
        timeoutMs: 120_000,
      });
    });
  });

  test('refusals: namespace Terminating (CREATE and UPDATE), a release of another Kind, kind-name longer than 30', async () => {
    // CREATE while namespace <name> is Terminating.
    const doomed = uniqueName('doomed');
    await terminatingNamespace(doomed);
    const terminating = await apiError(createInstance(WEBAPP, doomed));
    expect(terminating.message).toContain(`namespace ${doomed} is Terminating`);

    // UPDATE while the instance's namespace is Terminating.
    const live = uniqueName('live');
    await createInstance(WEBAPP, live);
    await kubeplus?.idle();
    const core = kc.makeApiClient(CoreV1Api);
    await core.createNamespacedConfigMap({
      namespace: live,
      body: { metadata: { name: 'hold', finalizers: ['kubeplus-standin.e2e/hold'] } },
    });
    held.push(live);
    await core.deleteNamespace({ name: live });
    await waitFor(
      `namespace ${live} to be Terminating`,
      async () => (await readNs(live))?.status?.phase === 'Terminating',
      {
        timeoutMs: 30_000,
      },
    );
    const update = await apiError(patchInstance(WEBAPP.plural, live, { metadata: { labels: { x: 'y' } } }));
    expect(update.message).toContain(`namespace ${live} is Terminating`);

    // A namespace carrying another Kind's release.
    const taken = uniqueName('taken');
    await core.createNamespace({
      body: { metadata: { name: taken, annotations: { [RELEASE_NAME_ANNOTATION]: `"mysqlservice-${taken}"` } } },
    });
    held.push(taken);
    expect((await apiError(createInstance(WEBAPP, taken))).message).toContain('another Kind');

    // len("WebApp-" + name) = 31
    expect((await apiError(createInstance(WEBAPP, 'a'.repeat(24)))).message).toContain('at most 30');
    expect(kubeplus?.admissions().filter((a) => !a.allowed && a.operation === 'CREATE')).toHaveLength(3);
  });

  test('a failed install deletes the namespace; its instance (no status) cannot be deleted until labeled delete', async () => {
    const name = uniqueName('broken');
    await createInstance(BROKEN, name);
    expect(await readNs(name)).toBeDefined();
    await kubeplus?.idle();
    expect(kubeplus?.events.find((e) => e.type === 'helm' && e.release === `brokenapp-${name}`)).toMatchObject({
      verb: 'install',
      ok: false,
    });
    expect(kubeplus?.events).toContainEqual({ type: 'namespace', action: 'deleted', namespace: name });
    await waitFor(`namespace ${name} to be gone`, async () => (await readNs(name)) === undefined, {
      timeoutMs: 120_000,
    });
    expect((await getInstance(BROKEN.plural, name)).status).toBeUndefined();

    const refused = await apiError(custom().deleteNamespacedCustomObject(ref(BROKEN.plural, name)));
    expect(refused.message).toContain('cannot be deleted. It is not ready yet');
    await patchInstance(BROKEN.plural, name, { metadata: { labels: { delete: 'true' } } });
    await custom().deleteNamespacedCustomObject(ref(BROKEN.plural, name));
    await waitFor(
      `instance ${name} to be gone`,
      async () =>
        custom()
          .getNamespacedCustomObject(ref(BROKEN.plural, name))
          .then(
            () => false,
            (error: unknown) => isApiStatus(error, 404),
          ),
      { timeoutMs: 30_000 },
    );
  });
});
