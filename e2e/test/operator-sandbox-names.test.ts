/**
 * One instance, one set of policy names (issue 21, hole 2), on the real control plane with the
 * real operator process:
 *
 * - two Agents named alike in two namespaces. Policy and binding names used to derive from the
 *   instance name alone, so the second one's policy name was the first one's: it got a conflict
 *   Warning and no policy at all, and runc Sandboxes were admitted in its namespace. Now each
 *   namespace refuses them with policies of its own; the design document's RuntimeClass name
 *   (`kubeplus-sandbox-<instance>`) still collides, so the second namespace allows the platform's
 *   classes that meet the minimum, and its Warning names the instance holding the class;
 * - the upgrade from the operator that named policies after the instance alone (built from git,
 *   e2e/scripts/build-previous-operator.sh): the new operator writes the new names before it
 *   deletes the old ones, so a stream of weak Sandbox CREATEs through the switch is never admitted.
 */
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { beforeAll, describe, expect, test } from '@jest/globals';
import {
  isApiStatus,
  legacyInstancePolicyName,
  type RunningOperator,
  repoRoot,
  waitFor,
} from '@kubeplus-isolation/e2e';
import { OWNER_ANNOTATION, SANDBOX_ISOLATION_ANNOTATION } from '@kubeplus-isolation/spec';
import { AdmissionregistrationV1Api, CoreV1Api, type KubeConfig, NodeV1Api } from '@kubernetes/client-node';
import { uniqueName } from './support/names.js';
import {
  createAgent,
  deleteAgent,
  expectedSandboxObjects,
  policyName,
  runtimeClassName,
  waitForEvent,
  waitForOwned,
} from './support/operator.js';
import {
  type Admission,
  createSandbox,
  denied,
  expectAllowed,
  expectDenied,
  RuntimeClasses,
  type SandboxRef,
  waitForAdmission,
} from './support/operator-sandbox.js';
import { operatorSuite } from './support/operator-suite.js';

const run = promisify(execFile);
/** The operator before issue 21's hole 2: policy names from the instance name alone. */
const PREVIOUS_OPERATOR_REF = 'a5e60e5';
const KATA_ENFORCED = JSON.stringify({ minRuntimeClass: 'kata', enforce: true });

describe('operator: one set of policy names per instance identity (issue 21, hole 2)', () => {
  /** This checkout's operator, started once (the upgrade test starts it after the previous one). */
  let operator: RunningOperator | undefined;
  const currentOperator = async (): Promise<RunningOperator> => {
    operator ??= await suite.startOperator();
    return operator;
  };
  const suite = operatorSuite({
    name: 'op-names',
    startOperator: false,
    waitForServiceAccount: false,
    // Deleting the Agents needs an operator.
    beforeTeardown: () =>
      currentOperator().then(
        () => undefined,
        () => undefined,
      ),
  });
  const { tenantNamespace } = suite;
  let kc: KubeConfig;
  beforeAll(() => {
    kc = suite.kc;
  });
  const ref = (namespace: string, name: string): SandboxRef => ({
    kind: 'Sandbox',
    version: 'v1beta1',
    namespace,
    name,
  });

  test('upgrade from the operator that named policies after the instance alone: the new names are written before the old ones go, and no weak Sandbox is admitted during the switch', async () => {
    const { stdout } = await run(join(repoRoot(), 'e2e', 'scripts', 'build-previous-operator.sh'), [
      PREVIOUS_OPERATOR_REF,
    ]);
    const previousEntry = stdout.trim().split('\n').at(-1) ?? '';
    const ns = await tenantNamespace('kpi-op-names-upgrade');
    const name = uniqueName('agent');
    const adm = kc.makeApiClient(AdmissionregistrationV1Api);
    const legacy = legacyInstancePolicyName(name, 'enforce');

    const previous = await suite.startOperator({ name: 'op-names-previous', entry: previousEntry });
    let streaming = true;
    let stream: Promise<void> | undefined;
    /** Every streamed CREATE's outcome, in order. */
    const outcomes: Admission[] = [];
    const judge = (o: Admission): string | undefined =>
      o.allowed ? undefined : /ValidatingAdmissionPolicy '([^']+)'/.exec(o.message)?.[1];
    try {
      await createAgent(kc, ns, name, { [SANDBOX_ISOLATION_ANNOTATION]: KATA_ENFORCED });
      await waitForOwned(
        kc,
        { namespace: ns, name },
        [
          `RuntimeClass/${runtimeClassName(name)}`,
          `ValidatingAdmissionPolicy/${legacy}`,
          `ValidatingAdmissionPolicyBinding/${legacy}`,
        ],
        () => true,
        60_000, // the previous operator must win the Lease first
      );
      await waitForAdmission(kc, ref(ns, 'probe'), 'runc', 'to be denied by the previous operator’s policy', denied);

      // Weak Sandbox CREATEs back to back (server-side dry run: the whole admission chain, nothing stored).
      stream = (async () => {
        for (let i = 0; streaming; i++)
          outcomes.push(await createSandbox(kc, ref(ns, `weak-${i}`), 'runc', { dryRun: true }));
      })();
      await previous.stop();
      const current = await currentOperator();
      // The old names are gone only once the new ones were written (and pruning came after them).
      await waitForOwned(kc, { namespace: ns, name }, expectedSandboxObjects(ns, name, true), () => true, 60_000);
      // The stream goes on until the API server judges its CREATEs with the new policy alone (its
      // policy informer has dropped the old binding): the switch is over, and the stream covered it.
      const fresh = policyName(ns, name, 'enforce');
      await waitFor(
        `ten streamed CREATEs in a row refused by ${fresh}`,
        async (observe) => {
          observe(outcomes.slice(-3).map((o) => judge(o) ?? o));
          return outcomes.length >= 10 && outcomes.slice(-10).every((o) => judge(o) === fresh);
        },
        { timeoutMs: 30_000, intervalMs: 50 },
      );
      streaming = false;
      await stream;
      const admitted = outcomes.filter((o) => o.allowed);
      const refusals = outcomes.filter((o) => !o.allowed);
      console.log(
        `upgrade: ${outcomes.length} weak Sandbox CREATEs during the switch, ${admitted.length} admitted; refused by: ${[
          ...new Set(refusals.map((o) => judge(o) ?? o.message)),
        ].join(', ')}`,
      );
      expect(admitted).toEqual([]);
      for (const o of refusals) expect(o.code).toBe(403);
      // Both generations of names judged some of them, the old before the new.
      expect(judge(outcomes[0] as Admission)).toBe(legacy);
      expect(new Set(refusals.map(judge))).toEqual(new Set([legacy, fresh]));

      for (const read of [
        () => adm.readValidatingAdmissionPolicy({ name: legacy }),
        () => adm.readValidatingAdmissionPolicyBinding({ name: legacy }),
      ]) {
        const status = await read().then(
          () => 200,
          (error: unknown) => (isApiStatus(error, 404) ? 404 : error),
        );
        expect(status).toBe(404);
      }
      expect(await current.metric('kubeplus_operator_conflicts_total')).toBe(0);
    } finally {
      streaming = false;
      await stream?.catch(() => undefined);
      await previous.stop();
    }
  });

  test('two Agents named alike in two namespaces: each namespace refuses a runc Sandbox with policies of its own; the second allows the platform’s kata classes, and its Warning names the instance holding the RuntimeClass name', async () => {
    await currentOperator();
    const nsA = await tenantNamespace('kpi-op-names-a');
    const nsB = await tenantNamespace('kpi-op-names-b');
    const name = uniqueName('agent');
    const rcs = new RuntimeClasses(kc);
    try {
      const platformKata = await rcs.create(uniqueName('kpi-kata'), 'kata');
      await createAgent(kc, nsA, name, { [SANDBOX_ISOLATION_ANNOTATION]: KATA_ENFORCED });
      await waitForAdmission(kc, ref(nsA, 'probe'), 'runc', 'to be denied', denied);
      await createAgent(kc, nsB, name, { [SANDBOX_ISOLATION_ANNOTATION]: KATA_ENFORCED });

      // The hole: nsB's policy name was nsA's, nothing was written for nsB, and runc was admitted there.
      const refused = await waitForAdmission(kc, ref(nsB, 'probe'), 'runc', 'to be denied', denied);
      const message = expectDenied(refused, `a runc Sandbox in ${nsB}`);
      expect(message).toContain(`ValidatingAdmissionPolicy '${policyName(nsB, name, 'enforce')}'`);
      expect(message).toContain(`namespace "${nsB}" requires sandbox runtime kata or stronger`);
      const unset = expectDenied(
        await createSandbox(kc, ref(nsB, 'unset'), undefined, { dryRun: true }),
        `a Sandbox without a class in ${nsB}`,
      );
      expect(unset).toContain(`use runtimeClassName "${platformKata}"`);
      // The RuntimeClass of that name is nsA's: another tenant's class, refused here.
      expect(
        expectDenied(
          await createSandbox(kc, ref(nsB, 'theirs'), runtimeClassName(name), { dryRun: true }),
          `a Sandbox in ${nsB} with ${nsA}'s class`,
        ),
      ).toContain(`runtimeClassName "${runtimeClassName(name)}" is not allowed here`);
      expect(
        expectAllowed(
          await createSandbox(kc, ref(nsB, 'platform'), platformKata, { dryRun: true }),
          `a Sandbox in ${nsB} with ${platformKata}`,
        ).warnings,
      ).toEqual([]);

      const conflict = await waitForEvent(kc, nsB, name, 'RuntimeClassConflict');
      expect(conflict.type).toBe('Warning');
      expect(conflict.message).toContain(`belongs to cloudark.io/Agent/${nsA}/${name}`);
      expect(conflict.message).toContain(`may use: ${platformKata}`);
      await waitForOwned(
        kc,
        { namespace: nsB, name },
        expectedSandboxObjects(nsB, name, true, { runtimeClass: false }),
      );
      await waitForOwned(kc, { namespace: nsA, name }, expectedSandboxObjects(nsA, name, true));
      const reasons = (
        await kc
          .makeApiClient(CoreV1Api)
          .listNamespacedEvent({ namespace: nsB, fieldSelector: `involvedObject.name=${name}` })
      ).items.map((e) => e.reason);
      expect(reasons).not.toContain('AdmissionPolicyConflict');
      // nsA is still governed by its own policy, unchanged by nsB's instance.
      expect(
        expectDenied(await createSandbox(kc, ref(nsA, 'weak'), 'runc', { dryRun: true }), `runc in ${nsA}`),
      ).toContain(`ValidatingAdmissionPolicy '${policyName(nsA, name, 'enforce')}'`);

      // Once nsA's instance is gone, nsB's takes the RuntimeClass name at once — the class's deletion
      // re-queues it, well before its 60 s conflict requeue (it used to wait for that) — and its own
      // policy stayed in force throughout.
      await deleteAgent(kc, nsA, name);
      await waitFor(
        `RuntimeClass ${runtimeClassName(name)} to belong to ${nsB}/${name}`,
        async (observe) => {
          const rc = await kc
            .makeApiClient(NodeV1Api)
            .readRuntimeClass({ name: runtimeClassName(name) })
            .catch((error: unknown) => {
              if (isApiStatus(error, 404)) return undefined;
              throw error;
            });
          observe({ owner: rc?.metadata?.annotations?.[OWNER_ANNOTATION], handler: rc?.handler });
          return rc?.metadata?.annotations?.[OWNER_ANNOTATION] === `cloudark.io/Agent/${nsB}/${name}`;
        },
        { timeoutMs: 20_000 },
      );
      await waitForOwned(kc, { namespace: nsB, name }, expectedSandboxObjects(nsB, name, true));
      expectDenied(await createSandbox(kc, ref(nsB, 'weak'), 'runc', { dryRun: true }), `runc in ${nsB}`);
      await waitForAdmission(kc, ref(nsB, 'own'), runtimeClassName(name), 'to be admitted', (o) => o.allowed);
    } finally {
      await rcs.deleteAll();
    }
  });
});
