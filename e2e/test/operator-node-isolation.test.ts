/**
 * Seed 1 (node isolation), driven end to end by instance annotations: the real operator process
 * (services/operator/dist/main.js) turns `kubeplus.io/node-isolation` on an `Agent`
 * (cloudark.io/v1, labelled `registered-by: kubeplus`) into the namespace label and resolved
 * annotation, the real webhook process (or the admission-policy engine) patches Pods there, and the real scheduler binds them to
 * the tainted, labelled fake node only.
 *
 * - an instance in its own namespace: label + canonical annotation; Pods placed on the pool node;
 * - an instance in the platform namespace `kubeplus`: a namespace named after it, born isolated
 *   (the first version any watcher sees already carries both keys); deleting the instance deletes
 *   the namespace (`kubectl get namespace` → NotFound) without an unlabelling step first;
 * - annotation removed → both keys removed; instance deleted → both removed, namespace kept;
 * - an invalid annotation → a Warning Event listing the errors, the invalid-annotation metric,
 *   and the namespace exactly as it was (last good state).
 *
 * All of it twice: with the webhook, and with the admission-policy engine instead.
 */
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { beforeAll, expect, test } from '@jest/globals';
import {
  type Cluster,
  type FakeNodes,
  type RunningWebhook,
  registerWebhook,
  startFakeNodes,
  startWebhook,
  testPod,
  unregisterWebhook,
  waitFor,
  waitForPodBound,
} from '@kubeplus-isolation/e2e';
import {
  NAMESPACE_CREATED_FOR_ANNOTATION,
  NODE_ISOLATION_ANNOTATION,
  NODE_ISOLATION_ENABLED_LABEL,
  NODE_ISOLATION_RESOLVED_ANNOTATION,
  OWNER_ANNOTATION,
} from '@kubeplus-isolation/spec';
import { CoreV1Api, CustomObjectsApi, type KubeConfig, type V1Namespace, Watch } from '@kubernetes/client-node';
import { uniqueName } from './support/names.js';
import { placement, waitForWebhookActive, withoutDefaultTolerations } from './support/node-isolation.js';
import {
  AGENT,
  createAgent,
  deleteAgent,
  getAgent,
  isolationKeys,
  mergePatch,
  patchAgent,
  readNamespace,
  waitForEvent,
  waitForNamespace,
} from './support/operator.js';
import { operatorSuite } from './support/operator-suite.js';
import { installPolicyEngine, NODE_ISOLATION_PARAMS, type PolicyEngine } from './support/policy-engine.js';
import { describeIf, POLICY_ENGINE_SERVED, POLICY_ENGINE_WHY } from './support/versions.js';

const run = promisify(execFile);
const PLATFORM_NAMESPACE = 'kubeplus';
const INVALID_METRIC = 'kubeplus_operator_invalid_annotations_total';

/**
 * The seed's mandate for `pool`, written the way a user might (keys out of order, indented, one
 * toleration twice — once with the operator left out, which Kubernetes reads as Equal) ...
 */
function userAnnotation(pool: string): string {
  return JSON.stringify(
    {
      tolerations: [
        { effect: 'NoSchedule', value: pool, key: 'dedicated', operator: 'Equal' },
        { key: 'dedicated', value: pool, effect: 'NoSchedule' },
      ],
      nodeSelector: { pool, 'kubernetes.io/os': 'linux' },
    },
    null,
    2,
  );
}

/** ... and the canonical text the operator must write: keys sorted, tolerations normalized and de-duplicated. */
function canonical(pool: string): string {
  return `{"nodeSelector":{"kubernetes.io/os":"linux","pool":"${pool}"},"tolerations":[{"key":"dedicated","operator":"Equal","value":"${pool}","effect":"NoSchedule"}]}`;
}

const isolated = (ns: V1Namespace | undefined, pool: string): boolean =>
  ns?.metadata?.labels?.[NODE_ISOLATION_ENABLED_LABEL] === 'true' &&
  ns.metadata.annotations?.[NODE_ISOLATION_RESOLVED_ANNOTATION] === canonical(pool);

const unisolated = (ns: V1Namespace | undefined): boolean =>
  ns !== undefined &&
  Object.values(isolationKeys(ns)).every((v) => v === undefined) &&
  ns.status?.phase === 'Active' &&
  ns.metadata?.deletionTimestamp === undefined;

/**
 * The whole suite runs once per engine: the real webhook process (the default), and the API
 * server's MutatingAdmissionPolicy fed by the NodeIsolation parameter the operator writes
 * (`--node-isolation-engine=admission-policy`, no webhook registered at all).
 */
const ENGINES = ['webhook', 'admission-policy'] as const;

for (const engine of ENGINES) {
  describeIf(engine === 'webhook' || POLICY_ENGINE_SERVED, POLICY_ENGINE_WHY)(
    `operator: node isolation (seed 1) from instance annotations, on the real control plane (engine ${engine})`,
    () => {
      let core: CoreV1Api;
      let webhook: RunningWebhook | undefined;
      let policyEngine: PolicyEngine | undefined;
      let nodes: FakeNodes | undefined;
      const pool = uniqueName('team-a-pool');
      const otherPool = uniqueName('team-a-pool-v2');
      const pinned = uniqueName('op-ni-pool-node');
      const free = uniqueName('op-ni-free-node');
      const webhookConfig = uniqueName('e2e-op-node-isolation');
      const suite = operatorSuite({
        name: 'op-ni',
        platformNamespace: PLATFORM_NAMESPACE,
        args: [`--node-isolation-engine=${engine}`],
        beforeOperator: async ({ cluster, kc }) => {
          // Demo step 1: a tainted, labelled pool node, and an ordinary one any other Pod may use.
          nodes = await startFakeNodes(kc, [pinned, free]);
          await nodes.taint(pinned, { key: 'dedicated', value: pool, effect: 'NoSchedule' });
          await nodes.label(pinned, { pool });
          if (engine === 'webhook') {
            webhook = await startWebhook(cluster);
            await registerWebhook(kc, { url: webhook.url, caPem: webhook.caPem, name: webhookConfig });
          } else {
            // Before the operator: its cache of NodeIsolation objects must sync before it is ready.
            policyEngine = await installPolicyEngine(kc);
          }
        },
        afterTeardown: async ({ kc }) => {
          if (webhook) await unregisterWebhook(kc, webhookConfig);
          await nodes?.stop();
          await webhook?.stop();
          await policyEngine?.uninstall();
        },
      });
      const { tenantNamespace } = suite;
      let kc: KubeConfig;
      let cluster: Cluster;
      beforeAll(() => {
        ({ cluster, kc } = suite);
        core = kc.makeApiClient(CoreV1Api);
      });

      test('an instance in its own namespace: the namespace gets the label and the canonical annotation, and its Pods land only on the pool node', async () => {
        const ns = await tenantNamespace('kpi-op-ni-team-a');
        const name = uniqueName('team-a-agent');
        await createAgent(kc, ns, name, { [NODE_ISOLATION_ANNOTATION]: userAnnotation(pool) });

        // Demo step 3: the namespace carries both the label and the resolved annotation.
        const labelled = await waitForNamespace(kc, ns, 'to be labelled and annotated by the operator', (n) =>
          isolated(n, pool),
        );
        expect(labelled?.metadata?.annotations?.[NODE_ISOLATION_RESOLVED_ANNOTATION]).toBe(canonical(pool));
        expect(labelled?.metadata?.annotations?.[OWNER_ANNOTATION]).toBe(`${AGENT.group}/${AGENT.kind}/${ns}/${name}`);
        // Not created by the operator: it never claims the namespace as its own (so it never deletes it).
        expect(labelled?.metadata?.annotations?.[NAMESPACE_CREATED_FOR_ANNOTATION]).toBeUndefined();
        // The operator never writes the instance (issue 35): no finalizer.
        expect((await getAgent(kc, ns, name))?.metadata.finalizers).toBeUndefined();
        await waitForEvent(kc, ns, name, 'NodeIsolationApplied');
        if (engine === 'admission-policy') {
          // The policy's parameter, beside the label: the same canonical spec.
          const param = (await kc.makeApiClient(CustomObjectsApi).getNamespacedCustomObject({
            group: NODE_ISOLATION_PARAMS.group,
            version: NODE_ISOLATION_PARAMS.version,
            plural: NODE_ISOLATION_PARAMS.plural,
            namespace: ns,
            name: NODE_ISOLATION_PARAMS.name,
          })) as { spec: unknown };
          expect(param.spec).toEqual(JSON.parse(canonical(pool)));
        }

        // Demo step 4: a Pod that declares no placement gets the mandate and is bound to the pool node.
        await waitForWebhookActive(kc, ns, { pool });
        await core.createNamespacedPod({ namespace: ns, body: testPod('agent-pod') });
        const pod = await waitForPodBound(kc, ns, 'agent-pod');
        expect(placement(pod)).toEqual({
          name: 'agent-pod',
          nodeName: pinned,
          nodeSelector: { 'kubernetes.io/os': 'linux', pool },
          tolerations: [{ key: 'dedicated', operator: 'Equal', value: pool, effect: 'NoSchedule' }],
        });
      });

      test('an instance in the platform namespace gets a namespace named after it, isolated from its first version; deleting the instance deletes it', async () => {
        const name = uniqueName('team-a-agent-instance');
        // A watch started before the instance exists sees every version of the namespace.
        const seen: { type: string; labels: Record<string, string>; annotations: Record<string, string> }[] = [];
        let watchEnded: unknown;
        const before = await core.listNamespace({ fieldSelector: `metadata.name=${name}` });
        expect(before.items).toEqual([]);
        const watch = await new Watch(kc).watch(
          '/api/v1/namespaces',
          { fieldSelector: `metadata.name=${name}`, resourceVersion: before.metadata?.resourceVersion },
          (type, obj: V1Namespace) =>
            seen.push({ type, labels: obj.metadata?.labels ?? {}, annotations: obj.metadata?.annotations ?? {} }),
          (err) => {
            watchEnded = err ?? 'closed';
          },
        );
        try {
          await createAgent(kc, PLATFORM_NAMESPACE, name, { [NODE_ISOLATION_ANNOTATION]: userAnnotation(pool) });
          await waitFor(
            `the watch to see namespace ${name} created`,
            async (observe) => {
              observe({ seen, watchEnded });
              return seen.length > 0;
            },
            { timeoutMs: 30_000, intervalMs: 100 },
          );
          // The very first version — what any Pod admission could ever see — is already isolated.
          const first = seen[0];
          expect(first?.type).toBe('ADDED');
          expect(first?.labels[NODE_ISOLATION_ENABLED_LABEL]).toBe('true');
          expect(first?.annotations[NODE_ISOLATION_RESOLVED_ANNOTATION]).toBe(canonical(pool));
          expect(first?.annotations[NAMESPACE_CREATED_FOR_ANNOTATION]).toBe(
            `${AGENT.group}/${AGENT.kind}/${PLATFORM_NAMESPACE}/${name}`,
          );
          await waitForEvent(kc, PLATFORM_NAMESPACE, name, 'NamespaceCreated', (m) =>
            m.includes('with node isolation'),
          );

          // Its Pods are placed like any isolated namespace's.
          await waitFor(
            `ServiceAccount default in namespace ${name}`,
            () => core.readNamespacedServiceAccount({ name: 'default', namespace: name }),
            { timeoutMs: 30_000 },
          );
          await waitForWebhookActive(kc, name, { pool });
          await core.createNamespacedPod({ namespace: name, body: testPod('agent-pod') });
          expect((await waitForPodBound(kc, name, 'agent-pod')).spec?.nodeName).toBe(pinned);

          // Demo step 6: delete the instance; the namespace (and so the label) is gone.
          await deleteAgent(kc, PLATFORM_NAMESPACE, name);
          await waitForNamespace(kc, name, 'to be deleted and finalized', (ns) => ns === undefined, 120_000);
          const kubectl = join(cluster.state.assetsDir, 'kubectl');
          const got = await run(kubectl, ['--kubeconfig', cluster.kubeconfigPath, 'get', 'namespace', name]).then(
            () => ({ code: 0, stderr: '' }),
            (error: { code: number; stderr: string }) => ({ code: error.code, stderr: error.stderr }),
          );
          expect(got.code).toBe(1);
          expect(got.stderr).toContain(`namespaces "${name}" not found`);
          // No explicit unlabelling step: every version up to the deletion still carried the label.
          await waitFor('the watch to see the DELETED event', async () => seen.at(-1)?.type === 'DELETED', {
            timeoutMs: 10_000,
          });
          expect(seen.filter((e) => e.labels[NODE_ISOLATION_ENABLED_LABEL] !== 'true')).toEqual([]);
        } finally {
          watch.abort();
        }
      });

      test('removing the annotation removes the label and the annotation; deleting the instance removes them and keeps the namespace', async () => {
        const ns = await tenantNamespace('kpi-op-ni-team-b');
        const name = uniqueName('team-b-agent');
        await createAgent(kc, ns, name, { [NODE_ISOLATION_ANNOTATION]: userAnnotation(pool) });
        await waitForNamespace(kc, ns, 'to be isolated', (n) => isolated(n, pool));

        await patchAgent(kc, ns, name, { annotations: { [NODE_ISOLATION_ANNOTATION]: null } });
        await waitForNamespace(kc, ns, 'to lose the label, the annotation and the owner keys', unisolated);
        expect((await getAgent(kc, ns, name))?.metadata.finalizers).toBeUndefined();
        // The API server no longer sends this namespace's Pods to the webhook (nor to the policy).
        const plain = await core.createNamespacedPod({ namespace: ns, body: testPod('after-removal'), dryRun: 'All' });
        expect(plain.spec?.nodeSelector).toBeUndefined();
        expect(withoutDefaultTolerations(plain.spec?.tolerations)).toEqual([]);

        // Isolated again, then the instance is deleted: the keys go, the namespace (not the operator's) stays.
        await patchAgent(kc, ns, name, { annotations: { [NODE_ISOLATION_ANNOTATION]: userAnnotation(pool) } });
        await waitForNamespace(kc, ns, 'to be isolated again', (n) => isolated(n, pool));
        await deleteAgent(kc, ns, name);
        const kept = await waitForNamespace(kc, ns, 'to lose the isolation keys and stay Active', unisolated);
        expect(kept?.metadata?.name).toBe(ns);
      });

      test('drift: a label or resolved annotation removed or changed by hand is restored', async () => {
        const ns = await tenantNamespace('kpi-op-ni-drift');
        const name = uniqueName('drift-agent');
        await createAgent(kc, ns, name, { [NODE_ISOLATION_ANNOTATION]: userAnnotation(pool) });
        await waitForNamespace(kc, ns, 'to be isolated', (n) => isolated(n, pool));

        await core.patchNamespace(
          { name: ns, body: { metadata: { labels: { [NODE_ISOLATION_ENABLED_LABEL]: null } } } },
          mergePatch,
        );
        await waitForNamespace(kc, ns, 'to get the label back', (n) => isolated(n, pool));

        await core.patchNamespace(
          {
            name: ns,
            body: { metadata: { annotations: { [NODE_ISOLATION_RESOLVED_ANNOTATION]: canonical(otherPool) } } },
          },
          mergePatch,
        );
        await waitForNamespace(kc, ns, `to get the annotation back to ${pool}`, (n) => isolated(n, pool));
      });

      test('an invalid annotation: a Warning Event listing the errors, the metric counts it, and the namespace keeps its last good state', async () => {
        const ns = await tenantNamespace('kpi-op-ni-team-c');
        const name = uniqueName('team-c-agent');
        const op = suite.operator;
        await createAgent(kc, ns, name, { [NODE_ISOLATION_ANNOTATION]: userAnnotation(pool) });
        await waitForNamespace(kc, ns, 'to be isolated', (n) => isolated(n, pool));
        const good = (await readNamespace(kc, ns)) as V1Namespace;
        const countBefore = await op.metric(INVALID_METRIC, { annotation: NODE_ISOLATION_ANNOTATION });

        await patchAgent(kc, ns, name, {
          annotations: {
            [NODE_ISOLATION_ANNOTATION]: JSON.stringify({
              nodeSelector: { pool: otherPool },
              tolerations: [{ key: 'dedicated', operator: 'Sideways', value: otherPool, effect: 'Never' }],
            }),
          },
        });
        const event = await waitForEvent(kc, ns, name, 'InvalidNodeIsolation');
        expect(event.type).toBe('Warning');
        expect(event.message).toContain('tolerations[0].operator must be one of Exists, Equal');
        expect(event.message).toContain('tolerations[0].effect must be one of NoSchedule, PreferNoSchedule, NoExecute');
        await waitFor(
          `${INVALID_METRIC}{annotation="${NODE_ISOLATION_ANNOTATION}"} to move past ${countBefore}`,
          async (observe) => {
            const now = await op.metric(INVALID_METRIC, { annotation: NODE_ISOLATION_ANNOTATION });
            observe(now);
            return now > countBefore;
          },
          { timeoutMs: 10_000 },
        );
        // Not a single write to the namespace: same resourceVersion, same keys.
        const after = (await readNamespace(kc, ns)) as V1Namespace;
        expect(after.metadata?.resourceVersion).toBe(good.metadata?.resourceVersion);
        expect(isolationKeys(after)).toEqual(isolationKeys(good));
        expect(after.metadata?.annotations?.[NODE_ISOLATION_RESOLVED_ANNOTATION]).toBe(canonical(pool));

        // A valid annotation again is applied at once (the instance is not stuck).
        await patchAgent(kc, ns, name, { annotations: { [NODE_ISOLATION_ANNOTATION]: userAnnotation(otherPool) } });
        await waitForNamespace(kc, ns, `to be isolated to ${otherPool}`, (n) => isolated(n, otherPool));
      });
    },
  );
}
