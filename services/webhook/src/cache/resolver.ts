/**
 * Step 3 of the admission path (admission/admit.ts lists it): namespace → what its Pods must get.
 * A cache hit is a Map read (namespace-cache.ts, filled by the informer). A miss (the informer has
 * not yet delivered a namespace the operator just labeled) costs one live GET of that namespace
 * (namespace-reader.ts), bounded by a short timeout, before failing open — as the kube-apiserver's
 * in-tree PodNodeSelector plugin does. Concurrent misses for one namespace share a single GET, and
 * at most `maxConcurrentLookups` namespaces are looked up at once.
 */

import { describeError, MAX_ERROR_DETAIL } from '@kubeplus-isolation/service';
import type { NodeIsolationSpec } from '@kubeplus-isolation/spec';
import type { FailOpenReason, LiveLookupResult } from '../admission/metric-labels.js';
import { type CacheEntry, entryFromNamespace, type NamespaceCache, type NamespaceLike } from './namespace-cache.js';

export type Resolution = { ok: true; spec: NodeIsolationSpec } | { ok: false; reason: FailOpenReason; detail: string };

/** Reads one namespace from the API server. */
export interface NamespaceReader {
  /** The namespace, or undefined when it does not exist; rejects on any other failure. Should honour `signal`. */
  read(name: string, signal: AbortSignal): Promise<NamespaceLike | undefined>;
}

export interface ResolverOptions {
  /** Upper bound of one live GET; the request fails open after it. */
  liveLookupTimeoutMs: number;
  /**
   * Live GETs of distinct namespaces in flight at once; a miss beyond it fails open at once
   * (`lookup_throttled`) instead of costing the API server one more GET. Default: unbounded.
   */
  maxConcurrentLookups?: number;
  onLiveLookup?: (result: LiveLookupResult) => void;
}

export function resolutionFromEntry(entry: CacheEntry): Resolution {
  switch (entry.state) {
    case 'valid':
      return { ok: true, spec: entry.spec };
    case 'annotation_missing':
      return { ok: false, reason: 'annotation_missing', detail: 'namespace has no resolved node-isolation annotation' };
    case 'annotation_invalid':
      return {
        ok: false,
        reason: 'annotation_invalid',
        detail: `namespace's resolved node-isolation annotation is invalid: ${entry.errors.join('; ')}`,
      };
  }
}

/** `p`, or a rejection with the signal's reason once `signal` aborts, whichever is first. */
function untilAborted<T>(p: Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) return Promise.reject(signal.reason);
  return new Promise<T>((resolve, reject) => {
    const onAbort = (): void => reject(signal.reason);
    signal.addEventListener('abort', onAbort, { once: true });
    p.then(
      (v) => {
        signal.removeEventListener('abort', onAbort);
        resolve(v);
      },
      (e: unknown) => {
        signal.removeEventListener('abort', onAbort);
        reject(e);
      },
    );
  });
}

export class IsolationResolver {
  readonly #cache: NamespaceCache;
  readonly #reader: NamespaceReader;
  readonly #opts: ResolverOptions;
  readonly #inflight = new Map<string, Promise<Resolution>>();

  constructor(cache: NamespaceCache, reader: NamespaceReader, opts: ResolverOptions) {
    this.#cache = cache;
    this.#reader = reader;
    this.#opts = opts;
  }

  /**
   * The namespace's Resolution: at once on a cache hit (a Map read, no Promise), else a Promise
   * of the live GET's. Never rejects.
   */
  resolve(namespace: string): Resolution | Promise<Resolution> {
    const entry = this.#cache.get(namespace);
    if (entry !== undefined) return resolutionFromEntry(entry);
    let pending = this.#inflight.get(namespace);
    if (pending === undefined && this.#inflight.size >= (this.#opts.maxConcurrentLookups ?? Number.POSITIVE_INFINITY)) {
      // Misses of many names at once are not the informer's lag after a labeling (one name at a
      // time): e.g. reviews no API server sent, each naming another namespace (issue 34).
      this.#opts.onLiveLookup?.('throttled');
      return {
        ok: false,
        reason: 'lookup_throttled',
        detail: `${this.#inflight.size} live GETs of other namespaces are in flight already`,
      };
    }
    if (pending === undefined) {
      pending = this.#lookup(namespace).finally(() => this.#inflight.delete(namespace));
      this.#inflight.set(namespace, pending);
    }
    return pending;
  }

  async #lookup(name: string): Promise<Resolution> {
    const timeoutMs = this.#opts.liveLookupTimeoutMs;
    const signal = AbortSignal.timeout(timeoutMs);
    let ns: NamespaceLike | undefined;
    try {
      ns = await untilAborted(this.#reader.read(name, signal), signal);
    } catch (e) {
      if (signal.aborted) {
        this.#opts.onLiveLookup?.('timeout');
        return { ok: false, reason: 'lookup_timeout', detail: `live GET of the namespace took over ${timeoutMs} ms` };
      }
      this.#opts.onLiveLookup?.('error');
      return {
        ok: false,
        reason: 'lookup_failed',
        detail: `live GET of the namespace failed: ${describeError(e, MAX_ERROR_DETAIL)}`,
      };
    }
    if (ns === undefined) {
      this.#opts.onLiveLookup?.('not_found');
      return { ok: false, reason: 'namespace_not_found', detail: 'namespace not found by a live GET' };
    }
    const entry = entryFromNamespace(ns);
    if (entry === undefined) {
      this.#opts.onLiveLookup?.('not_labeled');
      return {
        ok: false,
        reason: 'namespace_not_labeled',
        detail:
          'namespace is not labeled for node isolation (label removed, or webhook registered without its namespaceSelector)',
      };
    }
    this.#opts.onLiveLookup?.('found');
    this.#cache.putProvisional(name, entry);
    // If the informer delivered the namespace meanwhile, its entry is the newer one.
    return resolutionFromEntry(this.#cache.get(name) ?? entry);
  }
}
