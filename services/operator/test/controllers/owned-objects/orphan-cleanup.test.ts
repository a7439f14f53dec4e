import { beforeEach, describe, expect, it } from '@jest/globals';
import type { KubernetesObject } from '@kubernetes/client-node';
import { deletedOwnedObjectOwnerKey } from '../../../src/controllers/instances/keys.js';
import { InstanceReconciler } from '../../../src/controllers/instances/reconciler.js';
import { OrphanCleanup } from '../../../src/controllers/owned-objects/orphan-cleanup.js';
import { encodeInstanceKey, type InstanceKey } from '../../../src/desired/instance.js';
import { FakeCluster } from '../../cluster/fake-cluster.js';
import { agentPolicy } from '../../desired/helpers.js';

const NODE = 'kubeplus.io/node-isolation';
const SANDBOX = 'kubeplus.io/sandbox-isolation';
const NODE_SPEC = '{"nodeSelector":{"pool":"a"}}';
const ENFORCE = '{"minRuntimeClass":"kata"}';
const RC = 'kubeplus-sandbox-inst';
const rcRef = { apiVersion: 'node.k8s.io/v1', kind: 'RuntimeClass', name: RC } as const;
const vapRef = {
  apiVersion: 'admissionregistration.k8s.io/v1',
  kind: 'ValidatingAdmissionPolicy',
  name: agentPolicy('team-a', 'inst', 'enforce'),
} as const;

let cluster: FakeCluster;
let r: InstanceReconciler;
let orphans: OrphanCleanup;

/** An instance reconciled into the cluster, so it owns objects. */
async function owning(namespace: string, annotations: Record<string, string>): Promise<InstanceKey> {
  const key = cluster.putInstance({ name: 'inst', namespace, annotations });
  await r.reconcile(key);
  return key;
}

/** The instance is deleted: nothing holds it (the operator adds no finalizer). */
function vanish(key: InstanceKey): void {
  cluster.deleteInstance(key);
  expect(cluster.instance(key)).toBeUndefined();
}

beforeEach(() => {
  cluster = new FakeCluster();
  cluster.putNamespace('team-a');
  cluster.putNamespace('kubeplus');
  r = new InstanceReconciler({ port: cluster });
  orphans = new OrphanCleanup({ port: cluster, instances: r });
});

describe('cleanupOrphan', () => {
  it('hands an object whose owner still wants it back to the owner, writing nothing', async () => {
    const key = await owning('team-a', { [SANDBOX]: ENFORCE });
    const writes = cluster.writeCount();
    expect(await orphans.cleanupOrphan(rcRef)).toEqual({ enqueue: key });
    expect(await orphans.cleanupOrphan({ apiVersion: 'v1', kind: 'Namespace', name: 'team-a' })).toEqual({});
    expect(cluster.writeCount()).toBe(writes);
  });

  it('deletes the RuntimeClass and policies of an instance that is gone', async () => {
    const key = await owning('team-a', { [SANDBOX]: ENFORCE });
    vanish(key);
    expect(cluster.instance(key)).toBeUndefined();
    expect(await orphans.cleanupOrphan(rcRef)).toEqual({});
    expect(await orphans.cleanupOrphan(vapRef)).toEqual({});
    expect(cluster.stored('RuntimeClass', RC)).toBeUndefined();
    expect(cluster.stored('ValidatingAdmissionPolicy', vapRef.name)).toBeUndefined();
    expect(cluster.stored('ValidatingAdmissionPolicyBinding', vapRef.name)).toBeDefined();
  });

  it('deletes the namespace created for an instance that is gone', async () => {
    const key = await owning('kubeplus', { [NODE]: NODE_SPEC });
    expect(cluster.namespaces.has('inst')).toBe(true);
    vanish(key);
    await orphans.cleanupOrphan({ apiVersion: 'v1', kind: 'Namespace', name: 'inst' });
    expect(cluster.namespaces.has('inst')).toBe(false);
  });

  it('only strips node isolation from a namespace it did not create', async () => {
    const key = await owning('team-a', { [NODE]: NODE_SPEC });
    vanish(key);
    await orphans.cleanupOrphan({ apiVersion: 'v1', kind: 'Namespace', name: 'team-a' });
    expect(cluster.namespaces.get('team-a')).toMatchObject({ labels: {}, annotations: {} });
  });

  it('treats an instance whose Kind is no longer served as gone', async () => {
    await owning('team-a', { [SANDBOX]: ENFORCE });
    cluster.kinds.length = 0;
    await orphans.cleanupOrphan(rcRef);
    expect(cluster.stored('RuntimeClass', RC)).toBeUndefined();
  });

  it('treats an instance being deleted as gone, even while another finalizer holds it', async () => {
    const key = await owning('team-a', { [SANDBOX]: ENFORCE });
    const meta = cluster.instance(key)?.metadata as Record<string, unknown>;
    meta.finalizers = ['someone.else/finalizer'];
    cluster.deleteInstance(key);
    await orphans.cleanupOrphan(rcRef);
    expect(cluster.stored('RuntimeClass', RC)).toBeUndefined();
  });

  it('takes down what a live instance that no longer asks for isolation left behind', async () => {
    const key = await owning('kubeplus', { [NODE]: NODE_SPEC, [SANDBOX]: ENFORCE });
    // Annotations removed while the operator was down.
    cluster.putInstance({ name: 'inst', namespace: 'kubeplus', annotations: {} });
    expect(await orphans.cleanupOrphan(rcRef)).toEqual({});
    expect(cluster.objects.size).toBe(0);
    // Its namespace is still its own: kept, only the isolation goes.
    const ns = cluster.namespaces.get('inst');
    expect(ns?.annotations['kubeplus.io/created-for']).toBe('cloudark.io/Agent/kubeplus/inst');
    expect(ns?.labels).not.toHaveProperty(['kubeplus.io/node-isolation-enabled']);
    expect(cluster.finalizersOf(key)).toEqual([]);
  });

  it('treats an instance being deleted that still carries the legacy finalizer as gone (the reconcile removes it)', async () => {
    const key = await owning('team-a', { [SANDBOX]: ENFORCE });
    (cluster.instance(key)?.metadata as Record<string, unknown>).finalizers = ['isolation.kubeplus.io/cleanup'];
    cluster.deleteInstance(key);
    await orphans.cleanupOrphan(rcRef);
    expect(cluster.stored('RuntimeClass', RC)).toBeUndefined();
  });

  it('deletes a gone owner’s NodeIsolation parameter only after its namespace lost the isolation label', async () => {
    const withParams = new InstanceReconciler({ port: cluster, nodeIsolationParams: true });
    const key = cluster.putInstance({ name: 'inst', namespace: 'team-a', annotations: { [NODE]: NODE_SPEC } });
    await withParams.reconcile(key);
    expect(cluster.stored('NodeIsolation', 'node-isolation', 'team-a')).toBeDefined();
    vanish(key);
    const since = cluster.writeCount();
    const param = {
      apiVersion: 'isolation.kubeplus.io/v1alpha1',
      kind: 'NodeIsolation',
      namespace: 'team-a',
      name: 'node-isolation',
    } as const;
    await new OrphanCleanup({ port: cluster, instances: withParams }).cleanupOrphan(param);
    expect(cluster.writes.slice(since).map((w) => w.op)).toEqual(['patchNamespace', 'deleteObject']);
    expect(cluster.namespaces.get('team-a')?.labels).toEqual({});
    expect(cluster.stored('NodeIsolation', 'node-isolation', 'team-a')).toBeUndefined();
  });

  it('leaves alone what it does not manage or cannot attribute', async () => {
    cluster.putRuntimeClass('platform-kata', 'kata');
    cluster.putRuntimeClass('stray', 'kata', { 'app.kubernetes.io/managed-by': 'kubeplus-isolation' });
    cluster.putRuntimeClass('foreign', 'kata', {}, { 'kubeplus.io/owner': 'cloudark.io/Agent/x/y' });
    for (const name of ['platform-kata', 'stray', 'foreign', 'missing']) {
      expect(await orphans.cleanupOrphan({ ...rcRef, name })).toEqual({});
    }
    expect(await orphans.cleanupOrphan({ apiVersion: 'v1', kind: 'Namespace', name: 'nowhere' })).toEqual({});
    expect(cluster.writeCount()).toBe(0);
    expect(cluster.storedOfKind('RuntimeClass')).toHaveLength(3);
  });

  it('propagates a failed precondition as 409 (the object changed since it was read)', async () => {
    const key = await owning('team-a', { [SANDBOX]: ENFORCE });
    vanish(key);
    cluster.failNext('deleteObject', 409);
    await expect(orphans.cleanupOrphan(rcRef)).rejects.toMatchObject({ statusCode: 409 });
  });
});

/**
 * An instance deleted and re-created under the same identity (group/Kind/namespace/name) while no
 * operator ran: ownership is the identity, so the new instance adopts what the old one left, and
 * its own reconcile decides what stays. Deleting instead would take the namespace the new
 * instance's release runs in (KubePlus upgrades into an existing namespace of that name).
 */
describe('an owner re-created under the same identity while the operator was down', () => {
  function recreate(namespace: string, annotations: Record<string, string>): InstanceKey {
    cluster.instances.clear();
    return cluster.putInstance({ name: 'inst', namespace, annotations, uid: 'new-uid' });
  }

  it('asking for isolation: its objects are handed to it, and its reconcile relabels them with the new uid', async () => {
    await owning('kubeplus', { [NODE]: NODE_SPEC, [SANDBOX]: ENFORCE });
    const key = recreate('kubeplus', { [SANDBOX]: ENFORCE });
    expect(await orphans.cleanupOrphan(rcRef)).toEqual({ enqueue: key });
    expect(await orphans.cleanupOrphan({ apiVersion: 'v1', kind: 'Namespace', name: 'inst' })).toEqual({
      enqueue: key,
    });
    await r.reconcile(key);
    for (const o of cluster.objects.values()) expect(o.metadata.labels?.['kubeplus.io/owner-uid']).toBe('new-uid');
    // Node isolation is no longer asked for: the namespace (created for this identity) stays, unlabelled.
    const ns = cluster.namespaces.get('inst');
    expect(ns?.labels).not.toHaveProperty(['kubeplus.io/node-isolation-enabled']);
    expect(ns?.annotations['kubeplus.io/created-for']).toBe('cloudark.io/Agent/kubeplus/inst');
  });

  it('asking for nothing: what the old one left is taken down, the namespace created for the identity stays', async () => {
    await owning('kubeplus', { [NODE]: NODE_SPEC, [SANDBOX]: ENFORCE });
    const key = recreate('kubeplus', {});
    expect(await orphans.cleanupOrphan(rcRef)).toEqual({});
    expect(cluster.objects.size).toBe(0);
    expect(cluster.namespaces.get('inst')?.labels).not.toHaveProperty(['kubeplus.io/node-isolation-enabled']);
    // Deleted for good later: the namespace goes with it.
    cluster.deleteInstance(key);
    await orphans.cleanupOrphan({ apiVersion: 'v1', kind: 'Namespace', name: 'inst' });
    expect(cluster.namespaces.has('inst')).toBe(false);
  });
});

/**
 * The owner annotation the reconciler writes resolves back to its instance's work-queue key on the
 * path that does it: a deleted owned object's owner (instances/keys.ts, fed by the owned-object
 * informers' deletes) — and, above, `cleanupOrphan`'s `enqueue`.
 */
describe('the owner an owned object names', () => {
  const lookup = (group: string, kind: string) => cluster.kinds.find((k) => k.group === group && k.kind === kind);
  const RUNTIME_CLASS = { apiVersion: 'node.k8s.io/v1', kind: 'RuntimeClass' } as const;
  /** The RuntimeClass the reconciler wrote, as its informer's delete event carries it. */
  const deleted = (annotations?: Record<string, string>): KubernetesObject => {
    const rc = cluster.stored('RuntimeClass', RC);
    const { name, labels } = rc?.metadata ?? {};
    return { ...RUNTIME_CLASS, metadata: { name, labels, annotations: annotations ?? rc?.metadata.annotations } };
  };

  it('resolves the owner annotation to a work-queue key', async () => {
    const key = await owning('team-a', { [SANDBOX]: ENFORCE });
    expect(deletedOwnedObjectOwnerKey(RUNTIME_CLASS, deleted(), lookup)).toEqual(encodeInstanceKey(key));
  });

  it('is undefined without an owner annotation or for a Kind not served', async () => {
    await owning('team-a', { [SANDBOX]: ENFORCE });
    expect(deletedOwnedObjectOwnerKey(RUNTIME_CLASS, deleted({}), lookup)).toBeUndefined();
    expect(
      deletedOwnedObjectOwnerKey(RUNTIME_CLASS, deleted({ 'kubeplus.io/owner': 'cloudark.io/Gone/ns/n' }), lookup),
    ).toBeUndefined();
  });
});
