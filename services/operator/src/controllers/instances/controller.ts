/**
 * The operator's two controllers as Manager reconcilers (string keys), over InstanceReconciler:
 *
 * - `instances`: key → `InstanceReconciler.reconcile`;
 * - `owned-objects`: key → `InstanceReconciler.cleanupOrphan`, handing the owner it returns to
 *   the instances controller.
 *
 * Each reconcile gets a ClusterPort that refuses further calls once the reconcile's signal has
 * aborted (leadership lost, or the shutdown drain bound passed): a replica that may no longer
 * lead stops writing at its next API call instead of finishing the reconcile.
 *
 * Every outcome is logged as one JSON line (controller, key, result, durationMs); failures are
 * also logged by the worker pool with the error and retry count.
 */

import type { ClusterPort } from '../../cluster/port.js';
import { decodeInstanceKey, encodeInstanceKey, type InstanceKey } from '../../desired/instance.js';
import { type Clock, systemClock } from '../../runtime/clock.js';
import { describeError, isConflict } from '../../runtime/errors.js';
import type { Logger } from '../../runtime/log.js';
import type { Reconciler } from '../../runtime/manager.js';
import type { ReconcileOutcome } from '../../runtime/work-queue.js';
import { decodeOwnedRef } from './keys.js';
import type { InstanceReconciler } from './reconciler.js';

export const INSTANCES_CONTROLLER = 'instances';
export const OWNED_OBJECTS_CONTROLLER = 'owned-objects';
export const CONTROLLERS = [INSTANCES_CONTROLLER, OWNED_OBJECTS_CONTROLLER] as const;

/** The InstanceReconciler to use for one reconcile, on the port it is given. */
export type ReconcilerFactory = (port: ClusterPort) => Pick<InstanceReconciler, 'reconcile' | 'cleanupOrphan'>;

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

function logOutcome(
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

function logFailure(
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

function instanceFields(key: InstanceKey): Record<string, unknown> {
  return { kind: `${key.kind}.${key.group}`, namespace: key.namespace, name: key.name };
}

export interface ControllerDeps {
  port: ClusterPort;
  reconcilerFor: ReconcilerFactory;
  logger: Logger;
  clock?: Clock;
}

/** The `instances` controller: one instance per key (`encodeInstanceKey`). */
export function instancesReconciler({ port, reconcilerFor, logger, clock = systemClock }: ControllerDeps): Reconciler {
  const log = logger.child({ controller: INSTANCES_CONTROLLER });
  return {
    name: INSTANCES_CONTROLLER,
    async reconcile(key: string, signal: AbortSignal): Promise<ReconcileOutcome> {
      const instance = decodeInstanceKey(key);
      if (instance === undefined) {
        log.error('dropping a malformed instance key', { key });
        return undefined;
      }
      const fields = { key, ...instanceFields(instance) };
      const startedAt = clock.now();
      try {
        const outcome = await reconcilerFor(abortablePort(port, signal)).reconcile(instance);
        logOutcome(log, fields, startedAt, clock, outcome);
        return outcome;
      } catch (err) {
        logFailure(log, fields, startedAt, clock, err);
        throw err;
      }
    },
  };
}

/**
 * The `owned-objects` controller: one owned object per key (`encodeOwnedRef`). Deletes it when
 * its owner is gone; otherwise pushes the owner to `owners` so its reconcile restores drift.
 */
export function ownedObjectsReconciler(
  { port, reconcilerFor, logger, clock = systemClock }: ControllerDeps,
  owners: { push(key: string): void },
): Reconciler {
  const log = logger.child({ controller: OWNED_OBJECTS_CONTROLLER });
  return {
    name: OWNED_OBJECTS_CONTROLLER,
    async reconcile(key: string, signal: AbortSignal): Promise<ReconcileOutcome> {
      const ref = decodeOwnedRef(key);
      if (ref === undefined) {
        log.error('dropping a malformed owned-object key', { key });
        return undefined;
      }
      const fields = { key, object: `${ref.kind}/${ref.name}` };
      const startedAt = clock.now();
      try {
        const { enqueue } = await reconcilerFor(abortablePort(port, signal)).cleanupOrphan(ref);
        if (enqueue !== undefined) owners.push(encodeInstanceKey(enqueue));
        logOutcome(log, { ...fields, owner: enqueue && encodeInstanceKey(enqueue) }, startedAt, clock, undefined);
        return undefined;
      } catch (err) {
        logFailure(log, fields, startedAt, clock, err);
        throw err;
      }
    },
  };
}
