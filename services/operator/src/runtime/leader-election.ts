/**
 * Leader election on a coordination.k8s.io/v1 Lease, with client-go's
 * `tools/leaderelection` semantics:
 *
 * - acquire when the lease is unheld (empty holder), expired, or already ours; expiry is judged
 *   on OUR clock — `leaseDurationSeconds` after we last saw the record change — never by
 *   comparing the remote `renewTime` with our time, so clock skew between replicas is harmless;
 * - a candidate retries every `retryPeriod` (+ up to 1.2× jitter); the leader renews every
 *   `retryPeriod`, and if renewing has not succeeded within `renewDeadline` it stops leading at
 *   once (the leading signal aborts and `onStoppedLeading` runs before `run` returns), even if a
 *   request is still hanging — a leader that cannot renew must stop reconciling before its lease
 *   can expire for the others (`leaseDuration > renewDeadline`);
 * - writes carry the resourceVersion that was read: a 409 means another replica won the race;
 * - `leaseTransitions` is incremented whenever a different holder takes the lease;
 * - on graceful cancellation the lease is released (holder "", `leaseDurationSeconds: 1`, as
 *   `ReleaseOnCancel`), so a standby takes over on its next retry instead of after expiry.
 *
 * Deviations from client-go, deliberate: `onStoppedLeading` is called only if we actually led,
 * and `onNewLeader` is not called for "no leader" (an empty holder after a release).
 * The Lease I/O is the small `LeaseLock` interface (lease-lock.ts implements it on
 * CoordinationV1Api), so tests use an in-memory lease and a controllable clock.
 */
import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import { createSilentLogger, describeError, type Logger } from '@kubeplus-isolation/service';
import { type Clock, raceAbort, sleep, systemClock, timeoutSignal } from './clock.js';
import { isConflict } from './errors.js';

/** The election-relevant fields of a Lease spec (client-go's LeaderElectionRecord). */
export interface LeaderElectionRecord {
  /** '' when nobody holds the lease. */
  holderIdentity: string;
  leaseDurationSeconds: number;
  acquireTime: Date | undefined;
  renewTime: Date | undefined;
  leaseTransitions: number;
}

export interface ObservedLease {
  record: LeaderElectionRecord;
  resourceVersion: string;
}

/** Lease I/O. Errors carry an HTTP status (see errors.ts); 409 means the write lost a race. */
export interface LeaseLock {
  /** `namespace/name`, for logs. */
  readonly description: string;
  /** The current lease, or `undefined` if it does not exist. */
  get(signal: AbortSignal): Promise<ObservedLease | undefined>;
  /** Creates the lease; fails with 409 if it already exists. */
  create(record: LeaderElectionRecord, signal: AbortSignal): Promise<ObservedLease>;
  /** Replaces the spec if the lease is still at `resourceVersion`; fails with 409 otherwise. */
  update(record: LeaderElectionRecord, resourceVersion: string, signal: AbortSignal): Promise<ObservedLease>;
}

export interface LeaderCallbacks {
  /** We became leader. `signal` aborts when we stop leading, for any reason. */
  onStartedLeading(signal: AbortSignal): void | Promise<void>;
  /** We stopped leading (renew deadline passed, or graceful stop). Runs before any release. */
  onStoppedLeading(): void;
  /** The observed holder changed to `identity` (may be us). */
  onNewLeader?(identity: string): void;
}

export interface LeaderElectionOptions {
  lock: LeaseLock;
  callbacks: LeaderCallbacks;
  /** Unique per replica. Default: `defaultIdentity()`. */
  identity?: string;
  /** How long a non-leader waits after the last observed change before taking over. Default 15s. */
  leaseDurationMs?: number;
  /** How long the leader keeps retrying a failed renewal before it stops leading. Default 10s. */
  renewDeadlineMs?: number;
  /** Interval between acquire/renew attempts. Default 2s. */
  retryPeriodMs?: number;
  /** Release the lease when `run`'s signal aborts. Default true. */
  releaseOnCancel?: boolean;
  clock?: Clock;
  /** Uniform [0,1) source for retry jitter. Default Math.random. */
  random?: () => number;
  logger?: Logger;
}

/** client-go's JitterFactor for the acquire loop. */
export const JITTER_FACTOR = 1.2;

/** `hostname_<random uuid>`, the identity convention of client-go based controllers. */
export function defaultIdentity(): string {
  return `${hostname()}_${randomUUID()}`;
}

export interface LeaderElectionTimings {
  leaseDurationMs: number;
  renewDeadlineMs: number;
  retryPeriodMs: number;
}

/** Applies defaults and client-go's constraints: leaseDuration > renewDeadline > retryPeriod × 1.2 > 0. */
export function resolveTimings(options: Partial<LeaderElectionTimings>): LeaderElectionTimings {
  const timings = {
    leaseDurationMs: options.leaseDurationMs ?? 15_000,
    renewDeadlineMs: options.renewDeadlineMs ?? 10_000,
    retryPeriodMs: options.retryPeriodMs ?? 2_000,
  };
  for (const [name, value] of Object.entries(timings)) {
    if (!(Number.isFinite(value) && value > 0)) throw new Error(`leader election: ${name} must be a positive number`);
  }
  if (timings.leaseDurationMs <= timings.renewDeadlineMs) {
    throw new Error('leader election: leaseDurationMs must be greater than renewDeadlineMs');
  }
  if (timings.renewDeadlineMs <= JITTER_FACTOR * timings.retryPeriodMs) {
    throw new Error(`leader election: renewDeadlineMs must be greater than retryPeriodMs × ${JITTER_FACTOR}`);
  }
  return timings;
}

function rawRecord(record: LeaderElectionRecord): string {
  return JSON.stringify([
    record.holderIdentity,
    record.leaseDurationSeconds,
    record.acquireTime?.getTime() ?? null,
    record.renewTime?.getTime() ?? null,
    record.leaseTransitions,
  ]);
}

type RenewOutcome = 'lost' | 'cancelled';

export class LeaderElector {
  readonly identity: string;
  private readonly lock: LeaseLock;
  private readonly callbacks: LeaderCallbacks;
  private readonly timings: LeaderElectionTimings;
  private readonly releaseOnCancel: boolean;
  private readonly clock: Clock;
  private readonly random: () => number;
  private readonly logger: Logger;
  private observedRecord: LeaderElectionRecord | undefined;
  private observedRaw = '';
  /** When (our clock) we last saw the record change. */
  private observedTime = 0;
  private reportedLeader = '';
  private leading = false;
  private running = false;

  constructor(options: LeaderElectionOptions) {
    this.timings = resolveTimings(options);
    this.identity = options.identity ?? defaultIdentity();
    if (this.identity === '') throw new Error('leader election: identity must not be empty');
    this.lock = options.lock;
    this.callbacks = options.callbacks;
    this.releaseOnCancel = options.releaseOnCancel ?? true;
    this.clock = options.clock ?? systemClock;
    this.random = options.random ?? Math.random;
    this.logger = (options.logger ?? createSilentLogger()).child({ lease: options.lock.description });
  }

  /** True between onStartedLeading and onStoppedLeading. */
  isLeader(): boolean {
    return this.leading;
  }

  /** The holder we last observed ('' if none or unknown). */
  getLeader(): string {
    return this.observedRecord?.holderIdentity ?? '';
  }

  /**
   * Campaigns until leader, leads until the lease cannot be renewed within the renew deadline
   * or `signal` aborts, then returns. Run it again to campaign again (controllers usually exit
   * instead, as controller-runtime does).
   */
  async run(signal: AbortSignal): Promise<void> {
    if (this.running) throw new Error('leader election: run is already in progress');
    this.running = true;
    try {
      const acquired = await this.acquire(signal);
      if (!acquired) {
        // Aborted; an acquire whose write landed just as we were cancelled still holds the lease.
        if (this.releaseOnCancel && this.observedHolderIsMe()) await this.release();
        return;
      }
      const leadership = new AbortController();
      this.leading = true;
      this.startLeading(leadership.signal);
      const outcome = await this.renewLoop(signal);
      this.leading = false;
      leadership.abort(new Error(outcome === 'lost' ? 'leader election lost' : 'leader election stopped'));
      if (outcome === 'lost') {
        this.logger.error('leader election lost: lease not renewed within the renew deadline', {
          identity: this.identity,
          renewDeadlineMs: this.timings.renewDeadlineMs,
        });
      }
      this.invoke('onStoppedLeading', () => this.callbacks.onStoppedLeading());
      if (outcome === 'cancelled' && this.releaseOnCancel) await this.release();
    } finally {
      this.running = false;
    }
  }

  private startLeading(signal: AbortSignal): void {
    this.logger.info('became leader', { identity: this.identity });
    this.invoke('onStartedLeading', () => {
      const result = this.callbacks.onStartedLeading(signal);
      if (result instanceof Promise) {
        result.catch((err: unknown) =>
          this.logger.error('onStartedLeading callback failed', { error: describeError(err) }),
        );
      }
    });
  }

  private async acquire(signal: AbortSignal): Promise<boolean> {
    this.logger.info('attempting to acquire leader lease', { identity: this.identity });
    while (!signal.aborted) {
      const attempt = timeoutSignal(this.clock, this.timings.renewDeadlineMs, signal);
      const acquired = await raceAbort(this.tryAcquireOrRenew(attempt.signal), attempt.signal, () => false);
      attempt.cancel();
      this.maybeReportTransition();
      if (acquired) {
        this.logger.info('acquired leader lease', { identity: this.identity });
        return true;
      }
      const period = this.timings.retryPeriodMs;
      await sleep(this.clock, period + this.random() * JITTER_FACTOR * period, signal);
    }
    return false;
  }

  private async renewLoop(signal: AbortSignal): Promise<RenewOutcome> {
    for (;;) {
      if (signal.aborted) return 'cancelled';
      const renewed = await this.renewWithinDeadline(signal);
      this.maybeReportTransition();
      if (!renewed) return signal.aborted ? 'cancelled' : 'lost';
      await sleep(this.clock, this.timings.retryPeriodMs, signal);
    }
  }

  /** Tries now, then every retryPeriod, until a renewal succeeds or renewDeadline passes. */
  private async renewWithinDeadline(signal: AbortSignal): Promise<boolean> {
    const deadline = timeoutSignal(this.clock, this.timings.renewDeadlineMs, signal);
    try {
      while (!deadline.signal.aborted) {
        const renewed = await raceAbort(this.tryAcquireOrRenew(deadline.signal), deadline.signal, () => false);
        if (renewed) return true;
        await sleep(this.clock, this.timings.retryPeriodMs, deadline.signal);
      }
      return false;
    } finally {
      deadline.cancel();
    }
  }

  /** One attempt, exactly client-go's tryAcquireOrRenew. Never throws. */
  private async tryAcquireOrRenew(signal: AbortSignal): Promise<boolean> {
    const now = this.clock.now();
    const desired: LeaderElectionRecord = {
      holderIdentity: this.identity,
      leaseDurationSeconds: Math.ceil(this.timings.leaseDurationMs / 1000),
      acquireTime: new Date(now),
      renewTime: new Date(now),
      leaseTransitions: 0,
    };

    let current: ObservedLease | undefined;
    try {
      current = await this.lock.get(signal);
    } catch (err) {
      this.logger.warn('error retrieving leader lease', { error: describeError(err) });
      return false;
    }
    if (signal.aborted) return false;

    if (current === undefined) {
      try {
        await this.lock.create(desired, signal);
      } catch (err) {
        this.logWriteError('create', err);
        return false;
      }
      this.setObserved(desired);
      return !signal.aborted;
    }

    const raw = rawRecord(current.record);
    if (raw !== this.observedRaw) {
      this.observedRecord = current.record;
      this.observedRaw = raw;
      this.observedTime = this.clock.now();
    }
    if (current.record.holderIdentity !== '' && this.isLeaseValid(now) && !this.observedHolderIsMe()) {
      this.logger.debug('leader lease is held by another replica and has not expired', {
        holder: current.record.holderIdentity,
      });
      return false;
    }

    if (this.observedHolderIsMe()) {
      desired.acquireTime = current.record.acquireTime;
      desired.leaseTransitions = current.record.leaseTransitions;
    } else {
      desired.leaseTransitions = current.record.leaseTransitions + 1;
    }
    try {
      await this.lock.update(desired, current.resourceVersion, signal);
    } catch (err) {
      this.logWriteError('update', err);
      return false;
    }
    this.setObserved(desired);
    return !signal.aborted;
  }

  /** Gives the lease up so a standby need not wait for it to expire. Bounded by renewDeadline; never throws. */
  private async release(): Promise<void> {
    const attempt = timeoutSignal(this.clock, this.timings.renewDeadlineMs);
    const work = async (): Promise<void> => {
      const current = await this.lock.get(attempt.signal);
      if (current === undefined || current.record.holderIdentity !== this.identity) return;
      const now = this.clock.now();
      const released: LeaderElectionRecord = {
        holderIdentity: '',
        leaseDurationSeconds: 1,
        acquireTime: new Date(now),
        renewTime: new Date(now),
        leaseTransitions: current.record.leaseTransitions,
      };
      await this.lock.update(released, current.resourceVersion, attempt.signal);
      this.setObserved(released);
      this.logger.info('released leader lease', { identity: this.identity });
    };
    try {
      await raceAbort(work(), attempt.signal, () => {
        this.logger.warn('timed out releasing leader lease; it will expire instead');
      });
    } catch (err) {
      this.logger.warn('failed to release leader lease; it will expire instead', { error: describeError(err) });
    } finally {
      attempt.cancel();
    }
  }

  private setObserved(record: LeaderElectionRecord): void {
    this.observedRecord = record;
    this.observedRaw = rawRecord(record);
    this.observedTime = this.clock.now();
  }

  private isLeaseValid(now: number): boolean {
    const durationMs = (this.observedRecord?.leaseDurationSeconds ?? 0) * 1000;
    return this.observedTime + durationMs > now;
  }

  private observedHolderIsMe(): boolean {
    return this.observedRecord?.holderIdentity === this.identity;
  }

  private maybeReportTransition(): void {
    const holder = this.observedRecord?.holderIdentity ?? '';
    if (holder === this.reportedLeader) return;
    this.reportedLeader = holder;
    if (holder === '') return;
    this.logger.info('new leader observed', { leader: holder });
    const onNewLeader = this.callbacks.onNewLeader;
    if (onNewLeader) this.invoke('onNewLeader', () => onNewLeader(holder));
  }

  private logWriteError(op: string, err: unknown): void {
    if (isConflict(err)) {
      this.logger.debug(`leader lease ${op} lost a race (conflict)`, { error: describeError(err) });
    } else {
      this.logger.warn(`error writing leader lease (${op})`, { error: describeError(err) });
    }
  }

  private invoke(name: string, fn: () => void): void {
    try {
      fn();
    } catch (err) {
      this.logger.error(`${name} callback failed`, { error: describeError(err) });
    }
  }
}
