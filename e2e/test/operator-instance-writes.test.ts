/**
 * The operator never writes an instance (issue 35), on the real control plane with a real
 * operator process. Beside KubePlus every UPDATE (and PATCH) of an instance passes KubePlus's
 * fail-closed mutating webhook, which rewrites `accountidentity` to the writer, may start a
 * `helm upgrade`, refuses while the tenant namespace is Terminating and refuses everything while
 * KubePlus is down. So:
 *
 * - (a) a fail-closed ValidatingWebhookConfiguration on UPDATE of the instance Kind pointing at a
 *   dead endpoint (KubePlus's webhook down): an instance with both annotations is still isolated
 *   (namespace labelled and annotated, RuntimeClass, policies, NodeIsolation parameter);
 * - (b) its resourceVersion and managedFields never name the operator's field manager, after full
 *   isolation and after annotation changes;
 * - (c) deleting it (gone at once: no finalizer) removes its RuntimeClass, policies, bindings,
 *   NodeIsolation parameter and namespace keys;
 * - (d) the same when the operator is stopped during the deletion and started afterwards;
 * - (e) an instance carrying the finalizer of an earlier release gets it removed (live, and while
 *   being deleted with the operator down) and deletes normally;
 * - (f) an instance deleted and re-created under the same name while the operator is down: the new
 *   one adopts what the first left, and only what it asks for stays.
 *
 * The NodeIsolation parameter is written where the cluster serves the admission-policy engine
 * (MutatingAdmissionPolicy v1, 1.36+); elsewhere the rest is checked without it.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, test } from '@jest/globals';
import { isApiStatus, waitFor } from '@kubeplus-isolation/e2e';
import {
  FINALIZER,
  NODE_ISOLATION_ANNOTATION,
  NODE_ISOLATION_ENABLED_LABEL,
  NODE_ISOLATION_RESOLVED_ANNOTATION,
  OWNER_UID_LABEL,
  SANDBOX_ISOLATION_ANNOTATION,
} from '@kubeplus-isolation/spec';
import {
  AdmissionregistrationV1Api,
  CustomObjectsApi,
  type KubeConfig,
  type V1ManagedFieldsEntry,
  type V1Namespace,
} from '@kubernetes/client-node';
import { uniqueName } from './support/names.js';
import {
  AGENT,
  type AgentObject,
  createAgent,
  expectedSandboxObjects,
  getAgent,
  isolationKeys,
  mergePatch,
  ownedObjects,
  patchAgent,
  readNamespace,
  waitForNamespace,
  waitForOwned,
} from './support/operator.js';
import { operatorSuite } from './support/operator-suite.js';
import { installPolicyEngine, NODE_ISOLATION_PARAMS as PARAMS, type PolicyEngine } from './support/policy-engine.js';
import { POLICY_ENGINE_SERVED } from './support/versions.js';

/** The operator's field manager on every write (services/operator/src/kube/cluster-port.ts FIELD_MANAGER). */
const OPERATOR_FIELD_MANAGER = 'kubeplus-isolation-operator';
/** Instances carrying this label are behind the dead fail-closed webhook. */
const DOWN_LABEL = 'e2e.kubeplus.io/kubeplus-down';

type Instance = AgentObject & { metadata: AgentObject['metadata'] & { managedFields?: V1ManagedFieldsEntry[] } };

const nodeMandate = (pool: string): string =>
  JSON.stringify({
    nodeSelector: { pool },
    tolerations: [{ key: 'dedicated', operator: 'Equal', value: pool, effect: 'NoSchedule' }],
  });
/** The canonical form the operator writes for nodeMandate(pool). */
const resolved = (pool: string): string =>
  `{"nodeSelector":{"pool":"${pool}"},"tolerations":[{"key":"dedicated","operator":"Equal","value":"${pool}","effect":"NoSchedule"}]}`;
const both = (pool: string, enforce: boolean): Record<string, string> => ({
  [NODE_ISOLATION_ANNOTATION]: nodeMandate(pool),
  [SANDBOX_ISOLATION_ANNOTATION]: JSON.stringify({ minRuntimeClass: 'kata', enforce }),
});

const isolatedFor = (ns: V1Namespace | undefined, pool: string): boolean =>
  ns?.metadata?.labels?.[NODE_ISOLATION_ENABLED_LABEL] === 'true' &&
  ns.metadata.annotations?.[NODE_ISOLATION_RESOLVED_ANNOTATION] === resolved(pool);
const keysGone = (ns: V1Namespace | undefined): boolean =>
  ns !== undefined && Object.values(isolationKeys(ns)).every((v) => v === undefined);

async function readInstance(kc: KubeConfig, ns: string, name: string): Promise<Instance | undefined> {
  return (await getAgent(kc, ns, name)) as Instance | undefined;
}

/** The field managers that ever wrote the instance (managedFields). */
const managers = (i: Instance | undefined): string[] => (i?.metadata.managedFields ?? []).map((f) => f.manager ?? '');

describe('operator: never writes an instance (no finalizer), on the real control plane', () => {
  let engine: PolicyEngine | undefined;
  const suite = operatorSuite({
    name: 'op-iw',
    args: POLICY_ENGINE_SERVED ? ['--node-isolation-engine=admission-policy'] : [],
    beforeOperator: async ({ kc }) => {
      if (POLICY_ENGINE_SERVED) engine = await installPolicyEngine(kc);
    },
    afterTeardown: async () => {
      await engine?.uninstall();
    },
  });
  const { tenantNamespace } = suite;
  let kc: KubeConfig;
  let custom: CustomObjectsApi;
  const webhookConfig = uniqueName('kpi-op-iw-kubeplus-down');
  const downValue = uniqueName('down');

  beforeAll(() => {
    kc = suite.kc;
    custom = kc.makeApiClient(CustomObjectsApi);
  });
  // A test that stops the operator and fails before starting it again leaves none to the next.
  let operatorStopped = false;
  const stopOperator = async (): Promise<void> => {
    operatorStopped = true;
    await suite.operator.stop();
  };
  const startOperator = async (): Promise<void> => {
    await suite.startOperator();
    operatorStopped = false;
  };
  beforeEach(async () => {
    if (operatorStopped) await startOperator();
  });
  afterAll(async () => {
    await kc
      .makeApiClient(AdmissionregistrationV1Api)
      .deleteValidatingWebhookConfiguration({ name: webhookConfig })
      .catch((error: unknown) => {
        if (!isApiStatus(error, 404)) throw error;
      });
  });

  const readParam = async (namespace: string): Promise<unknown> => {
    try {
      return await custom.getNamespacedCustomObject({ ...PARAMS, namespace });
    } catch (error) {
      if (isApiStatus(error, 404)) return undefined;
      throw error;
    }
  };

  /** Waits until the instance is isolated entirely: namespace keys, sandbox objects, and the parameter where served. */
  const waitIsolated = async (ns: string, name: string, pool: string, enforce: boolean): Promise<void> => {
    await waitForNamespace(kc, ns, `to be node-isolated for pool ${pool}`, (n) => isolatedFor(n, pool));
    await waitForOwned(kc, { namespace: ns, name }, expectedSandboxObjects(ns, name, enforce));
    if (POLICY_ENGINE_SERVED) {
      await waitFor(
        `NodeIsolation ${ns}/${PARAMS.name} for pool ${pool}`,
        async (observe) => {
          const p = (await readParam(ns)) as { spec?: { nodeSelector?: Record<string, string> } } | undefined;
          observe(p?.spec ?? 'absent');
          return p?.spec?.nodeSelector?.pool === pool;
        },
        { timeoutMs: 30_000 },
      );
    }
  };

  /** Waits until nothing of the instance is left: owned objects, namespace keys, parameter. */
  const waitCleanedUp = async (ns: string, name: string): Promise<void> => {
    await waitFor(
      `everything ${ns}/${name} owned to be deleted`,
      async (observe) => {
        const [objects, namespace, param] = await Promise.all([
          ownedObjects(kc, { namespace: ns, name }),
          readNamespace(kc, ns),
          readParam(ns),
        ]);
        observe({
          objects: objects.map((o) => `${o.kind}/${o.name}`),
          keys: isolationKeys(namespace),
          param: param !== undefined,
        });
        return objects.length === 0 && keysGone(namespace) && param === undefined;
      },
      { timeoutMs: 30_000 },
    );
    // A namespace the operator did not create stays.
    expect((await readNamespace(kc, ns))?.status?.phase).toBe('Active');
  };

  /** Deletes the instance and expects it gone at once: no finalizer holds it. */
  const deleteAtOnce = async (ns: string, name: string): Promise<void> => {
    await custom.deleteNamespacedCustomObject({ ...AGENT, namespace: ns, name });
    const left = await getAgent(kc, ns, name);
    expect(left?.metadata).toBeUndefined();
  };

  test('(a) with the instance Kind’s fail-closed UPDATE webhook down, an instance with both annotations is still isolated', async () => {
    const adm = kc.makeApiClient(AdmissionregistrationV1Api);
    await adm.createValidatingWebhookConfiguration({
      body: {
        metadata: { name: webhookConfig },
        webhooks: [
          {
            name: 'kubeplus-down.e2e.kubeplus.io',
            // UPDATE covers PATCH (admission sees a patch as an UPDATE), as KubePlus's rules do.
            rules: [
              {
                apiGroups: [AGENT.group],
                apiVersions: [AGENT.version],
                resources: [AGENT.plural],
                operations: ['UPDATE'],
                scope: 'Namespaced',
              },
            ],
            clientConfig: { url: 'https://127.0.0.1:1/kubeplus-down' },
            failurePolicy: 'Fail',
            sideEffects: 'None',
            admissionReviewVersions: ['v1'],
            timeoutSeconds: 2,
            objectSelector: { matchLabels: { [DOWN_LABEL]: downValue } },
          },
        ],
      },
    });
    const ns = await tenantNamespace('kpi-op-iw-down');
    // The webhook is live once an UPDATE of a probe instance behind it is refused.
    const probe = uniqueName('probe');
    await createAgent(kc, ns, probe, {}, { [DOWN_LABEL]: downValue });
    const refusal = await waitFor(
      'the dead fail-closed webhook to refuse an UPDATE of the instance Kind',
      async (observe) => {
        try {
          await patchAgent(kc, ns, probe, { labels: { touched: String(Date.now()) } });
          observe('allowed');
          return undefined;
        } catch (error) {
          observe(String(error));
          return isApiStatus(error, 500) || isApiStatus(error, 403) ? String(error) : undefined;
        }
      },
      { timeoutMs: 30_000 },
    );
    expect(refusal).toContain('kubeplus-down.e2e.kubeplus.io');

    const name = uniqueName('agent-down');
    const pool = uniqueName('pool');
    await createAgent(kc, ns, name, both(pool, true), { [DOWN_LABEL]: downValue });
    await waitIsolated(ns, name, pool, true);
    // Still behind the dead webhook: a full UPDATE and a merge PATCH are both refused.
    const current = await readInstance(kc, ns, name);
    await expect(
      custom.replaceNamespacedCustomObject({ ...AGENT, namespace: ns, name, body: current }),
    ).rejects.toThrow(/kubeplus-down\.e2e\.kubeplus\.io/);
    await expect(
      custom.patchNamespacedCustomObject(
        { ...AGENT, namespace: ns, name, body: { metadata: { labels: { x: 'y' } } } },
        mergePatch,
      ),
    ).rejects.toThrow(/kubeplus-down\.e2e\.kubeplus\.io/);
    expect((await readInstance(kc, ns, name))?.metadata.finalizers).toBeUndefined();
    // Deleting is not an UPDATE: it goes through, and so does the cleanup.
    await deleteAtOnce(ns, name);
    await deleteAtOnce(ns, probe);
    await waitCleanedUp(ns, name);
  });

  test('(b) the instance’s resourceVersion and managedFields never name the operator, after full isolation and after annotation changes', async () => {
    const ns = await tenantNamespace('kpi-op-iw-nowrite');
    const name = uniqueName('agent-nowrite');
    const pool = uniqueName('pool');
    const created = await createAgent(kc, ns, name, both(pool, true));
    await waitIsolated(ns, name, pool, true);
    const isolated = await readInstance(kc, ns, name);
    expect(isolated?.metadata.resourceVersion).toBe(created.metadata.resourceVersion);
    expect(managers(isolated)).not.toContain(OPERATOR_FIELD_MANAGER);
    expect(isolated?.metadata.finalizers).toBeUndefined();

    // Annotation changes (another pool; advisory sandbox), then node isolation removed.
    const otherPool = uniqueName('pool-v2');
    const changed = await patchAgent(kc, ns, name, { annotations: both(otherPool, false) });
    await waitIsolated(ns, name, otherPool, false);
    const afterChange = await readInstance(kc, ns, name);
    expect(afterChange?.metadata.resourceVersion).toBe(changed.metadata.resourceVersion);
    expect(managers(afterChange)).not.toContain(OPERATOR_FIELD_MANAGER);

    const removed = await patchAgent(kc, ns, name, { annotations: { [NODE_ISOLATION_ANNOTATION]: null } });
    await waitForNamespace(kc, ns, 'to lose its node-isolation keys', keysGone);
    await waitForOwned(kc, { namespace: ns, name }, expectedSandboxObjects(ns, name, false));
    const afterRemoval = await readInstance(kc, ns, name);
    expect(afterRemoval?.metadata.resourceVersion).toBe(removed.metadata.resourceVersion);
    expect(managers(afterRemoval)).not.toContain(OPERATOR_FIELD_MANAGER);
    expect(afterRemoval?.metadata.finalizers).toBeUndefined();
  });

  test('(c) deleting the instance (gone at once, no finalizer) removes its RuntimeClass, policies, bindings, parameter and namespace keys', async () => {
    const ns = await tenantNamespace('kpi-op-iw-delete');
    const name = uniqueName('agent-delete');
    const pool = uniqueName('pool');
    await createAgent(kc, ns, name, both(pool, true));
    await waitIsolated(ns, name, pool, true);
    expect((await readInstance(kc, ns, name))?.metadata.finalizers).toBeUndefined();
    await deleteAtOnce(ns, name);
    await waitCleanedUp(ns, name);
  });

  test('(d) deleted while the operator is stopped: nothing is cleaned up meanwhile, and the restarted operator cleans up', async () => {
    const ns = await tenantNamespace('kpi-op-iw-down-op');
    const name = uniqueName('agent-down-op');
    const pool = uniqueName('pool');
    await createAgent(kc, ns, name, both(pool, false));
    await waitIsolated(ns, name, pool, false);
    await stopOperator();
    await deleteAtOnce(ns, name);
    // Nobody cleaned up: the objects and keys are still there.
    expect((await ownedObjects(kc, { namespace: ns, name })).length).toBe(
      expectedSandboxObjects(ns, name, false).length,
    );
    expect(isolatedFor(await readNamespace(kc, ns), pool)).toBe(true);
    await startOperator();
    await waitCleanedUp(ns, name);
  });

  test('(e) the finalizer of an earlier release is removed, from a live instance and from one being deleted while the operator was down', async () => {
    const ns = await tenantNamespace('kpi-op-iw-legacy');
    const name = uniqueName('agent-legacy');
    const pool = uniqueName('pool');
    await custom.createNamespacedCustomObject({
      ...AGENT,
      namespace: ns,
      body: {
        apiVersion: `${AGENT.group}/${AGENT.version}`,
        kind: AGENT.kind,
        metadata: { name, annotations: both(pool, true), finalizers: [FINALIZER] },
        spec: {},
      },
    });
    await waitFor(
      `the operator to remove ${FINALIZER} from ${ns}/${name}`,
      async (observe) => {
        const i = await readInstance(kc, ns, name);
        observe(i?.metadata.finalizers);
        return i !== undefined && (i.metadata.finalizers ?? []).length === 0;
      },
      { timeoutMs: 30_000 },
    );
    await waitIsolated(ns, name, pool, true);

    // An upgrade while an instance is being deleted: the old finalizer holds it, no operator runs.
    await stopOperator();
    await custom.patchNamespacedCustomObject(
      { ...AGENT, namespace: ns, name, body: { metadata: { finalizers: [FINALIZER] } } },
      mergePatch,
    );
    await custom.deleteNamespacedCustomObject({ ...AGENT, namespace: ns, name });
    expect((await readInstance(kc, ns, name))?.metadata.deletionTimestamp).toBeDefined();
    await startOperator();
    await waitFor(
      `Agent ${ns}/${name} to be released and gone`,
      async (observe) => {
        const i = await readInstance(kc, ns, name);
        observe(i?.metadata);
        return i === undefined;
      },
      { timeoutMs: 30_000 },
    );
    await waitCleanedUp(ns, name);
  });

  test('(f) deleted and re-created under the same name while the operator is stopped: the new instance adopts what is left, and only what it asks for stays', async () => {
    const ns = await tenantNamespace('kpi-op-iw-recreate');
    const name = uniqueName('agent-recreate');
    const pool = uniqueName('pool');
    await createAgent(kc, ns, name, both(pool, true));
    await waitIsolated(ns, name, pool, true);
    const [rcBefore] = (await ownedObjects(kc, { namespace: ns, name })).filter((o) => o.kind === 'RuntimeClass');
    await stopOperator();
    await deleteAtOnce(ns, name);
    // The new incarnation asks for sandbox isolation only, in advisory mode.
    const reborn = await createAgent(kc, ns, name, {
      [SANDBOX_ISOLATION_ANNOTATION]: JSON.stringify({ minRuntimeClass: 'kata', enforce: false }),
    });
    await startOperator();
    const objects = await waitForOwned(kc, { namespace: ns, name }, expectedSandboxObjects(ns, name, false), (os) =>
      os.every((o) => o.raw.metadata?.labels?.[OWNER_UID_LABEL] === reborn.metadata.uid),
    );
    // Adopted, not re-created: the same RuntimeClass object, relabelled with the new uid.
    expect(objects.find((o) => o.kind === 'RuntimeClass')?.uid).toBe(rcBefore?.uid);
    await waitForNamespace(kc, ns, 'to lose the node-isolation keys the first incarnation asked for', keysGone);
    if (POLICY_ENGINE_SERVED) {
      await waitFor('the NodeIsolation parameter to be gone', async () => (await readParam(ns)) === undefined, {
        timeoutMs: 30_000,
      });
    }
    expect((await readInstance(kc, ns, name))?.metadata.finalizers).toBeUndefined();
  });
});
