/**
 * Seed 2 (sandbox isolation), driven end to end by `kubeplus.io/sandbox-isolation` on `Agent`
 * instances: the real operator process writes a RuntimeClass and admission policies, and the real
 * kube-apiserver's admission chain (ValidatingAdmissionPolicy, MutatingAdmissionPolicy — GA in
 * 1.36) judges Sandbox and SandboxTemplate objects of the Agent Sandbox CRDs, at every version the
 * pinned release serves (v1.0.x: v1beta1; v0.5.x, the floor run's: v1beta1 and v1alpha1). One
 * operator process for the file; every test has its own namespace and instance.
 */
import { beforeAll, describe, expect, test } from '@jest/globals';
import { isApiStatus, loadCrds, sandboxCrdsDir, servedSandboxVersions, waitFor } from '@kubeplus-isolation/e2e';
import {
  FINALIZER,
  NODE_ISOLATION_ANNOTATION,
  NODE_ISOLATION_ENABLED_LABEL,
  NODE_ISOLATION_RESOLVED_ANNOTATION,
  OWNER_ANNOTATION,
  SANDBOX_ISOLATION_ANNOTATION,
} from '@kubeplus-isolation/spec';
import {
  AdmissionregistrationV1Api,
  CoreV1Api,
  type KubeConfig,
  NodeV1Api,
  type V1RuntimeClass,
} from '@kubernetes/client-node';
import { uniqueName } from './support/names.js';
import {
  agentKey,
  createAgent,
  deleteAgent,
  expectedSandboxObjects,
  getAgent,
  ownedObjects,
  patchAgent,
  policyName,
  readNamespace,
  runtimeClassName,
  sharedClusterDefaults,
  waitForEvent,
  waitForNamespace,
  waitForOwned,
  waitForSettled,
} from './support/operator.js';
import {
  allowedWithout,
  createSandbox,
  denied,
  expectAllowed,
  expectDenied,
  getSandbox,
  patchSandbox,
  RuntimeClasses,
  type SandboxKind,
  type SandboxRef,
  type SandboxVersion,
  waitForAdmission,
} from './support/operator-sandbox.js';
import { operatorSuite } from './support/operator-suite.js';

const sandboxAnnotation = (minRuntimeClass: string, enforce?: boolean): string =>
  JSON.stringify(enforce === undefined ? { minRuntimeClass } : { minRuntimeClass, enforce });

/** Every version the pinned Agent Sandbox release serves (e2e/README.md "Agent Sandbox versions"). */
const VERSIONS = servedSandboxVersions(loadCrds(sandboxCrdsDir())) as SandboxVersion[];
/** Advisory mode defaults where the cluster serves MutatingAdmissionPolicy (the version matrix: 1.36+). */
const DEFAULTING = sharedClusterDefaults();
const INVALID_METRIC = 'kubeplus_operator_invalid_annotations_total';

/** The handler of the instance's RuntimeClass, or undefined. */
async function handlerOf(kc: KubeConfig, name: string): Promise<string | undefined> {
  try {
    return (await kc.makeApiClient(NodeV1Api).readRuntimeClass({ name })).handler;
  } catch (error) {
    if (isApiStatus(error, 404)) return undefined;
    throw error;
  }
}

/** Fields of a RuntimeClass besides apiVersion, kind and metadata. */
const bodyFields = (rc: V1RuntimeClass): string[] =>
  Object.keys(rc)
    .filter(
      (k) =>
        !['apiVersion', 'kind', 'metadata'].includes(k) && (rc as unknown as Record<string, unknown>)[k] !== undefined,
    )
    .sort();

describe('operator: sandbox isolation (seed 2) from instance annotations, on the real control plane', () => {
  const suite = operatorSuite({ name: 'op-sbx', waitForServiceAccount: false });
  const { tenantNamespace } = suite;
  let kc: KubeConfig;
  beforeAll(() => {
    kc = suite.kc;
  });
  const classes = (): RuntimeClasses => new RuntimeClasses(kc);
  const ref = (namespace: string, name: string, version: SandboxVersion = 'v1beta1', kind: SandboxKind = 'Sandbox') =>
    ({ kind, version, namespace, name }) satisfies SandboxRef;

  test('an instance without the annotation: no RuntimeClass, no policies, no finalizer, and Sandboxes are unconstrained', async () => {
    const ns = await tenantNamespace('kpi-op-sbx-none');
    const name = uniqueName('plain-agent');
    const op = suite.operator;
    const mark = op.logMark();
    await createAgent(kc, ns, name, { 'example.com/unrelated': 'yes' });
    // The operator has seen and reconciled it: from here on, its absence of action is a result.
    await op.waitReconciled(agentKey(ns, name), mark);

    expect(await ownedObjects(kc, name)).toEqual([]);
    expect(await handlerOf(kc, runtimeClassName(name))).toBeUndefined();
    expect((await getAgent(kc, ns, name))?.metadata.finalizers ?? []).not.toContain(FINALIZER);
    const events = await kc
      .makeApiClient(CoreV1Api)
      .listNamespacedEvent({ namespace: ns, fieldSelector: `involvedObject.name=${name}` });
    expect(events.items.map((e) => e.reason)).toEqual([]);
    for (const version of VERSIONS) {
      for (const runtimeClass of ['runc', undefined]) {
        const outcome = await createSandbox(
          kc,
          ref(ns, `${version}-${runtimeClass ?? 'unset'}`, version),
          runtimeClass,
        );
        const admitted = expectAllowed(outcome, `a ${version} Sandbox with ${runtimeClass ?? 'no'} runtime class`);
        expect(admitted.warnings).toEqual([]);
        expect(admitted.object.spec.podTemplate.spec.runtimeClassName).toBe(runtimeClass);
      }
    }
  });

  test('minRuntimeClass kata, enforce true (with node isolation too): weak or unset runtime classes are refused at admission, the own class and later kata-level classes are accepted', async () => {
    const ns = await tenantNamespace('kpi-op-sbx-team-a');
    const name = uniqueName('team-a-agent-instance');
    const own = runtimeClassName(name);
    const rcs = classes();
    const clusterClassesBefore = (await kc.makeApiClient(NodeV1Api).listRuntimeClass()).items.length;
    try {
      // A class with a gVisor handler exists from the start: runsc is weaker than kata.
      const gvisor = await rcs.create(uniqueName('kpi-gvisor'), 'runsc');
      await createAgent(kc, ns, name, {
        [NODE_ISOLATION_ANNOTATION]: JSON.stringify({ nodeSelector: { pool: 'team-a-pool' } }),
        [SANDBOX_ISOLATION_ANNOTATION]: sandboxAnnotation('kata', true),
      });
      const owned = await waitForOwned(kc, name, expectedSandboxObjects(ns, name, true));
      // Exactly one RuntimeClass overall for the instance: its own, carrying only a kata handler.
      const rc = owned.find((o) => o.kind === 'RuntimeClass')?.raw as V1RuntimeClass;
      expect(rc.handler).toBe('kata');
      expect(bodyFields(rc)).toEqual(['handler']);
      const all = (await kc.makeApiClient(NodeV1Api).listRuntimeClass()).items;
      expect(all.length).toBe(clusterClassesBefore + 2); // the instance's own + the gVisor class above
      expect(all.filter((c) => c.metadata?.name?.includes(name)).map((c) => c.metadata?.name)).toEqual([own]);
      // Node isolation is in effect too, on its own path.
      await waitForNamespace(
        kc,
        ns,
        'to be node-isolated as well',
        (n) =>
          n?.metadata?.labels?.[NODE_ISOLATION_ENABLED_LABEL] === 'true' &&
          n.metadata.annotations?.[NODE_ISOLATION_RESOLVED_ANNOTATION] !== undefined,
      );
      await waitForEvent(kc, ns, name, 'SandboxIsolationApplied', (m) => m.includes('minimum kata, enforced'));

      await waitForAdmission(kc, ref(ns, 'probe'), undefined, 'to be denied', denied);
      for (const version of VERSIONS) {
        for (const [i, runtimeClass] of ['runc', undefined, gvisor].entries()) {
          const what = `a ${version} Sandbox with runtimeClassName ${runtimeClass ?? '(unset)'}`;
          const message = expectDenied(
            await createSandbox(kc, ref(ns, `weak-${version}-${i}`, version), runtimeClass),
            what,
          );
          expect(message).toContain(`namespace "${ns}" requires sandbox runtime kata or stronger`);
          expect(message).toContain(`use runtimeClassName "${own}"`);
          if (runtimeClass !== undefined)
            expect(message).toContain(
              `runtimeClassName "${runtimeClass}" is not allowed here: its handler is weaker than kata`,
            );
        }
        const accepted = expectAllowed(
          await createSandbox(kc, ref(ns, `own-${version}`, version), own),
          `a ${version} Sandbox with runtimeClassName ${own}`,
        );
        expect(accepted.warnings).toEqual([]);
      }
      // SandboxTemplates stamp Sandboxes: a weak one is refused when it is written.
      for (const version of VERSIONS) {
        expectDenied(
          await createSandbox(kc, ref(ns, `weak-template-${version}`, version, 'SandboxTemplate'), 'runc'),
          `a ${version} SandboxTemplate with runtimeClassName runc`,
        );
        expectAllowed(
          await createSandbox(kc, ref(ns, `own-template-${version}`, version, 'SandboxTemplate'), own),
          `a ${version} SandboxTemplate with runtimeClassName ${own}`,
        );
      }

      // A kata-level class created later (kata-deploy's kata-qemu) becomes usable: the policy follows RuntimeClasses.
      const qemu = await rcs.create(uniqueName('kpi-kata-qemu'), 'kata-qemu');
      await waitForAdmission(
        kc,
        ref(ns, 'qemu'),
        qemu,
        'to be admitted once the operator has updated the policy',
        (a) => a.allowed,
      );
      expectAllowed(await createSandbox(kc, ref(ns, 'qemu'), qemu), `a Sandbox with runtimeClassName ${qemu}`);
      // ... and the policy that now admits it still refuses the gVisor class.
      expectDenied(await createSandbox(kc, ref(ns, 'gvisor-again'), gvisor), `a Sandbox with ${gvisor} (runsc)`);
      // Deleting the kata-qemu class takes it off the allowed list again.
      await kc.makeApiClient(NodeV1Api).deleteRuntimeClass({ name: qemu });
      await waitForAdmission(kc, ref(ns, 'qemu-gone'), qemu, `to be denied once ${qemu} is deleted`, denied);
    } finally {
      await rcs.deleteAll();
    }
  });

  test('enforce false: an unset runtime class is defaulted to the instance’s class, an explicit weaker one is admitted with a warning', async () => {
    const ns = await tenantNamespace('kpi-op-sbx-team-b');
    const name = uniqueName('team-b-agent-instance');
    const own = runtimeClassName(name);
    await createAgent(kc, ns, name, { [SANDBOX_ISOLATION_ANNOTATION]: sandboxAnnotation('kata', false) });
    const owned = await waitForOwned(kc, name, expectedSandboxObjects(ns, name, false));
    expect(owned.find((o) => o.kind === 'RuntimeClass')?.raw.handler).toBe('kata');
    // No node isolation was asked for, and none appears: the two annotations are independent.
    expect((await readNamespace(kc, ns))?.metadata?.labels?.[NODE_ISOLATION_ENABLED_LABEL]).toBeUndefined();

    // Defaulted where the cluster serves MutatingAdmissionPolicy (1.36+); on an older minor the
    // documented fallback: left unset, admitted (kubernetes-versions.test.ts: its Warning Event).
    const unsetBecomes = DEFAULTING ? own : undefined;
    await waitForAdmission(kc, ref(ns, 'probe'), undefined, `to be admitted as ${unsetBecomes ?? 'unset'}`, (a) =>
      a.allowed ? a.object.spec.podTemplate.spec.runtimeClassName === unsetBecomes : false,
    );
    for (const version of VERSIONS) {
      const defaulted = expectAllowed(
        await createSandbox(kc, ref(ns, `unset-${version}`, version), undefined),
        `a ${version} Sandbox without a runtime class`,
      );
      expect(defaulted.object.spec.podTemplate.spec.runtimeClassName).toBe(unsetBecomes);
      if (DEFAULTING) expect(defaulted.warnings).toEqual([]);
      expect((await getSandbox(kc, ref(ns, `unset-${version}`, version)))?.spec.podTemplate.spec.runtimeClassName).toBe(
        unsetBecomes,
      );
    }

    await waitForAdmission(
      kc,
      ref(ns, 'probe'),
      'runc',
      'to be admitted with a warning',
      (a) => a.allowed && a.warnings.length > 0,
    );
    for (const version of VERSIONS) {
      const weak = expectAllowed(
        await createSandbox(kc, ref(ns, `runc-${version}`, version), 'runc'),
        `a ${version} Sandbox with runtimeClassName runc in advisory mode`,
      );
      // The explicit choice is kept, and the user is told (kubectl prints this as "Warning: …").
      expect(weak.object.spec.podTemplate.spec.runtimeClassName).toBe('runc');
      expect(weak.warnings).toEqual([
        `Validation failed for ValidatingAdmissionPolicy '${policyName(ns, name, 'advisory')}' with binding '${policyName(ns, name, 'advisory')}': Sandbox runtimeClassName "runc" is not allowed here: its handler is weaker than kata or unknown, or it is another instance's class; namespace "${ns}" requires sandbox runtime kata or stronger (kubeplus.io/sandbox-isolation); use runtimeClassName "${own}"`,
      ]);
    }
  });

  test('tenants never share generated classes: another instance’s kata class is refused, a platform kata class is allowed; a name held by another instance is not trusted, and is taken once freed', async () => {
    const nsA = await tenantNamespace('kpi-op-sbx-share-a');
    const nsB = await tenantNamespace('kpi-op-sbx-share-b');
    const nsZ = await tenantNamespace('kpi-op-sbx-share-z');
    const a = uniqueName('share-agent');
    const b = uniqueName('share-agent');
    const rcs = classes();
    const node = kc.makeApiClient(NodeV1Api);
    try {
      const platformKata = await rcs.create(uniqueName('kpi-kata'), 'kata');
      await createAgent(kc, nsA, a, { [SANDBOX_ISOLATION_ANNOTATION]: sandboxAnnotation('kata', true) });
      await createAgent(kc, nsB, b, { [SANDBOX_ISOLATION_ANNOTATION]: sandboxAnnotation('kata', true) });
      await waitForOwned(kc, a, expectedSandboxObjects(nsA, a, true));
      await waitForOwned(kc, b, expectedSandboxObjects(nsB, b, true));
      expect(await handlerOf(kc, runtimeClassName(b))).toBe('kata');

      // b's class has a kata handler, but it is b's: deleted with b, re-created weaker if b lowers its minimum.
      for (const [ns, own, other] of [
        [nsA, runtimeClassName(a), runtimeClassName(b)],
        [nsB, runtimeClassName(b), runtimeClassName(a)],
      ] as const) {
        // Admission policies load asynchronously: the refusal is what shows this one is in force.
        const refused = await waitForAdmission(
          kc,
          ref(ns, 'probe'),
          other,
          `to be denied (${other} is the other tenant's)`,
          denied,
        );
        const message = expectDenied(refused, `a Sandbox in ${ns} with the other tenant's class ${other}`);
        expect(message).toContain(`runtimeClassName "${other}" is not allowed here`);
        expect(message).toContain("or it is another instance's class");
        expectAllowed(await createSandbox(kc, ref(ns, 'own'), own), `a Sandbox in ${ns} with its own class ${own}`);
        expectAllowed(
          await createSandbox(kc, ref(ns, 'platform'), platformKata),
          `a Sandbox in ${ns} with ${platformKata}`,
        );
      }

      // The same instance name in a third namespace (advisory): a's class holds its RuntimeClass name.
      await createAgent(kc, nsZ, a, { [SANDBOX_ISOLATION_ANNOTATION]: sandboxAnnotation('kata', false) });
      const conflict = await waitForEvent(kc, nsZ, a, 'RuntimeClassConflict');
      expect(conflict.message).toContain(`belongs to cloudark.io/Agent/${nsA}/${a}`);
      expect(conflict.message).toMatch(new RegExp(`may use: .*${platformKata}`));
      expect(conflict.message.split('may use: ')[1]?.split(', ')).not.toContain(runtimeClassName(a));
      const warned = await waitForAdmission(
        kc,
        ref(nsZ, 'probe'),
        runtimeClassName(a),
        `to be admitted with a warning (${runtimeClassName(a)} is ${nsA}'s)`,
        (o) => o.allowed && o.warnings.length > 0,
      );
      expect(warned.allowed && warned.warnings.join()).toContain(
        `runtimeClassName "${runtimeClassName(a)}" is not allowed here`,
      );
      const platformInZ = expectAllowed(
        await createSandbox(kc, ref(nsZ, 'platform'), platformKata),
        `a Sandbox in ${nsZ} with ${platformKata}`,
      );
      expect(platformInZ.warnings).toEqual([]);

      // Once a (in nsA) is gone, the instance in nsZ takes the name.
      await deleteAgent(kc, nsA, a);
      await waitFor(
        `RuntimeClass ${runtimeClassName(a)} to belong to ${nsZ}/${a}`,
        async (observe) => {
          let rc: V1RuntimeClass | undefined;
          try {
            rc = await node.readRuntimeClass({ name: runtimeClassName(a) });
          } catch (error) {
            if (!isApiStatus(error, 404)) throw error;
          }
          observe({ owner: rc?.metadata?.annotations?.[OWNER_ANNOTATION], handler: rc?.handler });
          return (
            rc?.metadata?.annotations?.[OWNER_ANNOTATION] === `cloudark.io/Agent/${nsZ}/${a}` && rc.handler === 'kata'
          );
        },
        // Either path takes it: the RuntimeClass deletion re-queues nsZ's instance, and so does its conflict requeue (60 s).
        { timeoutMs: 90_000 },
      );
      await waitForAdmission(
        kc,
        ref(nsZ, 'probe'),
        runtimeClassName(a),
        'to be admitted without a warning',
        allowedWithout,
      );
    } finally {
      await rcs.deleteAll();
    }
  });

  test('tightening minRuntimeClass runsc → kata leaves existing Sandboxes alone; updating one without changing its runtime class is still allowed, changing it is not', async () => {
    const ns = await tenantNamespace('kpi-op-sbx-tighten');
    const name = uniqueName('tighten-agent');
    const own = runtimeClassName(name);
    const rcs = classes();
    try {
      const gvisor = await rcs.create(uniqueName('kpi-gvisor'), 'runsc');
      await createAgent(kc, ns, name, { [SANDBOX_ISOLATION_ANNOTATION]: sandboxAnnotation('runsc', true) });
      const before = await waitForOwned(kc, name, expectedSandboxObjects(ns, name, true), (o) =>
        o.some((x) => x.kind === 'RuntimeClass' && x.raw.handler === 'runsc'),
      );
      await waitForAdmission(kc, ref(ns, 'probe'), gvisor, 'to be admitted (runsc meets runsc)', allowedWithout);
      const existing = expectAllowed(await createSandbox(kc, ref(ns, 'existing'), gvisor), 'a runsc Sandbox').object;

      await patchAgent(kc, ns, name, {
        annotations: { [SANDBOX_ISOLATION_ANNOTATION]: sandboxAnnotation('kata', true) },
      });
      const after = await waitForOwned(kc, name, expectedSandboxObjects(ns, name, true), (o) =>
        o.some((x) => x.kind === 'RuntimeClass' && x.raw.handler === 'kata'),
      );
      // handler is immutable: the class was re-created.
      expect(after.find((o) => o.kind === 'RuntimeClass')?.uid).not.toBe(
        before.find((o) => o.kind === 'RuntimeClass')?.uid,
      );
      await waitForAdmission(kc, ref(ns, 'probe'), gvisor, 'to be denied now that kata is the minimum', denied);

      // Not retroactive: the existing Sandbox is exactly as it was ...
      const still = await getSandbox(kc, ref(ns, 'existing'));
      expect(still?.metadata.uid).toBe(existing.metadata.uid);
      expect(still?.metadata.resourceVersion).toBe(existing.metadata.resourceVersion);
      // ... and an UPDATE that keeps its runtime class is allowed,
      const relabelled = expectAllowed(
        await patchSandbox(kc, ref(ns, 'existing'), { metadata: { labels: { touched: 'yes' } } }),
        'an UPDATE of the existing Sandbox that keeps its runtime class',
      );
      expect(relabelled.object.spec.podTemplate.spec.runtimeClassName).toBe(gvisor);
      // while changing it is refused, to a weak class or even to the own class: its Pod would keep
      // the class it started with (issue 36, class-change laundering; sandbox-bypass-paths.test.ts).
      expect(
        expectDenied(
          await patchSandbox(kc, ref(ns, 'existing'), {
            spec: { podTemplate: { spec: { runtimeClassName: 'runc' } } },
          }),
          'an UPDATE of the runtime class to runc',
        ),
      ).toContain(`runtimeClassName cannot change from "${gvisor}" to "runc"`);
      expect(
        expectDenied(
          await patchSandbox(kc, ref(ns, 'existing'), { spec: { podTemplate: { spec: { runtimeClassName: own } } } }),
          `an UPDATE of the runtime class to ${own}`,
        ),
      ).toContain('delete and re-create the Sandbox to change its runtime class');
    } finally {
      await rcs.deleteAll();
    }
  });

  test('enforce true → false → true replaces the enforcing pair by the advisory objects and back, with no leftovers', async () => {
    const ns = await tenantNamespace('kpi-op-sbx-toggle');
    const name = uniqueName('toggle-agent');
    const adm = kc.makeApiClient(AdmissionregistrationV1Api);
    const gone = async (read: () => Promise<unknown>): Promise<boolean> => {
      try {
        await read();
        return false;
      } catch (error) {
        if (isApiStatus(error, 404)) return true;
        throw error;
      }
    };

    await createAgent(kc, ns, name, { [SANDBOX_ISOLATION_ANNOTATION]: sandboxAnnotation('kata', true) });
    const enforcing = await waitForOwned(kc, name, expectedSandboxObjects(ns, name, true));
    const rcUid = enforcing.find((o) => o.kind === 'RuntimeClass')?.uid;
    await waitForAdmission(kc, ref(ns, 'probe'), 'runc', 'to be denied (enforce)', denied);

    await patchAgent(kc, ns, name, {
      annotations: { [SANDBOX_ISOLATION_ANNOTATION]: sandboxAnnotation('kata', false) },
    });
    const advisory = await waitForOwned(kc, name, expectedSandboxObjects(ns, name, false));
    expect(advisory.find((o) => o.kind === 'RuntimeClass')?.uid).toBe(rcUid); // kept in place
    expect(await gone(() => adm.readValidatingAdmissionPolicy({ name: policyName(ns, name, 'enforce') }))).toBe(true);
    expect(await gone(() => adm.readValidatingAdmissionPolicyBinding({ name: policyName(ns, name, 'enforce') }))).toBe(
      true,
    );
    await waitForAdmission(kc, ref(ns, 'probe'), 'runc', 'to be admitted with a warning (advisory)', (a) =>
      a.allowed ? a.warnings.some((w) => w.includes('weaker than kata')) : false,
    );

    await patchAgent(kc, ns, name, { annotations: { [SANDBOX_ISOLATION_ANNOTATION]: sandboxAnnotation('kata') } }); // enforce defaults to true
    const again = await waitForOwned(kc, name, expectedSandboxObjects(ns, name, true));
    expect(again.find((o) => o.kind === 'RuntimeClass')?.uid).toBe(rcUid);
    for (const [kind, read] of [
      [
        'ValidatingAdmissionPolicy',
        () => adm.readValidatingAdmissionPolicy({ name: policyName(ns, name, 'advisory') }),
      ],
      [
        'ValidatingAdmissionPolicyBinding',
        () => adm.readValidatingAdmissionPolicyBinding({ name: policyName(ns, name, 'advisory') }),
      ],
      ['MutatingAdmissionPolicy', () => adm.readMutatingAdmissionPolicy({ name: policyName(ns, name, 'default') })],
      [
        'MutatingAdmissionPolicyBinding',
        () => adm.readMutatingAdmissionPolicyBinding({ name: policyName(ns, name, 'default') }),
      ],
    ] as const) {
      expect({ kind, gone: await gone(read) }).toEqual({ kind, gone: true });
    }
    await waitForAdmission(kc, ref(ns, 'probe'), undefined, 'to be denied again, not defaulted (enforce)', denied);
  });

  test('removing the annotation deletes the RuntimeClass and the policies; deleting the instance does too and leaves existing Sandboxes untouched', async () => {
    const ns = await tenantNamespace('kpi-op-sbx-cleanup');
    const name = uniqueName('cleanup-agent');
    const own = runtimeClassName(name);
    await createAgent(kc, ns, name, { [SANDBOX_ISOLATION_ANNOTATION]: sandboxAnnotation('kata', true) });
    await waitForOwned(kc, name, expectedSandboxObjects(ns, name, true));
    await waitForAdmission(kc, ref(ns, 'probe'), undefined, 'to be denied', denied);

    await patchAgent(kc, ns, name, { annotations: { [SANDBOX_ISOLATION_ANNOTATION]: null } });
    await waitForOwned(kc, name, []);
    expect(await handlerOf(kc, own)).toBeUndefined();
    expect((await getAgent(kc, ns, name))?.metadata.finalizers).toBeUndefined(); // never written (issue 35)
    await waitForAdmission(kc, ref(ns, 'probe'), undefined, 'to be admitted again (no constraint)', allowedWithout);

    // Isolated again; Sandboxes are created; then the instance is deleted.
    await patchAgent(kc, ns, name, {
      annotations: { [SANDBOX_ISOLATION_ANNOTATION]: sandboxAnnotation('kata', true) },
    });
    await waitForOwned(kc, name, expectedSandboxObjects(ns, name, true));
    await waitForAdmission(kc, ref(ns, 'probe'), own, 'to be admitted', allowedWithout);
    const sandboxes = [];
    for (const version of VERSIONS) {
      sandboxes.push(
        expectAllowed(await createSandbox(kc, ref(ns, `kept-${version}`, version), own), `a ${version} Sandbox`).object,
      );
    }
    await deleteAgent(kc, ns, name);
    expect(await ownedObjects(kc, name)).toEqual([]);
    expect(await handlerOf(kc, own)).toBeUndefined();
    for (const [i, version] of VERSIONS.entries()) {
      const now = await getSandbox(kc, ref(ns, `kept-${version}`, version));
      expect(now?.metadata).toMatchObject({
        uid: sandboxes[i]?.metadata.uid,
        resourceVersion: sandboxes[i]?.metadata.resourceVersion,
      });
    }
    // Nothing constrains the namespace any more.
    await waitForAdmission(kc, ref(ns, 'probe'), 'runc', 'to be admitted without a warning', allowedWithout);
  });

  test('an invalid annotation: a Warning Event listing the error, the metric counts it, and the policy last applied stays in force', async () => {
    const ns = await tenantNamespace('kpi-op-sbx-invalid');
    const name = uniqueName('invalid-agent');
    const op = suite.operator;
    await createAgent(kc, ns, name, { [SANDBOX_ISOLATION_ANNOTATION]: sandboxAnnotation('kata', true) });
    await waitForAdmission(kc, ref(ns, 'probe'), 'runc', 'to be denied', denied);
    const good = await waitForSettled(kc, name, expectedSandboxObjects(ns, name, true));
    const countBefore = await op.metric(INVALID_METRIC, { annotation: SANDBOX_ISOLATION_ANNOTATION });

    await patchAgent(kc, ns, name, {
      annotations: {
        [SANDBOX_ISOLATION_ANNOTATION]: JSON.stringify({ minRuntimeClass: 'firecracker', enforce: false }),
      },
    });
    const event = await waitForEvent(kc, ns, name, 'InvalidSandboxIsolation');
    expect(event.type).toBe('Warning');
    expect(event.message).toContain('minRuntimeClass must be one of runc, runsc, kata');
    await waitFor(
      `${INVALID_METRIC}{annotation="${SANDBOX_ISOLATION_ANNOTATION}"} to move past ${countBefore}`,
      async () => (await op.metric(INVALID_METRIC, { annotation: SANDBOX_ISOLATION_ANNOTATION })) > countBefore,
      { timeoutMs: 10_000 },
    );
    // Neither relaxed to advisory nor removed: the same objects, unwritten, still denying.
    expect((await ownedObjects(kc, name)).map((o) => [o.kind, o.name, o.resourceVersion])).toEqual(
      good.map((o) => [o.kind, o.name, o.resourceVersion]),
    );
    expectDenied(await createSandbox(kc, ref(ns, 'weak'), 'runc'), 'a Sandbox with runc under the last good policy');
  });

  test('drift is reverted: a deleted binding comes back, an edited RuntimeClass and binding are restored', async () => {
    const ns = await tenantNamespace('kpi-op-sbx-drift');
    const name = uniqueName('drift-agent');
    const own = runtimeClassName(name);
    const adm = kc.makeApiClient(AdmissionregistrationV1Api);
    const node = kc.makeApiClient(NodeV1Api);
    await createAgent(kc, ns, name, { [SANDBOX_ISOLATION_ANNOTATION]: sandboxAnnotation('kata', false) });
    const owned = await waitForOwned(kc, name, expectedSandboxObjects(ns, name, false));
    const uidOf = (kind: string): string | undefined => owned.find((o) => o.kind === kind)?.uid;

    // A deleted binding is re-created (the defaulting one where the cluster serves it, else the warning one).
    const [bindingKind, deleteBinding] = DEFAULTING
      ? ([
          'MutatingAdmissionPolicyBinding',
          () => adm.deleteMutatingAdmissionPolicyBinding({ name: policyName(ns, name, 'default') }),
        ] as const)
      : ([
          'ValidatingAdmissionPolicyBinding',
          () => adm.deleteValidatingAdmissionPolicyBinding({ name: policyName(ns, name, 'advisory') }),
        ] as const);
    await deleteBinding();
    await waitForOwned(kc, name, expectedSandboxObjects(ns, name, false), (o) =>
      o.some((x) => x.kind === bindingKind && x.uid !== uidOf(bindingKind)),
    );

    // An advisory binding switched to Deny is switched back.
    const binding = await adm.readValidatingAdmissionPolicyBinding({ name: policyName(ns, name, 'advisory') });
    binding.spec = { ...binding.spec, validationActions: ['Deny'] };
    await adm.replaceValidatingAdmissionPolicyBinding({ name: policyName(ns, name, 'advisory'), body: binding });
    await waitFor(
      `binding ${policyName(ns, name, 'advisory')} to be restored to [Warn, Audit]`,
      async (observe) => {
        const b = await adm.readValidatingAdmissionPolicyBinding({ name: policyName(ns, name, 'advisory') });
        observe(b.spec?.validationActions);
        return JSON.stringify(b.spec?.validationActions) === '["Warn","Audit"]';
      },
      { timeoutMs: 30_000 },
    );

    // A RuntimeClass given scheduling constraints (a field the operator never sets) is restored.
    const rc = await node.readRuntimeClass({ name: own });
    rc.scheduling = { nodeSelector: { hijacked: 'true' } };
    const edited = await node.replaceRuntimeClass({ name: own, body: rc });
    const restored = await waitFor(
      `RuntimeClass ${own} to lose the added scheduling field`,
      async (observe) => {
        const now = await node.readRuntimeClass({ name: own });
        observe({ handler: now.handler, scheduling: now.scheduling });
        return now.scheduling === undefined ? now : undefined;
      },
      { timeoutMs: 30_000 },
    );
    expect(restored.metadata?.uid).toBe(edited.metadata?.uid); // updated in place, not re-created
    expect(bodyFields(restored)).toEqual(['handler']);
    expect(restored.handler).toBe('kata');
  });
});
