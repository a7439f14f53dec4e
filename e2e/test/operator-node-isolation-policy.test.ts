/**
 * Node isolation through the admission-policy engine (`--node-isolation-engine=admission-policy`),
 * on the real control plane with no webhook at all: the real operator process writes the
 * NodeIsolation parameter (`isolation.kubeplus.io/v1alpha1`, `node-isolation`) into the tenant
 * namespace next to the label and the resolved annotation, and the API server's own
 * MutatingAdmissionPolicy (deploy/kubeplus-isolation/files/node-isolation-engine.yaml) applies it to Pods.
 *
 * - annotation → namespace label + annotation + parameter (canonical spec, owner markers); a Pod
 *   created there is stored with the mandate;
 * - the parameter edited or deleted by hand → restored (drift);
 * - an invalid annotation → Warning Event, the parameter exactly as it was (last good state);
 * - annotation removed → label, annotation and parameter gone; new Pods are left alone;
 * - a namespace isolated without its parameter (by hand here): the policy fails open, the Pod is
 *   admitted unpatched, and the operator's fail-open audit reports it as for the webhook.
 */
import { isDeepStrictEqual } from 'node:util';
import { beforeAll, expect, test } from '@jest/globals';
import { isApiStatus, testPod, waitFor } from '@kubeplus-isolation/e2e';
import {
  MANAGED_BY_LABEL,
  MANAGED_BY_VALUE,
  NODE_ISOLATION_ANNOTATION,
  NODE_ISOLATION_ENABLED_LABEL,
  NODE_ISOLATION_RESOLVED_ANNOTATION,
  OWNER_ANNOTATION,
} from '@kubeplus-isolation/spec';
import { CoreV1Api, CustomObjectsApi, type KubeConfig, type KubernetesObject } from '@kubernetes/client-node';
import { uniqueName } from './support/names.js';
import { AGENT, createAgent, mergePatch, patchAgent, waitForEvent, waitForNamespace } from './support/operator.js';
import { operatorSuite } from './support/operator-suite.js';
import {
  installPolicyEngine,
  NODE_ISOLATION_PARAMS as PARAMS,
  type PolicyEngine,
  waitForPolicyResult,
} from './support/policy-engine.js';
import { describeIf, POLICY_ENGINE_SERVED, POLICY_ENGINE_WHY } from './support/versions.js';

type Param = KubernetesObject & { spec?: unknown };

const mandate = (pool: string) => ({
  nodeSelector: { pool, 'kubernetes.io/os': 'linux' },
  tolerations: [{ key: 'dedicated', operator: 'Equal', value: pool, effect: 'NoSchedule' }],
});
/** The canonical spec: selector keys sorted, tolerations normalized. */
const canonicalSpec = (pool: string) => ({
  nodeSelector: { 'kubernetes.io/os': 'linux', pool },
  tolerations: [{ key: 'dedicated', operator: 'Equal', value: pool, effect: 'NoSchedule' }],
});

describeIf(POLICY_ENGINE_SERVED, POLICY_ENGINE_WHY)(
  'operator: node isolation through the admission-policy engine, on the real control plane (no webhook)',
  () => {
    let engine: PolicyEngine | undefined;
    const suite = operatorSuite({
      name: 'op-nip',
      // A short audit period, for the missing-parameter test.
      args: ['--node-isolation-engine=admission-policy', '--audit-interval=1s'],
      // The chart's part: the CRD and the one policy + binding. Before the operator, whose cache of
      // NodeIsolation objects must sync before it becomes ready.
      beforeOperator: async ({ kc }) => {
        engine = await installPolicyEngine(kc);
      },
      afterTeardown: async () => {
        await engine?.uninstall();
      },
    });
    const { tenantNamespace } = suite;
    let kc: KubeConfig;
    let core: CoreV1Api;
    let custom: CustomObjectsApi;
    const pool = uniqueName('pool');
    const otherPool = uniqueName('pool-v2');

    beforeAll(() => {
      kc = suite.kc;
      core = kc.makeApiClient(CoreV1Api);
      custom = kc.makeApiClient(CustomObjectsApi);
    });
    const readParam = async (namespace: string): Promise<Param | undefined> => {
      try {
        return (await custom.getNamespacedCustomObject({ ...PARAMS, namespace })) as Param;
      } catch (error) {
        if (isApiStatus(error, 404)) return undefined;
        throw error;
      }
    };
    const waitForParam = async (
      namespace: string,
      what: string,
      ok: (p: Param | undefined) => boolean,
    ): Promise<Param | undefined> => {
      const found = await waitFor(
        `NodeIsolation ${namespace}/${PARAMS.name} ${what}`,
        async (observe) => {
          const p = await readParam(namespace);
          observe(p?.spec ?? 'absent');
          return ok(p) ? { p } : undefined;
        },
        { timeoutMs: 30_000 },
      );
      return found.p;
    };

    test('an annotated instance: its namespace gets the label, the annotation and the parameter, and a Pod created there is stored with the mandate', async () => {
      const ns = await tenantNamespace('kpi-op-nip-a');
      const name = uniqueName('agent-a');
      await createAgent(kc, ns, name, { [NODE_ISOLATION_ANNOTATION]: JSON.stringify(mandate(pool)) });

      const labelled = await waitForNamespace(
        kc,
        ns,
        'to be labelled and annotated',
        (n) => n?.metadata?.labels?.[NODE_ISOLATION_ENABLED_LABEL] === 'true',
      );
      expect(JSON.parse(labelled?.metadata?.annotations?.[NODE_ISOLATION_RESOLVED_ANNOTATION] ?? 'null')).toEqual(
        canonicalSpec(pool),
      );
      const param = await waitForParam(ns, 'to be written', (p) => p !== undefined);
      expect(param?.spec).toEqual(canonicalSpec(pool));
      expect(param?.metadata?.labels?.[MANAGED_BY_LABEL]).toBe(MANAGED_BY_VALUE);
      expect(param?.metadata?.annotations?.[OWNER_ANNOTATION]).toBe(`${AGENT.group}/${AGENT.kind}/${ns}/${name}`);

      await waitForPolicyResult(kc, ns, canonicalSpec(pool).nodeSelector);
      const pod = await core.createNamespacedPod({
        namespace: ns,
        body: testPod('agent-pod', { nodeSelector: { disk: 'ssd', pool: 'elsewhere' } }),
      });
      // Mandated keys win, the Pod's others stay; the toleration is added once.
      expect(pod.spec?.nodeSelector).toEqual({ disk: 'ssd', pool, 'kubernetes.io/os': 'linux' });
      expect(pod.spec?.tolerations?.filter((t) => t.key === 'dedicated')).toEqual([
        { key: 'dedicated', operator: 'Equal', value: pool, effect: 'NoSchedule' },
      ]);
    });

    test('the parameter edited or deleted by hand is restored', async () => {
      const ns = await tenantNamespace('kpi-op-nip-drift');
      const name = uniqueName('agent-drift');
      await createAgent(kc, ns, name, { [NODE_ISOLATION_ANNOTATION]: JSON.stringify(mandate(pool)) });
      const written = await waitForParam(ns, 'to be written', (p) => p !== undefined);

      await custom.patchNamespacedCustomObject(
        { ...PARAMS, namespace: ns, body: { spec: { nodeSelector: { pool: 'anything' }, tolerations: [] } } },
        mergePatch,
      );
      const restored = await waitForParam(ns, 'to be restored after an edit', (p) => {
        const rv = Number(p?.metadata?.resourceVersion ?? 0);
        return rv > Number(written?.metadata?.resourceVersion ?? 0) && isDeepStrictEqual(p?.spec, canonicalSpec(pool));
      });
      expect(restored?.spec).toEqual(canonicalSpec(pool));

      await custom.deleteNamespacedCustomObject({ ...PARAMS, namespace: ns });
      const recreated = await waitForParam(
        ns,
        'to be re-created after a deletion',
        (p) => p !== undefined && p.metadata?.uid !== restored?.metadata?.uid,
      );
      expect(recreated?.spec).toEqual(canonicalSpec(pool));
    });

    test('an invalid annotation keeps the parameter exactly as it was, and says why in an Event', async () => {
      const ns = await tenantNamespace('kpi-op-nip-invalid');
      const name = uniqueName('agent-invalid');
      await createAgent(kc, ns, name, { [NODE_ISOLATION_ANNOTATION]: JSON.stringify(mandate(pool)) });
      const good = await waitForParam(ns, 'to be written', (p) => p !== undefined);

      await patchAgent(kc, ns, name, {
        annotations: {
          [NODE_ISOLATION_ANNOTATION]: JSON.stringify({
            nodeSelector: { pool: otherPool },
            tolerations: [{ key: 'dedicated', operator: 'Sideways', value: otherPool, effect: 'NoSchedule' }],
          }),
        },
      });
      const event = await waitForEvent(kc, ns, name, 'InvalidNodeIsolation');
      expect(event.type).toBe('Warning');
      const after = await readParam(ns);
      expect(after?.metadata?.resourceVersion).toBe(good?.metadata?.resourceVersion);
      expect(after?.spec).toEqual(canonicalSpec(pool));
    });

    test('removing the annotation removes the parameter with the label, and new Pods are left alone', async () => {
      const ns = await tenantNamespace('kpi-op-nip-remove');
      const name = uniqueName('agent-remove');
      await createAgent(kc, ns, name, { [NODE_ISOLATION_ANNOTATION]: JSON.stringify(mandate(pool)) });
      await waitForParam(ns, 'to be written', (p) => p !== undefined);

      await patchAgent(kc, ns, name, { annotations: { [NODE_ISOLATION_ANNOTATION]: null } });
      await waitForParam(ns, 'to be deleted', (p) => p === undefined);
      await waitForNamespace(
        kc,
        ns,
        'to lose the label',
        (n) => n?.metadata?.labels?.[NODE_ISOLATION_ENABLED_LABEL] === undefined,
      );
      await waitForPolicyResult(kc, ns, undefined);
      const pod = await core.createNamespacedPod({ namespace: ns, body: testPod('free-pod') });
      expect(pod.spec?.nodeSelector).toBeUndefined();
    });

    test('a missing parameter admits the Pod unpatched, and the fail-open audit reports it', async () => {
      // Isolated by hand (label + resolved annotation, no instance): nobody writes its parameter.
      const ns = await tenantNamespace('kpi-op-nip-noparam', {
        labels: { [NODE_ISOLATION_ENABLED_LABEL]: 'true' },
        annotations: { [NODE_ISOLATION_RESOLVED_ANNOTATION]: JSON.stringify(canonicalSpec(pool)) },
      });
      expect(await readParam(ns)).toBeUndefined();
      const pod = await core.createNamespacedPod({ namespace: ns, body: testPod('unpatched') });
      expect(pod.spec?.nodeSelector).toBeUndefined();

      const op = suite.operator;
      await waitFor(
        `the audit to count the unpatched Pod in ${ns}`,
        async (observe) => {
          const lines = op.logLines().filter((l) => l.msg.startsWith('Pods lack') && l.namespace === ns);
          observe(lines.at(-1) ?? 'no audit line yet');
          return lines.at(-1);
        },
        { timeoutMs: 15_000, intervalMs: 250 },
      );
      const line = op
        .logLines()
        .filter((l) => l.msg.startsWith('Pods lack') && l.namespace === ns)
        .at(-1);
      expect(line).toMatchObject({ level: 'warn', unisolated: 1, missing: { both: 1 } });
      expect(await op.metric('kubeplus_operator_unisolated_pods', { missing: 'both' })).toBeGreaterThanOrEqual(1);
    });

    test('the NodeIsolation CRD accepts every spec the annotation schema accepts, up to its limits', async () => {
      // The longest qualified names (a 253-character DNS subdomain prefix, '/', a 63-character
      // name), the longest values, 32 selector entries (the annotation's maximum) and tolerations
      // with every field: the parameter the operator writes for them must be accepted as is.
      const prefix = `${['a', 'b', 'c'].map((c) => c.repeat(63)).join('.')}.${'d'.repeat(61)}`;
      const key = (i: number): string => `${prefix}/${String(i).padStart(2, '0')}${'x'.repeat(61)}`;
      expect(key(0)).toHaveLength(317);
      const nodeSelector = Object.fromEntries(Array.from({ length: 32 }, (_, i) => [key(i), 'v'.repeat(63)]));
      const tolerations = [
        { key: key(40), operator: 'Equal', value: 'w'.repeat(63), effect: 'NoExecute', tolerationSeconds: 3600 },
        { key: key(41), operator: 'Exists', effect: 'PreferNoSchedule' },
        { operator: 'Exists' },
      ];
      const ns = await tenantNamespace('kpi-op-nip-limits');
      const name = uniqueName('agent-limits');
      await createAgent(kc, ns, name, { [NODE_ISOLATION_ANNOTATION]: JSON.stringify({ nodeSelector, tolerations }) });
      const param = await waitForParam(ns, 'to be written', (p) => p !== undefined);
      const labelled = await waitForNamespace(
        kc,
        ns,
        'to be isolated',
        (n) => n?.metadata?.labels?.[NODE_ISOLATION_ENABLED_LABEL] === 'true',
      );
      expect(param?.spec).toEqual(
        JSON.parse(labelled?.metadata?.annotations?.[NODE_ISOLATION_RESOLVED_ANNOTATION] ?? 'null'),
      );
      expect(Object.keys((param?.spec as { nodeSelector?: object } | undefined)?.nodeSelector ?? {})).toHaveLength(32);
    });
  },
);
