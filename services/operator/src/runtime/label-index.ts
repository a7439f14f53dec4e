/**
 * The objects of one informer indexed by the values of a fixed set of labels, kept up to date
 * from its add/update/delete events (the cache is replayed first), like client-go's Indexers.
 *
 * The reconciler lists an instance's owned objects of each type by its owner-name and
 * owner-namespace labels on every reconcile (to prune what is no longer desired). Answered by a
 * walk over the cache, each such list cost O(objects of the type), i.e. O(instances), and
 * reconciling N instances O(N²). With the index it costs O(objects the owner has).
 */
import type { KubernetesObject } from '@kubernetes/client-node';
import type { EventHandlers } from './informer.js';

/** An informer's event registration (ResourceInformer). */
export interface LabelIndexSource<T> {
  addEventHandler(handlers: EventHandlers<T>): () => void;
}

function objectKey(obj: KubernetesObject): string | undefined {
  const name = obj.metadata?.name;
  if (!name) return undefined;
  return `${obj.metadata?.namespace ?? ''}/${name}`;
}

export class LabelIndex<T extends KubernetesObject = KubernetesObject> {
  /** Index value → object key → object. */
  private readonly byValue = new Map<string, Map<string, T>>();
  /** Object key → the index value it is filed under. */
  private readonly valueOfKey = new Map<string, string>();

  /** `labels`: the label keys indexed, together (an object lacking any of them is not filed). */
  constructor(readonly labels: readonly string[]) {}

  /** Files `obj` as an add or update left it. */
  upsert(obj: T): void {
    const key = objectKey(obj);
    if (key === undefined) return;
    this.forget(key);
    const value = this.valueOf(obj.metadata?.labels);
    if (value === undefined) return;
    const bucket = this.byValue.get(value) ?? new Map<string, T>();
    bucket.set(key, obj);
    this.byValue.set(value, bucket);
    this.valueOfKey.set(key, value);
  }

  remove(obj: T): void {
    const key = objectKey(obj);
    if (key !== undefined) this.forget(key);
  }

  /**
   * The objects an equality selector (`[label, value]` pairs) may match: those filed under its
   * values of the indexed labels (the caller still checks its other terms). Undefined when the
   * selector does not name every indexed label: the index cannot answer it.
   */
  candidates(terms: ReadonlyArray<readonly [string, string]>): readonly T[] | undefined {
    const wanted = new Map<string, string>();
    for (const [k, v] of terms) {
      const seen = wanted.get(k);
      if (seen !== undefined && seen !== v) return []; // k=a,k=b matches nothing
      wanted.set(k, v);
    }
    const values: string[] = [];
    for (const label of this.labels) {
      const v = wanted.get(label);
      if (v === undefined) return undefined;
      values.push(v);
    }
    return [...(this.byValue.get(JSON.stringify(values))?.values() ?? [])];
  }

  private valueOf(labels: Record<string, string> | undefined): string | undefined {
    const values: string[] = [];
    for (const label of this.labels) {
      const v = labels?.[label];
      if (v === undefined) return undefined;
      values.push(v);
    }
    return JSON.stringify(values);
  }

  private forget(key: string): void {
    const value = this.valueOfKey.get(key);
    if (value === undefined) return;
    this.valueOfKey.delete(key);
    const bucket = this.byValue.get(value);
    bucket?.delete(key);
    if (bucket?.size === 0) this.byValue.delete(value);
  }
}

/** A LabelIndex over `labels` kept in step with `informer` (cached objects replayed). Returns it and its unbind. */
export function indexByLabels<T extends KubernetesObject>(
  informer: LabelIndexSource<T>,
  labels: readonly string[],
): { index: LabelIndex<T>; unbind: () => void } {
  const index = new LabelIndex<T>(labels);
  const unbind = informer.addEventHandler({
    add: (obj) => index.upsert(obj),
    update: (obj) => index.upsert(obj),
    delete: (obj) => index.remove(obj),
  });
  return { index, unbind };
}
