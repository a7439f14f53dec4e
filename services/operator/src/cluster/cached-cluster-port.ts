/**
 * A ClusterPort whose reads are answered from the operator's informer caches, in the manner of
 * controller-runtime's cache-backed client: the caches already run on every replica (instances,
 * Namespaces labelled `kubeplus.io/owner-uid`, all RuntimeClasses, the admission-policy kinds
 * labelled managed-by), so reading an up-to-date instance's state costs no API request.
 *
 * Rules (see port.ts for the contract):
 * - a cache hit is returned as is: possibly stale. Every write planned from it carries the
 *   resourceVersion or uid it was read at, so staleness costs a 409 and a retry, and the watch
 *   event that updates the cache enqueues the instance again (level-triggered);
 * - a miss goes to the API server (a Namespace the operator has not labelled yet, an object
 *   outside a cache's label selector, one not yet seen by a watch), unless the caller says it
 *   creates what is absent and handles AlreadyExists (`missIsAbsent`, from a synced cache only);
 * - a list is served from a cache only once that cache has synced, through its label index when it
 *   has one that answers the selector (the owner-name/namespace labels every reconcile lists by),
 *   else by walking it;
 * - `{ fresh: true }` always goes to the API server;
 * - writes, discovery and Events go straight to the wrapped port.
 */
import { apiVersionOf, type InstanceKey, type KindRef } from '../desired/instance.js';
import { type NamespaceMeta, namespaceMetaOf } from '../desired/node-isolation.js';
import type { ManagedObject, ManagedType, ObjectRef } from '../desired/objects.js';
import type { ClusterPort, ReadOptions } from './port.js';

/** An object as an informer caches it (list items may lack apiVersion and kind). */
export interface CachedObject {
  apiVersion?: string;
  kind?: string;
  metadata?: {
    name?: string;
    namespace?: string;
    labels?: Record<string, string>;
  };
}

/** Read access to one informer's cache. */
export interface ObjectCacheView {
  get(name: string, namespace?: string): CachedObject | undefined;
  list(): readonly CachedObject[];
  hasSynced(): boolean;
  /**
   * The objects an equality selector may match, from an index of the cache (runtime/label-index.ts),
   * or undefined when no index answers it (then `list()` is walked). Optional.
   */
  candidates?(terms: ReadonlyArray<readonly [string, string]>): readonly CachedObject[] | undefined;
}

export interface ReadCaches {
  /** The cache of an instance Kind, when an informer watches it at exactly this version. */
  instances(kind: KindRef): ObjectCacheView | undefined;
  /** Namespaces (label-selected: a miss is not an answer). */
  namespaces(): ObjectCacheView | undefined;
  /** The cache of an owned cluster-scoped type, when an informer watches it at exactly this apiVersion. */
  objects(type: ManagedType): ObjectCacheView | undefined;
}

/** `k=v,k2=v2` (the only form the reconciler uses) → pairs; undefined for anything else. */
export function parseEqualitySelector(selector: string): Array<[string, string]> | undefined {
  const terms: Array<[string, string]> = [];
  for (const term of selector.split(',')) {
    if (term === '') continue;
    const eq = term.indexOf('=');
    if (eq <= 0 || term.includes('!') || term.indexOf('=', eq + 1) >= 0) return undefined;
    terms.push([term.slice(0, eq).trim(), term.slice(eq + 1).trim()]);
  }
  return terms;
}

export class CachedClusterPort implements ClusterPort {
  constructor(
    private readonly live: ClusterPort,
    private readonly caches: ReadCaches,
  ) {}

  resolveKind(group: string, kind: string): Promise<KindRef | undefined> {
    return this.live.resolveKind(group, kind);
  }

  async getInstance(key: InstanceKey, options?: ReadOptions): Promise<unknown> {
    if (options?.fresh !== true) {
      const cached = this.caches.instances(key)?.get(key.name, key.namespace);
      // Custom-resource list items carry apiVersion and kind; filled in should one not.
      if (cached !== undefined)
        return { ...cached, apiVersion: cached.apiVersion ?? apiVersionOf(key), kind: cached.kind ?? key.kind };
    }
    return this.live.getInstance(key, options);
  }

  setInstanceFinalizers(key: InstanceKey, finalizers: readonly string[], resourceVersion: string): Promise<void> {
    return this.live.setInstanceFinalizers(key, finalizers, resourceVersion);
  }

  recordEvent(...args: Parameters<ClusterPort['recordEvent']>): Promise<void> {
    return this.live.recordEvent(...args);
  }

  async getNamespace(name: string, options?: ReadOptions): Promise<NamespaceMeta | undefined> {
    const cache = options?.fresh === true ? undefined : this.caches.namespaces();
    const cached = cache?.get(name);
    if (cached !== undefined) return namespaceMetaOf(name, cached);
    if (cache !== undefined && options?.missIsAbsent === true && cache.hasSynced()) return undefined;
    return this.live.getNamespace(name, options);
  }

  createNamespace(...args: Parameters<ClusterPort['createNamespace']>): Promise<void> {
    return this.live.createNamespace(...args);
  }

  patchNamespace(...args: Parameters<ClusterPort['patchNamespace']>): Promise<void> {
    return this.live.patchNamespace(...args);
  }

  deleteNamespace(...args: Parameters<ClusterPort['deleteNamespace']>): Promise<void> {
    return this.live.deleteNamespace(...args);
  }

  async getObject(ref: ObjectRef, options?: ReadOptions): Promise<ManagedObject | undefined> {
    const cache = options?.fresh === true ? undefined : this.caches.objects(ref);
    const cached = cache?.get(ref.name, ref.namespace);
    if (cached !== undefined) return asManaged(cached, ref);
    if (cache !== undefined && options?.missIsAbsent === true && cache.hasSynced()) return undefined;
    return this.live.getObject(ref, options);
  }

  createObject(obj: ManagedObject): Promise<void> {
    return this.live.createObject(obj);
  }

  dryRunCreate(...args: Parameters<ClusterPort['dryRunCreate']>): ReturnType<ClusterPort['dryRunCreate']> {
    return this.live.dryRunCreate(...args);
  }

  listWarmPoolSandboxes(
    ...args: Parameters<ClusterPort['listWarmPoolSandboxes']>
  ): ReturnType<ClusterPort['listWarmPoolSandboxes']> {
    return this.live.listWarmPoolSandboxes(...args);
  }

  deleteSandbox(...args: Parameters<ClusterPort['deleteSandbox']>): Promise<void> {
    return this.live.deleteSandbox(...args);
  }

  replaceObject(obj: ManagedObject): Promise<void> {
    return this.live.replaceObject(obj);
  }

  deleteObject(...args: Parameters<ClusterPort['deleteObject']>): Promise<void> {
    return this.live.deleteObject(...args);
  }

  async listObjects(type: ManagedType, labelSelector: string, options?: ReadOptions): Promise<ManagedObject[]> {
    const cache = options?.fresh === true ? undefined : this.caches.objects(type);
    const terms = parseEqualitySelector(labelSelector);
    if (cache === undefined || !cache.hasSynced() || terms === undefined) {
      return this.live.listObjects(type, labelSelector, options);
    }
    const out: ManagedObject[] = [];
    for (const obj of cache.candidates?.(terms) ?? cache.list()) {
      const labels = obj.metadata?.labels;
      if (terms.every(([k, v]) => labels?.[k] === v)) out.push(asManaged(obj, type));
    }
    return out;
  }

  listRuntimeClasses(tenant: string): ReturnType<ClusterPort['listRuntimeClasses']> {
    return this.live.listRuntimeClasses(tenant);
  }

  listSandboxInstances(tenant: string): ReturnType<ClusterPort['listSandboxInstances']> {
    return this.live.listSandboxInstances(tenant);
  }

  servedMutatingPolicyVersion(): ReturnType<ClusterPort['servedMutatingPolicyVersion']> {
    return this.live.servedMutatingPolicyVersion();
  }
}

/** A cached object as a ManagedObject of `type` (a shallow copy: callers never see the cache's own object). */
function asManaged(obj: CachedObject, type: ManagedType): ManagedObject {
  return { ...(obj as unknown as ManagedObject), apiVersion: type.apiVersion, kind: type.kind };
}

/** Whether a cache at `apiVersion` serves `type` (API versions of one kind share storage, but the shapes may differ). */
export function sameType(a: ManagedType, b: { apiVersion: string; kind: string }): boolean {
  return a.kind === b.kind && a.apiVersion === b.apiVersion;
}
