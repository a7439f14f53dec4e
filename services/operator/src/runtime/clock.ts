/**
 * Injectable time: a wall clock and one-shot timers.
 *
 * Every timing decision in the controller runtime (lease expiry, backoff, requeue-after,
 * shutdown bounds) goes through a `Clock`, so tests drive time by hand or with jest's fake
 * timers instead of sleeping — the role k8s.io/utils/clock plays for client-go.
 */

export interface Clock {
  /** Milliseconds since the epoch. */
  now(): number;
  /** Runs `fn` once after `ms`; returns a function that cancels it (idempotent). */
  schedule(ms: number, fn: () => void): () => void;
}

/**
 * The process clock. Looks `Date.now`/`setTimeout` up on every call, so jest fake timers
 * installed after import still take effect.
 */
export const systemClock: Clock = {
  now: () => Date.now(),
  schedule(ms, fn) {
    const timer = setTimeout(fn, Math.max(0, ms));
    return () => clearTimeout(timer);
  },
};

/** Resolves after `ms`, or as soon as `signal` aborts. Never rejects. */
export function sleep(clock: Clock, ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted) {
      resolve();
      return;
    }
    const onAbort = (): void => {
      cancel();
      resolve();
    };
    const cancel = clock.schedule(ms, () => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    });
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

/** An AbortSignal that aborts after `ms` on `clock`, or when `parent` aborts. */
export function timeoutSignal(clock: Clock, ms: number, parent?: AbortSignal): { signal: AbortSignal; cancel(): void } {
  const controller = new AbortController();
  const onParentAbort = (): void => controller.abort(parent?.reason);
  const cancelTimer = clock.schedule(ms, () => {
    parent?.removeEventListener('abort', onParentAbort);
    controller.abort(new TimeoutError(`timed out after ${ms}ms`));
  });
  if (parent?.aborted) {
    cancelTimer();
    controller.abort(parent.reason);
  } else {
    parent?.addEventListener('abort', onParentAbort, { once: true });
  }
  return {
    signal: controller.signal,
    cancel() {
      cancelTimer();
      parent?.removeEventListener('abort', onParentAbort);
    },
  };
}

/** Settles like `promise`, but resolves `onAbort()` as soon as `signal` aborts (the promise is left to run). */
export function raceAbort<T>(promise: Promise<T>, signal: AbortSignal, onAbort: () => T): Promise<T> {
  if (signal.aborted) {
    promise.catch(() => undefined);
    return Promise.resolve(onAbort());
  }
  return new Promise<T>((resolve, reject) => {
    const abort = (): void => resolve(onAbort());
    signal.addEventListener('abort', abort, { once: true });
    promise.then(
      (value) => {
        signal.removeEventListener('abort', abort);
        resolve(value);
      },
      (err: unknown) => {
        signal.removeEventListener('abort', abort);
        reject(err);
      },
    );
  });
}

export class TimeoutError extends Error {
  override readonly name = 'TimeoutError';
}
