/**
 * The KubePlus flow (issue 35) on the REAL node, where its Pods must run: this project's chart as
 * Pods, the upstream Agent Sandbox controller, gVisor, and the KubePlus STAND-IN
 * (e2e/src/kubeplus-standin/; not KubePlus) in KubePlus's own namespace `default`, its webhook
 * registered by URL (the real-node API server's aggregator routing refuses the ExternalName
 * Service the API-level suite uses; `kubeplus-flow.test.ts` proves discovery there, so the
 * chart is told the namespace here: `operator.platformNamespace=default`).
 *
 * What `kubeplus-flow.test.ts` proves from every stored version with fake nodes, here with the
 * kubelet running the Pods: an instance created in `default` makes KubePlus create namespace
 * `<instance>` and start `helm install` inside the CREATE, before the operator can see it; every
 * Pod of that first install (Deployment ×3, Job, bare Pod) runs on the pool's node with the pool's
 * nodeSelector and toleration, the chart's Sandbox (no class written) is defaulted to the
 * instance's class (handler runsc: gVisor) and becomes Ready, `default` is never isolated, and deleting the instance
 * (KubePlus's helm delete and namespace delete) leaves none of the operator's objects behind.
 */
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { type KubePlusStandIn, type RealNodeCluster, startKubePlusStandIn, waitFor } from '@kubeplus-isolation/e2e';
import {
  ISOLATION_SETTLED_LABEL,
  NODE_ISOLATION_ANNOTATION,
  NODE_ISOLATION_ENABLED_LABEL,
  SANDBOX_ISOLATION_ANNOTATION,
} from '@kubeplus-isolation/spec';
import { CoreV1Api, CustomObjectsApi, NodeV1Api, type V1Pod } from '@kubernetes/client-node';
import { runtimeClassName } from './support/operator.js';
import { carriesPoolMandate, poolMandate, startSandboxNode } from './support/real-node.js';
import { podOfSandbox, waitForSandboxReady } from './support/sandboxes.js';

const POOL = 'kp-pool';
const KUBEPLUS_NAMESPACE = 'default';
const KIND = { kind: 'AgentService', plural: 'agentservices' } as const;
const GROUP = 'platformapi.kubeplus';
const INSTANCE = 'team-kpr';
/** The fixture chart's Pods (e2e/fixtures/kubeplus-tenant-chart): the Deployment's 3, the Job's, the bare one. */
const FIRST_INSTALL = 5;
const SANDBOX = 'agent';

describe('KubePlus (stand-in) on the real node: the first install runs placed and sandboxed', () => {
  let cluster: RealNodeCluster;
  let kubeplus: KubePlusStandIn | undefined;
  let core: CoreV1Api;
  let custom: CustomObjectsApi;

  beforeAll(async () => {
    cluster = await startSandboxNode(POOL, '--set', `operator.platformNamespace=${KUBEPLUS_NAMESPACE}`);
    core = cluster.cp.kc.makeApiClient(CoreV1Api);
    custom = cluster.cp.kc.makeApiClient(CustomObjectsApi);
    kubeplus = await startKubePlusStandIn({
      cluster: cluster.cp,
      kubeplusNamespace: KUBEPLUS_NAMESPACE,
      kinds: [KIND],
      registration: 'url',
    });
  });

  afterAll(async () => {
    await kubeplus?.idle().catch(() => undefined);
    await kubeplus?.cleanup().catch(() => undefined);
    await cluster?.stop();
  });

  test(`an instance in "default": its namespace is isolated, every Pod of the first install runs with the pool's placement, its Sandbox Ready on the generated runsc class`, async () => {
    await custom.createNamespacedCustomObject({
      group: GROUP,
      version: 'v1alpha1',
      plural: KIND.plural,
      namespace: KUBEPLUS_NAMESPACE,
      body: {
        apiVersion: `${GROUP}/v1alpha1`,
        kind: KIND.kind,
        metadata: {
          name: INSTANCE,
          namespace: KUBEPLUS_NAMESPACE,
          annotations: {
            [NODE_ISOLATION_ANNOTATION]: JSON.stringify(poolMandate(POOL)),
            [SANDBOX_ISOLATION_ANNOTATION]: JSON.stringify({ minRuntimeClass: 'runsc', enforce: false }),
          },
        },
        spec: {},
      },
    });
    // KubePlus made the namespace inside the CREATE and started helm install at once.
    expect(kubeplus?.events.find((e) => e.type === 'namespace' && e.namespace === INSTANCE)).toMatchObject({
      action: 'created',
    });
    await kubeplus?.idle();
    const install = kubeplus?.events.find((e) => e.type === 'helm' && e.namespace === INSTANCE);
    expect(install).toMatchObject({ verb: 'install', ok: true });

    const pods = await waitFor(
      `the first install's ${FIRST_INSTALL} Pods Running (or Succeeded) on the real node`,
      async (observe) => {
        const items = (await core.listNamespacedPod({ namespace: INSTANCE })).items.filter(
          (p) => p.metadata?.labels?.['agents.x-k8s.io/sandbox-name-hash'] === undefined,
        );
        observe(items.map((p) => ({ name: p.metadata?.name, node: p.spec?.nodeName, phase: p.status?.phase })));
        const up = (p: V1Pod) => p.status?.phase === 'Running' || p.status?.phase === 'Succeeded';
        return items.length >= FIRST_INSTALL && items.every(up) ? items : undefined;
      },
      { timeoutMs: 180_000 },
    );
    process.stderr.write(
      `[kubeplus-real-node] ${pods.map((p) => `${p.metadata?.name} ${p.status?.phase} on ${p.spec?.nodeName}`).join('; ')}\n`,
    );
    for (const pod of pods) {
      expect({ pod: pod.metadata?.name, placed: carriesPoolMandate(POOL, pod) }).toEqual({
        pod: pod.metadata?.name,
        placed: true,
      });
      expect(pod.spec?.nodeName).toBe(cluster.nodeName);
    }
    const owners = pods.map((p) => p.metadata?.ownerReferences?.[0]?.kind ?? 'none').sort();
    expect(owners).toEqual(['Job', 'ReplicaSet', 'ReplicaSet', 'ReplicaSet', 'none']);

    // The Sandbox, written with no class: defaulted to the instance's class (handler runsc), Ready.
    const ownClass = runtimeClassName(INSTANCE);
    const handler = (await cluster.cp.kc.makeApiClient(NodeV1Api).readRuntimeClass({ name: ownClass })).handler;
    expect(handler).toBe('runsc');
    const sandbox = await waitForSandboxReady(custom, INSTANCE, SANDBOX, 180_000);
    const written = (sandbox as { spec?: { podTemplate?: { spec?: { runtimeClassName?: string } } } }).spec;
    expect(written?.podTemplate?.spec?.runtimeClassName).toBe(ownClass);
    const sandboxPod = await podOfSandbox(core, custom, INSTANCE, SANDBOX);
    expect(sandboxPod?.spec?.runtimeClassName).toBe(ownClass);
    expect(sandboxPod?.spec?.nodeName).toBe(cluster.nodeName);
    expect(sandboxPod && carriesPoolMandate(POOL, sandboxPod)).toBe(true);

    // The tenant namespace is isolated and settled; KubePlus's own namespace carries no key of ours.
    const tenant = (await core.readNamespace({ name: INSTANCE })).metadata?.labels ?? {};
    expect(tenant[NODE_ISOLATION_ENABLED_LABEL]).toBe('true');
    expect(tenant[ISOLATION_SETTLED_LABEL]).toBe('true');
    const platform = (await core.readNamespace({ name: KUBEPLUS_NAMESPACE })).metadata ?? {};
    const ours = [...Object.keys(platform.labels ?? {}), ...Object.keys(platform.annotations ?? {})].filter((k) =>
      k.startsWith('kubeplus.io/'),
    );
    expect(ours).toEqual([]);
  });

  test("deleting the instance: KubePlus's helm delete and namespace delete, then the instance's RuntimeClass goes", async () => {
    const ref = {
      group: GROUP,
      version: 'v1alpha1',
      plural: KIND.plural,
      namespace: KUBEPLUS_NAMESPACE,
      name: INSTANCE,
    };
    await custom.deleteNamespacedCustomObject(ref);
    await kubeplus?.idle();
    await waitFor(
      `namespace ${INSTANCE} and RuntimeClass ${runtimeClassName(INSTANCE)} gone`,
      async (observe) => {
        const ns = await core.readNamespace({ name: INSTANCE }).catch(() => undefined);
        const rc = await cluster.cp.kc
          .makeApiClient(NodeV1Api)
          .readRuntimeClass({ name: runtimeClassName(INSTANCE) })
          .catch(() => undefined);
        observe({ namespace: ns?.status?.phase, runtimeClass: rc?.handler });
        return ns === undefined && rc === undefined ? true : undefined;
      },
      { timeoutMs: 180_000 },
    );
    expect(kubeplus?.events.filter((e) => e.type === 'helm').map((e) => (e.type === 'helm' ? e.verb : ''))).toEqual([
      'install',
      'delete',
    ]);
  });
});
