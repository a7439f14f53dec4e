/**
 * What a sandbox-isolation policy governs, on the real control plane with the real operator:
 *
 * - every version the API server serves for Sandbox and SandboxTemplate, including one added to
 *   the CRDs after the policies were written (Agent Sandbox moves fast: v1alpha1 → v1beta1, a v1
 *   will come). Before matchPolicy Equivalent, a runc Sandbox written at such a version was
 *   admitted in an enforced namespace;
 * - several instances binding policies to one tenant namespace: all of them apply, so the
 *   strictest governs; a class generated for an instance of the same namespace is acceptable to
 *   the others when strong enough (before, two kata-enforced instances refused each other's class,
 *   so neither could use its own), the weaker instance is told with a Warning, a metric counts
 *   such namespaces, and deleting one instance leaves the other's policy in force.
 */
import { beforeAll, describe, expect, test } from '@jest/globals';
import { SANDBOX_ISOLATION_ANNOTATION } from '@kubeplus-isolation/spec';
import { CoreV1Api, type KubeConfig } from '@kubernetes/client-node';
import { uniqueName } from './support/names.js';
import {
  createAgent,
  deleteAgent,
  expectedSandboxObjects,
  runtimeClassName,
  sharedClusterDefaults,
  waitForEvent,
  waitForOwned,
  waitForSettled,
} from './support/operator.js';
import {
  addServedVersion,
  allowedWithout,
  createSandbox,
  denied,
  expectAllowed,
  expectDenied,
  getSandbox,
  patchSandbox,
  removeVersion,
  type SandboxKind,
  type SandboxRef,
  type SandboxVersion,
  waitForAdmission,
} from './support/operator-sandbox.js';
import { operatorSuite } from './support/operator-suite.js';

const sandboxAnnotation = (minRuntimeClass: string, enforce: boolean): string =>
  JSON.stringify({ minRuntimeClass, enforce });
const MIXED_METRIC = 'kubeplus_operator_sandbox_mixed_policy_namespaces';

/** Advisory mode defaults where the cluster serves MutatingAdmissionPolicy (the version matrix: 1.36+). */
const DEFAULTING = sharedClusterDefaults();

describe('operator: what a sandbox policy governs (every served version; every instance of a namespace)', () => {
  const suite = operatorSuite({ name: 'op-scope', waitForServiceAccount: false });
  const { tenantNamespace } = suite;
  let kc: KubeConfig;
  beforeAll(() => {
    kc = suite.kc;
  });
  const ref = (
    namespace: string,
    name: string,
    version: SandboxVersion = 'v1beta1',
    kind: SandboxKind = 'Sandbox',
  ): SandboxRef => ({ kind, version, namespace, name });
  const eventReasons = async (namespace: string, instance: string): Promise<string[]> =>
    (
      await kc
        .makeApiClient(CoreV1Api)
        .listNamespacedEvent({ namespace, fieldSelector: `involvedObject.name=${instance}` })
    ).items.map((e) => e.reason ?? '');

  test('a version added to the Sandbox and SandboxTemplate CRDs after the policies were written is judged like v1beta1: enforced, and defaulted in advisory mode', async () => {
    const enforced = await tenantNamespace('kpi-op-scope-v1-enforce');
    const advisory = await tenantNamespace('kpi-op-scope-v1-advisory');
    const e = uniqueName('v1-enforced-agent');
    const a = uniqueName('v1-advisory-agent');
    await createAgent(kc, enforced, e, { [SANDBOX_ISOLATION_ANNOTATION]: sandboxAnnotation('kata', true) });
    await createAgent(kc, advisory, a, { [SANDBOX_ISOLATION_ANNOTATION]: sandboxAnnotation('kata', false) });
    await waitForOwned(kc, e, expectedSandboxObjects(enforced, e, true));
    await waitForOwned(kc, a, expectedSandboxObjects(advisory, a, false));
    await waitForAdmission(kc, ref(enforced, 'probe'), 'runc', 'to be denied', denied);
    await waitForAdmission(
      kc,
      ref(advisory, 'probe'),
      undefined,
      DEFAULTING ? 'to be defaulted' : 'to be admitted unset',
      (o) =>
        o.allowed
          ? o.object.spec.podTemplate.spec.runtimeClassName === (DEFAULTING ? runtimeClassName(a) : undefined)
          : false,
    );

    const kinds: SandboxKind[] = ['Sandbox', 'SandboxTemplate'];
    try {
      // What Agent Sandbox does when it ships v1: a new served version, the same fields.
      for (const kind of kinds) await addServedVersion(kc, kind, 'v1', 'v1beta1', enforced);

      for (const kind of kinds) {
        for (const runtimeClass of ['runc', undefined]) {
          const message = expectDenied(
            await createSandbox(kc, ref(enforced, `v1-${runtimeClass ?? 'unset'}`, 'v1', kind), runtimeClass),
            `a v1 ${kind} with runtimeClassName ${runtimeClass ?? '(unset)'} in an enforced namespace`,
          );
          expect(message).toContain(`namespace "${enforced}" requires sandbox runtime kata or stronger`);
        }
        expectAllowed(
          await createSandbox(kc, ref(enforced, 'v1-own', 'v1', kind), runtimeClassName(e)),
          `a v1 ${kind} with the instance's own class`,
        );
      }
      // An UPDATE at v1 that changes the runtime class is judged after conversion, like a CREATE.
      expectDenied(
        await patchSandbox(kc, ref(enforced, 'v1-own', 'v1'), {
          spec: { podTemplate: { spec: { runtimeClassName: 'runc' } } },
        }),
        'an UPDATE at v1 of the runtime class to runc',
      );

      // Advisory mode at v1: the MutatingAdmissionPolicy defaults through the same conversion (where
      // the cluster serves one, 1.36+; else the fallback leaves it unset, kubernetes-versions.test.ts).
      const unsetBecomes = sharedClusterDefaults() ? runtimeClassName(a) : undefined;
      const defaulted = expectAllowed(
        await createSandbox(kc, ref(advisory, 'v1-unset', 'v1'), undefined),
        'a v1 Sandbox without a runtime class in an advisory namespace',
      );
      expect(defaulted.object.apiVersion).toBe('agents.x-k8s.io/v1');
      expect(defaulted.object.spec.podTemplate.spec.runtimeClassName).toBe(unsetBecomes);
      expect((await getSandbox(kc, ref(advisory, 'v1-unset', 'v1')))?.spec.podTemplate.spec.runtimeClassName).toBe(
        unsetBecomes,
      );
      const warned = expectAllowed(
        await createSandbox(kc, ref(advisory, 'v1-runc', 'v1'), 'runc'),
        'a v1 Sandbox with runc in an advisory namespace',
      );
      expect(warned.object.spec.podTemplate.spec.runtimeClassName).toBe('runc');
      expect(warned.warnings.join('\n')).toContain('runtimeClassName "runc" is not allowed here');
    } finally {
      for (const kind of kinds) await removeVersion(kc, kind, 'v1');
    }
  });

  describe.each([
    ['first instance created first', false],
    ['second instance created first', true],
  ])('two instances in one namespace (%s)', (_order, reversed) => {
    const inOrder = <T>(pair: readonly [T, T]): readonly [T, T] => (reversed ? [pair[1], pair[0]] : pair);

    test('both kata, enforced: each own class is accepted, weak classes are refused; deleting one leaves the other’s policy in force', async () => {
      const ns = await tenantNamespace('kpi-op-scope-pair');
      const first = uniqueName('pair-agent');
      const second = uniqueName('pair-agent');
      for (const name of inOrder([first, second] as const)) {
        await createAgent(kc, ns, name, { [SANDBOX_ISOLATION_ANNOTATION]: sandboxAnnotation('kata', true) });
        await waitForSettled(kc, name, expectedSandboxObjects(ns, name, true));
      }
      // Admission policies load asynchronously: once a weak class is refused, at least one is in
      // force, and moments after their type check both are. From then on, every own class must be
      // admitted every time — both policies apply to every Sandbox, so each passes both.
      await waitForAdmission(kc, ref(ns, 'probe'), 'runc', 'to be denied', denied);
      const owns = [first, second].map(runtimeClassName);
      // The instance reconciled first learns of the other's class from its RuntimeClass event.
      for (const own of owns) {
        await waitForAdmission(kc, ref(ns, 'probe'), own, 'to be admitted by both policies', allowedWithout);
      }
      const deadline = Date.now() + 3_000;
      while (Date.now() < deadline) {
        for (const own of owns) {
          const outcome = await createSandbox(kc, ref(ns, 'probe'), own, { dryRun: true });
          expect({ own, allowed: outcome.allowed, warnings: outcome.allowed ? outcome.warnings : [] }).toEqual({
            own,
            allowed: true,
            warnings: [],
          });
        }
      }
      for (const own of owns)
        expectAllowed(await createSandbox(kc, ref(ns, `own-${own}`), own), `a Sandbox with ${own}`);
      for (const runtimeClass of ['runc', undefined]) {
        expectDenied(
          await createSandbox(kc, ref(ns, `weak-${runtimeClass ?? 'unset'}`), runtimeClass),
          `a Sandbox with ${runtimeClass ?? 'no'} runtime class`,
        );
      }
      // Equal policies (both reconciled after the other existed, as the admissions above show):
      // nobody is told another instance governs.
      for (const name of [first, second]) expect(await eventReasons(ns, name)).not.toContain('StricterSandboxPolicy');

      await deleteAgent(kc, ns, first);
      const remaining = runtimeClassName(second);
      await waitForOwned(kc, second, expectedSandboxObjects(ns, second, true));
      await waitForAdmission(kc, ref(ns, 'probe'), 'runc', 'to be denied still', denied);
      await waitForAdmission(kc, ref(ns, 'probe'), remaining, `to be admitted (${remaining})`, allowedWithout);
      await waitForAdmission(
        kc,
        ref(ns, 'probe'),
        runtimeClassName(first),
        'to be denied once that instance and its class are gone',
        denied,
      );
    });

    test('kata enforced beside runsc advisory: the weaker instance is warned, the strictest governs (its class is the default), a metric counts the namespace; deleting the stricter one hands the namespace back', async () => {
      const ns = await tenantNamespace('kpi-op-scope-mixed');
      const strict = uniqueName('strict-agent');
      const weak = uniqueName('weak-agent');
      const baseline = await suite.operator.metric(MIXED_METRIC);
      const annotations = { [strict]: sandboxAnnotation('kata', true), [weak]: sandboxAnnotation('runsc', false) };
      for (const name of inOrder([strict, weak] as const)) {
        await createAgent(kc, ns, name, { [SANDBOX_ISOLATION_ANNOTATION]: annotations[name] as string });
        await waitForOwned(kc, name, expectedSandboxObjects(ns, name, name === strict));
      }

      const warning = await waitForEvent(kc, ns, weak, 'StricterSandboxPolicy');
      expect(warning.type).toBe('Warning');
      expect(warning.message).toContain(`cloudark.io/Agent/${ns}/${strict} (minimum kata, enforced)`);
      expect(warning.message).toContain('minimum runsc, advisory');
      expect(await eventReasons(ns, strict)).not.toContain('StricterSandboxPolicy');
      expect(await suite.operator.metric(MIXED_METRIC)).toBe(baseline + 1);

      // The strictest governs: the weaker instance's own runsc class is refused by the kata policy,
      // and its advisory default is the stricter instance's class, which both policies accept.
      await waitForAdmission(
        kc,
        ref(ns, 'probe'),
        runtimeClassName(weak),
        `to be denied (${runtimeClassName(weak)} is runsc, and kata is enforced here)`,
        denied,
      );
      if (DEFAULTING) {
        const defaulted = await waitForAdmission(
          kc,
          ref(ns, 'probe'),
          undefined,
          `to be defaulted to ${runtimeClassName(strict)}`,
          (o) => (o.allowed ? o.object.spec.podTemplate.spec.runtimeClassName === runtimeClassName(strict) : false),
        );
        expect(defaulted.allowed && defaulted.warnings).toEqual([]);
      } else {
        // Nothing defaults on this minor: an unset class meets the enforced kata policy, and is refused.
        await waitForAdmission(kc, ref(ns, 'probe'), undefined, 'to be denied (unset, kata enforced)', denied);
      }
      expectAllowed(
        await createSandbox(kc, ref(ns, 'strict-own'), runtimeClassName(strict)),
        `a Sandbox with ${runtimeClassName(strict)}`,
      );

      await deleteAgent(kc, ns, strict);
      // The weaker instance's objects stay, and its policy alone governs now.
      await waitForOwned(kc, weak, expectedSandboxObjects(ns, weak, false));
      await waitForAdmission(
        kc,
        ref(ns, 'probe'),
        undefined,
        `to be admitted as ${DEFAULTING ? runtimeClassName(weak) : 'unset'}`,
        (o) =>
          o.allowed
            ? o.object.spec.podTemplate.spec.runtimeClassName === (DEFAULTING ? runtimeClassName(weak) : undefined)
            : false,
      );
      await waitForAdmission(kc, ref(ns, 'probe'), runtimeClassName(weak), 'to be admitted', allowedWithout);
      expect(await suite.operator.metric(MIXED_METRIC)).toBe(baseline);
    });
  });
});
