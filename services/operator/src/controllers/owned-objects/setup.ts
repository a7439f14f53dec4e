/**
 * The `owned-objects` controller sets itself up: the caches of what the operator owns (the same
 * informers the instances controller asked for), a key per added or updated object, and orphan
 * cleanup on the instances controller's port; a live owner goes to the instances controller.
 */
import type { PolicyResource } from '../../kube/discovery.js';
import type { ControllerOptions } from '../../runtime/manager.js';
import type { Instances } from '../instances/setup.js';
import type { SetupContext } from '../setup.js';
import { ownedObjectInformers } from './caches.js';
import { OWNED_OBJECTS_CONTROLLER, ownedObjectsReconciler } from './controller.js';
import { ownedObjectSource } from './key-sources.js';
import { OrphanCleanup } from './orphan-cleanup.js';

export { OWNED_OBJECTS_CONTROLLER };

export interface OwnedObjectsOptions {
  /** The owned kinds besides Namespaces and RuntimeClasses (as the instances controller got them). */
  ownedResources: readonly PolicyResource[];
  concurrency: number;
}

export function setupOwnedObjects(
  ctx: SetupContext,
  options: OwnedObjectsOptions,
  instances: Pick<Instances, 'port' | 'reconcilerFor' | 'owners'>,
): ControllerOptions {
  const logger = ctx.logger.child({ component: 'reconciler' });
  const cleanupFor = (port: Instances['port']): OrphanCleanup =>
    new OrphanCleanup({ port, instances: instances.reconcilerFor(port), logger });
  return {
    reconciler: ownedObjectsReconciler(
      { port: instances.port, reconcilerFor: cleanupFor, logger: ctx.logger, clock: ctx.clock },
      instances.owners,
    ),
    sources: ownedObjectInformers(ctx, options.ownedResources).map((o) => ownedObjectSource(o.informer, o.type)),
    concurrency: options.concurrency,
  };
}
