/**
 * The `owned-objects` controller sets itself up: the caches of what the operator owns (the same
 * informers the instances controller asked for), indexed by owner; its key sources (each added or
 * updated object, the objects of a deleted instance, a periodic pass over all of them); and orphan
 * cleanup on the instances controller's port. A live owner goes to the instances controller.
 */
import type { PolicyResource } from '../../kube/discovery.js';
import { indexByLabels } from '../../runtime/label-index.js';
import type { ControllerOptions } from '../../runtime/manager.js';
import type { Instances } from '../instances/setup.js';
import type { SetupContext } from '../setup.js';
import { ownedObjectInformers } from './caches.js';
import { OWNED_OBJECTS_CONTROLLER, ownedObjectsReconciler } from './controller.js';
import { deletedOwnerSource, ownedObjectSource, periodicOwnedSweep } from './key-sources.js';
import { OWNER_INDEX_LABELS } from './keys.js';
import { OrphanCleanup } from './orphan-cleanup.js';

export { OWNED_OBJECTS_CONTROLLER };

/** How often every owned object is checked again without an event (orphan cleanup's periodic pass). */
export const DEFAULT_ORPHAN_SWEEP_INTERVAL_MS = 10 * 60_000;

export interface OwnedObjectsOptions {
  /** The owned kinds besides Namespaces and RuntimeClasses (as the instances controller got them). */
  ownedResources: readonly PolicyResource[];
  concurrency: number;
  /** The periodic pass over every owned object (default DEFAULT_ORPHAN_SWEEP_INTERVAL_MS). */
  sweepIntervalMs?: number;
}

export function setupOwnedObjects(
  ctx: SetupContext,
  options: OwnedObjectsOptions,
  instances: Pick<Instances, 'port' | 'reconcilerFor' | 'owners' | 'caches'>,
): ControllerOptions {
  const logger = ctx.logger.child({ component: 'reconciler' });
  const cleanupFor = (port: Instances['port']): OrphanCleanup =>
    new OrphanCleanup({ port, instances: instances.reconcilerFor(port), logger });
  const owned = ownedObjectInformers(ctx, options.ownedResources);
  const byOwner = owned.map(({ type, informer }) => ({
    type,
    index: indexByLabels(informer, OWNER_INDEX_LABELS).index,
  }));
  const { caches } = instances;
  return {
    reconciler: ownedObjectsReconciler(
      { port: instances.port, reconcilerFor: cleanupFor, logger: ctx.logger, clock: ctx.clock },
      instances.owners,
    ),
    sources: [
      ...owned.map((o) => ownedObjectSource(o.informer, o.type)),
      deletedOwnerSource(caches.instances, (gvr) => caches.kinds.kindOf(gvr), byOwner),
      periodicOwnedSweep(owned, {
        intervalMs: options.sweepIntervalMs ?? DEFAULT_ORPHAN_SWEEP_INTERVAL_MS,
        clock: ctx.clock,
      }),
    ],
    concurrency: options.concurrency,
  };
}
