/**
 * The Pods a term counted as admitted without their mandate, by UID, so that a Pod seen twice —
 * by the watch, then again by a catch-up LIST that reaches back before a gap (or a catch-up
 * retried from its first page) — is counted once. A Pod is forgotten once no catch-up can reach
 * its creation any more (`forgetBefore` the watch position's cut-off), so this holds only the
 * unisolated Pods created within the clock-skew margin of the position: nothing while the webhook
 * answers.
 */
export class CountedPods {
  private readonly created = new Map<string, number>();

  /** True the first time `uid` is offered this term; false after. A Pod without a UID is always new. */
  first(uid: string | undefined, createdAt: number): boolean {
    if (uid === undefined || uid === '') return true;
    if (this.created.has(uid)) return false;
    this.created.set(uid, createdAt);
    return true;
  }

  /** Forgets the Pods created before `cutoff`: no catch-up reaches them. */
  forgetBefore(cutoff: number): void {
    for (const [uid, at] of this.created) if (at < cutoff) this.created.delete(uid);
  }

  get size(): number {
    return this.created.size;
  }
}
