/**
 * What the operator does to an instance object itself: nothing, except take off the finalizer an
 * earlier release put on it. Every write to an instance of a KubePlus Kind is an UPDATE through
 * KubePlus's fail-closed mutating webhook, which rewrites `accountidentity` to the writer, may
 * start a `helm upgrade`, refuses while the tenant namespace is Terminating and refuses everything
 * while KubePlus is down. So isolation never waits on such a write, and the cleanup of what an
 * instance owns is level-triggered from the owned objects (owned-objects/orphan-cleanup.ts), not
 * held by a finalizer.
 *
 * The one write left: releases before this one added `isolation.kubeplus.io/cleanup` to every
 * instance asking for isolation. An instance still carrying it would never finish deleting once
 * this operator no longer finalizes, so the operator removes it, once per such instance, as soon
 * as it sees it. It does so while the instance is live too: that is when KubePlus's webhook is most
 * likely to allow it (it refuses UPDATEs while the tenant namespace is Terminating, which is
 * exactly the state during KubePlus's own deletion).
 */
import { FINALIZER } from '@kubeplus-isolation/spec';
import type { Instance } from './instance.js';

/** The finalizer releases before this one put on instances; now only ever removed. */
export const LEGACY_FINALIZER = FINALIZER;

/** What one reconcile of an instance does. */
export interface InstancePlan {
  /** The instance's finalizer list without the legacy finalizer, when it carries it (the one write). */
  removeLegacyFinalizer?: string[];
  /**
   * `sync`: bring what it owns to what its annotations ask; `prune`: it asks for no isolation, so
   * only what it still owns (if anything) goes; `none`: it is being deleted, and orphan cleanup
   * takes everything it owns down (the instance's own state no longer matters).
   */
  isolation: 'sync' | 'prune' | 'none';
}

/** `asks`: whether the instance carries either isolation annotation. */
export function planInstance(
  instance: Pick<Instance, 'finalizers' | 'deletionTimestamp'>,
  asks: boolean,
): InstancePlan {
  const plan: InstancePlan = {
    isolation: instance.deletionTimestamp !== undefined ? 'none' : asks ? 'sync' : 'prune',
  };
  if (instance.finalizers.includes(LEGACY_FINALIZER)) {
    plan.removeLegacyFinalizer = instance.finalizers.filter((f) => f !== LEGACY_FINALIZER);
  }
  return plan;
}

/**
 * Whether the owner an object names is gone for good, so orphan cleanup deletes the object:
 * absent, or being deleted (nothing of it will come back; no finalizer of this operator holds it).
 */
export function isOwnerGone(instance: Pick<Instance, 'deletionTimestamp'> | undefined): boolean {
  return instance === undefined || instance.deletionTimestamp !== undefined;
}
