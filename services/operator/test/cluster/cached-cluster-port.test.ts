/**
 * CachedClusterPort: reads from informer caches, misses and fresh reads from the API server
 * (here FakeCluster, counting every call), and the reconciler on top of it with caches that lag
 * behind the cluster — the situations a level-triggered controller must tolerate.
 */
import { beforeEach, describe, expect, it } from '@jest/globals';
import {
  CachedClusterPort,
  type CachedObject,
  type ObjectCacheView,
  parseEqualitySelector,
  type ReadCaches,
} from '../../src/cluster/cached-cluster-port.js';
import type { ClusterPort } from '../../src/cluster/port.js';
import { InstanceReconciler } from '../../src/controllers/instances/reconciler.js';
import { OrphanCleanup } from '../../src/controllers/owned-objects/orphan-cleanup.js';
import type { InstanceKey, KindRef } from '../../src/desired/instance.js';
import type { ManagedType } from '../../src/desired/objects.js';
import { agentPolicy } from '../desired/helpers.js';
import { FakeCluster } from './fake-cluster.js';

const NODE = 'kubeplus.io/node-isolation';
const SANDBOX = 'kubeplus.io/sandbox-isolation';
const FINALIZER = 'isolation.kubeplus.io/cleanup';
const NODE_SPEC = JSON.stringify({ nodeSelector: { pool: 'p' } });
const KATA_ENFORCE = '{"minRuntimeClass": "kata", "enforce": true}';
const NAME = 'agent-x';
const RC = `kubeplus-sandbox-${NAME}`;
/** The enforce policy of the instance `put` creates (in the platform namespace, it isolates namespace NAME). */
const VAP = agentPolicy('kubeplus', NAME, 'enforce');
const MANAGED = 'app.kubernetes.io/managed-by';

const CACHED_TYPES = [
  'RuntimeClass',
  'ValidatingAdmissionPolicy',
  'ValidatingAdmissionPolicyBinding',
  'MutatingAdmissionPolicy',
  'MutatingAdmissionPolicyBinding',
];

class View implements ObjectCacheView {
  synced = true;
  constructor(private readonly objects: Map<string, CachedObject> = new Map()) {}
  get(name: string, namespace?: string): CachedObject | undefined {
    return this.objects.get(`${namespace ?? ''}/${name}`);
  }
  list(): readonly CachedObject[] {
    return [...this.objects.values()];
  }
  hasSynced(): boolean {
    return this.synced;
  }
}

/**
 * Caches as the operator's informers hold them (owned namespaces, every RuntimeClass, managed
 * policies, instances without apiVersion/kind as list items carry none), filled from the
 * cluster only when `refresh()` runs: between refreshes they lag behind, as a watch can.
 */
class LaggingCaches implements ReadCaches {
  private readonly views = new Map<string, View>();
  constructor(private readonly cluster: FakeCluster) {
    this.refresh();
  }

  /** Brings the caches (or only the named ones) up to the cluster's state. */
  refresh(only?: readonly string[]): void {
    const views = new Map<string, View>();
    const put = (view: string, obj: CachedObject): void => {
      const v = views.get(view) ?? new View();
      (v as unknown as { objects: Map<string, CachedObject> }).objects.set(
        `${obj.metadata?.namespace ?? ''}/${obj.metadata?.name ?? ''}`,
        obj,
      );
      views.set(view, v);
    };
    views.set('namespaces', new View());
    for (const ns of this.cluster.namespaces.values()) {
      if (ns.labels['kubeplus.io/owner-uid'] === undefined) continue;
      put('namespaces', structuredClone({ metadata: { ...ns } }) as CachedObject);
    }
    for (const type of CACHED_TYPES) views.set(type, new View());
    for (const obj of this.cluster.objects.values()) {
      if (obj.kind !== 'RuntimeClass' && obj.metadata.labels?.[MANAGED] !== 'kubeplus-isolation') continue;
      const { apiVersion: _a, kind: _k, ...item } = structuredClone(obj);
      put(obj.kind, item as CachedObject);
    }
    views.set('instances', new View());
    for (const obj of this.cluster.instances.values()) {
      const { apiVersion: _a, kind: _k, ...item } = structuredClone(obj);
      put('instances', item as CachedObject);
    }
    for (const [name, view] of views) if (only === undefined || only.includes(name)) this.views.set(name, view);
  }

  /** Empties one cache, as if its informer had not listed yet. */
  clear(name: string): void {
    this.views.set(name, new View());
  }

  view(name: string): View {
    return this.views.get(name) as View;
  }

  instances(kind: KindRef): ObjectCacheView | undefined {
    return kind.version === 'v1' && kind.kind === 'Agent' ? this.views.get('instances') : undefined;
  }
  namespaces(): ObjectCacheView | undefined {
    return this.views.get('namespaces');
  }
  objects(type: ManagedType): ObjectCacheView | undefined {
    // The informers watch admissionregistration.k8s.io/v1 (FakeCluster serves MutatingAdmissionPolicy there).
    return type.apiVersion.endsWith('beta1') ? undefined : this.views.get(type.kind);
  }
}

/** The live port, recording the name of every call that reaches it. */
function counted(cluster: FakeCluster, calls: string[]): ClusterPort {
  return new Proxy(cluster, {
    get(target, property, receiver) {
      const value: unknown = Reflect.get(target, property, receiver);
      if (typeof value !== 'function') return value;
      return (...args: unknown[]): unknown => {
        calls.push(String(property));
        return Reflect.apply(value, target, args);
      };
    },
  });
}

let cluster: FakeCluster;
let caches: LaggingCaches;
let calls: string[];
let port: CachedClusterPort;

function reconciler(): InstanceReconciler {
  return new InstanceReconciler({ port });
}

function orphans(): OrphanCleanup {
  return new OrphanCleanup({ port, instances: reconciler() });
}

function put(annotations: Record<string, string>, namespace = 'kubeplus'): InstanceKey {
  return cluster.putInstance({ name: NAME, namespace, annotations });
}

/** Informer reads in production, not API requests: the RuntimeClass list and the sandbox-annotated instances. */
const INFORMER_LISTS = ['listRuntimeClasses', 'listSandboxInstances'];
/** API reads. */
const reads = (): string[] => calls.filter((c) => /^(get|list)/.test(c) && !INFORMER_LISTS.includes(c));

beforeEach(() => {
  cluster = new FakeCluster();
  cluster.putNamespace('kubeplus');
  cluster.putNamespace('team-a');
  caches = new LaggingCaches(cluster);
  calls = [];
  port = new CachedClusterPort(counted(cluster, calls), caches);
});

describe('CachedClusterPort', () => {
  it('answers a cached instance from the cache (stamping apiVersion and kind), a miss and a fresh read from the API server', async () => {
    const key = put({ a: 'b' });
    expect(await port.getInstance(key)).toBeDefined(); // not cached yet: asked
    expect(reads()).toEqual(['getInstance']);
    caches.refresh();
    calls.length = 0;
    const cached = (await port.getInstance(key)) as { apiVersion: string; kind: string; metadata: { name: string } };
    expect(cached).toMatchObject({ apiVersion: 'cloudark.io/v1', kind: 'Agent', metadata: { name: NAME } });
    expect(reads()).toEqual([]);
    await port.getInstance(key, { fresh: true });
    expect(reads()).toEqual(['getInstance']);
  });

  it('reads a namespace it has not cached (not labelled by the operator) from the API server, with its resourceVersion', async () => {
    const ns = await port.getNamespace('team-a');
    expect(ns?.resourceVersion).toBe(cluster.namespaces.get('team-a')?.resourceVersion);
    expect(reads()).toEqual(['getNamespace']);
  });

  it('returns a copy of a cached object typed as asked, never the cache’s own object', async () => {
    cluster.putRuntimeClass('kata', 'kata');
    caches.refresh();
    const rc = await port.getObject({ apiVersion: 'node.k8s.io/v1', kind: 'RuntimeClass', name: 'kata' });
    expect(rc).toMatchObject({ apiVersion: 'node.k8s.io/v1', kind: 'RuntimeClass', handler: 'kata' });
    expect(rc).not.toBe(caches.view('RuntimeClass').get('kata'));
    expect(reads()).toEqual([]);
    expect(await port.getObject({ apiVersion: 'node.k8s.io/v1', kind: 'RuntimeClass', name: 'gone' })).toBeUndefined();
    expect(reads()).toEqual(['getObject']); // a miss is asked, never assumed
  });

  it('lists from a synced cache by the label selector; before sync, with a fresh read or another selector, from the API server', async () => {
    cluster.putRuntimeClass('a', 'kata', { 'kubeplus.io/owner-name': 'x', 'kubeplus.io/owner-namespace': 'y' });
    cluster.putRuntimeClass('b', 'kata', { 'kubeplus.io/owner-name': 'x' });
    caches.refresh();
    const type = { apiVersion: 'node.k8s.io/v1', kind: 'RuntimeClass' } as const;
    const names = async (selector: string, fresh = false): Promise<string[]> =>
      (await port.listObjects(type, selector, { fresh })).map((o) => `${o.kind}/${o.metadata.name}`);
    expect(await names('kubeplus.io/owner-name=x,kubeplus.io/owner-namespace=y')).toEqual(['RuntimeClass/a']);
    expect(await names('kubeplus.io/owner-name=x')).toEqual(['RuntimeClass/a', 'RuntimeClass/b']);
    expect(reads()).toEqual([]);
    expect(await names('kubeplus.io/owner-name=x', true)).toEqual(['RuntimeClass/a', 'RuntimeClass/b']);
    caches.view('RuntimeClass').synced = false;
    await names('kubeplus.io/owner-name=x');
    caches.view('RuntimeClass').synced = true;
    await names('kubeplus.io/owner-name!=x');
    expect(reads()).toEqual(['listObjects', 'listObjects', 'listObjects']);
  });

  it('lists through a cache index when it answers the selector (never walking the cache), still checking every term', async () => {
    cluster.putRuntimeClass('a', 'kata', { 'kubeplus.io/owner-name': 'x', 'kubeplus.io/owner-namespace': 'y' });
    cluster.putRuntimeClass('b', 'kata', { 'kubeplus.io/owner-name': 'x', 'kubeplus.io/owner-namespace': 'y', t: '1' });
    caches.refresh();
    const view = caches.view('RuntimeClass');
    const asked: Array<ReadonlyArray<readonly [string, string]>> = [];
    let walks = 0;
    const list = view.list.bind(view);
    view.list = () => {
      walks++;
      return list();
    };
    // An index over owner-name/owner-namespace: it answers selectors naming both, not others.
    (view as ObjectCacheView).candidates = (terms) => {
      asked.push(terms);
      return terms.some(([k]) => k === 'kubeplus.io/owner-namespace') ? list() : undefined;
    };
    const type = { apiVersion: 'node.k8s.io/v1', kind: 'RuntimeClass' } as const;
    const names = async (selector: string): Promise<string[]> =>
      (await port.listObjects(type, selector)).map((o) => o.metadata.name).sort();
    expect(await names('kubeplus.io/owner-name=x,kubeplus.io/owner-namespace=y,t=1')).toEqual(['b']);
    expect(walks).toBe(0);
    expect(await names('kubeplus.io/owner-name=x')).toEqual(['a', 'b']); // not answered: walked
    expect(walks).toBe(1);
    expect(asked).toHaveLength(2);
    expect(reads()).toEqual([]);
  });

  it('parses only equality selectors', () => {
    expect(parseEqualitySelector('a=b,c=d')).toEqual([
      ['a', 'b'],
      ['c', 'd'],
    ]);
    expect(parseEqualitySelector('')).toEqual([]);
    expect(parseEqualitySelector('a!=b')).toBeUndefined();
    expect(parseEqualitySelector('a==b')).toBeUndefined();
    expect(parseEqualitySelector('a')).toBeUndefined();
  });
});

describe('the reconciler on cached reads', () => {
  it('an up-to-date instance costs no API request at all: no write and no read', async () => {
    const key = put({ [NODE]: NODE_SPEC, [SANDBOX]: KATA_ENFORCE });
    await reconciler().reconcile(key);
    await reconciler().reconcile(key); // a resync
    caches.refresh();
    calls.length = 0;
    expect(await reconciler().reconcile(key)).toEqual({});
    // Discovery answers are cached by KubeClusterPort for 60 s; the RuntimeClasses are an informer's.
    const discovery = ['resolveKind', 'servedMutatingPolicyVersion', ...INFORMER_LISTS];
    expect(calls.filter((c) => !discovery.includes(c))).toEqual([]);
    // Without caches the same reconcile reads eleven times (instance, its tenant namespace, its own
    // namespace for a claim an older release left, 3 objects, 5 lists).
    const uncached = new CachedClusterPort(counted(cluster, calls), {
      instances: () => undefined,
      namespaces: () => undefined,
      objects: () => undefined,
    });
    await new InstanceReconciler({ port: uncached }).reconcile(key);
    expect(reads()).toHaveLength(11);
  });

  it('a new instance costs one read beyond itself: a miss in a synced cache is taken as absent before a create, except its namespace', async () => {
    caches.refresh();
    const key = put({ [NODE]: NODE_SPEC, [SANDBOX]: KATA_ENFORCE });
    await reconciler().reconcile(key);
    // The instance (not cached yet) and its namespace: the guard must know whether it exists (the
    // cache holds only claimed namespaces; KubePlus creates an instance's before the instance).
    // Its RuntimeClass, policy and binding are created unread.
    expect(reads()).toEqual(['getInstance', 'getNamespace']);
    expect(cluster.namespaces.get(NAME)?.labels['kubeplus.io/node-isolation-enabled']).toBe('true');
    expect(cluster.storedOfKind('ValidatingAdmissionPolicyBinding')).toHaveLength(1);
  });

  it('objects the cache has not seen yet: their creates are refused (AlreadyExists), they are read fresh, nothing changes (the namespace is read first, for the guard)', async () => {
    const key = put({ [NODE]: NODE_SPEC, [SANDBOX]: KATA_ENFORCE });
    caches.refresh();
    await reconciler().reconcile(key);
    // The instance is cached; the adds of what it created have not arrived.
    caches.refresh(['instances']);
    const before = JSON.stringify([...cluster.objects.values(), ...cluster.namespaces.values()]);
    const writes = cluster.writeCount();
    calls.length = 0;
    expect(await reconciler().reconcile(key)).toEqual({});
    expect(cluster.writes.slice(writes).map((w) => w.op)).toEqual(['createObject', 'createObject', 'createObject']);
    expect(JSON.stringify([...cluster.objects.values(), ...cluster.namespaces.values()])).toBe(before);
    expect(reads().sort()).toEqual(['getNamespace', 'getObject', 'getObject', 'getObject']);
  });

  it('a name held by an object no cache holds (no managed-by label) is found through AlreadyExists and reported', async () => {
    caches.refresh();
    await cluster.createObject({
      apiVersion: 'admissionregistration.k8s.io/v1',
      kind: 'ValidatingAdmissionPolicy',
      metadata: { name: VAP },
      spec: {},
    });
    const key = put({ [SANDBOX]: KATA_ENFORCE });
    expect(await reconciler().reconcile(key)).toEqual({ requeueAfterMs: 60_000 });
    expect(cluster.events.map((e) => e.reason)).toContain('AdmissionPolicyConflict');
    expect(cluster.stored('ValidatingAdmissionPolicy', VAP)?.metadata.labels).toBeUndefined();
  });

  it('a RuntimeClass taken by another instance after the cached read: no policy is written, the reconcile retries', async () => {
    caches.refresh();
    cluster.putRuntimeClass(RC, 'runc', {}, { 'kubeplus.io/owner': 'cloudark.io/Agent/elsewhere/agent-x' });
    const key = put({ [SANDBOX]: KATA_ENFORCE });
    await expect(reconciler().reconcile(key)).rejects.toMatchObject({ statusCode: 409 });
    expect(cluster.storedOfKind('ValidatingAdmissionPolicy')).toEqual([]);
    caches.refresh();
    expect(await reconciler().reconcile(key)).toEqual({ requeueAfterMs: 60_000 });
    expect(cluster.events.map((e) => e.reason)).toContain('RuntimeClassConflict');
    const vap = JSON.stringify(cluster.stored('ValidatingAdmissionPolicy', VAP)?.spec);
    expect(vap).not.toContain(`"${RC}"`); // a runc class is not allowed for minimum kata
  });

  it('a namespace KubePlus created for the instance (no cache holds it) is read and isolated by a patch', async () => {
    cluster.putNamespace(NAME, { team: 'x' }, { 'meta.helm.sh/release-name': `"agent-${NAME}"` });
    caches.refresh();
    const key = put({ [NODE]: NODE_SPEC });
    await reconciler().reconcile(key);
    expect(cluster.namespaces.get(NAME)?.labels).toMatchObject({
      team: 'x',
      'kubeplus.io/node-isolation-enabled': 'true',
    });
    expect(cluster.writes.map((w) => w.op)).toEqual(['patchNamespace']);
  });

  it('a namespace that exists unlabelled and was not created for the instance is never written', async () => {
    cluster.putNamespace(NAME, { team: 'x' });
    caches.refresh();
    const key = put({ [NODE]: NODE_SPEC });
    await reconciler().reconcile(key);
    expect(cluster.namespaces.get(NAME)?.labels).toEqual({ team: 'x' });
    expect(cluster.writes.map((w) => w.op)).toEqual([]);
    expect(cluster.events.map((e) => e.reason)).toEqual(['TenantNamespaceRefused']);
  });

  it('a namespace patch planned from a stale cache fails with 409 instead of taking the namespace over', async () => {
    // Another instance isolated team-a a moment ago; the cache still shows it unowned but labelled.
    cluster.putNamespace('team-a', { 'kubeplus.io/owner-uid': 'old' }, {});
    caches.refresh();
    await cluster.patchNamespace('team-a', {
      metadata: { annotations: { 'kubeplus.io/owner': 'cloudark.io/Agent/team-a/other' } },
    });
    const key = put({ [NODE]: NODE_SPEC }, 'team-a');
    await expect(reconciler().reconcile(key)).rejects.toMatchObject({ statusCode: 409 });
    expect(cluster.namespaces.get('team-a')?.annotations['kubeplus.io/owner']).toBe('cloudark.io/Agent/team-a/other');
    // Once the cache has caught up: a conflict reported, still no takeover.
    caches.refresh();
    expect(await reconciler().reconcile(key)).toEqual({ requeueAfterMs: 60_000 });
    expect(cluster.events.map((e) => e.reason)).toContain('NodeIsolationConflict');
  });

  it('an owner the cache does not (yet) hold is asked for before its objects are deleted as orphans', async () => {
    const key = put({ [SANDBOX]: KATA_ENFORCE });
    await reconciler().reconcile(key);
    caches.refresh();
    caches.clear('instances'); // the instance Kind's informer has not listed yet
    calls.length = 0;
    const result = await orphans().cleanupOrphan({ apiVersion: 'node.k8s.io/v1', kind: 'RuntimeClass', name: RC });
    expect(result).toEqual({ enqueue: key });
    expect(reads()).toEqual(['getInstance']);
    expect(cluster.stored('RuntimeClass', RC)).toBeDefined();
  });

  it('an owner the cache shows going away is confirmed by the API server: a re-created owner keeps its objects', async () => {
    const key = put({ [SANDBOX]: KATA_ENFORCE });
    await reconciler().reconcile(key);
    await reconciler().reconcile(key);
    // Cached: the old incarnation, being deleted. Live: a new one, same name.
    caches.refresh();
    const cached = caches.view('instances').get(NAME, 'kubeplus') as { metadata: Record<string, unknown> };
    cached.metadata.deletionTimestamp = '2026-11-29T19:00:00Z';
    cached.metadata.finalizers = [];
    cluster.forceRemoveFinalizers(key);
    cluster.deleteInstance(key);
    put({ [SANDBOX]: KATA_ENFORCE });
    const result = await orphans().cleanupOrphan({ apiVersion: 'node.k8s.io/v1', kind: 'RuntimeClass', name: RC });
    expect(result).toEqual({ enqueue: key });
    expect(cluster.stored('RuntimeClass', RC)).toBeDefined();
  });

  it('deletion: what the caches had not seen when the owner went is deleted when its add arrives (the owner confirmed gone)', async () => {
    const key = put({ [SANDBOX]: KATA_ENFORCE });
    caches.refresh();
    await reconciler().reconcile(key); // created RC, VAP, VAPB; the caches saw none of them
    cluster.deleteInstance(key);
    expect(cluster.instance(key)).toBeUndefined(); // nothing holds it
    caches.refresh(); // the adds arrive, and the instance's delete
    for (const kind of ['ValidatingAdmissionPolicyBinding', 'ValidatingAdmissionPolicy'] as const) {
      await orphans().cleanupOrphan({ apiVersion: 'admissionregistration.k8s.io/v1', kind, name: VAP });
    }
    await orphans().cleanupOrphan({ apiVersion: 'node.k8s.io/v1', kind: 'RuntimeClass', name: RC });
    expect(cluster.objects.size).toBe(0);
    expect(cluster.finalizersOf(key)).not.toContain(FINALIZER);
  });

  it('removing both annotations: an object whose add had not arrived is pruned when it does', async () => {
    const key = put({ [SANDBOX]: KATA_ENFORCE }, 'team-a');
    await reconciler().reconcile(key);
    cluster.putInstance({ name: NAME, namespace: 'team-a', annotations: {} });
    caches.refresh();
    caches.clear('ValidatingAdmissionPolicyBinding'); // its add has not arrived
    await reconciler().reconcile(key);
    const binding = agentPolicy('team-a', NAME, 'enforce');
    expect(cluster.stored('ValidatingAdmissionPolicyBinding', binding)).toBeDefined();
    caches.refresh();
    await orphans().cleanupOrphan({
      apiVersion: 'admissionregistration.k8s.io/v1',
      kind: 'ValidatingAdmissionPolicyBinding',
      name: binding,
    });
    expect(cluster.objects.size).toBe(0);
    expect(cluster.finalizersOf(key)).toEqual([]);
  });
});
