/**
 * How the instances and owned-objects controllers call their reconcilers (the InstanceReconciler,
 * the OrphanCleanup): each reconcile gets
 * a ClusterPort that refuses further calls once the reconcile's signal has aborted (leadership
 * lost, or the shutdown drain bound passed), so a replica that may no longer lead stops writing at
 * its next API call; and every outcome is logged as one JSON line (controller, key, result,
 * durationMs). Failures are also logged by the worker pool with the error and retry count.
 */

import type { Logger } from '@kubeplus-isolation/service';
import { describeError } from '@kubeplus-isolation/service';
import type { ClusterPort } from '../cluster/port.js';
import type { Clock } from '../runtime/clock.js';
import { isConflict } from '../runtime/errors.js';

/** The reconciler to use for one reconcile, on the port it is given. */
export type ReconcilerFactory<R> = (port: ClusterPort) => R;

/**
 * A ClusterPort whose every call first checks `signal`: once it has aborted, calls reject with
 * its reason (every ClusterPort method is asynchronous) and never reach the API server.
 */
export function abortablePort(port: ClusterPort, signal: AbortSignal): ClusterPort {
  return new Proxy(port, {
    get(target, property, receiver) {
      const value: unknown = Reflect.get(target, property, receiver);
      if (typeof value !== 'function') return value;
      return (...args: unknown[]): unknown =>
        signal.aborted ? Promise.reject(signal.reason) : Reflect.apply(value, target, args);
    },
  });
}

export function logOutcome(
  logger: Logger,
  fields: Record<string, unknown>,
  startedAt: number,
  clock: Clock,
  outcome: { requeueAfterMs?: number } | undefined,
): void {
  const durationMs = Math.max(0, clock.now() - startedAt);
  const requeueAfterMs = outcome?.requeueAfterMs;
  if (requeueAfterMs !== undefined && requeueAfterMs > 0) {
    logger.info('reconciled', { ...fields, result: 'requeue', requeueAfterMs, durationMs });
  } else {
    logger.info('reconciled', { ...fields, result: 'success', durationMs });
  }
}

export function logFailure(
  logger: Logger,
  fields: Record<string, unknown>,
  startedAt: number,
  clock: Clock,
  err: unknown,
): void {
  const durationMs = Math.max(0, clock.now() - startedAt);
  // The worker pool logs the error itself (error level, with retries); this line adds the duration.
  logger.debug('reconcile failed', {
    ...fields,
    result: isConflict(err) ? 'conflict' : 'error',
    durationMs,
    error: describeError(err),
  });
}

export interface ControllerDeps<R> {
  port: ClusterPort;
  reconcilerFor: ReconcilerFactory<R>;
  logger: Logger;
  clock?: Clock;
}
