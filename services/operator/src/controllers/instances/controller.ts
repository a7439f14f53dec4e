import { decodeInstanceKey, type InstanceKey } from '../../desired/instance.js';
import { systemClock } from '../../runtime/clock.js';
import type { Reconciler } from '../../runtime/manager.js';
import type { ReconcileOutcome } from '../../runtime/worker-pool.js';
import { abortablePort, type ControllerDeps, logFailure, logOutcome } from '../reconcile-call.js';
import type { InstanceReconciler } from './reconciler.js';
import type { SettlePort, SettleResult } from './settle.js';

export const INSTANCES_CONTROLLER = 'instances';

function instanceFields(key: InstanceKey): Record<string, unknown> {
  return { kind: `${key.kind}.${key.group}`, namespace: key.namespace, name: key.name };
}

/** The `instances` controller: one instance per key (`encodeInstanceKey`). */
/** After a successful reconcile: settle the tenant namespace (settle.ts), issue 35's hold. */
export type SettleHook = (port: SettlePort, key: InstanceKey) => Promise<SettleResult>;

function earliest(a: { requeueAfterMs?: number } | undefined, b: SettleResult): { requeueAfterMs?: number } {
  const delays = [a?.requeueAfterMs, b.requeueAfterMs].filter((d): d is number => d !== undefined);
  return delays.length === 0 ? {} : { requeueAfterMs: Math.min(...delays) };
}

export function instancesReconciler({
  port,
  reconcilerFor,
  logger,
  clock = systemClock,
  settle,
}: ControllerDeps<Pick<InstanceReconciler, 'reconcile'>> & { settle?: SettleHook }): Reconciler {
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
        const p = abortablePort(port, signal);
        const reconciled = (await reconcilerFor(p).reconcile(instance)) ?? undefined;
        const outcome = settle === undefined ? reconciled : earliest(reconciled, await settle(p, instance));
        logOutcome(log, fields, startedAt, clock, outcome);
        return outcome;
      } catch (err) {
        logFailure(log, fields, startedAt, clock, err);
        throw err;
      }
    },
  };
}
