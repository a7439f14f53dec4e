/**
 * Key sources of the two controllers: thin adapters from informer events to the pure mappings
 * of keys.ts. The Manager subscribes them only while this replica leads (replaying the caches
 * then), so a standby never enqueues anything.
 */
import type { KubernetesObject } from '@kubernetes/client-node';
import type { DynamicInformers, EventHandlers, GroupVersionResource } from '../controller/informers.js';
import type { KeySource } from '../controller/manager.js';
import type { KindRef } from '../desired/instance.js';
import {
  type CachedInstance,
  deletedOwnedObjectOwnerKey,
  instanceEventKey,
  type OwnedType,
  ownedObjectKey,
  sandboxInstanceKeys,
} from './keys.js';

interface EventSource<T> {
  addEventHandler(handlers: EventHandlers<T>): () => void;
}

type Enqueue = (key: string) => void;

function emit(enqueue: Enqueue, keys: string | readonly string[] | undefined): void {
  if (keys === undefined) return;
  for (const key of typeof keys === 'string' ? [keys] : keys) enqueue(key);
}

/** The Kinds the instance informers watch (InstanceKindRegistry). */
export interface KindIndex {
  kindOf(gvr: GroupVersionResource): string | undefined;
  lookup(group: string, kind: string): KindRef | undefined;
}

/** Every event of every instance informer → that instance. */
export function instanceSource(instances: DynamicInformers<KubernetesObject>, kinds: KindIndex): KeySource {
  return {
    subscribe(enqueue) {
      const on = (gvr: GroupVersionResource, obj: KubernetesObject): void =>
        emit(
          enqueue,
          instanceEventKey(gvr, obj, (g) => kinds.kindOf(g)),
        );
      return instances.addEventHandler({ add: on, update: on, delete: on });
    },
  };
}

/** Every instance in the caches of `instances`. */
export function* cachedInstances(instances: DynamicInformers<KubernetesObject>): Generator<CachedInstance> {
  for (const gvr of instances.kinds()) {
    for (const obj of instances.get(gvr)?.list() ?? []) yield { gvr, obj };
  }
}

/** Any RuntimeClass add/update/delete → every sandbox-annotated instance. */
export function runtimeClassFanOut(
  runtimeClasses: EventSource<KubernetesObject>,
  instances: DynamicInformers<KubernetesObject>,
  kinds: KindIndex,
): KeySource {
  return {
    subscribe(enqueue) {
      const on = (): void =>
        emit(
          enqueue,
          sandboxInstanceKeys(cachedInstances(instances), (g) => kinds.kindOf(g)),
        );
      return runtimeClasses.addEventHandler({ add: on, update: on, delete: on });
    },
  };
}

/** Delete of an owned object → its owner instance (drift restore). */
export function ownerOfDeletedSource(
  informer: EventSource<KubernetesObject>,
  type: OwnedType,
  kinds: KindIndex,
): KeySource {
  return {
    subscribe(enqueue) {
      return informer.addEventHandler({
        delete: (obj) =>
          emit(
            enqueue,
            deletedOwnedObjectOwnerKey(type, obj, (g, k) => kinds.lookup(g, k)),
          ),
      });
    },
  };
}

/** Add/update of an owned object → the object itself, for the orphan check. */
export function ownedObjectSource(informer: EventSource<KubernetesObject>, type: OwnedType): KeySource {
  return {
    subscribe(enqueue) {
      const on = (obj: KubernetesObject): void => emit(enqueue, ownedObjectKey(type, obj));
      return informer.addEventHandler({ add: on, update: on });
    },
  };
}

/**
 * Keys pushed by code (controller-runtime's channel source): the owned-objects controller hands
 * the owners it finds to the instances controller. Pushes while nobody is subscribed (this
 * replica does not lead) are dropped: the next leader replays every instance anyway.
 */
export class KeyChannel implements KeySource {
  private readonly subscribers = new Set<Enqueue>();

  subscribe(enqueue: Enqueue): () => void {
    this.subscribers.add(enqueue);
    return () => {
      this.subscribers.delete(enqueue);
    };
  }

  push(key: string): void {
    for (const enqueue of this.subscribers) enqueue(key);
  }
}
