/**
 * The `owned-objects` controller: one object carrying the operator's ownership markers per key
 * (`encodeOwnedRef`) → `OrphanCleanup.cleanupOrphan` (orphan-cleanup.ts), which deletes it when
 * its owner is gone and otherwise returns the owner, handed to the instances controller to
 * restore drift.
 */
import { encodeInstanceKey } from '../../desired/instance.js';
import { systemClock } from '../../runtime/clock.js';
import type { Reconciler } from '../../runtime/manager.js';
import type { ReconcileOutcome } from '../../runtime/worker-pool.js';
import { abortablePort, type ControllerDeps, logFailure, logOutcome } from '../reconcile-call.js';
import { decodeOwnedRef } from './keys.js';
import type { OrphanCleanup } from './orphan-cleanup.js';

export const OWNED_OBJECTS_CONTROLLER = 'owned-objects';
/**
 * The `owned-objects` controller: one owned object per key (`encodeOwnedRef`). Deletes it when
 * its owner is gone; otherwise pushes the owner to `owners` so its reconcile restores drift.
 */
export function ownedObjectsReconciler(
  { port, reconcilerFor, logger, clock = systemClock }: ControllerDeps<Pick<OrphanCleanup, 'cleanupOrphan'>>,
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
