/**
 * InstanceReconciler, sandbox isolation (sandbox-sync.ts): the generated RuntimeClass, the per-instance
 * and shared policy layouts, conflicts with other instances, peers in one namespace, and names of
 * earlier versions.
 */
import { beforeEach, describe, expect, it } from '@jest/globals';
import { ConditionWarnings } from '../../../src/controllers/instances/condition-warnings.js';
import type { InstanceReconciler, InstanceReconcilerOptions } from '../../../src/controllers/instances/reconciler.js';
import { OrphanCleanup } from '../../../src/controllers/owned-objects/orphan-cleanup.js';
import type { InstanceKey } from '../../../src/desired/instance.js';
import { isConflict } from '../../../src/runtime/errors.js';
import { agentPolicy } from '../../desired/helpers.js';
import {
  cleanUpOrphans,
  cluster,
  conflicts,
  freshCluster,
  INSTANCE,
  KATA_ADVISORY,
  KATA_ENFORCE,
  kindsInCluster,
  legacyObject,
  POLICY,
  RC,
  reasons,
  reconciler,
  SANDBOX,
  spec,
  teamA,
  unavailable,
} from './reconciler-harness.js';

beforeEach(freshCluster);

describe('acceptance: minRuntimeClass kata, enforce true', () => {
  it('creates one RuntimeClass (handler kata) and the enforce pair, and never writes the instance', async () => {
    const key = teamA({ [SANDBOX]: KATA_ENFORCE });
    expect(await reconciler().reconcile(key)).toEqual({});
    expect(cluster.writes.filter((w) => w.op === 'setFinalizers')).toEqual([]);
    expect(cluster.finalizersOf(key)).toEqual([]);
    expect(kindsInCluster()).toEqual([
      `RuntimeClass/${RC}`,
      `ValidatingAdmissionPolicy/${POLICY.enforce}`,
      `ValidatingAdmissionPolicyBinding/${POLICY.enforce}`,
    ]);
    expect(cluster.stored('RuntimeClass', RC)?.handler).toBe('kata');
    expect(spec('ValidatingAdmissionPolicyBinding', POLICY.enforce)).toMatchObject({
      policyName: POLICY.enforce,
      validationActions: ['Deny'],
      matchResources: { namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'team-a' } } },
    });
    expect(reasons()).toEqual(['SandboxIsolationApplied']);
    expect(cluster.events[0]?.target).toMatchObject({ kind: 'Agent', namespace: 'team-a', name: INSTANCE });
  });

  it('creates the RuntimeClass before the policy that names it, and the binding last', async () => {
    await reconciler().reconcile(teamA({ [SANDBOX]: KATA_ENFORCE }));
    expect(cluster.writes.filter((w) => w.op === 'createObject').map((w) => w.target.split('/')[0])).toEqual([
      'RuntimeClass',
      'ValidatingAdmissionPolicy',
      'ValidatingAdmissionPolicyBinding',
    ]);
  });

  it('allows existing cluster classes that meet the minimum', async () => {
    cluster.putRuntimeClass('kata-qemu', 'kata-qemu');
    cluster.putRuntimeClass('gvisor', 'runsc');
    await reconciler().reconcile(teamA({ [SANDBOX]: KATA_ENFORCE }));
    expect(spec('ValidatingAdmissionPolicy', POLICY.enforce).variables).toContainEqual({
      name: 'allowedRuntimeClasses',
      expression: `["kata-qemu", "${RC}"]`,
    });
  });

  it('another tenant’s generated kata class is not allowed, and its policy is not rewritten when ours appears', async () => {
    const r = reconciler();
    cluster.putNamespace('team-b');
    const b = cluster.putInstance({ name: 'agent-b', namespace: 'team-b', annotations: { [SANDBOX]: KATA_ENFORCE } });
    await r.reconcile(b);
    const theirs = cluster.stored('ValidatingAdmissionPolicy', agentPolicy('team-b', 'agent-b', 'enforce'));
    expect(cluster.stored('RuntimeClass', 'kubeplus-sandbox-agent-b')?.handler).toBe('kata');

    await r.reconcile(teamA({ [SANDBOX]: KATA_ENFORCE }));
    expect(spec('ValidatingAdmissionPolicy', POLICY.enforce).variables).toContainEqual({
      name: 'allowedRuntimeClasses',
      expression: `["${RC}"]`,
    });
    // Reconciling the other tenant again (as any RuntimeClass event used to make it) writes nothing.
    const writes = cluster.writes.length;
    await r.reconcile(b);
    expect(cluster.writes.slice(writes)).toEqual([]);
    expect(cluster.stored('ValidatingAdmissionPolicy', agentPolicy('team-b', 'agent-b', 'enforce'))).toEqual(theirs);
  });
});

describe('acceptance: enforce false (advisory)', () => {
  it('creates the defaulting MutatingAdmissionPolicy and a warning policy, and nothing that denies', async () => {
    await reconciler().reconcile(teamA({ [SANDBOX]: KATA_ADVISORY }));
    expect(kindsInCluster()).toEqual([
      `MutatingAdmissionPolicy/${POLICY.default}`,
      `MutatingAdmissionPolicyBinding/${POLICY.default}`,
      `RuntimeClass/${RC}`,
      `ValidatingAdmissionPolicy/${POLICY.advisory}`,
      `ValidatingAdmissionPolicyBinding/${POLICY.advisory}`,
    ]);
    expect(spec('ValidatingAdmissionPolicyBinding', POLICY.advisory).validationActions).toEqual(['Warn', 'Audit']);
    expect(JSON.stringify([...cluster.objects.values()])).not.toContain('"Deny"');
    expect(cluster.stored('MutatingAdmissionPolicy', POLICY.default)?.apiVersion).toBe(
      'admissionregistration.k8s.io/v1',
    );
  });

  it('uses the v1beta1 MutatingAdmissionPolicy API when that is what the cluster serves', async () => {
    cluster.mutatingVersion = 'admissionregistration.k8s.io/v1beta1';
    await reconciler().reconcile(teamA({ [SANDBOX]: KATA_ADVISORY }));
    expect(cluster.stored('MutatingAdmissionPolicy', POLICY.default)?.apiVersion).toBe(
      'admissionregistration.k8s.io/v1beta1',
    );
  });

  it('without a MutatingAdmissionPolicy API: warning policy only, a Warning Event and the metric hook', async () => {
    cluster.mutatingVersion = undefined;
    const key = teamA({ [SANDBOX]: KATA_ADVISORY });
    await reconciler().reconcile(key);
    expect(kindsInCluster()).toEqual([
      `RuntimeClass/${RC}`,
      `ValidatingAdmissionPolicy/${POLICY.advisory}`,
      `ValidatingAdmissionPolicyBinding/${POLICY.advisory}`,
    ]);
    expect(cluster.events.find((e) => e.reason === 'MutatingAdmissionPolicyUnavailable')?.type).toBe('Warning');
    expect(unavailable).toEqual([key]);
  });

  it('the standing warning is recorded once, not at every resync (a write each), and again after the re-announce interval', async () => {
    cluster.mutatingVersion = undefined;
    let now = 0;
    // As the operator runs it: a new reconciler per reconcile, one memo shared by all.
    const memo = new ConditionWarnings(60_000);
    const r = (): InstanceReconciler => reconciler({ now: () => now, conditionWarnings: memo });
    const key = teamA({ [SANDBOX]: KATA_ADVISORY });
    const warned = (): number => cluster.events.filter((e) => e.reason === 'MutatingAdmissionPolicyUnavailable').length;
    await r().reconcile(key);
    for (now = 1_000; now < 60_000; now += 10_000) await r().reconcile(key); // resyncs
    expect(warned()).toBe(1);
    expect(unavailable).toHaveLength(7); // the metric still counts every reconcile
    now = 60_000;
    await r().reconcile(key);
    expect(warned()).toBe(2);
  });
});

describe('acceptance: changes are applied in place', () => {
  it('enforce true → false replaces the enforce pair with the advisory set, keeping the RuntimeClass', async () => {
    const r = reconciler();
    const key = teamA({ [SANDBOX]: KATA_ENFORCE });
    await r.reconcile(key);
    const rcUid = cluster.stored('RuntimeClass', RC)?.metadata.uid;
    teamA({ [SANDBOX]: KATA_ADVISORY });
    await r.reconcile(key);
    expect(kindsInCluster()).toEqual([
      `MutatingAdmissionPolicy/${POLICY.default}`,
      `MutatingAdmissionPolicyBinding/${POLICY.default}`,
      `RuntimeClass/${RC}`,
      `ValidatingAdmissionPolicy/${POLICY.advisory}`,
      `ValidatingAdmissionPolicyBinding/${POLICY.advisory}`,
    ]);
    expect(cluster.stored('RuntimeClass', RC)?.metadata.uid).toBe(rcUid);
    // The advisory set exists before the enforce set goes: no moment without a policy.
    const ops = cluster.writes.slice(-7).map((w) => `${w.op} ${w.target.split('/')[0]}`);
    expect(ops.indexOf('deleteObject ValidatingAdmissionPolicyBinding')).toBeGreaterThan(
      ops.indexOf('createObject ValidatingAdmissionPolicyBinding'),
    );
  });

  it('a new minimum updates the policy in place and re-creates the RuntimeClass (its handler is immutable)', async () => {
    const r = reconciler();
    const key = teamA({ [SANDBOX]: KATA_ENFORCE });
    await r.reconcile(key);
    const vapUid = cluster.stored('ValidatingAdmissionPolicy', POLICY.enforce)?.metadata.uid;
    const before = cluster.writeCount();
    teamA({ [SANDBOX]: '{"minRuntimeClass":"runsc"}' });
    await r.reconcile(key);
    expect(cluster.stored('RuntimeClass', RC)?.handler).toBe('runsc');
    const vap = cluster.stored('ValidatingAdmissionPolicy', POLICY.enforce);
    expect(vap?.metadata.uid).toBe(vapUid);
    expect(JSON.stringify(vap?.spec)).toContain('runtime runsc or stronger');
    // The binding did not change, so it is not written. The policy goes first: it no longer
    // trusts the own class's time before the class is deleted (issue 36).
    expect(cluster.writes.slice(before)).toEqual([
      { op: 'replaceObject', target: `ValidatingAdmissionPolicy/${POLICY.enforce}` },
      { op: 'deleteObject', target: `RuntimeClass/${RC}` },
      { op: 'createObject', target: `RuntimeClass/${RC}` },
    ]);
  });
});

describe('conflicts with other instances', () => {
  it('a RuntimeClass owned by another instance of the same name: Warning Event, no takeover, retry later', async () => {
    const r = reconciler({ conflictRequeueMs: 30_000 });
    const other = cluster.putInstance({
      name: INSTANCE,
      namespace: 'team-z',
      annotations: { [SANDBOX]: '{"minRuntimeClass":"runc"}' },
    });
    cluster.putNamespace('team-z');
    await r.reconcile(other);
    const theirs = cluster.stored('RuntimeClass', RC);
    const key = teamA({ [SANDBOX]: KATA_ENFORCE });
    expect(await r.reconcile(key)).toEqual({ requeueAfterMs: 30_000 });
    expect(cluster.stored('RuntimeClass', RC)).toEqual(theirs);
    expect(cluster.events.some((e) => e.reason === 'RuntimeClassConflict' && e.type === 'Warning')).toBe(true);
    expect(conflicts.map(([c]) => c)).toContain('RuntimeClass');
  });

  it('does not trust the other instance’s class in its own policy, even when its handler meets the minimum', async () => {
    const r = reconciler();
    cluster.putNamespace('team-z');
    await r.reconcile(
      cluster.putInstance({ name: INSTANCE, namespace: 'team-z', annotations: { [SANDBOX]: KATA_ENFORCE } }),
    );
    expect(cluster.stored('RuntimeClass', RC)?.handler).toBe('kata');
    cluster.putRuntimeClass('kata-qemu', 'kata-qemu');
    await r.reconcile(teamA({ [SANDBOX]: KATA_ADVISORY }));
    // Only the platform's kata class: it is what advisory mode defaults to.
    expect(spec('ValidatingAdmissionPolicy', POLICY.advisory).variables).toContainEqual({
      name: 'allowedRuntimeClasses',
      expression: '["kata-qemu"]',
    });
    const warning = cluster.events.find((e) => e.reason === 'RuntimeClassConflict');
    expect(warning?.message).toContain('Sandboxes in team-a may use: kata-qemu');
  });

  it('does not trust the other instance’s weaker class in its own policy', async () => {
    const r = reconciler();
    cluster.putNamespace('team-z');
    await r.reconcile(
      cluster.putInstance({
        name: INSTANCE,
        namespace: 'team-z',
        annotations: { [SANDBOX]: '{"minRuntimeClass":"runc"}' },
      }),
    );
    await r.reconcile(teamA({ [SANDBOX]: KATA_ADVISORY }));
    const ours = spec('ValidatingAdmissionPolicy', POLICY.advisory);
    expect(ours.variables).toContainEqual({ name: 'allowedRuntimeClasses', expression: '[]' });
    // Nothing meets kata, so there is nothing to default to: no MutatingAdmissionPolicy, and a warning.
    expect(cluster.storedOfKind('MutatingAdmissionPolicy')).toEqual([]);
    expect(reasons()).toEqual(expect.arrayContaining(['RuntimeClassConflict', 'NoDefaultRuntimeClass']));
  });

  it('an instance of the same name in another namespace: each gets policies of its own; the RuntimeClass Warning names the holder (issue 21)', async () => {
    const r = reconciler();
    cluster.putNamespace('team-z');
    await r.reconcile(
      cluster.putInstance({ name: INSTANCE, namespace: 'team-z', annotations: { [SANDBOX]: KATA_ENFORCE } }),
    );
    const theirs = cluster.stored('ValidatingAdmissionPolicyBinding', agentPolicy('team-z', INSTANCE, 'enforce'));
    cluster.putRuntimeClass('kata-qemu', 'kata-qemu');
    const result = await r.reconcile(teamA({ [SANDBOX]: KATA_ENFORCE }));
    // Only the RuntimeClass name is shared: retried later, to take it once it is free.
    expect(result.requeueAfterMs).toBe(60_000);
    expect(cluster.stored('ValidatingAdmissionPolicyBinding', agentPolicy('team-z', INSTANCE, 'enforce'))).toEqual(
      theirs,
    );
    // team-a is governed by its own enforce pair, bound to team-a, allowing the platform's kata class only.
    expect(spec('ValidatingAdmissionPolicyBinding', POLICY.enforce)).toMatchObject({
      policyName: POLICY.enforce,
      validationActions: ['Deny'],
      matchResources: { namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'team-a' } } },
    });
    expect(spec('ValidatingAdmissionPolicy', POLICY.enforce).variables).toContainEqual({
      name: 'allowedRuntimeClasses',
      expression: '["kata-qemu"]',
    });
    expect(reasons()).not.toContain('AdmissionPolicyConflict');
    const warning = cluster.events.find((e) => e.reason === 'RuntimeClassConflict');
    expect(warning).toMatchObject({ type: 'Warning', target: { namespace: 'team-a', name: INSTANCE } });
    expect(warning?.message).toContain(`belongs to cloudark.io/Agent/team-z/${INSTANCE}`);
    expect(warning?.message).toContain('Sandboxes in team-a may use: kata-qemu');
    expect(conflicts.map(([c]) => c)).toEqual(['RuntimeClass']);
  });

  it('an admission policy name held by another owner: Warning Event naming it, no takeover, and nothing of ours is pruned meanwhile', async () => {
    const r = reconciler();
    const key = teamA({ [SANDBOX]: KATA_ENFORCE });
    await r.reconcile(key);
    // The instance switches to advisory while the advisory name is held by another owner.
    await cluster.createObject(legacyObject('ValidatingAdmissionPolicy', POLICY.advisory, 'cloudark.io/Agent/x/y'));
    teamA({ [SANDBOX]: KATA_ADVISORY });
    const result = await r.reconcile(key);
    expect(result.requeueAfterMs).toBe(60_000);
    expect(cluster.stored('ValidatingAdmissionPolicy', POLICY.advisory)?.metadata.annotations).toEqual({
      'kubeplus.io/owner': 'cloudark.io/Agent/x/y',
    });
    const warning = cluster.events.find((e) => e.reason === 'AdmissionPolicyConflict');
    expect(warning?.message).toContain('cloudark.io/Agent/x/y');
    expect(conflicts.map(([c]) => c)).toEqual(['AdmissionPolicy']);
    // The enforce pair still governs team-a: it is pruned only once its replacement exists.
    expect(cluster.stored('ValidatingAdmissionPolicy', POLICY.enforce)).toBeDefined();
    expect(spec('ValidatingAdmissionPolicyBinding', POLICY.enforce).validationActions).toEqual(['Deny']);
  });
});

describe('several instances binding sandbox isolation to one namespace', () => {
  const other = 'second-agent';
  const put = (name: string, annotation: string): InstanceKey =>
    cluster.putInstance({ name, namespace: 'team-a', annotations: { [SANDBOX]: annotation } });
  const allowed = (policy: string): unknown =>
    (spec('ValidatingAdmissionPolicy', policy).variables as { name: string; expression: string }[]).find(
      (v) => v.name === 'allowedRuntimeClasses',
    )?.expression;

  it.each([
    ['first', false],
    ['second', true],
  ])(
    'two kata-enforced instances (%s created first): each policy accepts both generated classes',
    async (_o, reversed) => {
      const keys = [put(INSTANCE, KATA_ENFORCE), put(other, KATA_ENFORCE)];
      for (const key of reversed ? [...keys].reverse() : keys) await reconciler().reconcile(key);
      // The one reconciled first saw no peer class yet: the peer's class event re-queues it (controllers/instances/keys.ts).
      for (const key of keys) await reconciler().reconcile(key);
      const both = `["kubeplus-sandbox-${other}", "${RC}"]`;
      expect(allowed(POLICY.enforce)).toBe(both);
      expect(allowed(agentPolicy('team-a', other, 'enforce'))).toBe(both);
      expect(reasons()).not.toContain('StricterSandboxPolicy');
    },
  );

  it('a weaker instance beside a stricter one: Warning naming who governs, and its default is the stricter class', async () => {
    const strict = put(INSTANCE, KATA_ENFORCE);
    const weak = put(other, '{"minRuntimeClass": "runsc", "enforce": false}');
    await reconciler().reconcile(strict);
    await reconciler().reconcile(weak);
    const warning = cluster.events.find((e) => e.reason === 'StricterSandboxPolicy');
    expect(warning).toMatchObject({ type: 'Warning', target: { name: other } });
    expect(warning?.message).toContain(`cloudark.io/Agent/team-a/${INSTANCE} (minimum kata, enforced)`);
    expect(
      JSON.stringify(spec('MutatingAdmissionPolicy', agentPolicy('team-a', other, 'default')).mutations),
    ).toContain(`value: \\"${RC}\\"`);
    // The stricter instance refuses the weaker one's runsc class and is not warned.
    expect(allowed(POLICY.enforce)).toBe(`["${RC}"]`);
    expect(cluster.events.filter((e) => e.reason === 'StricterSandboxPolicy' && e.target.name === INSTANCE)).toEqual(
      [],
    );
  });
});

describe('upgrade from policy names derived from the instance name alone (issue 21)', () => {
  const LEGACY = `kubeplus-sandbox-${INSTANCE}-enforce`;

  it('writes the new names first, then prunes the legacy ones it owns; nothing else is touched', async () => {
    const key = teamA({ [SANDBOX]: KATA_ENFORCE });
    const me = `cloudark.io/Agent/team-a/${INSTANCE}`;
    await cluster.createObject(legacyObject('ValidatingAdmissionPolicy', LEGACY, me));
    await cluster.createObject(legacyObject('ValidatingAdmissionPolicyBinding', LEGACY, me));
    // Another instance's old-named pair (same name, another namespace, still on the old names): not ours.
    const other = `kubeplus-sandbox-${INSTANCE}-advisory`;
    await cluster.createObject(
      legacyObject('ValidatingAdmissionPolicy', other, `cloudark.io/Agent/team-z/${INSTANCE}`),
    );
    const writes = cluster.writes.length;

    await reconciler().reconcile(key);
    const ops = cluster.writes.slice(writes).map((w) => `${w.op} ${w.target}`);
    const lastCreate = ops.findLastIndex((o) => o.startsWith('createObject'));
    const firstDelete = ops.findIndex((o) => o.startsWith('deleteObject'));
    expect(ops.filter((o) => o.startsWith('deleteObject'))).toEqual([
      `deleteObject ValidatingAdmissionPolicyBinding/${LEGACY}`,
      `deleteObject ValidatingAdmissionPolicy/${LEGACY}`,
    ]);
    expect(ops).toContain(`createObject ValidatingAdmissionPolicyBinding/${POLICY.enforce}`);
    expect(firstDelete).toBeGreaterThan(lastCreate);
    expect(kindsInCluster()).toEqual([
      `RuntimeClass/${RC}`,
      `ValidatingAdmissionPolicy/${other}`,
      `ValidatingAdmissionPolicy/${POLICY.enforce}`,
      `ValidatingAdmissionPolicyBinding/${POLICY.enforce}`,
    ]);
    // A second pass finds nothing to do.
    const settled = cluster.writes.length;
    expect(await reconciler().reconcile(key)).toEqual({});
    expect(cluster.writes.length).toBe(settled);
  });

  it('the uninstall and orphan cleanup find legacy-named objects too (by their markers, not their names)', async () => {
    const key = teamA({ [SANDBOX]: KATA_ENFORCE });
    await reconciler().reconcile(key);
    const me = `cloudark.io/Agent/team-a/${INSTANCE}`;
    await cluster.createObject(legacyObject('ValidatingAdmissionPolicyBinding', LEGACY, me));
    cluster.deleteInstance(key);
    await cleanUpOrphans();
    expect(cluster.storedOfKind('ValidatingAdmissionPolicyBinding')).toEqual([]);
    expect(cluster.storedOfKind('ValidatingAdmissionPolicy')).toEqual([]);
  });
});

describe('the shared sandbox policy layout', () => {
  const SHARED = 'kubeplus-isolation-sandbox';
  const SHARED_DEFAULT = 'kubeplus-isolation-sandbox-default';
  const PARAMS = POLICY.enforce.replace(/-enforce$/, '-params');
  const shared = (over: Partial<InstanceReconcilerOptions> = {}): InstanceReconciler =>
    reconciler({ sandboxPolicyLayout: 'shared', ...over });

  it('writes the shared policies once, then per instance its RuntimeClass, parameter and binding (no policy of its own)', async () => {
    const key = teamA({ [SANDBOX]: KATA_ENFORCE });
    expect(await shared().reconcile(key)).toEqual({});
    expect(kindsInCluster()).toEqual([
      `MutatingAdmissionPolicy/${SHARED_DEFAULT}`,
      `RuntimeClass/${RC}`,
      `SandboxIsolation/${PARAMS}`,
      `ValidatingAdmissionPolicy/${SHARED}`,
      `ValidatingAdmissionPolicyBinding/${POLICY.enforce}`,
    ]);
    expect(spec('ValidatingAdmissionPolicyBinding', POLICY.enforce)).toMatchObject({
      policyName: SHARED,
      paramRef: { name: PARAMS, parameterNotFoundAction: 'Deny' },
      validationActions: ['Deny'],
    });
    // Parameter and shared policies exist before the binding that names them.
    const created = cluster.writes.filter((w) => w.op === 'createObject').map((w) => w.target.split('/')[0]);
    expect(created.indexOf('ValidatingAdmissionPolicyBinding')).toBeGreaterThan(created.indexOf('SandboxIsolation'));
    expect(created.indexOf('ValidatingAdmissionPolicyBinding')).toBeGreaterThan(
      created.indexOf('ValidatingAdmissionPolicy'),
    );
  });

  it('a second instance reuses the shared policies: it writes only its own three objects', async () => {
    await shared().reconcile(teamA({ [SANDBOX]: KATA_ENFORCE }));
    cluster.putNamespace('team-b', { 'kubernetes.io/metadata.name': 'team-b' });
    const before = cluster.writes.length;
    await shared().reconcile(
      cluster.putInstance({ name: 'team-b-agent', namespace: 'team-b', annotations: { [SANDBOX]: KATA_ADVISORY } }),
    );
    const created = cluster.writes
      .slice(before)
      .filter((w) => w.op === 'createObject')
      .map((w) => w.target.split('/')[0]);
    expect(created.sort()).toEqual([
      'MutatingAdmissionPolicyBinding',
      'RuntimeClass',
      'SandboxIsolation',
      'ValidatingAdmissionPolicyBinding',
    ]);
    expect(cluster.storedOfKind('ValidatingAdmissionPolicy').map((o) => o.metadata.name)).toEqual([SHARED]);
  });

  it('an up-to-date instance issues zero writes', async () => {
    const key = teamA({ [SANDBOX]: KATA_ADVISORY });
    await shared().reconcile(key);
    const writes = cluster.writeCount();
    expect(await shared().reconcile(key)).toEqual({});
    expect(cluster.writeCount()).toBe(writes);
  });

  it('switching from per-instance prunes the per-instance policy once the binding is bound to the shared one', async () => {
    const key = teamA({ [SANDBOX]: KATA_ENFORCE });
    await reconciler().reconcile(key);
    expect(kindsInCluster()).toContain(`ValidatingAdmissionPolicy/${POLICY.enforce}`);
    await shared().reconcile(key);
    expect(kindsInCluster()).not.toContain(`ValidatingAdmissionPolicy/${POLICY.enforce}`);
    expect(spec('ValidatingAdmissionPolicyBinding', POLICY.enforce)).toMatchObject({ policyName: SHARED });
    // The binding was rebound (updated in place), never deleted: the namespace was governed throughout.
    expect(
      cluster.writes.some((w) => w.op === 'deleteObject' && w.target.startsWith('ValidatingAdmissionPolicyBinding')),
    ).toBe(false);
  });

  it('deleting the instance removes its binding, parameter and RuntimeClass, and leaves the shared policies', async () => {
    const r = shared();
    const key = teamA({ [SANDBOX]: KATA_ADVISORY });
    await r.reconcile(key);
    cluster.deleteInstance(key);
    await cleanUpOrphans({ sandboxPolicyLayout: 'shared' });
    expect(kindsInCluster()).toEqual([
      `MutatingAdmissionPolicy/${SHARED_DEFAULT}`,
      `ValidatingAdmissionPolicy/${SHARED}`,
    ]);
  });

  it('an object named like the shared policy that is not the operator’s stops the reconcile before any binding is written', async () => {
    await cluster.createObject({
      apiVersion: 'admissionregistration.k8s.io/v1',
      kind: 'ValidatingAdmissionPolicy',
      metadata: { name: SHARED, labels: { team: 'someone-else' } },
      spec: {},
    });
    const err = await shared()
      .reconcile(teamA({ [SANDBOX]: KATA_ENFORCE }))
      .catch((e: unknown) => e);
    expect(isConflict(err)).toBe(true);
    expect((err as Error).message).toContain(
      `ValidatingAdmissionPolicy/${SHARED} exists but is not kubeplus-isolation's shared sandbox policy`,
    );
    expect(cluster.storedOfKind('ValidatingAdmissionPolicyBinding')).toEqual([]);
    expect(cluster.stored('ValidatingAdmissionPolicy', SHARED)?.metadata.labels).toEqual({ team: 'someone-else' });
  });

  it('a shared policy deleted or changed by hand is put back by the owned-objects path (cleanupOrphan)', async () => {
    await shared().reconcile(teamA({ [SANDBOX]: KATA_ENFORCE }));
    cluster.edit('ValidatingAdmissionPolicy', SHARED, (o) => {
      (o.spec as { validations: unknown[] }).validations = [];
    });
    await cluster.deleteObject(
      { apiVersion: 'admissionregistration.k8s.io/v1', kind: 'MutatingAdmissionPolicy', name: SHARED_DEFAULT },
      {},
    );
    const target = {
      apiVersion: 'admissionregistration.k8s.io/v1',
      kind: 'ValidatingAdmissionPolicy',
      name: SHARED,
    } as const;
    const orphans = (r: InstanceReconciler): OrphanCleanup => new OrphanCleanup({ port: cluster, instances: r });
    expect(await orphans(shared()).cleanupOrphan(target)).toEqual({});
    // Its five checks: the class freeze, a Binding's labels, the class set, the class allowed, and (issue 36, path 1) nothing handed out that predates its class's handler.
    expect((spec('ValidatingAdmissionPolicy', SHARED).validations as unknown[]).length).toBe(5);
    expect(cluster.stored('MutatingAdmissionPolicy', SHARED_DEFAULT)).toBeDefined();
    // With the per-instance layout the same event changes nothing.
    await cluster.deleteObject(
      { apiVersion: 'admissionregistration.k8s.io/v1', kind: 'MutatingAdmissionPolicy', name: SHARED_DEFAULT },
      {},
    );
    await orphans(reconciler()).cleanupOrphan(target);
    expect(cluster.stored('MutatingAdmissionPolicy', SHARED_DEFAULT)).toBeUndefined();
  });
});

describe('a class that gets a new handler (issue 36, path 1)', () => {
  const RUNSC_ENFORCE = '{"minRuntimeClass": "runsc", "enforce": true}';
  const T0 = '2026-12-07T05:00:00Z';
  const T1 = '2026-12-07T06:00:00Z';
  /** The API server's creationTimestamp on the stored own class (the fake writes none). */
  const dateOwnClass = (at: string): void => {
    const rc = cluster.stored('RuntimeClass', RC);
    if (rc === undefined) throw new Error('no own RuntimeClass');
    rc.metadata.creationTimestamp = at;
  };
  const sinceOf = (name: string): string | undefined =>
    (spec('ValidatingAdmissionPolicy', name).variables as Array<{ name: string; expression: string }>).find(
      (v) => v.name === 'allowedRuntimeClassesSince',
    )?.expression;
  const POOL_REF = {
    apiVersion: 'extensions.agents.x-k8s.io/v1beta1',
    kind: 'SandboxWarmPool',
    name: 'pool',
    uid: 'pool-uid',
    controller: true,
  };
  const warm = (name: string, creationTimestamp: string, ownerReferences: object[] = [POOL_REF]) => ({
    metadata: {
      name,
      uid: `uid-${name}`,
      creationTimestamp,
      labels: { 'agents.x-k8s.io/warm-pool-sandbox': 'h' },
      ownerReferences,
    },
    spec: { podTemplate: { spec: { runtimeClassName: RC } } },
  });

  it("a raised minimum first clears the own class's time in the policy, then re-creates the class; the next reconcile writes the new time", async () => {
    const r = reconciler();
    const key = teamA({ [SANDBOX]: RUNSC_ENFORCE });
    await r.reconcile(key);
    dateOwnClass(T0);
    await r.reconcile(key);
    expect(sinceOf(POLICY.enforce)).toBe(`{"${RC}": "${T0}"}`);
    const before = cluster.writeCount();
    teamA({ [SANDBOX]: KATA_ENFORCE });
    await r.reconcile(key);
    expect(cluster.writes.slice(before).map((w) => `${w.op} ${w.target}`)).toEqual([
      `replaceObject ValidatingAdmissionPolicy/${POLICY.enforce}`,
      `deleteObject RuntimeClass/${RC}`,
      `createObject RuntimeClass/${RC}`,
    ]);
    expect(sinceOf(POLICY.enforce)).toBe(`{"${RC}": ""}`);
    dateOwnClass(T1);
    await r.reconcile(key);
    expect(sinceOf(POLICY.enforce)).toBe(`{"${RC}": "${T1}"}`);
  });

  it('deletes the warm-pool Sandboxes created before, once per change of the times, with an Event and the hook', async () => {
    const deleted: number[] = [];
    const r = reconciler({
      hooks: { staleWarmSandboxesDeleted: (n) => deleted.push(n) },
    });
    const key = teamA({ [SANDBOX]: KATA_ENFORCE });
    await r.reconcile(key);
    expect(cluster.sandboxLists).toBe(0); // no time known yet: nothing to judge
    cluster.sandboxes?.set('team-a', [
      warm('stale', T0),
      warm('same-second', T1),
      warm('fresh', '2026-12-07T06:00:01Z'),
      warm('claimed', T0, [{ ...POOL_REF, kind: 'SandboxClaim', name: 'c' }]),
    ]);
    dateOwnClass(T1);
    await r.reconcile(key);
    expect(cluster.writes.filter((w) => w.op === 'deleteSandbox').map((w) => w.target)).toEqual([
      'team-a/stale',
      'team-a/same-second',
    ]);
    expect(cluster.sandboxes?.get('team-a')?.map((s) => s.metadata?.name)).toEqual(['fresh', 'claimed']);
    expect(deleted).toEqual([2]);
    const event = cluster.events.find((e) => e.reason === 'StaleWarmSandboxDeleted');
    expect(event?.type).toBe('Normal');
    expect(event?.message).toContain(`stale (created ${T0}, RuntimeClass "${RC}" got its current handler ${T1})`);
    // The same times again (a resync): no LIST.
    const lists = cluster.sandboxLists;
    await r.reconcile(key);
    expect(cluster.sandboxLists).toBe(lists);
  });

  it('a failed LIST fails the reconcile and is tried again; advisory mode deletes nothing', async () => {
    const r = reconciler();
    const key = teamA({ [SANDBOX]: KATA_ENFORCE });
    await r.reconcile(key);
    dateOwnClass(T1);
    cluster.sandboxes?.set('team-a', [warm('stale', T0)]);
    cluster.failNext('listWarmPoolSandboxes', 500);
    await expect(r.reconcile(key)).rejects.toThrow('injected 500');
    await r.reconcile(key);
    expect(cluster.sandboxes?.get('team-a')).toEqual([]);

    freshCluster();
    const advisory = teamA({ [SANDBOX]: KATA_ADVISORY });
    await reconciler().reconcile(advisory);
    dateOwnClass(T1);
    cluster.sandboxes?.set('team-a', [warm('stale', T0)]);
    await reconciler().reconcile(advisory);
    expect(cluster.sandboxLists).toBe(0);
    expect(cluster.sandboxes?.get('team-a')).toHaveLength(1);
  });
});
