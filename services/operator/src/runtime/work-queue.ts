/**
 * A rate-limited work queue, after client-go's `workqueue.TypedRateLimitingInterface`. The
 * worker pool that drains it is worker-pool.ts; per-key backoff, rate-limiter.ts.
 *
 * Queue guarantees (client-go's `Type` semantics):
 * - a key added while it is already queued is queued once (de-duplication);
 * - a key added while it is being processed is queued again once, after `done(key)` — a key
 *   is therefore never processed concurrently with itself;
 * - `addAfter` delays an add (requeue-after); a key already waiting keeps the earlier time;
 * - `addRateLimited` delays by a per-key exponential backoff (`ItemExponentialFailureRateLimiter`,
 *   base 5ms, cap 1000s by default) until `forget(key)`;
 * - after `shutDown()` adds are ignored and `get()` returns `undefined` (queued keys are dropped:
 *   a level-triggered controller re-lists them when it starts again).
 */
import { type Clock, systemClock } from './clock.js';
import { DelayHeap } from './delay-heap.js';
import { ItemExponentialFailureRateLimiter, type RateLimiter } from './rate-limiter.js';

/** Hooks a queue reports through (see runtime-metrics.ts). */
export interface WorkQueueMetrics {
  depth(n: number): void;
  add(): void;
  retry(): void;
  workDuration(seconds: number): void;
  /** Registers a reader of the longest-running in-flight item, in seconds (read at scrape time). */
  longestRunning(read: () => number): void;
}

export interface WorkQueueOptions {
  rateLimiter?: RateLimiter;
  clock?: Clock;
  metrics?: WorkQueueMetrics;
}

export class WorkQueue {
  private queue: string[] = [];
  private head = 0;
  private readonly dirty = new Set<string>();
  /** Keys being processed → when `get` handed them out. */
  private readonly processing = new Map<string, number>();
  private readonly waiters: Array<(key: string | undefined) => void> = [];
  private readonly waiting = new Map<string, number>();
  private readonly heap = new DelayHeap();
  private seq = 0;
  private cancelTimer: (() => void) | undefined;
  private timerAt = Number.POSITIVE_INFINITY;
  private shuttingDown = false;
  readonly rateLimiter: RateLimiter;
  private readonly clock: Clock;
  private readonly metrics: WorkQueueMetrics | undefined;

  constructor(options: WorkQueueOptions = {}) {
    this.rateLimiter = options.rateLimiter ?? new ItemExponentialFailureRateLimiter();
    this.clock = options.clock ?? systemClock;
    this.metrics = options.metrics;
    this.metrics?.longestRunning(() => this.longestRunningMs() / 1000);
  }

  /** Queues `key` unless it is already queued; a key in processing is queued again after `done`. */
  add(key: string): void {
    if (this.shuttingDown || this.dirty.has(key)) return;
    this.metrics?.add();
    this.dirty.add(key);
    if (this.processing.has(key)) return;
    this.enqueue(key);
  }

  /** Adds `key` after `delayMs` (immediately if ≤ 0). A key already waiting keeps the earlier time. */
  addAfter(key: string, delayMs: number): void {
    if (this.shuttingDown) return;
    if (!(delayMs > 0)) {
      this.add(key);
      return;
    }
    const readyAt = this.clock.now() + delayMs;
    const existing = this.waiting.get(key);
    if (existing !== undefined && existing <= readyAt) return;
    this.waiting.set(key, readyAt);
    this.heap.push({ readyAt, seq: this.seq++, key });
    this.armTimer();
  }

  /** Adds `key` after the backoff `limiter` (the queue's own by default) assigns; counts a retry. */
  addRateLimited(key: string, limiter: RateLimiter = this.rateLimiter): void {
    if (this.shuttingDown) return;
    this.metrics?.retry();
    this.addAfter(key, limiter.when(key));
  }

  /** Ends backoff tracking for `key` in the queue's rate limiter. */
  forget(key: string): void {
    this.rateLimiter.forget(key);
  }

  numRequeues(key: string): number {
    return this.rateLimiter.numRequeues(key);
  }

  /** Next key to process, waiting if none; `undefined` once the queue is shut down. Call `done(key)` after. */
  get(): Promise<string | undefined> {
    if (this.shuttingDown) return Promise.resolve(undefined);
    if (this.head < this.queue.length) {
      const key = this.shift();
      this.handOut(key);
      return Promise.resolve(key);
    }
    return new Promise((resolve) => this.waiters.push(resolve));
  }

  /** Marks `key` processed; if it was added meanwhile it is queued again now. */
  done(key: string): void {
    const started = this.processing.get(key);
    if (started === undefined) return;
    this.processing.delete(key);
    this.metrics?.workDuration(Math.max(0, this.clock.now() - started) / 1000);
    if (this.dirty.has(key) && !this.shuttingDown) this.enqueue(key);
  }

  /** Keys queued and ready (not counting delayed or in-flight ones). */
  len(): number {
    return this.queue.length - this.head;
  }

  /** Keys waiting for an `addAfter`/backoff delay. */
  delayedLen(): number {
    return this.waiting.size;
  }

  /** Keys handed out by `get` and not yet `done`. */
  processingLen(): number {
    return this.processing.size;
  }

  isShuttingDown(): boolean {
    return this.shuttingDown;
  }

  /** Milliseconds the oldest in-flight key has been processing (0 when idle). */
  longestRunningMs(): number {
    let oldest = Number.POSITIVE_INFINITY;
    for (const started of this.processing.values()) oldest = Math.min(oldest, started);
    return oldest === Number.POSITIVE_INFINITY ? 0 : Math.max(0, this.clock.now() - oldest);
  }

  /** Stops accepting keys, drops queued and delayed ones, and wakes every `get` with `undefined`. */
  shutDown(): void {
    if (this.shuttingDown) return;
    this.shuttingDown = true;
    this.cancelTimer?.();
    this.cancelTimer = undefined;
    this.heap.clear();
    this.waiting.clear();
    this.queue = [];
    this.head = 0;
    this.dirty.clear();
    this.metrics?.depth(0);
    for (const waiter of this.waiters.splice(0)) waiter(undefined);
  }

  /** Makes a dirty, not-in-flight key available: straight to a waiting `get`, else to the FIFO. */
  private enqueue(key: string): void {
    const waiter = this.waiters.shift();
    if (waiter !== undefined) {
      this.handOut(key);
      waiter(key);
      return;
    }
    this.queue.push(key);
    this.metrics?.depth(this.len());
  }

  private handOut(key: string): void {
    this.dirty.delete(key);
    this.processing.set(key, this.clock.now());
  }

  private shift(): string {
    const key = this.queue[this.head] as string;
    this.head++;
    if (this.head > 1024 && this.head * 2 > this.queue.length) {
      this.queue = this.queue.slice(this.head);
      this.head = 0;
    }
    this.metrics?.depth(this.len());
    return key;
  }

  private armTimer(): void {
    const next = this.heap.peek();
    if (next === undefined || next.readyAt >= this.timerAt) return;
    this.cancelTimer?.();
    this.timerAt = next.readyAt;
    this.cancelTimer = this.clock.schedule(next.readyAt - this.clock.now(), () => this.fireDue());
  }

  private fireDue(): void {
    this.cancelTimer = undefined;
    this.timerAt = Number.POSITIVE_INFINITY;
    const now = this.clock.now();
    for (let next = this.heap.peek(); next !== undefined && next.readyAt <= now; next = this.heap.peek()) {
      this.heap.pop();
      // Skip heap entries superseded by an earlier addAfter of the same key.
      if (this.waiting.get(next.key) !== next.readyAt) continue;
      this.waiting.delete(next.key);
      this.add(next.key);
    }
    this.armTimer();
  }
}
