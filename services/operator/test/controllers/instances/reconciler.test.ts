/**
 * InstanceReconciler: the lifecycle without any write to the instance (deletion is orphan
 * cleanup's, owned-objects/orphan-cleanup.ts; the legacy finalizer is only removed), both
 * isolations together, invalid input and errors. Node isolation alone: node-sync.test.ts; sandbox
 * isolation alone: sandbox-sync.test.ts.
 */
import { beforeEach, describe, expect, it } from '@jest/globals';
import { isConflict } from '../../../src/runtime/errors.js';
import {
  cleanUpOrphans,
  cluster,
  FINALIZER,
  freshCluster,
  INSTANCE,
  instanceWrites,
  invalid,
  KATA_ADVISORY,
  KATA_ENFORCE,
  kindsInCluster,
  NODE,
  NODE_SPEC,
  POLICY,
  RC,
  RESOLVED,
  reasons,
  reconciler,
  SANDBOX,
  teamA,
  withLegacyFinalizer,
} from './reconciler-harness.js';

beforeEach(freshCluster);

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

describe('acceptance: removing an annotation', () => {
  it('removing sandbox isolation deletes every sandbox object, never touching the instance', async () => {
    const r = reconciler();
    const key = teamA({ [SANDBOX]: KATA_ADVISORY });
    await r.reconcile(key);
    teamA({});
    await r.reconcile(key);
    expect(cluster.objects.size).toBe(0);
    expect(reasons()).toContain('SandboxIsolationRemoved');
    // Nothing left: the next reconcile is as for an instance that never asked.
    const writes = cluster.writeCount();
    await r.reconcile(key);
    expect(cluster.writeCount()).toBe(writes);
    expect(instanceWrites()).toEqual([]);
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
    expect(instanceWrites()).toEqual([]);
  });
});

describe('acceptance: deleting the instance (orphan cleanup, no finalizer)', () => {
  it('the reconciler leaves a deleted instance alone; orphan cleanup removes policies, bindings and the RuntimeClass and strips the namespace it did not create', async () => {
    const r = reconciler();
    const key = teamA({ [NODE]: NODE_SPEC, [SANDBOX]: KATA_ADVISORY });
    cluster.putRuntimeClass('kata', 'kata');
    await r.reconcile(key);
    expect(cluster.finalizersOf(key)).toEqual([]);
    cluster.deleteInstance(key);
    expect(cluster.instance(key)).toBeUndefined(); // no finalizer holds it
    const writes = cluster.writeCount();
    expect(await r.reconcile(key)).toEqual({});
    expect(cluster.writeCount()).toBe(writes);
    await cleanUpOrphans();
    expect(kindsInCluster()).toEqual(['RuntimeClass/kata']);
    expect(cluster.namespaces.get('team-a')?.labels).toEqual({ 'kubernetes.io/metadata.name': 'team-a' });
    expect(cluster.namespaces.get('team-a')?.annotations).toEqual({});
    // Only objects the operator owns (and never a Sandbox or the tenant namespace) were deleted.
    const deleted = cluster.writes.filter((w) => w.op.startsWith('delete')).map((w) => w.target);
    expect(deleted.every((t) => t.includes(INSTANCE))).toBe(true);
    expect(instanceWrites()).toEqual([]);
  });

  it('an instance marked for deletion (another controller’s finalizer) counts as gone', async () => {
    const r = reconciler();
    const key = teamA({ [SANDBOX]: KATA_ENFORCE });
    await r.reconcile(key);
    (cluster.instance(key)?.metadata as Record<string, unknown>).finalizers = ['someone.else/finalizer'];
    cluster.deleteInstance(key);
    const writes = cluster.writeCount();
    await r.reconcile(key);
    expect(cluster.writeCount()).toBe(writes);
    await cleanUpOrphans();
    expect(cluster.objects.size).toBe(0);
    expect(cluster.finalizersOf(key)).toEqual(['someone.else/finalizer']);
  });

  it('deletes a namespace it created for an instance in the platform namespace', async () => {
    const r = reconciler();
    const key = cluster.putInstance({ name: 'team-b', namespace: 'kubeplus', annotations: { [NODE]: NODE_SPEC } });
    await r.reconcile(key);
    const ns = cluster.namespaces.get('team-b');
    expect(ns?.labels['kubeplus.io/node-isolation-enabled']).toBe('true');
    expect(ns?.annotations['kubeplus.io/created-for']).toBe('cloudark.io/Agent/kubeplus/team-b');
    cluster.deleteInstance(key);
    await cleanUpOrphans();
    expect(cluster.namespaces.has('team-b')).toBe(false);
  });

  it('only strips a platform-namespace instance’s namespace that KubePlus created for it', async () => {
    cluster.putNamespace('team-c', { owner: 'platform' }, { 'meta.helm.sh/release-name': '"agent-team-c"' });
    const r = reconciler();
    const key = cluster.putInstance({ name: 'team-c', namespace: 'kubeplus', annotations: { [NODE]: NODE_SPEC } });
    await r.reconcile(key);
    expect(cluster.namespaces.get('team-c')?.labels['kubeplus.io/node-isolation-enabled']).toBe('true');
    cluster.deleteInstance(key);
    await cleanUpOrphans();
    expect(cluster.namespaces.get('team-c')?.labels).toEqual({ owner: 'platform' });
    expect(cluster.namespaces.get('team-c')?.annotations).toEqual({ 'meta.helm.sh/release-name': '"agent-team-c"' });
  });

  it('keeps a namespace it created while the instance lives without annotations, and deletes it with the instance', async () => {
    const r = reconciler();
    const key = cluster.putInstance({ name: 'team-b', namespace: 'kubeplus', annotations: { [NODE]: NODE_SPEC } });
    await r.reconcile(key);
    cluster.putInstance({ name: 'team-b', namespace: 'kubeplus', annotations: {} });
    await r.reconcile(key);
    await cleanUpOrphans();
    expect(cluster.namespaces.get('team-b')?.labels).not.toHaveProperty(['kubeplus.io/node-isolation-enabled']);
    expect(cluster.namespaces.get('team-b')?.annotations['kubeplus.io/created-for']).toBe(
      'cloudark.io/Agent/kubeplus/team-b',
    );
    cluster.deleteInstance(key);
    await cleanUpOrphans();
    expect(cluster.namespaces.has('team-b')).toBe(false);
    expect(instanceWrites()).toEqual([]);
  });
});

describe('the legacy finalizer (releases before issue 35 added it)', () => {
  it('is removed from a live instance, once, with its other finalizers kept; isolation goes on', async () => {
    const r = reconciler();
    const key = teamA({ [SANDBOX]: KATA_ENFORCE });
    withLegacyFinalizer(key, ['someone.else/finalizer']);
    await r.reconcile(key);
    expect(cluster.finalizersOf(key)).toEqual(['someone.else/finalizer']);
    expect(cluster.objects.size).toBe(3);
    await r.reconcile(key);
    expect(instanceWrites()).toHaveLength(1);
  });

  it('is removed from an instance being deleted, which then goes; orphan cleanup takes what it owned', async () => {
    const r = reconciler();
    const key = cluster.putInstance({ name: 'team-b', namespace: 'kubeplus', annotations: { [NODE]: NODE_SPEC } });
    await r.reconcile(key);
    withLegacyFinalizer(key);
    cluster.deleteInstance(key);
    expect(cluster.instance(key)?.metadata).toHaveProperty('deletionTimestamp');
    await r.reconcile(key);
    expect(cluster.instance(key)).toBeUndefined();
    await cleanUpOrphans();
    expect(cluster.namespaces.has('team-b')).toBe(false);
    expect(instanceWrites()).toHaveLength(1);
  });

  it('a refused removal (KubePlus’s webhook down: 500, or a conflict) propagates so the work queue retries', async () => {
    const key = teamA({ [SANDBOX]: KATA_ENFORCE });
    withLegacyFinalizer(key);
    cluster.failNext('setFinalizers', 500);
    await expect(reconciler().reconcile(key)).rejects.toMatchObject({ statusCode: 500 });
    await reconciler().reconcile(key);
    expect(cluster.finalizersOf(key)).toEqual([]);
  });
});

describe('the instance is never written', () => {
  it('through full isolation, annotation changes, removal and deletion: no finalizer, annotation or status write', async () => {
    const r = reconciler();
    const key = cluster.putInstance({
      name: 'team-b',
      namespace: 'kubeplus',
      annotations: { [NODE]: NODE_SPEC, [SANDBOX]: KATA_ENFORCE },
    });
    const before = JSON.stringify(cluster.instance(key));
    await r.reconcile(key);
    expect(JSON.stringify(cluster.instance(key))).toBe(before);
    for (const annotations of <Record<string, string>[]>[
      { [SANDBOX]: KATA_ADVISORY },
      { [NODE]: NODE_SPEC },
      {},
      { [SANDBOX]: 'not json' },
    ]) {
      cluster.putInstance({ name: 'team-b', namespace: 'kubeplus', annotations });
      const stored = JSON.stringify(cluster.instance(key));
      await r.reconcile(key);
      await cleanUpOrphans();
      expect(JSON.stringify(cluster.instance(key))).toBe(stored);
    }
    cluster.deleteInstance(key);
    await r.reconcile(key);
    await cleanUpOrphans();
    expect(instanceWrites()).toEqual([]);
    expect(cluster.objects.size).toBe(0);
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
    expect(event?.message).toContain('only minRuntimeClass, enforce and runtimeClassName are allowed');
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

  it('an invalid annotation creates nothing and writes nothing to the instance', async () => {
    const key = teamA({ [SANDBOX]: 'not json' });
    await reconciler().reconcile(key);
    expect(instanceWrites()).toEqual([]);
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
    cluster.instances.clear(); // deleted while no operator ran
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
    // The retry converges.
    await r.reconcile(key);
    expect(cluster.objects.size).toBe(3);
  });

  it('a stale instance resourceVersion makes the legacy finalizer’s removal fail with 409, never overwrite', async () => {
    const key = teamA({ [SANDBOX]: KATA_ENFORCE });
    withLegacyFinalizer(key);
    cluster.failNext('setFinalizers', 409);
    await expect(reconciler().reconcile(key)).rejects.toMatchObject({ statusCode: 409 });
    expect(cluster.finalizersOf(key)).toEqual([FINALIZER]);
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
