/**
 * Living beside a platform's own sandbox policy (issue 36), on the real control plane. Managed GKE
 * installs a ValidatingAdmissionPolicy `secure-sandbox-policy` that requires a Sandbox's
 * `runtimeClassName` to be exactly `gvisor`: there, the class the operator generates
 * (`kubeplus-sandbox-<instance>`) is refused, and so is a Sandbox advisory mode defaulted to it.
 * `kubeplus.io/sandbox-isolation`'s optional `runtimeClassName` names an existing platform class
 * to use instead of generating one.
 *
 * Installed beside the operator: a stand-in for GKE's policy, written here from that one fact
 * (a Sandbox's spec.podTemplate.spec.runtimeClassName must be exactly `gvisor`), bound to the
 * namespaces labelled STANDIN_LABEL; a platform RuntimeClass `gvisor` with handler `runsc` (as GKE
 * Sandbox's), and a weak platform class (handler runc). Proven, in both policy layouts:
 * - an enforce tenant (minimum runsc, class gvisor) gets a Sandbox with class gvisor admitted by
 *   both policies; unset, or the generated class's name, is refused with our message
 *   recommending gvisor; no `kubeplus-sandbox-<instance>` RuntimeClass exists;
 * - an advisory tenant's Sandbox with no class is defaulted to gvisor and admitted by both (where
 *   the cluster serves MutatingAdmissionPolicy; on 1.30 the documented fallback: a
 *   MutatingAdmissionPolicyUnavailable Warning, and the unset class is the platform's to refuse);
 * - a tenant naming a class whose handler is weaker than its minimum gets a
 *   PlatformRuntimeClassUnusable Warning Event and its metric, no default and no generated class,
 *   and the policy still judges weak classes;
 * - an instance switching from its generated class to a platform class loses the generated one.
 */
import { beforeAll, describe, expect, test } from '@jest/globals';
import { installCrds, isApiStatus, sandboxIsolationParamsCrd, waitFor } from '@kubeplus-isolation/e2e';
import { SANDBOX_ISOLATION_ANNOTATION } from '@kubeplus-isolation/spec';
import { AdmissionregistrationV1Api, CustomObjectsApi, type KubeConfig, NodeV1Api } from '@kubernetes/client-node';
import { uniqueName } from './support/names.js';
import {
  createAgent,
  expectedSandboxObjects,
  mergePatch,
  patchAgent,
  policyName,
  runtimeClassName,
  sharedClusterDefaults,
  waitForEvent,
  waitForOwned,
} from './support/operator.js';
import {
  type Admission,
  allowedWithout,
  createSandbox,
  denied,
  expectAllowed,
  expectDenied,
  type SandboxRef,
  waitForAdmission,
} from './support/operator-sandbox.js';
import { operatorSuite } from './support/operator-suite.js';
import { PARAMS, removeSharedLayout } from './support/shared-layout.js';

/** Advisory mode defaults where the cluster serves MutatingAdmissionPolicy (1.36; not 1.30). */
const DEFAULTING = sharedClusterDefaults();
const UNUSABLE_METRIC = 'kubeplus_operator_platform_runtime_class_unusable_total';
/** GKE Sandbox's class name, which GKE's secure-sandbox-policy requires. */
const GVISOR = 'gvisor';
/** The namespaces the stand-in for GKE's policy governs. */
const STANDIN_LABEL = 'e2e.kubeplus.io/platform-sandbox-policy';
/** The stand-in for GKE's `secure-sandbox-policy` (policy and binding), unique to this run. */
const STANDIN = uniqueName('secure-sandbox-policy-standin');

/** The parts of a SandboxIsolation parameter the shared-layout test reads. */
interface SandboxIsolationParams {
  spec: { allowedRuntimeClasses: string[]; recommendedRuntimeClass: string; defaultRuntimeClass: string };
}

const annotation = (spec: { minRuntimeClass: string; enforce?: boolean; runtimeClassName?: string }): string =>
  JSON.stringify(spec);
const ref = (namespace: string, name: string): SandboxRef => ({ kind: 'Sandbox', version: 'v1beta1', namespace, name });

/** The stand-in: a Sandbox's runtime class must be exactly gvisor (CREATE and UPDATE, every version). */
async function installStandIn(kc: KubeConfig): Promise<void> {
  const adm = kc.makeApiClient(AdmissionregistrationV1Api);
  await adm.createValidatingAdmissionPolicy({
    body: {
      metadata: { name: STANDIN },
      spec: {
        failurePolicy: 'Fail',
        matchConstraints: {
          resourceRules: [
            {
              apiGroups: ['agents.x-k8s.io'],
              apiVersions: ['*'],
              resources: ['sandboxes'],
              operations: ['CREATE', 'UPDATE'],
            },
          ],
        },
        validations: [
          {
            expression:
              "has(object.spec) && has(object.spec.podTemplate) && has(object.spec.podTemplate.spec) && has(object.spec.podTemplate.spec.runtimeClassName) && object.spec.podTemplate.spec.runtimeClassName == 'gvisor'",
            message: 'stand-in for secure-sandbox-policy: spec.podTemplate.spec.runtimeClassName must be gvisor',
            reason: 'Forbidden',
          },
        ],
      },
    },
  });
  await adm.createValidatingAdmissionPolicyBinding({
    body: {
      metadata: { name: STANDIN },
      spec: {
        policyName: STANDIN,
        validationActions: ['Deny'],
        matchResources: { namespaceSelector: { matchLabels: { [STANDIN_LABEL]: 'true' } } },
      },
    },
  });
}

async function removeStandIn(kc: KubeConfig): Promise<void> {
  const adm = kc.makeApiClient(AdmissionregistrationV1Api);
  const ignoreMissing = (error: unknown): void => {
    if (!isApiStatus(error, 404)) throw error;
  };
  await adm.deleteValidatingAdmissionPolicyBinding({ name: STANDIN }).catch(ignoreMissing);
  await adm.deleteValidatingAdmissionPolicy({ name: STANDIN }).catch(ignoreMissing);
}

/**
 * The API server answers a request several ValidatingAdmissionPolicies deny with the first denial
 * of its policy list, whose order comes from a Go map, drawn again each time any policy or binding
 * changes. So, to read our policy's message while the stand-in also denies: dry-run, and while the
 * stand-in's message comes first, touch the stand-in's binding (a new draw) and ask again.
 */
async function ourDenial(kc: KubeConfig, sandbox: SandboxRef, runtimeClass: string | undefined): Promise<string> {
  let draws = 0;
  return waitFor(
    `a dry-run Sandbox in ${sandbox.namespace} with runtimeClassName ${runtimeClass ?? '(unset)'} to be denied by kubeplus-isolation's policy`,
    async (observe) => {
      const outcome = await createSandbox(kc, sandbox, runtimeClass, { dryRun: true });
      observe({ outcome, draws });
      if (outcome.allowed) return undefined;
      if (outcome.message.includes(SANDBOX_ISOLATION_ANNOTATION)) return outcome.message;
      if (outcome.message.includes(STANDIN)) {
        draws++;
        await kc
          .makeApiClient(AdmissionregistrationV1Api)
          .patchValidatingAdmissionPolicyBinding(
            { name: STANDIN, body: { metadata: { annotations: { 'e2e.kubeplus.io/draw': String(draws) } } } },
            mergePatch,
          );
      }
      return undefined;
    },
    { timeoutMs: 60_000, intervalMs: 250 },
  );
}

/** Whether a RuntimeClass of that name exists. */
async function runtimeClassExists(kc: KubeConfig, name: string): Promise<boolean> {
  try {
    await kc.makeApiClient(NodeV1Api).readRuntimeClass({ name });
    return true;
  } catch (error) {
    if (isApiStatus(error, 404)) return false;
    throw error;
  }
}

function expectAdmittedBy(outcome: Admission, what: string, runtimeClass: string): void {
  const admitted = expectAllowed(outcome, what);
  expect(admitted.object.spec.podTemplate.spec.runtimeClassName).toBe(runtimeClass);
  // Our policy (enforcing, or warning in advisory mode) said nothing; the stand-in denies anything else.
  expect(admitted.warnings).toEqual([]);
}

describe('sandbox isolation naming a platform RuntimeClass, beside a stand-in for GKE’s secure-sandbox-policy', () => {
  /** Platform classes this file made (deleted in afterTeardown); `gvisor` only when it did not exist. */
  const madeClasses: string[] = [];
  const weakClass = uniqueName('runc-platform');
  let sharedLayout = false;
  const suite = operatorSuite({
    name: 'op-pc',
    waitForServiceAccount: false,
    beforeOperator: async ({ kc }) => {
      const api = kc.makeApiClient(NodeV1Api);
      for (const [name, handler] of [
        [GVISOR, 'runsc'],
        [weakClass, 'runc'],
      ] as const) {
        try {
          await api.createRuntimeClass({ body: { metadata: { name }, handler } });
          madeClasses.push(name);
        } catch (error) {
          if (!isApiStatus(error, 409)) throw error;
          // Left by an earlier suite: fine if it is GKE Sandbox's shape.
          expect((await api.readRuntimeClass({ name })).handler).toBe(handler);
        }
      }
      await installStandIn(kc);
    },
    afterTeardown: async ({ kc }) => {
      await removeStandIn(kc);
      const api = kc.makeApiClient(NodeV1Api);
      for (const name of madeClasses) {
        await api.deleteRuntimeClass({ name }).catch((error: unknown) => {
          if (!isApiStatus(error, 404)) throw error;
        });
      }
      if (sharedLayout) await removeSharedLayout(kc);
    },
  });
  const { tenantNamespace } = suite;
  let kc: KubeConfig;
  beforeAll(() => {
    kc = suite.kc;
  });
  const governed = (prefix: string): Promise<string> =>
    tenantNamespace(prefix, { labels: { [STANDIN_LABEL]: 'true' } });

  test('the stand-in refuses every class but gvisor on its own', async () => {
    const ns = await governed('kpi-pc-standin');
    for (const runtimeClass of [undefined, 'runc', weakClass]) {
      const message = expectDenied(
        await waitForAdmission(kc, ref(ns, 'probe'), runtimeClass, 'to be denied by the stand-in', denied),
        `a Sandbox with runtimeClassName ${runtimeClass ?? '(unset)'}`,
      );
      expect(message).toContain(`ValidatingAdmissionPolicy '${STANDIN}'`);
    }
    expectAdmittedBy(await createSandbox(kc, ref(ns, 'gvisor'), GVISOR), 'a Sandbox with gvisor', GVISOR);
  });

  test('enforce, minimum runsc, runtimeClassName gvisor: no generated class; gvisor is admitted by both policies; unset or the generated name is refused with our message recommending gvisor', async () => {
    const ns = await governed('kpi-pc-enforce');
    const name = uniqueName('pc-enforce');
    await createAgent(kc, ns, name, {
      [SANDBOX_ISOLATION_ANNOTATION]: annotation({ minRuntimeClass: 'runsc', runtimeClassName: GVISOR }),
    });
    await waitForOwned(kc, name, expectedSandboxObjects(ns, name, true, { runtimeClass: false }));
    const applied = await waitForEvent(kc, ns, name, 'SandboxIsolationApplied');
    expect(applied.message).toContain('minimum runsc, enforced, platform RuntimeClass gvisor');
    expect(await runtimeClassExists(kc, runtimeClassName(name))).toBe(false);

    for (const runtimeClass of [undefined, runtimeClassName(name)]) {
      const message = await ourDenial(kc, ref(ns, 'probe'), runtimeClass);
      expect(message).toContain(`namespace "${ns}" requires sandbox runtime runsc or stronger`);
      expect(message).toContain(`use runtimeClassName "${GVISOR}"`);
      expectDenied(
        await createSandbox(kc, ref(ns, `refused-${runtimeClass === undefined ? 'unset' : 'generated'}`), runtimeClass),
        `a Sandbox with runtimeClassName ${runtimeClass ?? '(unset)'}`,
      );
    }
    expectAdmittedBy(await createSandbox(kc, ref(ns, 'gvisor'), GVISOR), 'a Sandbox with gvisor', GVISOR);
  });

  test('advisory, runtimeClassName gvisor: an unset class is defaulted to gvisor and admitted by both policies (1.30: the documented fallback)', async () => {
    const ns = await governed('kpi-pc-advisory');
    const name = uniqueName('pc-advisory');
    await createAgent(kc, ns, name, {
      [SANDBOX_ISOLATION_ANNOTATION]: annotation({
        minRuntimeClass: 'runsc',
        enforce: false,
        runtimeClassName: GVISOR,
      }),
    });
    await waitForOwned(kc, name, expectedSandboxObjects(ns, name, false, { runtimeClass: false }));
    expect(await runtimeClassExists(kc, runtimeClassName(name))).toBe(false);
    if (DEFAULTING) {
      await waitForAdmission(kc, ref(ns, 'probe'), undefined, 'to be defaulted to gvisor and admitted', (a) =>
        a.allowed ? a.object.spec.podTemplate.spec.runtimeClassName === GVISOR : false,
      );
      expectAdmittedBy(await createSandbox(kc, ref(ns, 'unset'), undefined), 'a Sandbox with no class', GVISOR);
    } else {
      // No MutatingAdmissionPolicy API: nothing is defaulted, the instance says so, and the platform refuses the unset class.
      const event = await waitForEvent(kc, ns, name, 'MutatingAdmissionPolicyUnavailable');
      expect(event.message).toContain(`not defaulted to ${GVISOR}`);
      const message = expectDenied(await createSandbox(kc, ref(ns, 'unset'), undefined), 'a Sandbox with no class');
      expect(message).toContain(`ValidatingAdmissionPolicy '${STANDIN}'`);
    }
    expectAdmittedBy(await createSandbox(kc, ref(ns, 'gvisor'), GVISOR), 'a Sandbox with gvisor', GVISOR);
  });

  test('a named class whose handler is weaker than the minimum: a PlatformRuntimeClassUnusable Warning and its metric, no default, no generated class, and weak classes still judged', async () => {
    // Not under the stand-in: what our policy alone does with an unusable platform class.
    const ns = await tenantNamespace('kpi-pc-weak');
    const name = uniqueName('pc-weak');
    const before = await suite.operator.metric(UNUSABLE_METRIC, { reason: 'below-minimum' });
    await createAgent(kc, ns, name, {
      [SANDBOX_ISOLATION_ANNOTATION]: annotation({
        minRuntimeClass: 'runsc',
        enforce: false,
        runtimeClassName: weakClass,
      }),
    });
    const event = await waitForEvent(kc, ns, name, 'PlatformRuntimeClassUnusable');
    expect(event.type).toBe('Warning');
    expect(event.message).toContain(
      `names runtimeClassName "${weakClass}", a RuntimeClass that has handler "runc", weaker than runsc`,
    );
    expect(event.message).toContain('none is defaulted to');
    await waitFor(
      `${UNUSABLE_METRIC}{reason="below-minimum"} to move past ${before}`,
      async () => (await suite.operator.metric(UNUSABLE_METRIC, { reason: 'below-minimum' })) > before,
      { timeoutMs: 10_000 },
    );
    // The warn-only policy alone: no defaulting policy, no generated class.
    await waitForOwned(
      kc,
      name,
      expectedSandboxObjects(ns, name, false, { runtimeClass: false, mutatingPolicy: false }),
    );
    expect(await runtimeClassExists(kc, runtimeClassName(name))).toBe(false);
    const weak = await waitForAdmission(
      kc,
      ref(ns, 'probe'),
      weakClass,
      'to be admitted with a warning',
      (a) => a.allowed && a.warnings.length > 0,
    );
    expect(weak.allowed && weak.warnings.join('\n')).toContain(
      `runtimeClassName "${weakClass}" is not allowed here: its handler is weaker than runsc`,
    );
    const unset = expectAllowed(await createSandbox(kc, ref(ns, 'unset'), undefined), 'a Sandbox with no class');
    expect(unset.object.spec.podTemplate.spec.runtimeClassName).toBeUndefined();
    expect(unset.warnings.join('\n')).toContain('spec.podTemplate.spec.runtimeClassName is unset');
    expect(unset.warnings.join('\n')).not.toContain(`use runtimeClassName "${weakClass}"`);
    // gvisor meets the minimum: allowed, without a word.
    expectAdmittedBy(await createSandbox(kc, ref(ns, 'gvisor'), GVISOR), 'a Sandbox with gvisor', GVISOR);
  });

  test('a named class that does not exist yet: a Warning and nothing recommended until the platform creates it, then recommended at once', async () => {
    const ns = await tenantNamespace('kpi-pc-late');
    const name = uniqueName('pc-late');
    const late = uniqueName('late-gvisor');
    const before = await suite.operator.metric(UNUSABLE_METRIC, { reason: 'missing' });
    await createAgent(kc, ns, name, {
      [SANDBOX_ISOLATION_ANNOTATION]: annotation({ minRuntimeClass: 'runsc', enforce: false, runtimeClassName: late }),
    });
    const event = await waitForEvent(kc, ns, name, 'PlatformRuntimeClassUnusable');
    expect(event.message).toContain(
      `names runtimeClassName "${late}", a RuntimeClass that does not exist as a platform class`,
    );
    await waitFor(
      `${UNUSABLE_METRIC}{reason="missing"} to move past ${before}`,
      async () => (await suite.operator.metric(UNUSABLE_METRIC, { reason: 'missing' })) > before,
      { timeoutMs: 10_000 },
    );
    const hint = (a: Admission): string => (a.allowed ? a.warnings.join('\n') : '');
    const missing = await waitForAdmission(kc, ref(ns, 'probe'), 'runc', 'to be warned about', (a) => hint(a) !== '');
    expect(hint(missing)).toContain('no RuntimeClass in the cluster meets it');
    const api = kc.makeApiClient(NodeV1Api);
    await api.createRuntimeClass({ body: { metadata: { name: late }, handler: 'runsc' } });
    madeClasses.push(late);
    // A platform class's creation requeues every sandbox instance: the policy now recommends it.
    await waitForAdmission(kc, ref(ns, 'probe'), 'runc', `to be told to use ${late}`, (a) =>
      hint(a).includes(`use runtimeClassName "${late}"`),
    );
    if (DEFAULTING) {
      await waitForAdmission(kc, ref(ns, 'probe'), undefined, `to be defaulted to ${late}`, (a) =>
        a.allowed ? a.object.spec.podTemplate.spec.runtimeClassName === late : false,
      );
    }
    expect(await runtimeClassExists(kc, runtimeClassName(name))).toBe(false);
  });

  test('an instance switching from its generated class to a platform class: the generated class is deleted and no longer allowed', async () => {
    const ns = await tenantNamespace('kpi-pc-switch');
    const name = uniqueName('pc-switch');
    const own = runtimeClassName(name);
    await createAgent(kc, ns, name, { [SANDBOX_ISOLATION_ANNOTATION]: annotation({ minRuntimeClass: 'runsc' }) });
    await waitForOwned(kc, name, expectedSandboxObjects(ns, name, true));
    await waitForAdmission(kc, ref(ns, 'probe'), own, 'to be admitted', allowedWithout);

    await patchAgent(kc, ns, name, {
      annotations: {
        [SANDBOX_ISOLATION_ANNOTATION]: annotation({ minRuntimeClass: 'runsc', runtimeClassName: GVISOR }),
      },
    });
    await waitForOwned(kc, name, expectedSandboxObjects(ns, name, true, { runtimeClass: false }));
    expect(await runtimeClassExists(kc, own)).toBe(false);
    const message = expectDenied(
      await waitForAdmission(kc, ref(ns, 'probe'), own, 'to be denied once the class is gone', denied),
      `a Sandbox with ${own}`,
    );
    expect(message).toContain(`use runtimeClassName "${GVISOR}"`);
    expectAdmittedBy(await createSandbox(kc, ref(ns, 'gvisor'), GVISOR), 'a Sandbox with gvisor', GVISOR);
  });

  test('the shared policy layout: the parameter recommends and defaults to gvisor; enforce and advisory tenants get Sandboxes both policies admit', async () => {
    await suite.operator.stop();
    await installCrds(kc, [sandboxIsolationParamsCrd()]);
    sharedLayout = true;
    await suite.startOperator({
      name: 'op-pc-shared',
      leaseName: uniqueName('op-pc-shared-lease'),
      args: ['--sandbox-policy-layout=shared'],
    });
    const enforceNs = await governed('kpi-pc-shared-enforce');
    const advisoryNs = await governed('kpi-pc-shared-advisory');
    const enforceName = uniqueName('pc-shared-enforce');
    const advisoryName = uniqueName('pc-shared-advisory');
    await createAgent(kc, enforceNs, enforceName, {
      [SANDBOX_ISOLATION_ANNOTATION]: annotation({ minRuntimeClass: 'runsc', runtimeClassName: GVISOR }),
    });
    await createAgent(kc, advisoryNs, advisoryName, {
      [SANDBOX_ISOLATION_ANNOTATION]: annotation({
        minRuntimeClass: 'runsc',
        enforce: false,
        runtimeClassName: GVISOR,
      }),
    });
    for (const [ns, name, enforce] of [
      [enforceNs, enforceName, true],
      [advisoryNs, advisoryName, false],
    ] as const) {
      const expected = [
        `ValidatingAdmissionPolicyBinding/${policyName(ns, name, enforce ? 'enforce' : 'advisory')}`,
        ...(!enforce && DEFAULTING ? [`MutatingAdmissionPolicyBinding/${policyName(ns, name, 'default')}`] : []),
      ].sort((a, b) => a.localeCompare(b));
      await waitForOwned(kc, name, expected);
      const paramsName = policyName(ns, name, 'enforce').replace(/-enforce$/, '-params');
      const params = await waitFor(
        `the SandboxIsolation ${paramsName}`,
        async () => {
          try {
            return (await kc
              .makeApiClient(CustomObjectsApi)
              .getClusterCustomObject({ ...PARAMS, name: paramsName })) as SandboxIsolationParams;
          } catch (error) {
            if (isApiStatus(error, 404)) return undefined;
            throw error;
          }
        },
        { timeoutMs: 30_000 },
      );
      expect(params.spec).toMatchObject({
        recommendedRuntimeClass: GVISOR,
        defaultRuntimeClass: enforce || !DEFAULTING ? '' : GVISOR,
      });
      expect(params.spec.allowedRuntimeClasses).toContain(GVISOR);
      expect(params.spec.allowedRuntimeClasses).not.toContain(runtimeClassName(name));
      expect(await runtimeClassExists(kc, runtimeClassName(name))).toBe(false);
    }

    const message = await ourDenial(kc, ref(enforceNs, 'probe'), undefined);
    expect(message).toContain(`use runtimeClassName "${GVISOR}"`);
    expectAdmittedBy(await createSandbox(kc, ref(enforceNs, 'gvisor'), GVISOR), 'a Sandbox with gvisor', GVISOR);
    if (DEFAULTING) {
      await waitForAdmission(kc, ref(advisoryNs, 'probe'), undefined, 'to be defaulted to gvisor and admitted', (a) =>
        a.allowed ? a.object.spec.podTemplate.spec.runtimeClassName === GVISOR : false,
      );
      expectAdmittedBy(await createSandbox(kc, ref(advisoryNs, 'unset'), undefined), 'a Sandbox with no class', GVISOR);
    }
    expectAdmittedBy(await createSandbox(kc, ref(advisoryNs, 'gvisor'), GVISOR), 'a Sandbox with gvisor', GVISOR);
  });
});
