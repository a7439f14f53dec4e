/**
 * Sandbox isolation in the shared policy layout (`--sandbox-policy-layout shared`), on the real
 * control plane: ONE ValidatingAdmissionPolicy (and, where served, ONE MutatingAdmissionPolicy)
 * for the cluster, parameterised per instance by the cluster-scoped SandboxIsolation object the
 * operator writes (CRD: deploy/kubeplus-isolation/charts/operator/files/sandbox-isolation-crd.yaml,
 * the file the chart installs). Proven here, against kube-apiserver's own paramRef handling: the
 * same denials and messages as the per-instance layout, advisory defaulting, fail-closed on a
 * missing parameter, the migration from the per-instance layout without a gap, deletion, and that
 * N tenants cost the API server no extra policy.
 */
import { beforeAll, describe, expect, test } from '@jest/globals';
import {
  installCrds,
  isApiStatus,
  type RunningOperator,
  sandboxIsolationParamsCrd,
  waitFor,
} from '@kubeplus-isolation/e2e';
import {
  MANAGED_BY_LABEL,
  MANAGED_BY_VALUE,
  OWNER_ANNOTATION,
  SANDBOX_ISOLATION_ANNOTATION,
  SHARED_SANDBOX_POLICY_NAME,
} from '@kubeplus-isolation/spec';
import {
  AdmissionregistrationV1Api,
  AuthorizationV1Api,
  CustomObjectsApi,
  type KubeConfig,
  RbacAuthorizationV1Api,
} from '@kubernetes/client-node';
import { uniqueName } from './support/names.js';
import {
  createAgent,
  deleteAgent,
  ownedObjects,
  policyName,
  runtimeClassName,
  sharedClusterDefaults,
  waitForOwned,
} from './support/operator.js';
import {
  createSandbox,
  denied,
  expectAllowed,
  expectDenied,
  getSandbox,
  type SandboxRef,
  waitForAdmission,
} from './support/operator-sandbox.js';
import { operatorSuite } from './support/operator-suite.js';
import { PARAMS, removeSharedLayout } from './support/shared-layout.js';

const SHARED = SHARED_SANDBOX_POLICY_NAME;
const DEFAULTING = sharedClusterDefaults();
const annotation = (minRuntimeClass: string, enforce: boolean): string => JSON.stringify({ minRuntimeClass, enforce });
const paramsName = (namespace: string, instance: string): string =>
  policyName(namespace, instance, 'enforce').replace(/-enforce$/, '-params');

// biome-ignore lint/suspicious/noExplicitAny: a custom object as the API server returns it
async function readParams(kc: KubeConfig, name: string): Promise<any | undefined> {
  try {
    return await kc.makeApiClient(CustomObjectsApi).getClusterCustomObject({ ...PARAMS, name });
  } catch (error) {
    if (isApiStatus(error, 404)) return undefined;
    throw error;
  }
}

/** The cluster's ValidatingAdmissionPolicies the operator manages (shared or per instance). */
async function managedPolicies(kc: KubeConfig): Promise<string[]> {
  const list = await kc
    .makeApiClient(AdmissionregistrationV1Api)
    .listValidatingAdmissionPolicy({ labelSelector: `${MANAGED_BY_LABEL}=${MANAGED_BY_VALUE}` });
  return list.items.map((p) => p.metadata?.name ?? '').sort();
}

/** The objects an instance owns in the shared layout (its RuntimeClass and bindings; the parameter is listed apart). */
function expectedShared(namespace: string, instance: string, enforce: boolean): string[] {
  const names = [
    `RuntimeClass/${runtimeClassName(instance)}`,
    `ValidatingAdmissionPolicyBinding/${policyName(namespace, instance, enforce ? 'enforce' : 'advisory')}`,
  ];
  if (!enforce && DEFAULTING)
    names.push(`MutatingAdmissionPolicyBinding/${policyName(namespace, instance, 'default')}`);
  return names.sort((a, b) => a.localeCompare(b));
}

describe('operator: the shared sandbox policy layout, on the real control plane', () => {
  /** What starting the shared layout's operator before its CRD existed ended with. */
  let refusal: string | undefined;
  const start = (layout: 'shared' | 'per-instance', leaseName: string): Promise<RunningOperator> =>
    suite.startOperator({ name: `op-shared-${layout}`, leaseName, args: [`--sandbox-policy-layout=${layout}`] });
  const suite = operatorSuite({
    name: 'op-shared',
    startOperator: false,
    waitForServiceAccount: false,
    beforeOperator: async ({ kc }) => {
      // Before the CRD exists: the operator must refuse to start, saying why (asserted below).
      refusal = await start('shared', uniqueName('op-shared-no-crd')).then(
        async (op) => {
          await op.stop();
          return undefined;
        },
        (error: unknown) => (error as Error).message,
      );
      await installCrds(kc, [sandboxIsolationParamsCrd()]);
      operator = await start('shared', uniqueName('op-shared-lease'));
    },
    // Nothing of the shared layout may outlive the suite: a later suite's operator would see the
    // shared policies as objects the operator manages (they carry managed-by).
    afterTeardown: ({ kc }) => removeSharedLayout(kc),
  });
  const { tenantNamespace } = suite;
  let kc: KubeConfig;
  let operator: RunningOperator | undefined;
  beforeAll(() => {
    kc = suite.kc;
  });
  const ref = (namespace: string, name: string): SandboxRef => ({
    kind: 'Sandbox',
    version: 'v1beta1',
    namespace,
    name,
  });

  test('without the SandboxIsolation CRD the operator refuses to start, naming the CRD and both ways out', () => {
    expect(refusal).toContain('exited during start-up');
    expect(refusal).toContain(
      '--sandbox-policy-layout shared needs the SandboxIsolation CRD (sandboxisolations.isolation.kubeplus.io), which this cluster does not serve',
    );
  });

  test('minRuntimeClass kata, enforce true: the shared policy denies weak and unset classes with the per-instance messages, and admits the own class', async () => {
    const ns = await tenantNamespace('kpi-shared-team-a');
    const name = uniqueName('team-a-agent-instance');
    const own = runtimeClassName(name);
    await createAgent(kc, ns, name, { [SANDBOX_ISOLATION_ANNOTATION]: annotation('kata', true) });
    const owned = await waitForOwned(kc, name, expectedShared(ns, name, true));
    const binding = owned.find((o) => o.kind === 'ValidatingAdmissionPolicyBinding')?.raw;
    expect(binding.spec.policyName).toBe(SHARED);
    expect(binding.spec.paramRef).toEqual({ name: paramsName(ns, name), parameterNotFoundAction: 'Deny' });
    expect(binding.spec.validationActions).toEqual(['Deny']);
    const params = await waitFor(
      `the SandboxIsolation ${paramsName(ns, name)}`,
      () => readParams(kc, paramsName(ns, name)),
      { timeoutMs: 30_000 },
    );
    expect(params.spec).toMatchObject({
      tenantNamespace: ns,
      minRuntimeClass: 'kata',
      enforce: true,
      recommendedRuntimeClass: own,
    });
    expect(params.metadata.annotations[OWNER_ANNOTATION]).toBe(`cloudark.io/Agent/${ns}/${name}`);
    // No policy of its own: the cluster's only managed policy is the shared one.
    expect(await managedPolicies(kc)).toEqual([SHARED]);
    // The controller-manager type-checks it against the CRD's schema (params.spec.*): no warning.
    const checked = await waitFor(
      `the API server's type check of ${SHARED}`,
      async () => {
        const p = await kc.makeApiClient(AdmissionregistrationV1Api).readValidatingAdmissionPolicy({ name: SHARED });
        return p.status?.observedGeneration === p.metadata?.generation ? p : undefined;
      },
      { timeoutMs: 30_000 },
    );
    expect(checked.status?.typeChecking?.expressionWarnings ?? []).toEqual([]);

    await waitForAdmission(kc, ref(ns, 'probe'), undefined, 'to be denied by the shared policy', denied);
    for (const [i, runtimeClass] of ['runc', undefined].entries()) {
      const message = expectDenied(
        await createSandbox(kc, ref(ns, `weak-${i}`), runtimeClass),
        `runtimeClassName ${runtimeClass ?? '(unset)'}`,
      );
      expect(message).toContain(
        `namespace "${ns}" requires sandbox runtime kata or stronger (kubeplus.io/sandbox-isolation)`,
      );
      expect(message).toContain(`use runtimeClassName "${own}"`);
      expect(message).toContain(
        runtimeClass === undefined
          ? 'Sandbox spec.podTemplate.spec.runtimeClassName is unset'
          : `Sandbox runtimeClassName "runc" is not allowed here: its handler is weaker than kata or unknown`,
      );
    }
    expect(expectAllowed(await createSandbox(kc, ref(ns, 'own'), own), `runtimeClassName ${own}`).warnings).toEqual([]);
  });

  test('enforce false: an unset class is defaulted through the shared defaulting policy (where served), a weaker one admitted with a warning', async () => {
    const ns = await tenantNamespace('kpi-shared-team-b');
    const name = uniqueName('team-b-agent-instance');
    const own = runtimeClassName(name);
    await createAgent(kc, ns, name, { [SANDBOX_ISOLATION_ANNOTATION]: annotation('kata', false) });
    await waitForOwned(kc, name, expectedShared(ns, name, false));
    const unsetBecomes = DEFAULTING ? own : undefined;
    await waitForAdmission(kc, ref(ns, 'probe'), undefined, `to be admitted as ${unsetBecomes ?? 'unset'}`, (a) =>
      a.allowed ? a.object.spec.podTemplate.spec.runtimeClassName === unsetBecomes : false,
    );
    // Bindings reach the admission chain asynchronously: wait until the warning is there.
    await waitForAdmission(
      kc,
      ref(ns, 'probe'),
      'runc',
      'to be admitted with a warning',
      (a) => a.allowed && a.warnings.length > 0,
    );
    const weak = expectAllowed(
      await createSandbox(kc, ref(ns, 'weak'), 'runc'),
      'runtimeClassName runc in advisory mode',
    );
    expect(weak.object.spec.podTemplate.spec.runtimeClassName).toBe('runc');
    // The per-instance layout's warning, word for word, but for the shared policy and the instance's binding.
    expect(weak.warnings).toEqual([
      `Validation failed for ValidatingAdmissionPolicy '${SHARED}' with binding '${policyName(ns, name, 'advisory')}': Sandbox runtimeClassName "runc" is not allowed here: its handler is weaker than kata or unknown, or it is another instance's class; namespace "${ns}" requires sandbox runtime kata or stronger (kubeplus.io/sandbox-isolation); use runtimeClassName "${own}"`,
    ]);
  });

  test('N tenants cost the API server one policy: three more instances add bindings and parameters, never a policy', async () => {
    const before = await managedPolicies(kc);
    const made: Array<{ ns: string; name: string }> = [];
    for (const i of [1, 2, 3]) {
      const ns = await tenantNamespace(`kpi-shared-many-${i}`);
      const name = uniqueName(`many-${i}`);
      await createAgent(kc, ns, name, { [SANDBOX_ISOLATION_ANNOTATION]: annotation('runsc', true) });
      made.push({ ns, name });
    }
    for (const { ns, name } of made) await waitForOwned(kc, name, expectedShared(ns, name, true));
    expect(await managedPolicies(kc)).toEqual(before);
    expect(before).toEqual([SHARED]);
    for (const { ns } of made) await waitForAdmission(kc, ref(ns, 'probe'), 'runc', 'runc to be denied', denied);
  });

  test('a tenant with admin rights in its namespace cannot read, change or delete its SandboxIsolation parameter (cluster-scoped)', async () => {
    const ns = await tenantNamespace('kpi-shared-rbac');
    const name = uniqueName('rbac-agent');
    await createAgent(kc, ns, name, { [SANDBOX_ISOLATION_ANNOTATION]: annotation('kata', true) });
    await waitFor('its parameter', () => readParams(kc, paramsName(ns, name)), { timeoutMs: 30_000 });
    const user = `tenant-${ns}`;
    await kc.makeApiClient(RbacAuthorizationV1Api).createNamespacedRoleBinding({
      namespace: ns,
      body: {
        metadata: { name: 'tenant-admin' },
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'admin' },
        subjects: [{ apiGroup: 'rbac.authorization.k8s.io', kind: 'User', name: user }],
      },
    });
    const can = async (verb: string, resource: string, group: string, namespace?: string): Promise<boolean> => {
      const review = await kc.makeApiClient(AuthorizationV1Api).createSubjectAccessReview({
        body: {
          spec: {
            user,
            resourceAttributes: {
              verb,
              group,
              resource,
              ...(namespace ? { namespace } : {}),
              name: paramsName(ns, name),
            },
          },
        },
      });
      return review.status?.allowed === true;
    };
    // The RoleBinding works (the tenant may manage Sandboxes' neighbours, e.g. ConfigMaps, in its namespace)...
    expect(await can('delete', 'configmaps', '', ns)).toBe(true);
    // ...and gives nothing on the parameter that decides what its Sandboxes may run.
    for (const verb of ['get', 'update', 'patch', 'delete'])
      expect(await can(verb, PARAMS.plural, PARAMS.group)).toBe(false);
  });

  test('fail closed: with the operator stopped and a parameter deleted, the binding denies; the next operator restores it', async () => {
    const ns = await tenantNamespace('kpi-shared-failclosed');
    const name = uniqueName('failclosed-agent');
    const own = runtimeClassName(name);
    await createAgent(kc, ns, name, { [SANDBOX_ISOLATION_ANNOTATION]: annotation('kata', true) });
    await waitForOwned(kc, name, expectedShared(ns, name, true));
    await waitForAdmission(kc, ref(ns, 'probe'), own, 'the own class to be admitted', (a) => a.allowed);
    await operator?.stop();
    operator = undefined;
    await kc.makeApiClient(CustomObjectsApi).deleteClusterCustomObject({ ...PARAMS, name: paramsName(ns, name) });
    // Even the class that was allowed is now refused: no parameter, no admission.
    const outcome = await waitForAdmission(kc, ref(ns, 'probe'), own, 'to be denied without its parameter', denied);
    expect(outcome.allowed).toBe(false);
    operator = await start('shared', uniqueName('op-shared-lease-2'));
    await waitFor('the parameter to be restored', () => readParams(kc, paramsName(ns, name)), { timeoutMs: 60_000 });
    await waitForAdmission(kc, ref(ns, 'probe'), own, 'the own class to be admitted again', (a) => a.allowed, 60_000);
  });

  test('migration: an instance isolated by a per-instance operator is taken over by the shared layout with no moment unenforced', async () => {
    const ns = await tenantNamespace('kpi-shared-migrate');
    const name = uniqueName('migrate-agent');
    await operator?.stop();
    operator = await start('per-instance', uniqueName('op-per-instance-lease'));
    await createAgent(kc, ns, name, { [SANDBOX_ISOLATION_ANNOTATION]: annotation('kata', true) });
    await waitForOwned(kc, name, [
      `RuntimeClass/${runtimeClassName(name)}`,
      `ValidatingAdmissionPolicy/${policyName(ns, name, 'enforce')}`,
      `ValidatingAdmissionPolicyBinding/${policyName(ns, name, 'enforce')}`,
    ]);
    await waitForAdmission(kc, ref(ns, 'probe'), 'runc', 'runc to be denied by the per-instance policy', denied);
    await operator.stop();
    // While the shared operator takes over, a prober creates runc Sandboxes (dry run): every one must be denied.
    let probing = true;
    const leaks: string[] = [];
    const probe = (async () => {
      for (let i = 0; probing; i++) {
        const a = await createSandbox(kc, ref(ns, `during-${i}`), 'runc', { dryRun: true });
        if (a.allowed) leaks.push(`during-${i}`);
      }
    })();
    try {
      operator = await start('shared', uniqueName('op-shared-lease-3'));
      await waitForOwned(kc, name, expectedShared(ns, name, true), (objects) =>
        objects.some((o) => o.kind === 'ValidatingAdmissionPolicyBinding' && o.raw.spec.policyName === SHARED),
      );
      await waitForAdmission(
        kc,
        ref(ns, 'probe2'),
        runtimeClassName(name),
        'the own class to be admitted',
        (a) => a.allowed,
      );
    } finally {
      probing = false;
      await probe;
    }
    expect(leaks).toEqual([]);
    expect(await managedPolicies(kc)).toEqual([SHARED]);
  });

  test('deleting the instance removes its binding, parameter and RuntimeClass; the shared policy and existing Sandboxes stay', async () => {
    const ns = await tenantNamespace('kpi-shared-delete');
    const name = uniqueName('delete-agent');
    const own = runtimeClassName(name);
    await createAgent(kc, ns, name, { [SANDBOX_ISOLATION_ANNOTATION]: annotation('kata', true) });
    await waitForOwned(kc, name, expectedShared(ns, name, true));
    await waitForAdmission(kc, ref(ns, 'kept'), own, 'the own class to be admitted', (a) => a.allowed);
    expectAllowed(await createSandbox(kc, ref(ns, 'kept'), own), 'a Sandbox with the own class');
    await deleteAgent(kc, ns, name);
    await waitForOwned(kc, name, []);
    await waitFor('the parameter to be gone', async () => (await readParams(kc, paramsName(ns, name))) === undefined, {
      timeoutMs: 30_000,
    });
    expect(await ownedObjects(kc, name)).toEqual([]);
    expect(await managedPolicies(kc)).toEqual([SHARED]);
    expect((await getSandbox(kc, ref(ns, 'kept')))?.spec.podTemplate.spec.runtimeClassName).toBe(own);
    // Unconstrained again: the binding is gone with the instance.
    await waitForAdmission(kc, ref(ns, 'free'), 'runc', 'runc to be admitted', (a) => a.allowed);
    const adm = kc.makeApiClient(AdmissionregistrationV1Api);
    expect((await adm.readValidatingAdmissionPolicy({ name: SHARED })).metadata?.labels?.[MANAGED_BY_LABEL]).toBe(
      MANAGED_BY_VALUE,
    );
  });
});
