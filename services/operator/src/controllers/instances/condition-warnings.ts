/**
 * Which of an instance's standing-condition warnings (a RuntimeClass held by someone else, a
 * stricter peer, advisory mode without MutatingAdmissionPolicy, no class to default to) to record
 * as Events now. A condition holds across every reconcile of the instance, resyncs included; an
 * Event per reconcile would make every resync of an up-to-date instance a write (a PATCH of the
 * Event's count), found on Kubernetes 1.30, where advisory mode always warns. So a warning is
 * announced when it appears or its message changes, and again after `reannounceMs` while it holds
 * (the default, 30 min, is inside the API server's 1 h Event TTL, so `kubectl describe` keeps
 * showing it); one that stops holding is forgotten, so its return is announced at once.
 */

export interface ConditionWarning {
  reason: string;
  message: string;
}

export const DEFAULT_REANNOUNCE_MS = 30 * 60 * 1000;

export class ConditionWarnings {
  /** instance → reason → the message last announced and when. */
  private readonly announced = new Map<string, Map<string, { message: string; at: number }>>();

  constructor(private readonly reannounceMs = DEFAULT_REANNOUNCE_MS) {}

  /** The warnings of `instance` to record now, given every condition that holds for it now. */
  toAnnounce(instance: string, holding: readonly ConditionWarning[], now: number): ConditionWarning[] {
    const before = this.announced.get(instance);
    const after = new Map<string, { message: string; at: number }>();
    const out: ConditionWarning[] = [];
    for (const w of holding) {
      const last = before?.get(w.reason);
      if (last !== undefined && last.message === w.message && now - last.at < this.reannounceMs) {
        after.set(w.reason, last);
        continue;
      }
      after.set(w.reason, { message: w.message, at: now });
      out.push(w);
    }
    if (after.size === 0) this.announced.delete(instance);
    else this.announced.set(instance, after);
    return out;
  }

  /** Drops what was announced for `instance` (deleted, or no longer asking for isolation). */
  forget(instance: string): void {
    this.announced.delete(instance);
  }

  /** Instances with a condition remembered (bounded by the instances that have one). */
  get size(): number {
    return this.announced.size;
  }
}
