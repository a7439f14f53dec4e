/**
 * What the instance reconciler's parts share (reconciler.ts, node-sync.ts, sandbox-sync.ts, and
 * owned-objects' orphan cleanup): the port, the metric hooks, the log, and how an outcome becomes
 * an Event on the instance.
 */
import { NODE_ISOLATION_ANNOTATION, SANDBOX_ISOLATION_ANNOTATION } from '@kubeplus-isolation/spec';
import type { ApplyOutcome } from '../../cluster/apply.js';
import type { ClusterPort, EventTarget, InstanceEvent, ReadOptions } from '../../cluster/port.js';
import { type Instance, type InstanceKey, instanceIdentity, instanceKeyOf } from '../../desired/instance.js';
import { formatRef, type ManagedObject, refOf } from '../../desired/objects.js';
import type { PlatformClassProblem } from '../../desired/sandbox-platform-class.js';

export type AnnotationName = 'node-isolation' | 'sandbox-isolation';
export type ConflictKind = 'RuntimeClass' | 'AdmissionPolicy' | 'Namespace';

/** Callbacks for metrics. Called synchronously; they must not throw. */
export interface ReconcilerHooks {
  invalidAnnotation?(annotation: AnnotationName, key: InstanceKey): void;
  /** Advisory mode on a cluster serving no MutatingAdmissionPolicy API. */
  mutatingPolicyUnavailable?(key: InstanceKey): void;
  /** The platform RuntimeClass the sandbox annotation names cannot be used (desired/sandbox-platform-class.ts). */
  platformRuntimeClassUnusable?(reason: PlatformClassProblem, key: InstanceKey): void;
  conflict?(kind: ConflictKind, key: InstanceKey): void;
  /** Warm-pool Sandboxes deleted for starting before their class got its current handler (desired/stale-warm-sandboxes.ts). */
  staleWarmSandboxesDeleted?(count: number): void;
}

/** The subset of a (winston) logger the reconciler uses. */
export interface ReconcileLogger {
  debug(message: string, meta?: Record<string, unknown>): void;
  info(message: string, meta?: Record<string, unknown>): void;
  warn(message: string, meta?: Record<string, unknown>): void;
}

export const NO_LOG: ReconcileLogger = { debug() {}, info() {}, warn() {} };

export const FRESH: ReadOptions = { fresh: true };

export function asksForIsolation(instance: Instance): boolean {
  return (
    instance.annotations[NODE_ISOLATION_ANNOTATION] !== undefined ||
    instance.annotations[SANDBOX_ISOLATION_ANNOTATION] !== undefined
  );
}

function eventTarget(i: Instance): EventTarget {
  return {
    apiVersion: i.apiVersion,
    kind: i.kind,
    namespace: i.namespace,
    name: i.name,
    uid: i.uid,
    resourceVersion: i.resourceVersion,
  };
}

/** One reconcile's port, hooks and log, and its Events on the instance. */
export class SyncContext {
  constructor(
    readonly port: ClusterPort,
    readonly hooks: ReconcilerHooks,
    readonly log: ReconcileLogger,
    /** Delay before retrying after a conflict with another instance. */
    readonly conflictRequeueMs: number,
  ) {}

  warn(instance: Instance, reason: string, message: string): void {
    this.event(instance, 'Warning', reason, message);
  }

  /**
   * Best effort and not awaited, like client-go's recorder: the reconcile does not wait for the
   * Event's write, and an Event that cannot be recorded is logged, never fails the reconcile.
   */
  event(instance: Instance, type: InstanceEvent['type'], reason: string, message: string): void {
    const log = type === 'Warning' ? this.log.warn : this.log.info;
    log.call(this.log, message, { reason, instance: instanceIdentity(instance) });
    const failed = (err: unknown): void => {
      this.log.warn('could not record an event', { reason, error: err instanceof Error ? err.message : String(err) });
    };
    try {
      this.port.recordEvent(eventTarget(instance), { type, reason, message }).catch(failed);
    } catch (err) {
      failed(err);
    }
  }

  /**
   * What applying `applied` changed (`created Kind/name`, …, for an Event or the log); each object
   * held by someone else is a Warning `reason` on the instance and a `conflict` metric.
   */
  reportApplied(
    instance: Instance,
    applied: readonly { desired: ManagedObject; outcome: ApplyOutcome }[],
    conflict: ConflictKind,
    reason: string,
  ): { changed: string[]; conflicted: boolean } {
    const changed: string[] = [];
    let conflicted = false;
    for (const { desired, outcome } of applied) {
      if (outcome.result === 'conflict') {
        conflicted = true;
        this.hooks.conflict?.(conflict, instanceKeyOf(instance));
        this.warn(
          instance,
          reason,
          `${formatRef(refOf(desired))} belongs to ${outcome.owner ?? 'someone else'}; not taking it over`,
        );
      } else if (outcome.result !== 'unchanged') {
        changed.push(`${outcome.result} ${formatRef(refOf(desired))}`);
      }
    }
    return { changed, conflicted };
  }
}
