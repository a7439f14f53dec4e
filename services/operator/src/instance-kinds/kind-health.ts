/**
 * One instance Kind the operator may not read must not stall the operator.
 *
 * Every CRD labelled `registered-by: kubeplus` is watched, but the operator's RBAC covers only
 * the groups the chart was told about (or aggregated later). A Kind whose list or watch is
 * forbidden (HTTP 403) is therefore an expected state, not a failure of the replica:
 *
 * - it is reported once, when it becomes forbidden (a Warning line naming the Kind and what to
 *   grant), and once when it becomes readable (info); the informer's own per-retry line drops to
 *   debug for 403s, so a Kind forbidden for days does not flood the log;
 * - it keeps being retried with the informer's backoff (0.8 s doubling to 30 s), so RBAC granted
 *   later (e.g. by ClusterRole aggregation) takes effect without a restart;
 * - it is counted in `kubeplus_operator_instance_kinds{state="forbidden"}`;
 * - it is left out of readiness: /readyz says "ok" and names it, the other Kinds keep working.
 *
 * Any other failure keeps its meaning: not yet synced, or stale, fails readiness as before.
 */

import { createSilentLogger, describeError, type Logger } from '@kubeplus-isolation/service';
import { isForbidden } from '../runtime/errors.js';
import { type GroupVersionResource, gvrString } from '../runtime/gvr.js';
import {
  type InformerFailure,
  type InformerListener,
  informersReady,
  type SyncedInformer,
} from '../runtime/informer.js';

export const INSTANCE_KIND_STATES = ['synced', 'pending', 'stale', 'forbidden'] as const;
export type InstanceKindState = (typeof INSTANCE_KIND_STATES)[number];

/** What an instance Kind's informer exposes. */
export interface KindInformer extends SyncedInformer {
  lastFailure(): InformerFailure | undefined;
}

/**
 * Forbidden while its latest list/watch failure is a 403 (even if it synced before: RBAC was
 * revoked); else pending until its first list, stale while its watch is down past the bound,
 * else synced.
 */
export function instanceKindState(informer: KindInformer): InstanceKindState {
  if (informer.lastFailure()?.status === 403) return 'forbidden';
  if (!informer.hasSynced()) return 'pending';
  if (informer.isStale()) return 'stale';
  return 'synced';
}

export function countInstanceKinds(informers: readonly KindInformer[]): Record<InstanceKindState, number> {
  const counts: Record<InstanceKindState, number> = { synced: 0, pending: 0, stale: 0, forbidden: 0 };
  for (const informer of informers) counts[instanceKindState(informer)]++;
  return counts;
}

/**
 * Readiness over the operator's own informers and the instance Kinds': every one synced and
 * none stale, except forbidden Kinds, which are named but do not fail it.
 */
export function instanceKindsReadiness(
  others: readonly SyncedInformer[],
  kinds: readonly KindInformer[],
): { ok: boolean; message: string } {
  const forbidden = kinds.filter((k) => instanceKindState(k) === 'forbidden').map((k) => k.name);
  const result = informersReady([...others, ...kinds.filter((k) => instanceKindState(k) !== 'forbidden')]);
  if (forbidden.length === 0) return result;
  return {
    ok: result.ok,
    message: `${result.message}; forbidden by RBAC (not watched, retried): ${forbidden.join(', ')}`,
  };
}

/** Reports each forbidden instance Kind once (and its recovery), as the informers' listener. */
export class ForbiddenKindReporter {
  private readonly forbidden = new Set<string>();
  private readonly logger: Logger;

  constructor(logger: Logger = createSilentLogger()) {
    this.logger = logger;
  }

  /** For the instance informers' options: 403s are this reporter's to report, once. */
  readonly failureLogLevel = (err: unknown): 'warn' | 'debug' => (isForbidden(err) ? 'debug' : 'warn');

  readonly listener: InformerListener = {
    failed: (informer, err) => {
      if (!isForbidden(err)) {
        // Failing for another reason now: a later 403 is news again.
        this.forbidden.delete(informer);
        return;
      }
      if (this.forbidden.has(informer)) return;
      this.forbidden.add(informer);
      this.logger.warn(
        'instance Kind forbidden: the operator may not list/watch it, so its instances are not isolated; retrying with backoff. Grant get, list, watch and patch on it (chart: operator.instanceGroups, or a ClusterRole labelled isolation.kubeplus.io/aggregate-to-operator=true)',
        { gvr: informer, error: describeError(err) },
      );
    },
    recovered: (informer) => {
      if (!this.forbidden.delete(informer)) return;
      this.logger.info('instance Kind readable again: watching its instances', { gvr: informer });
    },
  };

  /** The Kind is no longer watched (its CRD went): a new one of the same name is reported afresh. */
  forget(gvr: GroupVersionResource): void {
    this.forbidden.delete(gvrString(gvr));
  }
}

/**
 * Whether the instance caches count as synced and fresh, for
 * `kubeplus_operator_informer_synced{resource="instances"}`: every Kind the operator may read has
 * listed, and none of those has a watch down past the bound (a forbidden Kind is left out).
 */
export function instanceKindsSyncState(informers: () => readonly KindInformer[]): {
  hasSynced(): boolean;
  isStale(): boolean;
} {
  return {
    hasSynced: () => informers().every((i) => i.hasSynced() || instanceKindState(i) === 'forbidden'),
    isStale: () => informers().some((i) => i.isStale() && instanceKindState(i) !== 'forbidden'),
  };
}
