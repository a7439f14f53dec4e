/**
 * What triggers an audit of a namespace (the audit controller's key sources; the Manager
 * subscribes them only while this replica leads, so only the leader audits):
 *
 * - namespace events of the isolated-namespace informer: a namespace becoming isolated (add,
 *   replayed for every cached one when a leadership term starts), its mandate or owner changing
 *   (update, when `auditFingerprint` changes; other namespace updates are ignored), or it
 *   ceasing to be isolated (delete: the audit forgets it);
 * - a period: every `intervalMs` (plus up to 10% jitter, so replicas and restarts do not line up)
 *   every cached isolated namespace, plus the `extraKeys` (with reports on: every namespace with
 *   sandbox isolation bound).
 */
import type { KubernetesObject } from '@kubernetes/client-node';
import type { Clock } from '../../runtime/clock.js';
import type { EventHandlers, Lister } from '../../runtime/informer.js';
import type { KeySource } from '../../runtime/key-sources.js';
import { auditFingerprint } from './report.js';

interface EventSource<T> {
  addEventHandler(handlers: EventHandlers<T>): () => void;
}

/** Add, delete, and updates that change what the audit reads. */
export function isolatedNamespaceEvents(informer: EventSource<KubernetesObject>): KeySource {
  return {
    subscribe(enqueue) {
      const seen = new Map<string, string>();
      const upsert = (ns: KubernetesObject): void => {
        const name = ns.metadata?.name;
        if (!name) return;
        const fingerprint = auditFingerprint(ns.metadata ?? {});
        if (seen.get(name) === fingerprint) return;
        seen.set(name, fingerprint);
        enqueue(name);
      };
      return informer.addEventHandler({
        add: upsert,
        update: upsert,
        delete: (ns) => {
          const name = ns.metadata?.name;
          if (!name) return;
          seen.delete(name);
          enqueue(name);
        },
      });
    },
  };
}

/** Max fraction of the interval added at random to each period (client-go's JitterUntil factor). */
export const AUDIT_JITTER = 0.1;

export interface PeriodicAuditOptions {
  intervalMs: number;
  clock: Clock;
  random?: () => number;
  /** Called on subscribe and on unsubscribe: a leadership term begins or ends. */
  onTerm?: () => void;
  /** Called on subscribe only: a leadership term begins. */
  onTermStart?: () => void;
  /**
   * Further namespaces to audit every period (the compliance reports' sandbox-isolated tenant
   * namespaces, which need not be node-isolated); each key is enqueued once per period.
   */
  extraKeys?: () => Iterable<string>;
}

/** Every cached isolated namespace, every period, while subscribed. */
export function periodicAudit(namespaces: Lister<KubernetesObject>, options: PeriodicAuditOptions): KeySource {
  const random = options.random ?? Math.random;
  return {
    subscribe(enqueue) {
      options.onTerm?.();
      options.onTermStart?.();
      let cancel: (() => void) | undefined;
      const schedule = (): void => {
        const delay = options.intervalMs * (1 + AUDIT_JITTER * Math.min(1, Math.max(0, random())));
        cancel = options.clock.schedule(delay, () => {
          const keys = new Set<string>();
          for (const ns of namespaces.list()) if (ns.metadata?.name) keys.add(ns.metadata.name);
          for (const key of options.extraKeys?.() ?? []) keys.add(key);
          for (const key of keys) enqueue(key);
          schedule();
        });
      };
      schedule();
      return () => {
        cancel?.();
        cancel = undefined;
        options.onTerm?.();
      };
    },
  };
}
