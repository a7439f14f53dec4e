/**
 * A rate-limited work queue and the worker pool that drains it, after client-go's
 * `workqueue.TypedRateLimitingInterface` and controller-runtime's controller loop.
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
 *
 * The pool runs N workers. Per reconcile result (controller-runtime's reconcileHandler):
 * success → forget; `requeueAfterMs` → forget + addAfter; error → addRateLimited. Errors the
 * classifier calls `conflict` (HTTP 409 by default: a stale resourceVersion, expected under
 * concurrency) are retried promptly on a separate, low-capped backoff and logged quietly.
 */
import { type Clock, sleep, systemClock } from './clock.js';
import { describeError, isConflict } from './errors.js';
import { createSilentLogger, keyFields, type Logger } from './log.js';

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

/** Hooks a queue reports through (see metrics.ts). */
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

interface Delayed {
  readyAt: number;
  seq: number;
  key: string;
}

/** Binary min-heap on (readyAt, seq). */
class DelayHeap {
  private readonly items: Delayed[] = [];

  get size(): number {
    return this.items.length;
  }

  peek(): Delayed | undefined {
    return this.items[0];
  }

  push(item: Delayed): void {
    const items = this.items;
    items.push(item);
    let i = items.length - 1;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (!this.less(i, parent)) break;
      this.swap(i, parent);
      i = parent;
    }
  }

  pop(): Delayed | undefined {
    const items = this.items;
    const top = items[0];
    const last = items.pop();
    if (top === undefined || last === undefined || items.length === 0) return top;
    items[0] = last;
    let i = 0;
    for (;;) {
      const left = 2 * i + 1;
      const right = left + 1;
      let smallest = i;
      if (left < items.length && this.less(left, smallest)) smallest = left;
      if (right < items.length && this.less(right, smallest)) smallest = right;
      if (smallest === i) return top;
      this.swap(i, smallest);
      i = smallest;
    }
  }

  clear(): void {
    this.items.length = 0;
  }

  private less(a: number, b: number): boolean {
    const x = this.items[a];
    const y = this.items[b];
    if (x === undefined || y === undefined) return false;
    return x.readyAt < y.readyAt || (x.readyAt === y.readyAt && x.seq < y.seq);
  }

  private swap(a: number, b: number): void {
    const x = this.items[a];
    const y = this.items[b];
    if (x === undefined || y === undefined) return;
    this.items[a] = y;
    this.items[b] = x;
  }
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

/** What a reconcile resolves to: nothing (done), or a request to run again after a delay. */
// biome-ignore lint/suspicious/noConfusingVoidType: lets handlers be async functions that return nothing
export type ReconcileOutcome = { requeueAfterMs?: number } | undefined | void;
export type ErrorClass = 'conflict' | 'error';
export type ProcessResult = 'success' | 'error' | 'requeue';

export interface WorkerPoolOptions {
  /** Controller name, for logs. */
  name: string;
  queue: WorkQueue;
  /** Number of concurrent workers (≥ 1). */
  concurrency: number;
  handle(key: string, signal: AbortSignal): Promise<ReconcileOutcome>;
  /** Which errors are expected races to retry promptly. Default: HTTP 409. */
  classifyError?(err: unknown): ErrorClass;
  /** Backoff for `conflict` errors. Default: 5ms doubling, capped at 1s. */
  conflictRateLimiter?: RateLimiter;
  /** Called after every processed key (metrics). */
  onProcessed?(key: string, result: ProcessResult, durationSeconds: number): void;
  clock?: Clock;
  logger?: Logger;
}

export const defaultClassifyError = (err: unknown): ErrorClass => (isConflict(err) ? 'conflict' : 'error');

/** N workers draining a WorkQueue into a handler, with controller-runtime's result handling. */
export class WorkerPool {
  private readonly abortController = new AbortController();
  private readonly workers: Promise<void>[] = [];
  private readonly conflictLimiter: RateLimiter;
  private readonly classify: (err: unknown) => ErrorClass;
  private readonly clock: Clock;
  private readonly logger: Logger;
  private started = false;

  constructor(private readonly options: WorkerPoolOptions) {
    if (!(Number.isInteger(options.concurrency) && options.concurrency >= 1)) {
      throw new Error(`worker pool ${options.name}: concurrency must be an integer >= 1`);
    }
    this.conflictLimiter = options.conflictRateLimiter ?? new ItemExponentialFailureRateLimiter(5, 1000);
    this.classify = options.classifyError ?? defaultClassifyError;
    this.clock = options.clock ?? systemClock;
    this.logger = options.logger ?? createSilentLogger();
  }

  /** Starts the workers (once). */
  start(): void {
    if (this.started) return;
    this.started = true;
    for (let i = 0; i < this.options.concurrency; i++) this.workers.push(this.work());
  }

  /** Aborted when the pool stops: handlers should pass it to their API calls. */
  get signal(): AbortSignal {
    return this.abortController.signal;
  }

  /** Handlers currently running. */
  inFlight(): number {
    return this.options.queue.processingLen();
  }

  /**
   * Stops at once: no further key is taken and in-flight handlers' signal is aborted.
   * Used when leadership is lost — a replica that may no longer lead must not keep writing.
   */
  abort(reason = 'worker pool aborted'): void {
    this.options.queue.shutDown();
    if (!this.abortController.signal.aborted) this.abortController.abort(new Error(reason));
  }

  /**
   * Graceful stop: no further key is taken; in-flight handlers get up to `graceMs` to finish,
   * then their signal is aborted. Resolves `true` if every worker finished within the bound.
   */
  async stop(graceMs: number): Promise<boolean> {
    this.options.queue.shutDown();
    const all = Promise.all(this.workers).then(() => true);
    const bound = new AbortController();
    const drained = await Promise.race([all, sleep(this.clock, graceMs, bound.signal).then(() => false)]);
    bound.abort();
    if (!drained && !this.abortController.signal.aborted) {
      this.abortController.abort(new Error('worker pool stopped: drain timeout'));
    }
    return drained;
  }

  private async work(): Promise<void> {
    const { queue } = this.options;
    for (;;) {
      const key = await queue.get();
      if (key === undefined) return;
      if (this.abortController.signal.aborted) {
        queue.done(key);
        return;
      }
      await this.process(key);
    }
  }

  private async process(key: string): Promise<void> {
    const { queue, name } = this.options;
    const started = this.clock.now();
    let result: ProcessResult;
    try {
      const outcome = await this.options.handle(key, this.abortController.signal);
      const requeueAfterMs = outcome ? outcome.requeueAfterMs : undefined;
      queue.forget(key);
      this.conflictLimiter.forget(key);
      if (requeueAfterMs !== undefined && Number.isFinite(requeueAfterMs) && requeueAfterMs > 0) {
        queue.addAfter(key, requeueAfterMs);
        result = 'requeue';
      } else {
        if (requeueAfterMs !== undefined && requeueAfterMs !== 0) {
          this.logger.warn('ignoring invalid requeueAfterMs', { controller: name, ...keyFields(key), requeueAfterMs });
        }
        result = 'success';
      }
    } catch (err) {
      if (this.abortController.signal.aborted) {
        // Stopping: the key is dropped with the queue; the next leader re-lists it.
        result = 'error';
        this.logger.debug('reconcile interrupted by shutdown', { controller: name, ...keyFields(key) });
      } else if (this.safeClassify(err) === 'conflict') {
        queue.addRateLimited(key, this.conflictLimiter);
        result = 'requeue';
        this.logger.debug('reconcile conflict, retrying', {
          controller: name,
          ...keyFields(key),
          error: describeError(err),
        });
      } else {
        queue.addRateLimited(key);
        result = 'error';
        this.logger.error('reconcile failed', {
          controller: name,
          ...keyFields(key),
          error: describeError(err),
          retries: queue.numRequeues(key),
        });
      }
    } finally {
      queue.done(key);
    }
    try {
      this.options.onProcessed?.(key, result, Math.max(0, this.clock.now() - started) / 1000);
    } catch (err) {
      this.logger.warn('onProcessed hook failed', { controller: name, error: describeError(err) });
    }
  }

  private safeClassify(err: unknown): ErrorClass {
    try {
      return this.classify(err);
    } catch {
      return 'error';
    }
  }
}
