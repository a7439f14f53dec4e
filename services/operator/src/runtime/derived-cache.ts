/**
 * A value derived from an informer's whole cache (every RuntimeClass as the decisions read it, say),
 * computed on first use and again only after the cache changed: any add, update or delete since
 * drops it. Reconciles that read it back to back then share one computation instead of each
 * walking the cache: with 10,000 tenants (a generated RuntimeClass each), a sandbox reconcile that
 * rebuilt the list every time made a burst of 10,000 reconciles cost 10,000 × 10,000 steps.
 */
import type { EventHandlers } from './informer.js';

export interface ChangeSource<T> {
  addEventHandler(handlers: EventHandlers<T>, options?: { replay?: boolean }): () => void;
}

/** `compute()`'s value, kept until `source` reports a change; returns the reader and how to stop listening. */
export function derivedFromCache<T, V>(source: ChangeSource<T>, compute: () => V): { read(): V; stop(): void } {
  let value: { v: V } | undefined;
  const drop = (): void => {
    value = undefined;
  };
  const stop = source.addEventHandler({ add: drop, update: drop, delete: drop }, { replay: false });
  return {
    read() {
      value ??= { v: compute() };
      return value.v;
    },
    stop,
  };
}
