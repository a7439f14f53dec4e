/**
 * The owned-objects controller's key sources: add/update of an object carrying the operator's
 * ownership markers (every cached one replayed at each start, so what an instance deleted during
 * downtime left is found), the objects of an instance deleted or being deleted, and every owned
 * object once per period. Orphan cleanup (orphan-cleanup.ts) decides about each.
 */
import type { KubernetesObject } from '@kubernetes/client-node';
import type { InstanceIdentity } from '../../desired/instance.js';
import { isSharedPolicy } from '../../desired/sandbox-shared-policy.js';
import type { Clock } from '../../runtime/clock.js';
import type { DynamicEventHandlers } from '../../runtime/dynamic-informers.js';
import type { GroupVersionResource } from '../../runtime/gvr.js';
import { type EventSource, emitKeys, type KeySource } from '../../runtime/key-sources.js';
import type { LabelIndex } from '../../runtime/label-index.js';
import { type OwnedType, ownedKeysOf, ownedObjectKey, ownerIndexTerms } from './keys.js';

/**
 * Add/update of an owned object → the object itself, for the orphan check. Delete of one of the
 * shared sandbox policies too: no instance owns them, so only this puts them back at once.
 */
export function ownedObjectSource(informer: EventSource<KubernetesObject>, type: OwnedType): KeySource {
  return {
    subscribe(enqueue) {
      const on = (obj: KubernetesObject): void => emitKeys(enqueue, ownedObjectKey(type, obj));
      const onDelete = (obj: KubernetesObject): void => {
        if (isSharedPolicy(obj.metadata?.labels)) on(obj);
      };
      return informer.addEventHandler({ add: on, update: on, delete: onDelete });
    },
  };
}

/** The cached objects of one owned type, indexed by owner (OWNER_INDEX_LABELS). */
export interface OwnedIndex {
  type: OwnedType;
  index: Pick<LabelIndex, 'candidates'>;
}

/** The instance informers, as this source needs them. */
export interface InstanceEvents {
  addEventHandler(handlers: DynamicEventHandlers<KubernetesObject>): () => void;
}

/** The identity of the instance an informer event carries (its Kind from the watched Kinds). */
function identityOf(
  gvr: GroupVersionResource,
  obj: KubernetesObject,
  kindOf: (gvr: GroupVersionResource) => string | undefined,
): InstanceIdentity | undefined {
  const name = obj.metadata?.name;
  const namespace = obj.metadata?.namespace;
  const kind = kindOf(gvr) ?? obj.kind;
  if (!name || !namespace || !kind) return undefined;
  return { group: gvr.group, kind, namespace, name };
}

/**
 * Delete of an instance, or an update that marks it for deletion → every cached object it owns,
 * so orphan cleanup takes them down at once (no finalizer holds the instance for that).
 */
export function deletedOwnerSource(
  instances: InstanceEvents,
  kindOf: (gvr: GroupVersionResource) => string | undefined,
  owned: readonly OwnedIndex[],
): KeySource {
  return {
    subscribe(enqueue) {
      const on = (gvr: GroupVersionResource, obj: KubernetesObject): void => {
        const owner = identityOf(gvr, obj, kindOf);
        if (owner === undefined) return;
        const terms = ownerIndexTerms(owner);
        for (const { type, index } of owned) emitKeys(enqueue, ownedKeysOf(owner, type, index.candidates(terms) ?? []));
      };
      return instances.addEventHandler({
        update: (gvr, obj) => {
          if (obj.metadata?.deletionTimestamp != null) on(gvr, obj);
        },
        delete: on,
      });
    },
  };
}

/** Max fraction of the interval added at random to each period (client-go's JitterUntil factor). */
export const SWEEP_JITTER = 0.1;

export interface PeriodicSweepOptions {
  intervalMs: number;
  clock: Clock;
  random?: () => number;
}

/**
 * Every cached owned object, once per period while subscribed: orphan cleanup stays correct even
 * if an event was missed or a deletion kept failing (the start-up replay covers downtime).
 */
export function periodicOwnedSweep(
  informers: ReadonlyArray<{ type: OwnedType; informer: { list(): readonly KubernetesObject[] } }>,
  options: PeriodicSweepOptions,
): KeySource {
  const random = options.random ?? Math.random;
  return {
    subscribe(enqueue) {
      let cancel: (() => void) | undefined;
      const schedule = (): void => {
        const delay = options.intervalMs * (1 + SWEEP_JITTER * Math.min(1, Math.max(0, random())));
        cancel = options.clock.schedule(delay, () => {
          for (const { type, informer } of informers) {
            for (const obj of informer.list()) emitKeys(enqueue, ownedObjectKey(type, obj));
          }
          schedule();
        });
      };
      schedule();
      return () => {
        cancel?.();
        cancel = undefined;
      };
    },
  };
}
