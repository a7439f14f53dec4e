import { beforeEach, describe, expect, it } from '@jest/globals';
import { ConditionWarnings } from '../../../src/controllers/instances/condition-warnings.js';
import {
  type AnnotationName,
  type ConflictKind,
  InstanceReconciler,
  type InstanceReconcilerOptions,
} from '../../../src/controllers/instances/reconciler.js';
import type { InstanceKey } from '../../../src/desired/instance.js';
import type { ManagedKind, ManagedObject } from '../../../src/desired/objects.js';
import { isConflict } from '../../../src/runtime/errors.js';
import { FakeCluster } from '../../cluster/fake-cluster.js';
import { agentPolicy } from '../../desired/helpers.js';

const NODE = 'kubeplus.io/node-isolation';
const SANDBOX = 'kubeplus.io/sandbox-isolation';
const FINALIZER = 'isolation.kubeplus.io/cleanup';
const NODE_SPEC = JSON.stringify({
  nodeSelector: { pool: 'team-a-pool' },
  tolerations: [{ key: 'dedicated', operator: 'Equal', value: 'team-a-pool', effect: 'NoSchedule' }],
});
const RESOLVED =
  '{"nodeSelector":{"pool":"team-a-pool"},"tolerations":[{"key":"dedicated","operator":"Equal","value":"team-a-pool","effect":"NoSchedule"}]}';
const KATA_ENFORCE = '{"minRuntimeClass": "kata", "enforce": true}';
const KATA_ADVISORY = '{"minRuntimeClass": "kata", "enforce": false}';
const INSTANCE = 'team-a-agent-instance';
const RC = `kubeplus-sandbox-${INSTANCE}`;
/** team-a's instance's policy names (kubeplus-sandbox-team-a.<instance>-<hash>-<role>). */
const POLICY = {
  enforce: agentPolicy('team-a', INSTANCE, 'enforce'),
  advisory: agentPolicy('team-a', INSTANCE, 'advisory'),
  default: agentPolicy('team-a', INSTANCE, 'default'),
} as const;

let cluster: FakeCluster;
let invalid: [AnnotationName, InstanceKey][];
let unavailable: InstanceKey[];
let conflicts: [ConflictKind, InstanceKey][];

function reconciler(over: Partial<InstanceReconcilerOptions> = {}): InstanceReconciler {
  return new InstanceReconciler({
    port: cluster,
    hooks: {
      invalidAnnotation: (a, k) => invalid.push([a, k]),
      mutatingPolicyUnavailable: (k) => unavailable.push(k),
      conflict: (c, k) => conflicts.push([c, k]),
    },
    ...over,
  });
}

function teamA(annotations: Record<string, string>): InstanceKey {
  return cluster.putInstance({ name: INSTANCE, namespace: 'team-a', annotations });
}

function kindsInCluster(): string[] {
  return [...cluster.objects.values()].map((o) => `${o.kind}/${o.metadata.name}`).sort();
}

function spec(kind: string, name: string): Record<string, unknown> {
  return (cluster.stored(kind, name)?.spec ?? {}) as Record<string, unknown>;
}

function reasons(): string[] {
  return cluster.events.map((e) => e.reason);
}

beforeEach(() => {
  cluster = new FakeCluster();
  cluster.putNamespace('team-a', { 'kubernetes.io/metadata.name': 'team-a' });
  cluster.putNamespace('kubeplus');
  invalid = [];
  unavailable = [];
  conflicts = [];
});

describe('acceptance: an instance without the annotations', () => {
  it('behaves exactly as without the operator: no finalizer, no object, no write, no event', async () => {
    const key = teamA({ unrelated: 'x' });
    expect(await reconciler().reconcile(key)).toEqual({});
    expect(cluster.writeCount()).toBe(0);
    expect(cluster.objects.size).toBe(0);
    expect(cluster.events).toEqual([]);
    expect(cluster.finalizersOf(key)).toEqual([]);
  });

  it('ignores an instance that no longer exists', async () => {
    const key = teamA({});
    cluster.instances.clear();
    expect(await reconciler().reconcile(key)).toEqual({});
    expect(cluster.writeCount()).toBe(0);
  });
});

describe('acceptance: minRuntimeClass kata, enforce true', () => {
  it('adds the finalizer first, then creates one RuntimeClass (handler kata) and the enforce pair', async () => {
    const key = teamA({ [SANDBOX]: KATA_ENFORCE });
    expect(await reconciler().reconcile(key)).toEqual({});
    expect(cluster.writes[0]).toEqual({ op: 'setFinalizers', target: `cloudark.io/Agent/team-a/${INSTANCE}` });
    expect(cluster.finalizersOf(key)).toEqual([FINALIZER]);
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

describe('acceptance: both annotations', () => {
  it('produce exactly one RuntimeClass overall, and an isolated namespace', async () => {
    const key = teamA({ [NODE]: NODE_SPEC, [SANDBOX]: KATA_ENFORCE });
    await reconciler().reconcile(key);
    expect(cluster.storedOfKind('RuntimeClass').map((o) => o.metadata.name)).toEqual([RC]);
    const ns = cluster.namespaces.get('team-a');
    expect(ns?.labels['kubeplus.io/node-isolation-enabled']).toBe('true');
    expect(ns?.annotations['kubeplus.io/node-isolation-resolved']).toBe(RESOLVED);
    expect(reasons().sort()).toEqual(['NodeIsolationApplied', 'SandboxIsolationApplied']);
  });

  it('node isolation alone creates no RuntimeClass and no policy', async () => {
    await reconciler().reconcile(teamA({ [NODE]: NODE_SPEC }));
    expect(cluster.objects.size).toBe(0);
    expect(cluster.namespaces.get('team-a')?.labels['kubeplus.io/node-isolation-enabled']).toBe('true');
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
    // The binding did not change, so it is not written.
    expect(cluster.writes.slice(before)).toEqual([
      { op: 'deleteObject', target: `RuntimeClass/${RC}` },
      { op: 'createObject', target: `RuntimeClass/${RC}` },
      { op: 'replaceObject', target: `ValidatingAdmissionPolicy/${POLICY.enforce}` },
    ]);
  });

  it('a changed node isolation rewrites only the resolved annotation', async () => {
    const r = reconciler();
    const key = teamA({ [NODE]: NODE_SPEC });
    await r.reconcile(key);
    const before = cluster.writeCount();
    teamA({ [NODE]: '{"nodeSelector":{"pool":"b"}}' });
    await r.reconcile(key);
    expect(cluster.writes.slice(before)).toEqual([{ op: 'patchNamespace', target: 'team-a' }]);
    expect(cluster.namespaces.get('team-a')?.annotations['kubeplus.io/node-isolation-resolved']).toBe(
      '{"nodeSelector":{"pool":"b"},"tolerations":[]}',
    );
  });
});

describe('acceptance: removing an annotation', () => {
  it('removing sandbox isolation deletes every sandbox object and, with nothing left, the finalizer', async () => {
    const r = reconciler();
    const key = teamA({ [SANDBOX]: KATA_ADVISORY });
    await r.reconcile(key);
    teamA({});
    await r.reconcile(key);
    expect(cluster.objects.size).toBe(0);
    expect(cluster.finalizersOf(key)).toEqual([]);
    expect(reasons()).toContain('SandboxIsolationRemoved');
  });

  it('removing node isolation removes the label and annotation but keeps the sandbox policy', async () => {
    const r = reconciler();
    const key = teamA({ [NODE]: NODE_SPEC, [SANDBOX]: KATA_ENFORCE });
    await r.reconcile(key);
    teamA({ [SANDBOX]: KATA_ENFORCE });
    await r.reconcile(key);
    const ns = cluster.namespaces.get('team-a');
    expect(ns?.labels).toEqual({ 'kubernetes.io/metadata.name': 'team-a' });
    expect(ns?.annotations).toEqual({});
    expect(cluster.objects.size).toBe(3);
    expect(cluster.finalizersOf(key)).toEqual([FINALIZER]);
  });
});

describe('acceptance: deleting the instance', () => {
  it('removes policies, bindings and the RuntimeClass, strips the namespace it did not create, then lets go', async () => {
    const r = reconciler();
    const key = teamA({ [NODE]: NODE_SPEC, [SANDBOX]: KATA_ADVISORY });
    cluster.putRuntimeClass('kata', 'kata');
    await r.reconcile(key);
    cluster.deleteInstance(key);
    await r.reconcile(key);
    expect(kindsInCluster()).toEqual(['RuntimeClass/kata']);
    expect(cluster.namespaces.get('team-a')?.labels).toEqual({ 'kubernetes.io/metadata.name': 'team-a' });
    expect(cluster.instance(key)).toBeUndefined();
    // Only objects the operator owns (and never a Sandbox or the tenant namespace) were deleted.
    const deleted = cluster.writes.filter((w) => w.op.startsWith('delete')).map((w) => w.target);
    expect(deleted.every((t) => t.includes(INSTANCE))).toBe(true);
  });

  it('deletes bindings before policies before the RuntimeClass', async () => {
    const r = reconciler();
    const key = teamA({ [SANDBOX]: KATA_ADVISORY });
    await r.reconcile(key);
    cluster.deleteInstance(key);
    await r.reconcile(key);
    const order = cluster.writes.filter((w) => w.op === 'deleteObject').map((w) => w.target.split('/')[0]);
    expect(order.slice(0, 2).every((k) => k?.endsWith('Binding'))).toBe(true);
    expect(order.at(-1)).toBe('RuntimeClass');
  });

  it('deletes a namespace it created for an instance in the platform namespace', async () => {
    const r = reconciler();
    const key = cluster.putInstance({ name: 'team-b', namespace: 'kubeplus', annotations: { [NODE]: NODE_SPEC } });
    await r.reconcile(key);
    const ns = cluster.namespaces.get('team-b');
    expect(ns?.labels['kubeplus.io/node-isolation-enabled']).toBe('true');
    expect(ns?.annotations['kubeplus.io/created-for']).toBe('cloudark.io/Agent/kubeplus/team-b');
    cluster.deleteInstance(key);
    await r.reconcile(key);
    expect(cluster.namespaces.has('team-b')).toBe(false);
    expect(cluster.instance(key)).toBeUndefined();
    expect(reasons()).toContain('NamespaceDeleted');
  });

  it('only strips a platform-namespace instance’s namespace that already existed', async () => {
    cluster.putNamespace('team-c', { owner: 'platform' });
    const r = reconciler();
    const key = cluster.putInstance({ name: 'team-c', namespace: 'kubeplus', annotations: { [NODE]: NODE_SPEC } });
    await r.reconcile(key);
    expect(cluster.namespaces.get('team-c')?.labels['kubeplus.io/node-isolation-enabled']).toBe('true');
    cluster.deleteInstance(key);
    await r.reconcile(key);
    expect(cluster.namespaces.get('team-c')?.labels).toEqual({ owner: 'platform' });
    expect(cluster.namespaces.get('team-c')?.annotations).toEqual({});
  });

  it('cleans up after a restart: a fresh reconciler finds everything by its labels', async () => {
    const key = teamA({ [SANDBOX]: KATA_ENFORCE });
    await reconciler().reconcile(key);
    cluster.deleteInstance(key); // while no operator runs
    await reconciler().reconcile(key);
    expect(cluster.objects.size).toBe(0);
    expect(cluster.instance(key)).toBeUndefined();
  });

  it('keeps the finalizer of an instance whose namespace it created, even without annotations', async () => {
    const r = reconciler();
    const key = cluster.putInstance({ name: 'team-b', namespace: 'kubeplus', annotations: { [NODE]: NODE_SPEC } });
    await r.reconcile(key);
    cluster.putInstance({ name: 'team-b', namespace: 'kubeplus', annotations: {} });
    await r.reconcile(key);
    expect(cluster.namespaces.get('team-b')?.labels).not.toHaveProperty(['kubeplus.io/node-isolation-enabled']);
    expect(cluster.finalizersOf(key)).toEqual([FINALIZER]);
    cluster.deleteInstance(key);
    await r.reconcile(key);
    expect(cluster.namespaces.has('team-b')).toBe(false);
  });
});

describe('acceptance: an up-to-date instance issues zero writes', () => {
  it.each([
    ['node isolation', { [NODE]: NODE_SPEC }, 'team-a'],
    ['sandbox enforce', { [SANDBOX]: KATA_ENFORCE }, 'team-a'],
    ['sandbox advisory', { [SANDBOX]: KATA_ADVISORY }, 'team-a'],
    ['both', { [NODE]: NODE_SPEC, [SANDBOX]: '{"minRuntimeClass":"runc","enforce":false}' }, 'team-a'],
    ['both, in the platform namespace', { [NODE]: NODE_SPEC, [SANDBOX]: KATA_ENFORCE }, 'kubeplus'],
  ])('%s', async (_name, annotations, namespace) => {
    cluster.putRuntimeClass('kata-fc', 'kata-fc');
    const key = cluster.putInstance({ name: INSTANCE, namespace, annotations });
    const r = reconciler();
    await r.reconcile(key);
    const writes = cluster.writeCount();
    const events = cluster.events.length;
    expect(await r.reconcile(key)).toEqual({});
    expect(await reconciler().reconcile(key)).toEqual({});
    expect(cluster.writeCount()).toBe(writes);
    expect(cluster.events.length).toBe(events);
  });
});

describe('invalid annotations', () => {
  it('an invalid sandbox annotation: Warning Event listing the errors, metric hook, existing objects untouched', async () => {
    const r = reconciler();
    const key = teamA({ [SANDBOX]: KATA_ENFORCE });
    await r.reconcile(key);
    const before = JSON.stringify([...cluster.objects.values()]);
    const writes = cluster.writeCount();
    teamA({ [SANDBOX]: '{"minRuntimeClass":"firecracker","extra":1}' });
    expect(await r.reconcile(key)).toEqual({});
    expect(cluster.writeCount()).toBe(writes);
    expect(JSON.stringify([...cluster.objects.values()])).toBe(before);
    const event = cluster.events.at(-1);
    expect(event).toMatchObject({ type: 'Warning', reason: 'InvalidSandboxIsolation' });
    expect(event?.message).toContain('minRuntimeClass must be one of runc, runsc, kata');
    expect(event?.message).toContain('only minRuntimeClass and enforce are allowed');
    expect(invalid).toEqual([['sandbox-isolation', key]]);
  });

  it('an invalid node annotation: Warning Event, metric hook, the namespace keeps its last good isolation', async () => {
    const r = reconciler();
    const key = teamA({ [NODE]: NODE_SPEC });
    await r.reconcile(key);
    const writes = cluster.writeCount();
    teamA({ [NODE]: '{"tolerations":[{"key":"k","effect":"Sometimes"}]}' });
    await r.reconcile(key);
    expect(cluster.writeCount()).toBe(writes);
    expect(cluster.namespaces.get('team-a')?.annotations['kubeplus.io/node-isolation-resolved']).toBe(RESOLVED);
    expect(cluster.events.at(-1)).toMatchObject({ type: 'Warning', reason: 'InvalidNodeIsolation' });
    expect(cluster.events.at(-1)?.message).toContain('tolerations[0].effect');
    expect(invalid).toEqual([['node-isolation', key]]);
  });

  it('an invalid annotation still gets the finalizer, so the instance is cleaned up later', async () => {
    const key = teamA({ [SANDBOX]: 'not json' });
    await reconciler().reconcile(key);
    expect(cluster.finalizersOf(key)).toEqual([FINALIZER]);
    expect(cluster.objects.size).toBe(0);
  });

  it('an instance in the platform namespace whose name cannot be a namespace: Warning Event, nothing created', async () => {
    const key = cluster.putInstance({
      name: 'agent.v2',
      namespace: 'kubeplus',
      annotations: { [SANDBOX]: KATA_ENFORCE },
    });
    await reconciler().reconcile(key);
    expect(cluster.objects.size).toBe(0);
    expect(cluster.events.at(-1)).toMatchObject({ type: 'Warning', reason: 'InvalidTenantNamespace' });
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

  it('a namespace another instance isolates: Warning Event, no takeover', async () => {
    const r = reconciler();
    await r.reconcile(cluster.putInstance({ name: 'first', namespace: 'team-a', annotations: { [NODE]: NODE_SPEC } }));
    const second = cluster.putInstance({
      name: 'second',
      namespace: 'team-a',
      annotations: { [NODE]: '{"nodeSelector":{"x":"y"}}' },
    });
    const result = await r.reconcile(second);
    expect(result.requeueAfterMs).toBe(60_000);
    expect(cluster.namespaces.get('team-a')?.annotations['kubeplus.io/node-isolation-resolved']).toBe(RESOLVED);
    expect(cluster.events.at(-1)).toMatchObject({ type: 'Warning', reason: 'NodeIsolationConflict' });
  });
});

/** Every stored object without server-assigned identity, by kind/name. */
function snapshot(): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const o of cluster.objects.values()) {
    const copy = structuredClone(o);
    copy.metadata.uid = undefined;
    copy.metadata.resourceVersion = undefined;
    out[`${o.kind}/${o.metadata.name}`] = copy;
  }
  return out;
}

describe('drift', () => {
  it('restores a manually deleted policy, an edited binding and an edited RuntimeClass on the next reconcile', async () => {
    const r = reconciler();
    const key = teamA({ [SANDBOX]: KATA_ENFORCE });
    await r.reconcile(key);
    const pristine = snapshot();
    cluster.objects.delete(`ValidatingAdmissionPolicy/${POLICY.enforce}`);
    cluster.edit('ValidatingAdmissionPolicyBinding', POLICY.enforce, (o) => {
      (o.spec as { validationActions: string[] }).validationActions = ['Audit'];
    });
    cluster.edit('RuntimeClass', RC, (o) => {
      o.handler = 'runc';
      o.scheduling = { nodeSelector: { pool: 'elsewhere' } };
    });
    await r.reconcile(key);
    expect(snapshot()).toEqual(pristine);
  });

  it('restores removed node-isolation keys on the namespace', async () => {
    const r = reconciler();
    const key = teamA({ [NODE]: NODE_SPEC });
    await r.reconcile(key);
    await cluster.patchNamespace('team-a', { metadata: { labels: { 'kubeplus.io/node-isolation-enabled': null } } });
    await r.reconcile(key);
    expect(cluster.namespaces.get('team-a')?.labels['kubeplus.io/node-isolation-enabled']).toBe('true');
  });
});

describe('a re-created instance (same identity, new uid)', () => {
  it('adopts what its previous incarnation left, relabelling rather than re-creating', async () => {
    const r = reconciler();
    const key = teamA({ [SANDBOX]: KATA_ENFORCE });
    await r.reconcile(key);
    const uids = [...cluster.objects.values()].map((o) => o.metadata.uid);
    cluster.instances.clear(); // finalizer force-removed and deleted
    cluster.putInstance({
      name: INSTANCE,
      namespace: 'team-a',
      annotations: { [SANDBOX]: KATA_ENFORCE },
      uid: 'new-uid',
    });
    await r.reconcile(key);
    expect([...cluster.objects.values()].map((o) => o.metadata.uid)).toEqual(uids);
    for (const o of cluster.objects.values()) expect(o.metadata.labels?.['kubeplus.io/owner-uid']).toBe('new-uid');
  });
});

describe('errors', () => {
  it('a 409 propagates with statusCode 409 so the work queue retries', async () => {
    const r = reconciler();
    const key = teamA({ [SANDBOX]: KATA_ENFORCE });
    cluster.failNext('createObject', 409);
    const err = await r.reconcile(key).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(isConflict(err)).toBe(true);
    // The finalizer was set first; the retry converges.
    expect(cluster.finalizersOf(key)).toEqual([FINALIZER]);
    await r.reconcile(key);
    expect(cluster.objects.size).toBe(3);
  });

  it('a stale instance resourceVersion makes the finalizer write fail with 409, never overwrite', async () => {
    const key = teamA({ [SANDBOX]: KATA_ENFORCE });
    cluster.failNext('setFinalizers', 409);
    await expect(reconciler().reconcile(key)).rejects.toMatchObject({ statusCode: 409 });
    expect(cluster.objects.size).toBe(0);
  });

  it('an Event that cannot be recorded does not fail the reconcile', async () => {
    cluster.failNext('recordEvent', 500);
    const key = teamA({ [SANDBOX]: KATA_ENFORCE });
    await expect(reconciler().reconcile(key)).resolves.toEqual({});
    expect(cluster.objects.size).toBe(3);
  });

  it('a malformed instance is skipped, not thrown on', async () => {
    const key = teamA({ [SANDBOX]: KATA_ENFORCE });
    const stored = cluster.instance(key);
    if (stored === undefined) throw new Error('missing');
    (stored.metadata as Record<string, unknown>).uid = undefined;
    await expect(reconciler().reconcile(key)).resolves.toEqual({});
    expect(cluster.writeCount()).toBe(0);
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

describe('the admission-policy engine’s NodeIsolation parameter (nodeIsolationParams)', () => {
  const PARAMS = 'NodeIsolation';
  const withParams = (): InstanceReconciler => reconciler({ nodeIsolationParams: true });

  it('is written into the isolated namespace with the canonical mandate and the owner markers; an up-to-date instance costs no write', async () => {
    const key = teamA({ [NODE]: NODE_SPEC });
    await withParams().reconcile(key);
    const param = cluster.stored(PARAMS, 'node-isolation', 'team-a');
    expect(param).toMatchObject({
      apiVersion: 'isolation.kubeplus.io/v1alpha1',
      kind: 'NodeIsolation',
      metadata: {
        name: 'node-isolation',
        namespace: 'team-a',
        labels: { 'app.kubernetes.io/managed-by': 'kubeplus-isolation' },
        annotations: { 'kubeplus.io/owner': `cloudark.io/Agent/team-a/${INSTANCE}` },
      },
      spec: JSON.parse(RESOLVED),
    });
    const writes = cluster.writeCount();
    await withParams().reconcile(key);
    expect(cluster.writeCount()).toBe(writes);
  });

  it('is written before the label goes on an existing namespace (no window in which the policy selects it without its parameter)', async () => {
    const key = teamA({ [NODE]: NODE_SPEC });
    await withParams().reconcile(key);
    const order = cluster.writes.map((w) => `${w.op} ${w.target}`);
    const param = order.findIndex((w) => w.includes('NodeIsolation'));
    const label = order.findIndex((w) => w.startsWith('patchNamespace'));
    expect({ param: param >= 0, label: label >= 0 }).toEqual({ param: true, label: true });
    expect(param).toBeLessThan(label);
  });

  it('follows a changed mandate, stays while the annotation is invalid, and goes with the annotation', async () => {
    const key = teamA({ [NODE]: NODE_SPEC });
    await withParams().reconcile(key);
    teamA({ [NODE]: JSON.stringify({ nodeSelector: { pool: 'other' } }) });
    await withParams().reconcile(key);
    expect(cluster.stored(PARAMS, 'node-isolation', 'team-a')?.spec).toEqual({
      nodeSelector: { pool: 'other' },
      tolerations: [],
    });
    teamA({ [NODE]: '{"nodeSelector": 5}' });
    await withParams().reconcile(key);
    expect(cluster.stored(PARAMS, 'node-isolation', 'team-a')?.spec).toEqual({
      nodeSelector: { pool: 'other' },
      tolerations: [],
    });
    teamA({});
    await withParams().reconcile(key);
    expect(cluster.stored(PARAMS, 'node-isolation', 'team-a')).toBeUndefined();
  });

  it('is deleted with the instance, and never written without the engine', async () => {
    const key = teamA({ [NODE]: NODE_SPEC });
    await withParams().reconcile(key);
    cluster.deleteInstance(key);
    await withParams().reconcile(key);
    expect(cluster.storedOfKind(PARAMS)).toEqual([]);
    const other = teamA({ [NODE]: NODE_SPEC });
    await reconciler().reconcile(other);
    expect(cluster.storedOfKind(PARAMS)).toEqual([]);
  });

  it('is not written into a namespace another instance isolates', async () => {
    cluster.putInstance({ name: 'first', namespace: 'team-a', annotations: { [NODE]: NODE_SPEC } });
    await withParams().reconcile(
      cluster.putInstance({ name: 'first', namespace: 'team-a', annotations: { [NODE]: NODE_SPEC } }),
    );
    const second = teamA({ [NODE]: JSON.stringify({ nodeSelector: { pool: 'mine' } }) });
    await withParams().reconcile(second);
    expect(cluster.storedOfKind(PARAMS).map((p) => p.metadata.annotations?.['kubeplus.io/owner'])).toEqual([
      'cloudark.io/Agent/team-a/first',
    ]);
    expect(cluster.stored(PARAMS, 'node-isolation', 'team-a')?.spec).toEqual(JSON.parse(RESOLVED));
  });

  it('a parameter someone else wrote is not taken over: Warning Event, conflict metric, requeue', async () => {
    cluster.putNamespace('team-a');
    const theirs = {
      apiVersion: 'isolation.kubeplus.io/v1alpha1',
      kind: 'NodeIsolation' as const,
      metadata: { name: 'node-isolation', namespace: 'team-a' },
      spec: { nodeSelector: { pool: 'theirs' } },
    };
    await cluster.createObject(theirs);
    const result = await withParams().reconcile(teamA({ [NODE]: NODE_SPEC }));
    expect(result.requeueAfterMs).toBe(60_000);
    expect(cluster.stored(PARAMS, 'node-isolation', 'team-a')?.spec).toEqual(theirs.spec);
    const warning = cluster.events.find((e) => e.reason === 'NodeIsolationConflict');
    expect(warning?.type).toBe('Warning');
    expect(warning?.message).toContain('NodeIsolation/team-a/node-isolation belongs to');
    expect(conflicts.map(([c]) => c)).toContain('Namespace');
  });
});

/** A policy or binding as an earlier version left it: the ownership markers of `owner`, any name. */
function legacyObject(kind: ManagedKind, name: string, owner: string, uid = 'legacy-uid'): ManagedObject {
  const [, , namespace, instance] = owner.split('/');
  return {
    apiVersion: 'admissionregistration.k8s.io/v1',
    kind,
    metadata: {
      name,
      labels: {
        'app.kubernetes.io/managed-by': 'kubeplus-isolation',
        'kubeplus.io/owner-name': instance ?? '',
        'kubeplus.io/owner-namespace': namespace ?? '',
        'kubeplus.io/owner-uid': uid,
      },
      annotations: { 'kubeplus.io/owner': owner },
    },
    spec: kind === 'ValidatingAdmissionPolicyBinding' ? { policyName: name, validationActions: ['Deny'] } : {},
  };
}

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

  it('the uninstall and the finalizer find legacy-named objects too (by their markers, not their names)', async () => {
    const key = teamA({ [SANDBOX]: KATA_ENFORCE });
    await reconciler().reconcile(key);
    const me = `cloudark.io/Agent/team-a/${INSTANCE}`;
    await cluster.createObject(legacyObject('ValidatingAdmissionPolicyBinding', LEGACY, me));
    cluster.deleteInstance(key);
    await reconciler().reconcile(key);
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
    await r.reconcile(key);
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
    expect(await shared().cleanupOrphan(target)).toEqual({});
    expect((spec('ValidatingAdmissionPolicy', SHARED).validations as unknown[]).length).toBe(2);
    expect(cluster.stored('MutatingAdmissionPolicy', SHARED_DEFAULT)).toBeDefined();
    // With the per-instance layout the same event changes nothing.
    await cluster.deleteObject(
      { apiVersion: 'admissionregistration.k8s.io/v1', kind: 'MutatingAdmissionPolicy', name: SHARED_DEFAULT },
      {},
    );
    await reconciler().cleanupOrphan(target);
    expect(cluster.stored('MutatingAdmissionPolicy', SHARED_DEFAULT)).toBeUndefined();
  });
});
