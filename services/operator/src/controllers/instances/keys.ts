/**
 * Informer events → work-queue keys, pure. Two controllers use them (each folder's setup.ts):
 *
 * - `instances`, keyed by `encodeInstanceKey` (`group/version/Kind/plural/namespace/name`):
 *   an instance's own events; the owner of a deleted owned object (so a manual deletion is
 *   reverted); on a RuntimeClass change, the instances whose sandbox policy depends on it
 *   (`runtimeClassChangeKeys`: every sandbox-annotated instance for a platform class, whose
 *   allowed-class lists are snapshots of the platform's classes; only its owner for a class
 *   generated for an instance);
 * - `owned-objects`, keyed by `encodeOwnedRef` (`apiVersion/Kind/name`): add/update of an object
 *   carrying the operator's ownership markers, checked by `OrphanCleanup.cleanupOrphan`
 *   (owned-objects/).
 */
import { SANDBOX_ISOLATION_ANNOTATION } from '@kubeplus-isolation/spec';
import type { KubernetesObject } from '@kubernetes/client-node';
import {
  DEFAULT_PLATFORM_NAMESPACE,
  encodeInstanceKey,
  type InstanceIdentity,
  type KindRef,
} from '../../desired/instance.js';
import { carriesOwnershipMarkers, ownerOf } from '../../desired/owner.js';
import { tenantOf } from '../../desired/sandbox-peers.js';
import type { GroupVersionResource } from '../../runtime/gvr.js';
import { isOwnedObject, type OwnedType } from '../owned-objects/keys.js';
import type { SandboxInstanceLookup } from './sandbox-instance-index.js';

/** The instances-controller key of an instance event, `undefined` for an object without name or namespace. */
export function instanceEventKey(
  gvr: GroupVersionResource,
  obj: KubernetesObject,
  kindOf: (gvr: GroupVersionResource) => string | undefined,
): string | undefined {
  const name = obj.metadata?.name;
  const namespace = obj.metadata?.namespace;
  const kind = kindOf(gvr) ?? obj.kind;
  if (!name || !namespace || !kind) return undefined;
  return encodeInstanceKey({ group: gvr.group, version: gvr.version, kind, plural: gvr.resource, namespace, name });
}

/**
 * The instances-controller key of the owner of a deleted owned object, from its owner
 * annotation and the watched instance Kinds (`lookup`), so its reconcile re-creates what was
 * deleted by hand (or finds it gone with its owner). `undefined` when the object is not ours or
 * its owner's Kind is not watched.
 */
export function deletedOwnedObjectOwnerKey(
  type: OwnedType,
  obj: KubernetesObject,
  lookup: (group: string, kind: string) => KindRef | undefined,
): string | undefined {
  if (!isOwnedObject(type, obj)) return undefined;
  const owner = ownerOf({ annotations: obj.metadata?.annotations });
  return owner === undefined ? undefined : ownerInstanceKey(owner, lookup);
}

/** The instances-controller key of the instance an owner annotation names; `undefined` if its Kind is not watched. */
function ownerInstanceKey(
  owner: InstanceIdentity,
  lookup: (group: string, kind: string) => KindRef | undefined,
): string | undefined {
  const kind = lookup(owner.group, owner.kind);
  return kind === undefined ? undefined : encodeInstanceKey({ ...kind, namespace: owner.namespace, name: owner.name });
}

/** The tenant namespace a cached instance binds its policies to, if it has a valid one. */
function instanceTenant(obj: KubernetesObject, platformNamespace: string): string | undefined {
  const name = obj.metadata?.name;
  const namespace = obj.metadata?.namespace;
  return name && namespace ? tenantOf({ namespace, name }, platformNamespace) : undefined;
}

/**
 * The sandbox-annotated instances of each tenant namespace, as the instance events have shown
 * them: one index per subscription of the instances source, so that an instance event also
 * reaches the other instances whose policies bind the same namespace (their allowed classes and
 * StricterSandboxPolicy Warnings depend on it). It remembers the namespace an instance bound
 * before the event, since an update or delete removing the annotation concerns that namespace.
 */
export class SandboxTenantIndex {
  private readonly tenantOfKey = new Map<string, string>();
  private readonly keysOfTenant = new Map<string, Set<string>>();

  constructor(private readonly platformNamespace: string = DEFAULT_PLATFORM_NAMESPACE) {}

  /**
   * Records the instance `key` as it is after an event (`obj` undefined once deleted) and returns
   * the keys of the other sandbox-annotated instances of the namespace it binds now or bound before.
   */
  update(key: string, obj: KubernetesObject | undefined): string[] {
    const before = this.tenantOfKey.get(key);
    const annotated = obj?.metadata?.annotations?.[SANDBOX_ISOLATION_ANNOTATION] !== undefined;
    const after = obj !== undefined && annotated ? instanceTenant(obj, this.platformNamespace) : undefined;
    if (before !== undefined && before !== after) {
      this.tenantOfKey.delete(key);
      this.keysOfTenant.get(before)?.delete(key);
      if (this.keysOfTenant.get(before)?.size === 0) this.keysOfTenant.delete(before);
    }
    if (after !== undefined) {
      this.tenantOfKey.set(key, after);
      const keys = this.keysOfTenant.get(after) ?? new Set<string>();
      keys.add(key);
      this.keysOfTenant.set(after, keys);
    }
    const peers = new Set<string>();
    for (const tenant of [before, after]) {
      if (tenant === undefined) continue;
      for (const other of this.keysOfTenant.get(tenant) ?? []) if (other !== key) peers.add(other);
    }
    return [...peers];
  }
}

/** What the RuntimeClass fan-out needs to know of a class: its name and ownership markers. */
export interface RuntimeClassSnapshot {
  name: string;
  /** It carries kubeplus-isolation's markers (`carriesOwnershipMarkers`): generated for an instance. */
  generated: boolean;
  /** The instance its `kubeplus.io/owner` annotation names, if it names one well-formed. */
  owner: InstanceIdentity | undefined;
}

export function runtimeClassSnapshot(obj: KubernetesObject): RuntimeClassSnapshot | undefined {
  const name = obj.metadata?.name;
  if (!name) return undefined;
  const meta = { labels: obj.metadata?.labels, annotations: obj.metadata?.annotations };
  return { name, generated: carriesOwnershipMarkers(meta), owner: ownerOf(meta) };
}

/** One RuntimeClass event, with the class as the previous event left it (updates carry only the new object). */
export interface RuntimeClassChange {
  /** As last seen; `undefined` for a class not seen before (an add). */
  before: RuntimeClassSnapshot | undefined;
  /** As it is now; `undefined` once deleted. */
  after: RuntimeClassSnapshot | undefined;
}

/**
 * The instances-controller keys a RuntimeClass change concerns:
 *
 * - a platform class (no kubeplus-isolation markers before or after the change, or gaining or
 *   losing them): every sandbox-annotated instance, whose allowed list may gain or lose it;
 * - a class generated for an instance, before and after: only the allowed lists of its owner's
 *   tenant namespace may hold it (desired/sandbox-policy.ts `allowedRuntimeClasses`), so its owner
 *   (both owners, if the owner annotation was changed) and the sandbox-annotated instances bound
 *   to that owner's tenant namespace (`platformNamespace` decides which that is) — and, when it is
 *   deleted, the sandbox-annotated instances whose own class has its name (they were held off it:
 *   RuntimeClassConflict), so one takes the name now rather than after the conflict requeue.
 *
 * So N instances in N namespaces creating N classes cost N keys, not N² (a platform class change
 * still costs one key per sandbox instance), and each change reads only the instances it concerns
 * from the index (`SandboxInstanceIndex`), never every cached instance. The owner's key is also reached through `owned-objects` (add/update
 * → `cleanupOrphan`) and `deletedOwnedObjectOwnerKey` for classes labelled managed-by; the work
 * queue merges the duplicates.
 */
export function runtimeClassChangeKeys(
  change: RuntimeClassChange,
  sandboxInstances: SandboxInstanceLookup,
  lookup: (group: string, kind: string) => KindRef | undefined,
  platformNamespace: string = DEFAULT_PLATFORM_NAMESPACE,
): string[] {
  const sides = [change.before, change.after].filter((s): s is RuntimeClassSnapshot => s !== undefined);
  if (sides.length === 0) return [];
  if (sides.some((s) => !s.generated)) return [...sandboxInstances.all()].map((i) => i.key);
  const keys = new Set<string>();
  for (const { owner } of sides) {
    if (owner === undefined) continue;
    const key = ownerInstanceKey(owner, lookup);
    if (key !== undefined) keys.add(key);
    const tenant = tenantOf(owner, platformNamespace);
    if (tenant !== undefined) for (const i of sandboxInstances.inTenant(tenant)) keys.add(i.key);
  }
  const deleted = change.after === undefined ? change.before : undefined;
  if (deleted !== undefined) for (const i of sandboxInstances.withOwnClass(deleted.name)) keys.add(i.key);
  return [...keys];
}
