/**
 * Key sources: what feeds a controller's work queue (controller-runtime's source.Source). A
 * source is subscribed while this replica leads and must replay what it knows on subscribe.
 */
import type { EventHandlers } from './informer.js';

/** Produces keys for a controller. `subscribe` must first replay current state; returns an unsubscribe. */
export interface KeySource {
  subscribe(enqueue: (key: string) => void): () => void;
}

/** `namespace/name`, or `name` for cluster-scoped objects (client-go's MetaNamespaceKeyFunc). */
export function objectKey(obj: { metadata?: { namespace?: string; name?: string } }): string | undefined {
  const name = obj.metadata?.name;
  if (!name) return undefined;
  const namespace = obj.metadata?.namespace;
  return namespace ? `${namespace}/${name}` : name;
}

type KeyMapping<A extends unknown[]> = (...args: A) => string | readonly string[] | undefined;

/** Enqueues each key a mapping produced (none, one or several); empty keys are skipped. */
export function emitKeys(enqueue: (key: string) => void, keys: string | readonly string[] | undefined): void {
  if (keys === undefined) return;
  for (const key of typeof keys === 'string' ? [keys] : keys) if (key) enqueue(key);
}

/** Keys from an informer's add/update/delete events (default: the object's own key). */
export function informerKeySource<T extends { metadata?: { namespace?: string; name?: string } }>(
  informer: EventSource<T>,
  toKeys: KeyMapping<[T]> = objectKey,
): KeySource {
  return {
    subscribe(enqueue) {
      const on = (obj: T): void => emitKeys(enqueue, toKeys(obj));
      return informer.addEventHandler({ add: on, update: on, delete: on });
    },
  };
}

/** Anything informer-like that event handlers can be added to. */
export interface EventSource<T> {
  addEventHandler(handlers: EventHandlers<T>): () => void;
}

type Enqueue = (key: string) => void;

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
