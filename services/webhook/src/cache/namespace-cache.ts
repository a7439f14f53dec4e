/**
 * What each isolated namespace mandates, parsed once per namespace event and read per request.
 *
 * Keyed by namespace name. An entry exists only for a namespace labeled
 * `kubeplus.io/node-isolation-enabled: "true"`; it holds the parsed, canonical
 * NodeIsolationSpec, or why there is none (annotation missing or invalid) so a request can
 * fail open with the right reason without parsing anything. `get` is a Map read.
 */
import {
  NODE_ISOLATION_ENABLED_LABEL,
  NODE_ISOLATION_ENABLED_VALUE,
  NODE_ISOLATION_RESOLVED_ANNOTATION,
  type NodeIsolationSpec,
  parseNodeIsolation,
} from '@kubeplus-isolation/spec';
import type { LogSink } from '../log.js';

/** The fields of a core/v1 Namespace the cache reads (a V1Namespace fits). */
export interface NamespaceLike {
  metadata?: {
    name?: string;
    creationTimestamp?: string;
    labels?: Readonly<Record<string, string>>;
    annotations?: Readonly<Record<string, string>>;
  };
}

export type CacheEntry =
  | { state: 'valid'; spec: NodeIsolationSpec; annotation: string }
  | { state: 'annotation_missing' }
  | { state: 'annotation_invalid'; annotation: string; errors: string[] };

export type EntryState = CacheEntry['state'];
export const ENTRY_STATES: readonly EntryState[] = ['valid', 'annotation_missing', 'annotation_invalid'];

/** A stored entry; `provisionalUntilMs` is set on entries learned by a live GET rather than the informer. */
type Stored = CacheEntry & { provisionalUntilMs?: number };

export function isIsolationEnabled(ns: NamespaceLike): boolean {
  return ns.metadata?.labels?.[NODE_ISOLATION_ENABLED_LABEL] === NODE_ISOLATION_ENABLED_VALUE;
}

/** The entry a namespace stands for, or undefined when it is not labeled for node isolation. */
export function entryFromNamespace(ns: NamespaceLike): CacheEntry | undefined {
  if (!isIsolationEnabled(ns)) return undefined;
  const annotation = ns.metadata?.annotations?.[NODE_ISOLATION_RESOLVED_ANNOTATION];
  if (annotation === undefined) return { state: 'annotation_missing' };
  const parsed = parseNodeIsolation(annotation);
  return parsed.ok
    ? { state: 'valid', spec: parsed.value, annotation }
    : { state: 'annotation_invalid', annotation, errors: parsed.errors };
}

function annotationOf(e: CacheEntry): string | undefined {
  return e.state === 'annotation_missing' ? undefined : e.annotation;
}

export interface NamespaceCacheOptions {
  logger?: LogSink;
  now?: () => number;
  /**
   * How long an entry learned by a live GET is trusted without the informer confirming it.
   * The informer normally delivers the same namespace within moments and replaces it; the
   * bound only matters if it never does (the namespace lost its label again in between).
   */
  provisionalTtlMs?: number;
}

export const DEFAULT_PROVISIONAL_TTL_MS = 60_000;

export class NamespaceCache {
  readonly #entries = new Map<string, Stored>();
  readonly #logger: NamespaceCacheOptions['logger'];
  readonly #now: () => number;
  readonly #provisionalTtlMs: number;

  constructor(opts: NamespaceCacheOptions = {}) {
    this.#logger = opts.logger;
    this.#now = opts.now ?? Date.now;
    this.#provisionalTtlMs = opts.provisionalTtlMs ?? DEFAULT_PROVISIONAL_TTL_MS;
  }

  /** Informer add/update: store what the namespace now mandates, or drop it once it is no longer labeled. */
  upsert(ns: NamespaceLike): void {
    const name = ns.metadata?.name;
    if (name === undefined || name === '') return;
    const next = entryFromNamespace(ns);
    if (next === undefined) {
      if (this.#entries.delete(name)) this.#logger?.info('namespace no longer isolated', { namespace: name });
      return;
    }
    const prev = this.#entries.get(name);
    const unchanged =
      prev !== undefined &&
      prev.provisionalUntilMs === undefined &&
      prev.state === next.state &&
      annotationOf(prev) === annotationOf(next);
    this.#entries.set(name, next);
    if (!unchanged) this.#logChange(name, next);
  }

  /** Informer delete (the namespace is gone, or stopped matching the label selector). */
  remove(ns: NamespaceLike): void {
    const name = ns.metadata?.name;
    if (name !== undefined && this.#entries.delete(name)) {
      this.#logger?.info('namespace no longer isolated', { namespace: name });
    }
  }

  /** The entry of a namespace, or undefined on a miss. Constant time. */
  get(name: string): CacheEntry | undefined {
    const e = this.#entries.get(name);
    if (e?.provisionalUntilMs !== undefined && this.#now() >= e.provisionalUntilMs) {
      this.#entries.delete(name);
      return undefined;
    }
    return e;
  }

  /**
   * Stores an entry learned by a live GET, unless the informer delivered the namespace
   * meanwhile (its data is at least as new). Returns whether it was stored.
   */
  putProvisional(name: string, entry: CacheEntry): boolean {
    if (this.get(name) !== undefined) return false;
    this.#entries.set(name, { ...entry, provisionalUntilMs: this.#now() + this.#provisionalTtlMs });
    return true;
  }

  get size(): number {
    return this.#entries.size;
  }

  /** Entries per state, for the cache gauge (computed at scrape time, not per request). */
  counts(): Record<EntryState, number> {
    const out: Record<EntryState, number> = { valid: 0, annotation_missing: 0, annotation_invalid: 0 };
    for (const e of this.#entries.values()) out[e.state] += 1;
    return out;
  }

  #logChange(name: string, e: CacheEntry): void {
    if (e.state === 'valid') {
      this.#logger?.info('namespace isolation loaded', {
        namespace: name,
        nodeSelector: e.spec.nodeSelector,
        tolerations: e.spec.tolerations.length,
      });
    } else if (e.state === 'annotation_missing') {
      this.#logger?.warn('isolated namespace has no resolved annotation; its Pods will be admitted unchanged', {
        namespace: name,
        annotation: NODE_ISOLATION_RESOLVED_ANNOTATION,
      });
    } else {
      this.#logger?.warn('isolated namespace has an invalid resolved annotation; its Pods will be admitted unchanged', {
        namespace: name,
        annotation: NODE_ISOLATION_RESOLVED_ANNOTATION,
        errors: e.errors,
      });
    }
  }
}
