/**
 * The hold's view of KubePlus's namespaces (issue 35): a second Namespace informer, on
 * `managedby=kubeplus` only, feeds this cache; a held request waits here, event-driven, until its
 * namespace carries the settled label (hold/holder.ts). Nothing here calls the API server.
 *
 * Each entry keeps what the hold decides on (settled? carries Helm's release name? when was it
 * created?) and the namespace's node isolation as the main cache would parse it, so a request
 * released by the settling event is patched from that very event, whichever informer is ahead.
 */
import {
  HELM_RELEASE_NAME_ANNOTATION,
  ISOLATION_SETTLED_LABEL,
  ISOLATION_SETTLED_VALUE,
  KUBEPLUS_MANAGED_LABEL,
  KUBEPLUS_MANAGED_VALUE,
  NODE_ISOLATION_ENABLED_LABEL,
  NODE_ISOLATION_RESOLVED_ANNOTATION,
} from '@kubeplus-isolation/spec';
import type { SlimNamespace } from '../cache/informer.js';
import { type CacheEntry, entryFromNamespace, type NamespaceLike } from '../cache/namespace-cache.js';

/** Only KubePlus's namespaces: the hold's informer never holds the rest of the cluster. */
export const KUBEPLUS_NAMESPACES_SELECTOR = `${KUBEPLUS_MANAGED_LABEL}=${KUBEPLUS_MANAGED_VALUE}`;

/** What the hold knows of one KubePlus namespace. */
export interface SettleView {
  settled: boolean;
  /** Carries `meta.helm.sh/release-name` (KubePlus's helmer stamps each namespace it installs into). */
  releaseNamed: boolean;
  /** creationTimestamp in ms, or undefined when absent or unreadable. */
  createdMs: number | undefined;
  /** Node isolation as the main cache would hold it; undefined when not labeled for it. */
  isolation: CacheEntry | undefined;
}

const KEPT_LABELS = [KUBEPLUS_MANAGED_LABEL, ISOLATION_SETTLED_LABEL, NODE_ISOLATION_ENABLED_LABEL] as const;

/** The hold informer's slim object: name, resourceVersion, creationTimestamp, and the keys above. */
export function slimKubePlusNamespace(ns: NamespaceLike & { metadata?: { resourceVersion?: string } }): SlimNamespace {
  const meta = ns.metadata ?? {};
  const out: SlimNamespace = { metadata: {} };
  if (meta.name !== undefined) out.metadata.name = meta.name;
  if (meta.resourceVersion !== undefined) out.metadata.resourceVersion = meta.resourceVersion;
  if (meta.creationTimestamp !== undefined) out.metadata.creationTimestamp = meta.creationTimestamp;
  for (const key of KEPT_LABELS) {
    const v = meta.labels?.[key];
    if (v !== undefined) out.metadata.labels = { ...out.metadata.labels, [key]: v };
  }
  const resolved = meta.annotations?.[NODE_ISOLATION_RESOLVED_ANNOTATION];
  if (resolved !== undefined) out.metadata.annotations = { [NODE_ISOLATION_RESOLVED_ANNOTATION]: resolved };
  // Only its presence matters: the value (KubePlus writes it with literal quotes) is not kept.
  if (meta.annotations?.[HELM_RELEASE_NAME_ANNOTATION] !== undefined) {
    out.metadata.annotations = { ...out.metadata.annotations, [HELM_RELEASE_NAME_ANNOTATION]: '' };
  }
  return out;
}

export function settleViewOf(ns: NamespaceLike): SettleView {
  const meta = ns.metadata ?? {};
  const created = meta.creationTimestamp === undefined ? Number.NaN : Date.parse(meta.creationTimestamp);
  return {
    settled: meta.labels?.[ISOLATION_SETTLED_LABEL] === ISOLATION_SETTLED_VALUE,
    releaseNamed: meta.annotations?.[HELM_RELEASE_NAME_ANNOTATION] !== undefined,
    createdMs: Number.isFinite(created) ? created : undefined,
    isolation: entryFromNamespace(ns),
  };
}

/** Why a request in a KubePlus namespace is not held, or that it is. Pure. */
export type HoldVerdict = 'settled' | 'not_release' | 'too_old' | 'hold';

/**
 * Held only while the namespace is unsettled, carries Helm's release name, and is younger than
 * `windowMs`: a namespace KubePlus merely stamped long after it was created is never held, and
 * none is held past its window (its requests are then admitted as without the hold).
 */
export function holdVerdict(view: SettleView, nowMs: number, windowMs: number): HoldVerdict {
  if (view.settled) return 'settled';
  if (!view.releaseNamed) return 'not_release';
  if (view.createdMs === undefined || nowMs - view.createdMs >= windowMs) return 'too_old';
  return 'hold';
}

/** A held request's callback: the namespace's new view, or undefined once it left the cache. */
export type SettleWaiter = (view: SettleView | undefined) => void;

export class SettleCache {
  readonly #views = new Map<string, SettleView>();
  readonly #waiters = new Map<string, Set<SettleWaiter>>();

  /** Informer add/update. */
  upsert(ns: NamespaceLike): void {
    const name = ns.metadata?.name;
    if (name === undefined || name === '') return;
    const view = settleViewOf(ns);
    this.#views.set(name, view);
    this.#notify(name, view);
  }

  /** Informer delete: the namespace is gone, or no longer KubePlus's. */
  remove(ns: NamespaceLike): void {
    const name = ns.metadata?.name;
    if (name === undefined || !this.#views.delete(name)) return;
    this.#notify(name, undefined);
  }

  /** Constant time. */
  get(name: string): SettleView | undefined {
    return this.#views.get(name);
  }

  get size(): number {
    return this.#views.size;
  }

  /** Calls `waiter` at each event of namespace `name` until the returned function is called. */
  wait(name: string, waiter: SettleWaiter): () => void {
    let set = this.#waiters.get(name);
    if (set === undefined) {
      set = new Set();
      this.#waiters.set(name, set);
    }
    set.add(waiter);
    return () => {
      const s = this.#waiters.get(name);
      if (s === undefined) return;
      s.delete(waiter);
      if (s.size === 0) this.#waiters.delete(name);
    };
  }

  #notify(name: string, view: SettleView | undefined): void {
    const set = this.#waiters.get(name);
    if (set === undefined) return;
    for (const w of [...set]) w(view);
  }
}
