/**
 * The list/watch loop both services run, without its transport: what client-go's reflector does,
 * once, for the webhook's namespace informer (node:https), the operator's informers and its Pod
 * watch (@kubernetes/client-node). A transport (`ListerWatcher`) only lists and opens one watch;
 * everything about when to list, from where to watch, and how long to wait lives here:
 *
 * - resume: every event (bookmarks included) moves the resourceVersion; a watch the server ends
 *   (its `timeoutSeconds`, a restart) is reopened from it, without relisting;
 * - 410 Gone (a status or an ERROR event): the resourceVersion is too old, so it relists;
 * - idle timeout: a watch that delivered nothing for `idleTimeoutMs` is presumed dead and reopened
 *   from its resourceVersion (with bookmarks the API server sends something at least every minute);
 * - a watch that ended without delivering anything is reopened after a delay that doubles while it
 *   keeps happening (`quietCloseDelayMs`), so a server that ends every watch at once is not hammered;
 * - any other failure (a list or watch error, an ERROR event) stops the loop with that error;
 *   `WatchRestarts` restarts it with capped exponential backoff (and jitter), it resumes from its
 *   resourceVersion, and `WatchRestarts` keeps the staleness: since when it has been failing (or
 *   disconnected, when its owner says so).
 *
 * Time goes through an injected `WatchClock` (the operator's `Clock` is one), so tests drive it.
 * Per event the loop does no allocation: it counts the event, notes the time and the
 * resourceVersion (the webhook's hot path stays as lean as it was).
 */
import { httpStatusOf } from './errors.js';

/** Wall clock and one-shot timers (the operator's runtime `Clock` has this shape). */
export interface WatchClock {
  /** Milliseconds since the epoch. */
  now(): number;
  /** Runs `fn` once after `ms`; returns a function that cancels it (idempotent). */
  schedule(ms: number, fn: () => void): () => void;
}

/** The process clock; its timers never keep the process alive. Looks the globals up on every call (jest fake timers). */
export const systemWatchClock: WatchClock = {
  now: () => Date.now(),
  schedule(ms, fn) {
    const timer = setTimeout(fn, Math.max(0, ms));
    timer.unref();
    return () => clearTimeout(timer);
  },
};

/** A watch delivered nothing for its idle timeout: the connection may be dead. */
export class WatchIdleError extends Error {
  constructor(idleMs: number) {
    super(`watch received nothing for ${Math.round(idleMs / 1000)} s`);
    this.name = 'WatchIdleError';
  }
}

/** 410 Gone: the resourceVersion is too old to resume from. */
export function isGone(err: unknown): boolean {
  return httpStatusOf(err) === 410;
}

/** Capped exponential backoff with "equal jitter": a delay in [ceiling/2, ceiling]. `random` in [0, 1). */
export function backoffDelayMs(attempt: number, initialMs: number, maxMs: number, random: number): number {
  const ceiling = backoffCeilingMs(attempt, initialMs, maxMs);
  return Math.round(ceiling / 2 + (ceiling / 2) * random);
}

/** The un-jittered delay of attempt `attempt` (0-based): `initialMs` doubling per attempt, capped at `maxMs`. */
export function backoffCeilingMs(attempt: number, initialMs: number, maxMs: number): number {
  return Math.min(maxMs, initialMs * 2 ** Math.min(attempt, 30));
}

/**
 * Delay before reopening a watch the server ended cleanly (or before the relist after a 410):
 * none after a watch that delivered something (bookmarks included); after one that did not,
 * `initialMs`, doubling while it keeps happening, capped at `maxMs`.
 */
export function quietCloseDelayMs(previousMs: number, events: number, initialMs: number, maxMs: number): number {
  if (events > 0) return 0;
  return Math.min(previousMs > 0 ? previousMs * 2 : initialMs, maxMs);
}

/** What a transport calls while one watch runs. */
export interface WatchStream {
  /** The server answered 200: events flow from now on. */
  connected(): void;
  /** One event (ADDED, MODIFIED, DELETED, BOOKMARK, ERROR) with its object as decoded. */
  event(type: string, object: unknown): void;
  /**
   * Exactly once: `undefined` when the server ended the stream cleanly; otherwise the error (a
   * non-200 answer carrying its HTTP status, a network error), or the signal's reason once it aborted.
   */
  closed(err?: unknown): void;
}

/** A transport: one (paged, as it likes) list and one watch at a time. */
export interface ListerWatcher {
  /** Lists, handing on what it lists itself; resolves to the resourceVersion to watch from. Rejects on `signal`. */
  list(signal: AbortSignal): Promise<string>;
  /** Opens one watch from `resourceVersion`; ends it (`stream.closed(signal.reason)`) once `signal` aborts. */
  watch(resourceVersion: string, stream: WatchStream, signal: AbortSignal): void;
}

export interface ListWatchLoopOptions {
  /** Each ADDED, MODIFIED, DELETED and BOOKMARK event (not ERROR), before its resourceVersion is taken. */
  event(type: string, object: unknown): void;
  /** A watch request got its 200 response. */
  connected?(): void;
  /** A watch request ended, cleanly or not. */
  closed?(err: unknown): void;
  /** A watch that delivered nothing this long is reopened from its resourceVersion (0: never). Default 150 s. */
  idleTimeoutMs?: number;
  /** First delay before reopening a watch that ended without an event (doubling, capped). Default 1 s; 0: never wait. */
  quietCloseDelayMs?: number;
  quietCloseMaxDelayMs?: number;
  /** Whether a failure means "relist" (default: 410 Gone). */
  isGone?(err: unknown): boolean;
  /** The error an ERROR event that is not 410 stops the loop with (default: an Error carrying its code). */
  statusError?(status: WatchStatus): unknown;
  clock?: WatchClock;
}

/** The fields of the metav1.Status an ERROR event carries. */
export interface WatchStatus {
  code?: number;
  reason?: string;
  message?: string;
}

/** A watch with nothing for this long is presumed dead (client-go's reflector has no bound; bookmarks come every minute). */
export const WATCH_IDLE_TIMEOUT_MS = 150_000;
const QUIET_CLOSE_DELAY_MS = 1_000;
const QUIET_CLOSE_MAX_DELAY_MS = 30_000;

function defaultStatusError(status: WatchStatus): Error {
  return Object.assign(new Error(`watch ERROR event: ${status.code ?? 0} ${status.message ?? status.reason ?? ''}`), {
    code: status.code,
  });
}

function resourceVersionOf(object: unknown): string | undefined {
  if (typeof object !== 'object' || object === null) return undefined;
  const rv = (object as { metadata?: { resourceVersion?: unknown } }).metadata?.resourceVersion;
  return typeof rv === 'string' && rv !== '' ? rv : undefined;
}

/** Resolves after `ms`, or once `signal` aborts. */
function sleep(clock: WatchClock, ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const onAbort = (): void => {
      cancel();
      resolve();
    };
    const cancel = clock.schedule(ms, () => {
      signal.removeEventListener('abort', onAbort);
      resolve();
    });
    signal.addEventListener('abort', onAbort, { once: true });
  });
}

/**
 * List, then watch from the list's resourceVersion, resuming and relisting by itself (see the top
 * of this file) until stop(), or until a failure it reports by rejecting start(); start() again
 * resumes from where it got to.
 */
export class ListWatchLoop {
  readonly #lw: ListerWatcher;
  readonly #opts: ListWatchLoopOptions;
  readonly #clock: WatchClock;
  readonly #idleTimeoutMs: number;
  readonly #quietMs: number;
  readonly #quietMaxMs: number;
  readonly #isGone: (err: unknown) => boolean;
  #resourceVersion = '';
  #running: Promise<void> | undefined;
  #stop: AbortController | undefined;
  // The current watch (one at a time): what its stream calls update.
  #watch: AbortController | undefined;
  #events = 0;
  #errorStatus: WatchStatus | undefined;
  #lastEventAt = 0;
  #cancelIdle: (() => void) | undefined;
  #ended: ((err: unknown) => void) | undefined;
  readonly #checkIdle = (): void => this.#onIdleCheck();
  /** What the transport calls for the current watch: one object for every watch, nothing allocated per event. */
  readonly #stream: WatchStream = {
    connected: () => this.#onConnected(),
    event: (type, object) => this.#onEvent(type, object),
    closed: (err) => this.#onClosed(err),
  };

  constructor(lw: ListerWatcher, opts: ListWatchLoopOptions) {
    this.#lw = lw;
    this.#opts = opts;
    this.#clock = opts.clock ?? systemWatchClock;
    this.#idleTimeoutMs = opts.idleTimeoutMs ?? WATCH_IDLE_TIMEOUT_MS;
    this.#quietMs = opts.quietCloseDelayMs ?? QUIET_CLOSE_DELAY_MS;
    this.#quietMaxMs = opts.quietCloseMaxDelayMs ?? QUIET_CLOSE_MAX_DELAY_MS;
    this.#isGone = opts.isGone ?? isGone;
  }

  /** Where it resumes from ('' = list first). */
  get resourceVersion(): string {
    return this.#resourceVersion;
  }

  /** Resume from `rv` (e.g. a position kept elsewhere), or relist first (''). Only while stopped. */
  set resourceVersion(rv: string) {
    this.#resourceVersion = rv;
  }

  get running(): boolean {
    return this.#running !== undefined;
  }

  /** Resolves once stopped; rejects with the failure that stopped it. The same promise while running. */
  start(): Promise<void> {
    if (this.#running === undefined) {
      const stop = new AbortController();
      this.#stop = stop;
      this.#running = this.#run(stop.signal).finally(() => {
        this.#running = undefined;
      });
    }
    return this.#running;
  }

  async stop(): Promise<void> {
    this.#stop?.abort(new Error('watch stopped'));
    // A failure of the run was start()'s to report.
    await this.#running?.catch(() => undefined);
  }

  async #run(stopped: AbortSignal): Promise<void> {
    let delayMs = 0;
    while (!stopped.aborted) {
      if (delayMs > 0) {
        await sleep(this.#clock, delayMs, stopped);
        if (stopped.aborted) return;
      }
      if (this.#resourceVersion === '') {
        try {
          this.#resourceVersion = await this.#lw.list(stopped);
        } catch (e) {
          if (stopped.aborted) return;
          throw e;
        }
        if (stopped.aborted) return;
      }
      const err = await this.#watchOnce(stopped);
      if (stopped.aborted) return;
      const status = this.#errorStatus;
      if ((status !== undefined && status.code === 410) || (err !== undefined && this.#isGone(err))) {
        // Too old: relist, at once unless the watch before did not deliver anything either.
        this.#resourceVersion = '';
        delayMs = quietCloseDelayMs(delayMs, this.#events, this.#quietMs, this.#quietMaxMs);
      } else if (status !== undefined) {
        throw (this.#opts.statusError ?? defaultStatusError)(status);
      } else if (err instanceof WatchIdleError) {
        delayMs = 0;
      } else if (err !== undefined) {
        throw err;
      } else {
        delayMs = quietCloseDelayMs(delayMs, this.#events, this.#quietMs, this.#quietMaxMs);
      }
    }
  }

  /** One watch; resolves to how it ended (undefined: cleanly). */
  #watchOnce(stopped: AbortSignal): Promise<unknown> {
    return new Promise((resolve) => {
      const watch = new AbortController();
      const onStop = (): void => watch.abort(stopped.reason);
      stopped.addEventListener('abort', onStop, { once: true });
      this.#watch = watch;
      this.#events = 0;
      this.#errorStatus = undefined;
      this.#lastEventAt = this.#clock.now();
      this.#ended = (err) => {
        stopped.removeEventListener('abort', onStop);
        resolve(err);
      };
      if (this.#idleTimeoutMs > 0) this.#cancelIdle = this.#clock.schedule(this.#idleTimeoutMs, this.#checkIdle);
      try {
        this.#lw.watch(this.#resourceVersion, this.#stream, watch.signal);
      } catch (e) {
        // A transport that throws before its request (e.g. credentials): the watch ended with it.
        this.#onClosed(e);
      }
    });
  }

  #onIdleCheck(): void {
    this.#cancelIdle = undefined;
    const watch = this.#watch;
    if (watch === undefined) return;
    const quietMs = this.#clock.now() - this.#lastEventAt;
    if (quietMs >= this.#idleTimeoutMs) watch.abort(new WatchIdleError(this.#idleTimeoutMs));
    else this.#cancelIdle = this.#clock.schedule(this.#idleTimeoutMs - quietMs, this.#checkIdle);
  }

  #onConnected(): void {
    if (this.#watch === undefined) return;
    this.#lastEventAt = this.#clock.now();
    this.#opts.connected?.();
  }

  #onEvent(type: string, object: unknown): void {
    if (this.#watch === undefined) return;
    this.#lastEventAt = this.#clock.now();
    if (type === 'ERROR') {
      // The server ends the stream after it; what happens next depends on the code.
      this.#errorStatus = (typeof object === 'object' && object !== null ? object : {}) as WatchStatus;
      return;
    }
    this.#events += 1;
    this.#opts.event(type, object);
    const rv = resourceVersionOf(object);
    if (rv !== undefined) this.#resourceVersion = rv;
  }

  #onClosed(err: unknown): void {
    const ended = this.#ended;
    if (ended === undefined) return;
    this.#ended = undefined;
    this.#watch = undefined;
    this.#cancelIdle?.();
    this.#cancelIdle = undefined;
    this.#opts.closed?.(err);
    ended(err);
  }
}

export interface WatchRestartsOptions {
  /** First restart delay (attempt 0). */
  initialMs: number;
  /** Cap on the delay. */
  maxMs: number;
  /** Equal jitter (a delay in [ceiling/2, ceiling]) or none (the ceiling). */
  jitter: boolean;
  clock?: WatchClock;
  /** In [0, 1). Default Math.random. */
  random?: () => number;
}

/**
 * Restarts of a stopped loop with capped exponential backoff (and jitter), and its staleness: since
 * when it has been down (failing, or disconnected when its owner says so), until it is up again.
 */
export class WatchRestarts {
  readonly #restart: () => void;
  readonly #opts: WatchRestartsOptions;
  readonly #clock: WatchClock;
  #failures = 0;
  #downSince: number | undefined;
  #lastError: unknown;
  #cancel: (() => void) | undefined;
  #stopped = false;

  constructor(restart: () => void, opts: WatchRestartsOptions) {
    this.#restart = restart;
    this.#opts = opts;
    this.#clock = opts.clock ?? systemWatchClock;
  }

  /** Failures in a row (since it was last up). */
  get failures(): number {
    return this.#failures;
  }

  /** The latest failure; undefined once up again. */
  get lastError(): unknown {
    return this.#lastError;
  }

  /** Since when it has been down (ms), or undefined while up. */
  get downSince(): number | undefined {
    return this.#downSince;
  }

  /** For how long it has been down, or undefined while up. */
  downForMs(): number | undefined {
    return this.#downSince === undefined ? undefined : this.#clock.now() - this.#downSince;
  }

  /** Whether a restart is scheduled. */
  get pending(): boolean {
    return this.#cancel !== undefined;
  }

  /** Down without a failure (a watch that ended, about to be reopened). */
  down(): void {
    this.#downSince ??= this.#clock.now();
  }

  /**
   * A failure: noted, and a restart scheduled after the backoff delay. Returns that delay, or
   * undefined when a restart was already pending or it is stopped (nothing scheduled).
   */
  failed(err: unknown): number | undefined {
    this.down();
    this.#failures += 1;
    this.#lastError = err;
    if (this.#stopped || this.#cancel !== undefined) return undefined;
    const { initialMs, maxMs, jitter } = this.#opts;
    const attempt = this.#failures - 1;
    const delayMs = jitter
      ? backoffDelayMs(attempt, initialMs, maxMs, (this.#opts.random ?? Math.random)())
      : backoffCeilingMs(attempt, initialMs, maxMs);
    this.#cancel = this.#clock.schedule(delayMs, () => {
      this.#cancel = undefined;
      if (!this.#stopped) this.#restart();
    });
    return delayMs;
  }

  /** Up (a list and watch worked): backoff and staleness reset. Returns whether it had been failing. */
  up(): boolean {
    const wasFailing = this.#failures > 0;
    this.#failures = 0;
    this.#downSince = undefined;
    this.#lastError = undefined;
    return wasFailing;
  }

  /** No more restarts. */
  stop(): void {
    this.#stopped = true;
    this.#cancel?.();
    this.#cancel = undefined;
  }
}
