/**
 * The Manager composes the controller runtime, in controller-runtime's order:
 *
 *   start informers → wait until the must-sync ones have synced → campaign for the leader lease →
 *   while leading: subscribe each controller's key sources and run its workers →
 *   on shutdown: stop workers (bounded drain) → release the lease → stop informers → close
 *   servers.
 *
 * Losing the lease (renewal failed past the renew deadline) aborts every worker at once — no
 * further key is taken and in-flight reconciles see their signal abort — and `run` then
 * shuts down and resolves `'leadership-lost'`; like controller-runtime the process should
 * exit, so it restarts as a clean standby. A standby replica keeps its caches warm (and is
 * ready) but never reconciles.
 *
 * It is reconciler-agnostic: a reconciler is `{ name, reconcile(key, signal) }`; a key source
 * turns cache events into keys (`namespace/name`), replaying the cache when a leadership term
 * starts so every object is reconciled by the new leader (level-triggered).
 */

import { createSilentLogger, describeError, type Logger } from '@kubeplus-isolation/service';
import type { Caches } from './cache.js';
import { type Clock, sleep, systemClock } from './clock.js';
import type { HealthCheck } from './http-server.js';
import { informersReady } from './informer.js';
import type { KeySource } from './key-sources.js';
import type { LeaderCallbacks } from './leader-election.js';
import { ItemExponentialFailureRateLimiter } from './rate-limiter.js';
import type { OperatorMetrics } from './runtime-metrics.js';
import { WorkQueue } from './work-queue.js';
import { type ErrorClass, type ReconcileOutcome, WorkerPool } from './worker-pool.js';

export interface Reconciler {
  /** Fixed, code-chosen controller name (a metrics label). */
  name: string;
  reconcile(key: string, signal: AbortSignal): Promise<ReconcileOutcome>;
}

export interface ControllerOptions {
  reconciler: Reconciler;
  sources: readonly KeySource[];
  /** Concurrent reconciles (distinct keys only). Default 1, as controller-runtime. */
  concurrency?: number;
  /** Per-key error backoff. Defaults 5ms and 1000s, as client-go. */
  baseDelayMs?: number;
  maxDelayMs?: number;
  /** Which errors are expected races, retried promptly. Default: HTTP 409. */
  classifyError?(err: unknown): ErrorClass;
}

/** Runs `run(signal)` for the leader; resolves when it has stopped (lost or cancelled). */
export interface Elector {
  run(signal: AbortSignal): Promise<void>;
}

export interface ManagerOptions {
  /**
   * The caches the Manager starts and stops (cache.ts): their must-sync ones have synced before
   * this replica campaigns for the lease (cert-manager's `mustSync`); a cache left out (e.g.
   * informers for kinds that come and go at run time) is started but never waited for.
   */
  caches: Caches;
  /**
   * Builds the elector with the Manager's callbacks (e.g. `(cb) => new LeaderElector({ lock, callbacks: cb })`).
   * Omit to lead unconditionally (single replica, development).
   */
  leaderElection?: (callbacks: LeaderCallbacks) => Elector;
  metrics?: OperatorMetrics;
  logger?: Logger;
  clock?: Clock;
  /** How long in-flight reconciles may finish on graceful shutdown. Default 10s. */
  drainTimeoutMs?: number;
  /** Closed last on shutdown, in order (e.g. the HTTP server). */
  closers?: ReadonlyArray<{ name: string; close(): Promise<void> }>;
}

export type ManagerExit = 'shutdown' | 'leadership-lost';

interface RunningController {
  pool: WorkerPool;
  unsubscribes: Array<() => void>;
}

export class Manager {
  private readonly controllers: ControllerOptions[] = [];
  private readonly running: RunningController[] = [];
  private draining: WorkerPool[] = [];
  private readonly logger: Logger;
  private readonly clock: Clock;
  private leading = false;
  private started = false;

  constructor(private readonly options: ManagerOptions) {
    this.logger = options.logger ?? createSilentLogger();
    this.clock = options.clock ?? systemClock;
  }

  /** Registers a controller; only before `run`. */
  addController(controller: ControllerOptions): void {
    if (this.started) throw new Error('manager: addController after run');
    const name = controller.reconciler.name;
    if (!name) throw new Error('manager: reconciler name must not be empty');
    if (this.controllers.some((c) => c.reconciler.name === name)) {
      throw new Error(`manager: duplicate controller ${JSON.stringify(name)}`);
    }
    // Fail here, not when leadership starts: invalid settings or an undeclared metrics label.
    const concurrency = controller.concurrency ?? 1;
    if (!(Number.isInteger(concurrency) && concurrency >= 1)) {
      throw new Error(`manager: controller ${name}: concurrency must be an integer >= 1`);
    }
    new ItemExponentialFailureRateLimiter(controller.baseDelayMs ?? 5, controller.maxDelayMs ?? 1_000_000);
    this.options.metrics?.workQueue(name);
    this.controllers.push(controller);
  }

  /** True while this replica leads and its controllers run. */
  isLeading(): boolean {
    return this.leading;
  }

  /** /readyz check: informers synced and not stale (not leadership). */
  readinessCheck(): HealthCheck {
    return { name: 'informers', check: () => informersReady(this.options.caches.all()) };
  }

  /** Runs until `signal` aborts (→ 'shutdown') or leadership is lost (→ 'leadership-lost'); always cleans up. */
  async run(signal: AbortSignal): Promise<ManagerExit> {
    if (this.started) throw new Error('manager: run called twice');
    this.started = true;
    const election = new AbortController();
    let electionDone: Promise<void> = Promise.resolve();
    let exit: ManagerExit = 'shutdown';
    try {
      this.options.caches.start();
      this.logger.info('waiting for informer caches to sync');
      await this.options.caches.waitForSync(signal);
      if (signal.aborted) return exit;
      this.logger.info('informer caches synced');

      const callbacks: LeaderCallbacks = {
        onStartedLeading: () => this.startControllers(),
        onStoppedLeading: () => this.abortControllers('leadership ended'),
        onNewLeader: (identity) => this.logger.info('leader is now', { leader: identity }),
      };
      if (!this.options.leaderElection) {
        this.startControllers();
        await untilAborted(signal);
        return exit;
      }
      electionDone = this.options.leaderElection(callbacks).run(election.signal);
      electionDone.catch(() => undefined);
      const ended = await Promise.race([
        electionDone.then(
          () => 'ended' as const,
          (err: unknown) => {
            this.logger.error('leader election failed', { error: describeError(err) });
            return 'ended' as const;
          },
        ),
        untilAborted(signal).then(() => 'aborted' as const),
      ]);
      if (ended === 'ended' && !signal.aborted) exit = 'leadership-lost';
      return exit;
    } finally {
      await this.shutdown(election, electionDone);
    }
  }

  private startControllers(): void {
    if (this.leading) return;
    this.leading = true;
    this.options.metrics?.setLeader(true);
    for (const controller of this.controllers) {
      const { reconciler } = controller;
      const name = reconciler.name;
      const logger = this.logger.child({ controller: name });
      const queue = new WorkQueue({
        rateLimiter: new ItemExponentialFailureRateLimiter(
          controller.baseDelayMs ?? 5,
          controller.maxDelayMs ?? 1_000_000,
        ),
        clock: this.clock,
        metrics: this.options.metrics?.workQueue(name),
      });
      const pool = new WorkerPool({
        name,
        queue,
        concurrency: controller.concurrency ?? 1,
        handle: (key, signal) => reconciler.reconcile(key, signal),
        classifyError: controller.classifyError,
        onProcessed: (_key, result, seconds) => this.options.metrics?.observeReconcile(name, result, seconds),
        clock: this.clock,
        logger,
      });
      const enqueue = (key: string): void => queue.add(key);
      const unsubscribes: Array<() => void> = [];
      for (const source of controller.sources) {
        try {
          unsubscribes.push(source.subscribe(enqueue));
        } catch (err) {
          logger.error('key source failed to subscribe', { error: describeError(err) });
        }
      }
      pool.start();
      this.running.push({ pool, unsubscribes });
      logger.info('controller started', { concurrency: controller.concurrency ?? 1 });
    }
  }

  /** Immediate stop: no further keys, in-flight signals aborted (also of pools still draining). */
  private abortControllers(reason: string): void {
    if (!this.leading) return;
    this.leading = false;
    this.options.metrics?.setLeader(false);
    for (const { pool, unsubscribes } of this.running.splice(0)) {
      for (const unsubscribe of unsubscribes) unsubscribe();
      pool.abort(reason);
    }
    for (const pool of this.draining) pool.abort(reason);
    this.logger.warn('controllers stopped', { reason });
  }

  private async shutdown(election: AbortController, electionDone: Promise<void>): Promise<void> {
    const drainMs = this.options.drainTimeoutMs ?? 10_000;
    // 1. Drain workers while we still hold the lease, so no other replica reconciles concurrently.
    const pools = this.running.splice(0);
    if (pools.length > 0) {
      for (const { unsubscribes } of pools) for (const unsubscribe of unsubscribes) unsubscribe();
      // Still abortable meanwhile: if the lease is lost while draining, work stops at once.
      this.draining = pools.map(({ pool }) => pool);
      const drained = await Promise.all(this.draining.map((pool) => pool.stop(drainMs)));
      this.draining = [];
      if (!drained.every(Boolean)) {
        this.logger.warn('in-flight reconciles did not finish in time; aborted', { drainMs });
      }
    }
    if (this.leading) {
      this.leading = false;
      this.options.metrics?.setLeader(false);
    }
    // 2. Release the lease (the elector bounds this by its renew deadline).
    election.abort(new Error('manager shutting down'));
    await electionDone.catch(() => undefined);
    // 3. Stop caches, then 4. close servers.
    await this.options.caches.stop();
    for (const closer of this.options.closers ?? []) {
      try {
        await Promise.race([closer.close(), sleep(this.clock, drainMs)]);
      } catch (err) {
        this.logger.warn('close failed', { name: closer.name, error: describeError(err) });
      }
    }
    this.logger.info('manager stopped');
  }
}

function untilAborted(signal: AbortSignal): Promise<void> {
  if (signal.aborted) return Promise.resolve();
  return new Promise((resolve) => signal.addEventListener('abort', () => resolve(), { once: true }));
}
