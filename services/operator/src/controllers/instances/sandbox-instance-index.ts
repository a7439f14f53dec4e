/**
 * The sandbox-annotated instances of every watched Kind, indexed by the tenant namespace their
 * policies bind and by the name of their own generated RuntimeClass, kept up to date from the
 * instance informers' add/update/delete events (and a Kind no longer watched).
 *
 * Every question the operator asks about other sandbox instances is "which ones bind tenant
 * namespace T" (an instance's peers, a namespace's compliance policy, a generated class's
 * tenant) or "whose own class is named N" (a deleted class frees its name). Answered by walking
 * the instance caches, each reconcile of a sandbox instance cost O(instances), and creating N
 * instances O(N²): at 10,000 tenants that walk, not the API server, bounded the operator. Here
 * each answer costs O(answer).
 *
 * The tenant of an instance is derived from its namespace and name (`tenantOf`: the
 * platform-namespace rule), so it cannot change while its key stays the same; the index still
 * re-files an entry whose tenant differs from the one it was filed under, so it never holds an
 * entry under two tenants.
 */
import { runtimeClassName } from '@kubeplus-isolation/spec';
import type { KubernetesObject } from '@kubernetes/client-node';
import { DEFAULT_PLATFORM_NAMESPACE } from '../../desired/instance.js';
import { type SandboxInstanceMeta, sandboxInstanceMeta, tenantOf } from '../../desired/sandbox-peers.js';
import type { DynamicEventHandlers } from '../../runtime/dynamic-informers.js';
import { type GroupVersionResource, gvrString } from '../../runtime/gvr.js';
import { instanceEventKey } from './keys.js';

/** One sandbox-annotated instance (valid annotation or not). */
export interface IndexedSandboxInstance {
  /** Its instances-controller key (`encodeInstanceKey`). */
  key: string;
  meta: SandboxInstanceMeta;
  /** The tenant namespace its policies bind; undefined when its name is no valid namespace name. */
  tenant: string | undefined;
}

/** What readers of the index need (the index itself, or a fake in tests). */
export interface SandboxInstanceLookup {
  /** Every sandbox-annotated instance. */
  all(): Iterable<IndexedSandboxInstance>;
  /** Those whose policies bind `tenant`. */
  inTenant(tenant: string): readonly IndexedSandboxInstance[];
  /** Those whose own generated RuntimeClass is named `className` (instances of that name in any namespace). */
  withOwnClass(className: string): readonly IndexedSandboxInstance[];
}

/** A multimap bucket: add, remove (dropping the bucket once empty), read. */
function addTo(map: Map<string, Map<string, IndexedSandboxInstance>>, at: string, entry: IndexedSandboxInstance): void {
  const bucket = map.get(at) ?? new Map<string, IndexedSandboxInstance>();
  bucket.set(entry.key, entry);
  map.set(at, bucket);
}

function removeFrom(map: Map<string, Map<string, IndexedSandboxInstance>>, at: string, key: string): void {
  const bucket = map.get(at);
  if (bucket === undefined) return;
  bucket.delete(key);
  if (bucket.size === 0) map.delete(at);
}

export class SandboxInstanceIndex implements SandboxInstanceLookup {
  private readonly byKey = new Map<string, { entry: IndexedSandboxInstance; source: string }>();
  private readonly byTenant = new Map<string, Map<string, IndexedSandboxInstance>>();
  private readonly byOwnClass = new Map<string, Map<string, IndexedSandboxInstance>>();
  private readonly bySource = new Map<string, Set<string>>();

  constructor(private readonly platformNamespace: string = DEFAULT_PLATFORM_NAMESPACE) {}

  /**
   * Records instance `key`, delivered by informer `source`, as an event left it: `meta` is its
   * SandboxInstanceMeta, undefined once it is deleted or no longer carries the annotation.
   */
  set(key: string, source: string, meta: SandboxInstanceMeta | undefined): void {
    this.remove(key);
    if (meta === undefined) return;
    const entry: IndexedSandboxInstance = { key, meta, tenant: tenantOf(meta, this.platformNamespace) };
    this.byKey.set(key, { entry, source });
    if (entry.tenant !== undefined) addTo(this.byTenant, entry.tenant, entry);
    addTo(this.byOwnClass, runtimeClassName(meta.name), entry);
    const keys = this.bySource.get(source) ?? new Set<string>();
    keys.add(key);
    this.bySource.set(source, keys);
  }

  /** Forgets every instance `source` delivered: its informer stopped (the Kind is no longer watched), with no delete events. */
  removeSource(source: string): void {
    for (const key of this.bySource.get(source) ?? []) this.remove(key);
  }

  all(): Iterable<IndexedSandboxInstance> {
    return [...this.byKey.values()].map(({ entry }) => entry);
  }

  inTenant(tenant: string): readonly IndexedSandboxInstance[] {
    return [...(this.byTenant.get(tenant)?.values() ?? [])];
  }

  withOwnClass(className: string): readonly IndexedSandboxInstance[] {
    return [...(this.byOwnClass.get(className)?.values() ?? [])];
  }

  get size(): number {
    return this.byKey.size;
  }

  private remove(key: string): void {
    const held = this.byKey.get(key);
    if (held === undefined) return;
    const { entry, source } = held;
    this.byKey.delete(key);
    if (entry.tenant !== undefined) removeFrom(this.byTenant, entry.tenant, key);
    removeFrom(this.byOwnClass, runtimeClassName(entry.meta.name), key);
    const keys = this.bySource.get(source);
    keys?.delete(key);
    if (keys?.size === 0) this.bySource.delete(source);
  }
}

/** The instance informers as the index reads them (DynamicInformers). */
export interface InstanceEventSource {
  addEventHandler(handlers: DynamicEventHandlers<KubernetesObject>): () => void;
}

/**
 * Keeps `index` in step with the instance informers: every add/update/delete (the cached
 * objects are replayed first) and every Kind removed. `kindOf` names the Kind an informer
 * watches. Returns a function that unbinds.
 */
export function bindSandboxInstanceIndex(
  index: SandboxInstanceIndex,
  instances: InstanceEventSource,
  kindOf: (gvr: GroupVersionResource) => string | undefined,
): () => void {
  const on = (gvr: GroupVersionResource, obj: KubernetesObject, deleted: boolean): void => {
    const key = instanceEventKey(gvr, obj, kindOf);
    const kind = kindOf(gvr) ?? obj.kind;
    if (key === undefined || kind === undefined) return;
    index.set(key, gvrString(gvr), deleted ? undefined : sandboxInstanceMeta({ group: gvr.group, kind }, obj.metadata));
  };
  return instances.addEventHandler({
    add: (gvr, obj) => on(gvr, obj, false),
    update: (gvr, obj) => on(gvr, obj, false),
    delete: (gvr, obj) => on(gvr, obj, true),
    removed: (gvr) => index.removeSource(gvrString(gvr)),
  });
}
