/**
 * Create-or-update and prune of operator-owned cluster-scoped objects through the ClusterPort.
 * Writes only on a difference (see desired/diff.ts), never touches an object another instance
 * owns, and uses uid/resourceVersion preconditions so a concurrent change surfaces as a 409.
 */

import { updatedObject, updateKind } from '../desired/diff.js';
import { type InstanceIdentity, instanceIdentity } from '../desired/instance.js';
import {
  applyOrder,
  applyRank,
  deleteOrder,
  type ManagedObject,
  type ManagedType,
  type ObjectRef,
  refOf,
} from '../desired/objects.js';
import { isOwnedBy, ownerNameSelector, ownerOf } from '../desired/owner.js';
import { isSharedPolicy } from '../desired/sandbox-shared-policy.js';
import { type ClusterPort, type DeletePreconditions, isAlreadyExists, type ReadOptions } from './port.js';

/** Reads before a create: a cache miss is taken as absent (applyObject handles AlreadyExists). */
export const OPTIMISTIC: ReadOptions = { missIsAbsent: true };

/**
 * Promise.all that waits for every promise to settle before rejecting with the first failure:
 * when a reconcile fails, none of its writes is still in flight (the work queue may start the
 * same key again at once, and a key must never run twice at the same time).
 */
export async function settleAll<T extends readonly unknown[] | []>(
  promises: T,
): Promise<{ -readonly [K in keyof T]: Awaited<T[K]> }> {
  const results: readonly PromiseSettledResult<unknown>[] = await Promise.allSettled(promises as readonly unknown[]);
  const values: unknown[] = [];
  for (const r of results) {
    if (r.status === 'rejected') throw r.reason;
    values.push(r.value);
  }
  return values as { -readonly [K in keyof T]: Awaited<T[K]> };
}

export type ApplyOutcome =
  | { result: 'created' | 'updated' | 'recreated' | 'unchanged' }
  /** The name is taken by an object this instance does not own; `owner` is its recorded owner, if any. */
  | { result: 'conflict'; owner: string | undefined };

/**
 * Brings one object to its desired state. `current` may be passed when the caller already read
 * it (undefined = believed absent, e.g. a cache miss); otherwise it is read here. A create
 * refused with AlreadyExists (the cache was behind, or the name is held by an object no cache
 * holds) reads the object fresh and goes on from there.
 */
export async function applyObject(
  port: ClusterPort,
  desired: ManagedObject,
  owner: InstanceIdentity,
  known?: { current: ManagedObject | undefined },
): Promise<ApplyOutcome> {
  const holder = (current: ManagedObject): string | undefined => {
    const recorded = ownerOf(current.metadata);
    return recorded === undefined ? undefined : instanceIdentity(recorded);
  };
  return applyAs(port, desired, (current) => isOwnedBy(current.metadata, owner), holder, known);
}

/**
 * Brings one of the shared sandbox policies (`desired/sandbox-shared-policy.ts`) to its desired
 * state: the operator's, owned by no instance. An object of that name without the shared
 * policies' labels is someone else's: a conflict, never taken over.
 */
export async function applySharedObject(port: ClusterPort, desired: ManagedObject): Promise<ApplyOutcome> {
  return applyAs(
    port,
    desired,
    (current) => isSharedPolicy(current.metadata.labels),
    () => undefined,
  );
}

async function applyAs(
  port: ClusterPort,
  desired: ManagedObject,
  isMine: (current: ManagedObject) => boolean,
  holder: (current: ManagedObject) => string | undefined,
  known?: { current: ManagedObject | undefined },
): Promise<ApplyOutcome> {
  let current = known === undefined ? await port.getObject(refOf(desired), OPTIMISTIC) : known.current;
  if (current === undefined) {
    try {
      await port.createObject(desired);
      return { result: 'created' };
    } catch (err) {
      if (!isAlreadyExists(err)) throw err;
      current = await port.getObject(refOf(desired), { fresh: true });
      if (current === undefined) throw err; // deleted again meanwhile: retry
    }
  }
  if (!isMine(current)) return { result: 'conflict', owner: holder(current) };
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

/**
 * `ordered` (sorted by apply rank, either way) cut into runs of one rank: the objects of a run
 * never refer to each other, so a run's writes may go in parallel.
 */
function rankRuns<T>(ordered: readonly T[], rank: (item: T) => number): T[][] {
  const runs: T[][] = [];
  for (const item of ordered) {
    const run = runs.at(-1);
    if (run !== undefined && rank(run[0] as T) === rank(item)) run.push(item);
    else runs.push([item]);
  }
  return runs;
}

/**
 * Applies `desired` in apply order: every current object is read at once (in parallel), then
 * the writes go rank by rank — RuntimeClass, then policies, then bindings — in parallel within
 * a rank, so an object never exists before what it refers to. Outcomes are returned in apply
 * order.
 */
export async function applyObjects(
  port: ClusterPort,
  desired: readonly ManagedObject[],
  owner: InstanceIdentity,
): Promise<Array<{ desired: ManagedObject; outcome: ApplyOutcome }>> {
  const ordered = applyOrder(desired);
  const currents = await settleAll(ordered.map((d) => port.getObject(refOf(d), OPTIMISTIC)));
  const reads = ordered.map((d, i) => ({ desired: d, current: currents[i] }));
  const out: Array<{ desired: ManagedObject; outcome: ApplyOutcome }> = [];
  for (const run of rankRuns(reads, (r) => applyRank(r.desired))) {
    const outcomes = await settleAll(run.map((r) => applyObject(port, r.desired, owner, { current: r.current })));
    run.forEach((r, k) => {
      out.push({ desired: r.desired, outcome: outcomes[k] as ApplyOutcome });
    });
  }
  return out;
}

/** uid and resourceVersion of what was read: a delete then never hits a replaced or changed object. */
export function preconditionsOf(obj: ManagedObject): DeletePreconditions {
  const out: DeletePreconditions = {};
  if (obj.metadata.uid !== undefined) out.uid = obj.metadata.uid;
  if (obj.metadata.resourceVersion !== undefined) out.resourceVersion = obj.metadata.resourceVersion;
  return out;
}

function sameObject(a: ObjectRef, b: ObjectRef): boolean {
  return a.kind === b.kind && a.name === b.name && a.namespace === b.namespace;
}

/** Every object of `types` that `owner` owns (any incarnation of it). Lists all types at once. */
export async function listOwned(
  port: ClusterPort,
  owner: InstanceIdentity,
  types: readonly ManagedType[],
  options?: ReadOptions,
): Promise<ManagedObject[]> {
  const selector = ownerNameSelector(owner);
  const lists = await settleAll(types.map((type) => port.listObjects(type, selector, options)));
  return lists.flat().filter((obj) => isOwnedBy(obj.metadata, owner));
}

/** Deletes `objects` in delete order: rank by rank (bindings, policies, RuntimeClass), in parallel within a rank. */
export async function deleteObjects(port: ClusterPort, objects: readonly ManagedObject[]): Promise<ObjectRef[]> {
  const ordered = deleteOrder(objects);
  for (const run of rankRuns(ordered, applyRank)) {
    await settleAll(run.map((obj) => port.deleteObject(refOf(obj), preconditionsOf(obj))));
  }
  return ordered.map(refOf);
}

/**
 * Deletes every owned object of `types` not in `keep`; returns what it deleted. `options.fresh`
 * lists from the API server (when what follows depends on nothing being left, e.g. removing the
 * finalizer); otherwise a cache may answer, and an object it has not seen yet is pruned by the
 * reconcile its add event causes.
 */
export async function pruneOwned(
  port: ClusterPort,
  owner: InstanceIdentity,
  types: readonly ManagedType[],
  keep: readonly ManagedObject[],
  options?: ReadOptions,
): Promise<ObjectRef[]> {
  const owned = await listOwned(port, owner, types, options);
  const stale = owned.filter((obj) => !keep.some((k) => sameObject(refOf(k), refOf(obj))));
  return deleteObjects(port, stale);
}
