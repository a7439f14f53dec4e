/**
 * Where the Pod watch got to, kept across leadership terms (issue 34), and how a new term starts
 * from it. Pure.
 *
 * A Pod admitted without its mandate while no leader watched (the leader killed while the webhook
 * failed open) that finished before the new leader's first audit would otherwise never be counted:
 * the periodic audit skips finished Pods, and a term's watch started from "now". So the leader
 * keeps its watch's position — the last resourceVersion seen and when — on its own Lease
 * (annotation POD_WATCH_POSITION_ANNOTATION, carried by its renewals: kube/lease-lock.ts), and the
 * next term starts from what the Lease held when it took it:
 *
 * - a position with a resourceVersion: the watch resumes from it, and the API server replays every
 *   Pod created since, whatever became of it; if it cannot (410 Gone: too old), catch up;
 * - no position, but a term ran before (an operator without this, or a term killed before its
 *   first renewal): catch up since that term began (its acquireTime; else the Lease's creation);
 * - no term ran before (this replica created the Lease, or no replica ever held it): from "now",
 *   as the very first start always did.
 *
 * A catch-up LISTs every Pod of the cluster, finished ones included, and judges those created at
 * or after the position's time less CLOCK_SKEW_MARGIN_MS (the position's time is the old leader's
 * clock, creationTimestamp the API server's), then watches from the LIST's resourceVersion. A
 * position without a resourceVersion is a catch-up not finished yet: the next term does it again.
 */

/** The Lease annotation holding the leader's Pod watch position (JSON: `resourceVersion`, `seenAt`). */
export const POD_WATCH_POSITION_ANNOTATION = 'isolation.kubeplus.io/pod-watch-position';

/**
 * How far before the position's time a catch-up reaches: the old leader's clock against the API
 * server's creationTimestamps (NTP keeps them well within a second; a minute allows for a badly
 * kept node), those timestamps' whole seconds, and the delivery of the last events seen. Reaching
 * back further only re-judges Pods (a map lookup each) and may count again one the previous
 * leader counted; too short a reach would lose Pods.
 */
export const CLOCK_SKEW_MARGIN_MS = 60_000;

/**
 * Every Pod created up to `resourceVersion` was judged; `seenAt` (ms, the leader's clock) is when
 * that resourceVersion was seen. Without a resourceVersion: judged up to `seenAt` at most (a
 * catch-up under way from there).
 */
export interface WatchPosition {
  resourceVersion?: string;
  seenAt: number;
}

export function formatPosition(position: WatchPosition): string {
  return JSON.stringify({
    ...(position.resourceVersion === undefined ? {} : { resourceVersion: position.resourceVersion }),
    seenAt: new Date(position.seenAt).toISOString(),
  });
}

/** The annotation's value as a position; undefined for anything malformed (never throws). */
export function parsePosition(text: string | undefined): WatchPosition | undefined {
  if (text === undefined || text === '') return undefined;
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return undefined;
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return undefined;
  const { resourceVersion, seenAt } = value as { resourceVersion?: unknown; seenAt?: unknown };
  const at = typeof seenAt === 'string' ? Date.parse(seenAt) : Number.NaN;
  if (!Number.isFinite(at)) return undefined;
  if (resourceVersion === undefined) return { seenAt: at };
  // "0" would mean "any": a watch from it starts at the cache's state, not at a position.
  if (typeof resourceVersion !== 'string' || resourceVersion === '' || resourceVersion === '0') return undefined;
  return { resourceVersion, seenAt: at };
}

/** The Lease as this replica found it when it took it: what the term before left. */
export interface PreviousTerm {
  /** The POD_WATCH_POSITION_ANNOTATION value, if any. */
  checkpoint: string | undefined;
  /** The previous holder ('' if it released the Lease). */
  holderIdentity: string;
  /** When the previous holder took the Lease (ms), if it says. */
  acquiredAt: number | undefined;
  leaseTransitions: number;
  /** When the Lease was created (ms): before any term. */
  createdAt: number | undefined;
}

/**
 * Why a term catches up by a LIST (the `reason` of kubeplus_operator_pod_watch_catch_ups_total):
 * `expired`, the resourceVersion to resume from was too old (410 Gone), at the start of a term or
 * within one; `missing`, no position to resume from (the previous term left none, or an unfinished
 * catch-up).
 */
export const CATCH_UP_REASONS = ['expired', 'missing'] as const;
export type CatchUpReason = (typeof CATCH_UP_REASONS)[number];

export type TermStart =
  | { from: 'now' }
  | { from: 'checkpoint'; position: WatchPosition & { resourceVersion: string } }
  | { from: 'catch-up'; reason: CatchUpReason; position: WatchPosition };

/** How a term's Pod watch starts, from what the Lease held when this replica took it (undefined: it created it). */
export function planTermStart(previous: PreviousTerm | undefined): TermStart {
  if (previous === undefined) return { from: 'now' };
  const position = parsePosition(previous.checkpoint);
  if (position?.resourceVersion !== undefined) {
    return { from: 'checkpoint', position: { resourceVersion: position.resourceVersion, seenAt: position.seenAt } };
  }
  if (position !== undefined) return { from: 'catch-up', reason: 'missing', position };
  const termRan = previous.holderIdentity !== '' || previous.acquiredAt !== undefined || previous.leaseTransitions > 0;
  if (!termRan) return { from: 'now' };
  return { from: 'catch-up', reason: 'missing', position: { seenAt: previous.acquiredAt ?? previous.createdAt ?? 0 } };
}

/** The earliest creation time a catch-up from `position` judges. */
export function catchUpCutoff(position: WatchPosition, marginMs = CLOCK_SKEW_MARGIN_MS): number {
  return position.seenAt - marginMs;
}

/** A Pod's creationTimestamp in ms (a string from the watch, a Date from client-node's typed lists). */
export function createdAtOf(pod: { metadata?: { creationTimestamp?: unknown } }): number | undefined {
  const value = pod.metadata?.creationTimestamp;
  const ms = value instanceof Date ? value.getTime() : typeof value === 'string' ? Date.parse(value) : Number.NaN;
  return Number.isFinite(ms) ? ms : undefined;
}
