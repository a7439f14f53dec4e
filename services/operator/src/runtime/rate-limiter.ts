/** Per-key retry delays, after client-go's `workqueue.TypedRateLimiter`. */

/** Decides how long a key waits before its next retry. */
export interface RateLimiter {
  /** Delay for this retry of `key`; records the failure. */
  when(key: string): number;
  /** Clears the failure history of `key`. */
  forget(key: string): void;
  /** Failures recorded for `key` since the last `forget`. */
  numRequeues(key: string): number;
}

/** delay = base · 2^failures, capped — client-go's ItemExponentialFailureRateLimiter. */
export class ItemExponentialFailureRateLimiter implements RateLimiter {
  private readonly failures = new Map<string, number>();

  constructor(
    readonly baseDelayMs = 5,
    readonly maxDelayMs = 1_000_000,
  ) {
    if (!(Number.isFinite(baseDelayMs) && baseDelayMs > 0)) throw new Error('rate limiter: baseDelayMs must be > 0');
    if (!(Number.isFinite(maxDelayMs) && maxDelayMs >= baseDelayMs)) {
      throw new Error('rate limiter: maxDelayMs must be >= baseDelayMs');
    }
  }

  when(key: string): number {
    const failures = this.failures.get(key) ?? 0;
    this.failures.set(key, failures + 1);
    // 2^1100 is Infinity, which Math.min turns into the cap: no overflow concerns.
    return Math.min(this.baseDelayMs * 2 ** failures, this.maxDelayMs);
  }

  forget(key: string): void {
    this.failures.delete(key);
  }

  numRequeues(key: string): number {
    return this.failures.get(key) ?? 0;
  }
}
