/**
 * Create-or-update and prune of operator-owned cluster-scoped objects through the ClusterPort.
 * Writes only on a difference (see desired/diff.ts), never touches an object another instance
 * owns, and uses uid/resourceVersion preconditions so a concurrent change surfaces as a 409.
 */

import { updatedObject, updateKind } from '../desired/diff.js';
import { type InstanceIdentity, instanceIdentity } from '../desired/instance.js';
import { deleteOrder, type ManagedObject, type ManagedType, type ObjectRef, refOf } from '../desired/objects.js';
import { isOwnedBy, ownerNameSelector, ownerOf } from '../desired/owner.js';
import type { ClusterPort } from './port.js';

export type ApplyOutcome =
  | { result: 'created' | 'updated' | 'recreated' | 'unchanged' }
  /** The name is taken by an object this instance does not own; `owner` is its recorded owner, if any. */
  | { result: 'conflict'; owner: string | undefined };

/**
 * Brings one object to its desired state. `current` may be passed when the caller already read
 * it (undefined = known absent); otherwise it is read here.
 */
export async function applyObject(
  port: ClusterPort,
  desired: ManagedObject,
  owner: InstanceIdentity,
  known?: { current: ManagedObject | undefined },
): Promise<ApplyOutcome> {
  const current = known === undefined ? await port.getObject(refOf(desired)) : known.current;
  if (current === undefined) {
    await port.createObject(desired);
    return { result: 'created' };
  }
  if (!isOwnedBy(current.metadata, owner)) {
    const recorded = ownerOf(current.metadata);
    return { result: 'conflict', owner: recorded === undefined ? undefined : instanceIdentity(recorded) };
  }
  switch (updateKind(desired, current)) {
    case 'none':
      return { result: 'unchanged' };
    case 'update':
      await port.replaceObject(updatedObject(desired, current));
      return { result: 'updated' };
    case 'recreate':
      // An immutable field (RuntimeClass.handler) changed: only delete-and-create gets there.
      await port.deleteObject(refOf(current), preconditionsOf(current));
      await port.createObject(desired);
      return { result: 'recreated' };
  }
}

/** uid and resourceVersion of what was read: a delete then never hits a replaced or changed object. */
export function preconditionsOf(obj: ManagedObject): { uid?: string; resourceVersion?: string } {
  const out: { uid?: string; resourceVersion?: string } = {};
  if (obj.metadata.uid !== undefined) out.uid = obj.metadata.uid;
  if (obj.metadata.resourceVersion !== undefined) out.resourceVersion = obj.metadata.resourceVersion;
  return out;
}

function sameObject(a: Pick<ObjectRef, 'kind' | 'name'>, b: Pick<ObjectRef, 'kind' | 'name'>): boolean {
  return a.kind === b.kind && a.name === b.name;
}

/** Every object of `types` that `owner` owns (any incarnation of it), in delete order. */
export async function listOwned(
  port: ClusterPort,
  owner: InstanceIdentity,
  types: readonly ManagedType[],
): Promise<ManagedObject[]> {
  const selector = ownerNameSelector(owner);
  const found: ManagedObject[] = [];
  for (const type of types) {
    for (const obj of await port.listObjects(type, selector)) {
      if (isOwnedBy(obj.metadata, owner)) found.push(obj);
    }
  }
  return deleteOrder(found);
}

/** Deletes every owned object of `types` not in `keep`; returns what it deleted. */
export async function pruneOwned(
  port: ClusterPort,
  owner: InstanceIdentity,
  types: readonly ManagedType[],
  keep: readonly ManagedObject[],
): Promise<ObjectRef[]> {
  const deleted: ObjectRef[] = [];
  for (const obj of await listOwned(port, owner, types)) {
    const ref = refOf(obj);
    if (keep.some((k) => sameObject(refOf(k), ref))) continue;
    await port.deleteObject(ref, preconditionsOf(obj));
    deleted.push(ref);
  }
  return deleted;
}
