/**
 * The worker pool that drains a WorkQueue into a reconcile handler, after controller-runtime's
 * controller loop. Per reconcile result (its reconcileHandler): success → forget;
 * `requeueAfterMs` → forget + addAfter; error → addRateLimited. Errors the classifier calls
 * `conflict` (HTTP 409 by default: a stale resourceVersion, expected under concurrency) are
 * retried promptly on a separate, low-capped backoff and logged quietly.
 *
 * A worker yields to the event loop once it has run for YIELD_AFTER_MS without doing so. A
 * reconcile served from the caches awaits only settled promises, so without this a burst of them
 * (thousands of queued keys) runs as one chain of microtasks, and no socket is read until it
 * ends: measured at 10,000 tenants, the event loop blocked for ~130 s, the API server's answers
 * to the last instances' writes unread all that time (the end-of-run tail of the operator scale
 * bench). controller-runtime's workers
 * are goroutines, preempted by Go's scheduler; here the worker lets go itself.
 */

import { createSilentLogger, describeError, type Logger } from '@kubeplus-isolation/service';
import { type Clock, sleep, systemClock } from './clock.js';
import { isConflict } from './errors.js';
import { keyFields } from './log.js';
import { ItemExponentialFailureRateLimiter, type RateLimiter } from './rate-limiter.js';
import type { WorkQueue } from './work-queue.js';

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

/** How long a worker may run reconciles back to back before it lets the event loop turn (ms). */
export const YIELD_AFTER_MS = 20;

/** Resolves after the event loop's next check phase: pending I/O and timers run first. */
export function yieldToEventLoop(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}

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
    // Wall time, not this.clock: it bounds how long the event loop is held, whatever the clock says.
    let turnStarted = performance.now();
    for (;;) {
      const key = await queue.get();
      if (key === undefined) return;
      if (this.abortController.signal.aborted) {
        queue.done(key);
        return;
      }
      await this.process(key);
      if (performance.now() - turnStarted >= YIELD_AFTER_MS) {
        await yieldToEventLoop();
        turnStarted = performance.now();
      }
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
