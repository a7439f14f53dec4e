import { decodeInstanceKey, type InstanceKey } from '../../desired/instance.js';
import { systemClock } from '../../runtime/clock.js';
import type { Reconciler } from '../../runtime/manager.js';
import type { ReconcileOutcome } from '../../runtime/worker-pool.js';
import { abortablePort, type ControllerDeps, logFailure, logOutcome } from '../reconcile-call.js';
import type { InstanceReconciler } from './reconciler.js';

export const INSTANCES_CONTROLLER = 'instances';

function instanceFields(key: InstanceKey): Record<string, unknown> {
  return { kind: `${key.kind}.${key.group}`, namespace: key.namespace, name: key.name };
}

/** The `instances` controller: one instance per key (`encodeInstanceKey`). */
export function instancesReconciler({
  port,
  reconcilerFor,
  logger,
  clock = systemClock,
}: ControllerDeps<Pick<InstanceReconciler, 'reconcile'>>): Reconciler {
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
