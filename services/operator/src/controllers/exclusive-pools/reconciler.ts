/**
 * The exclusive-pools reconciler: ONE key, the cluster's ExclusivePools object. Level-triggered:
 * every reconcile reads every isolated namespace's resolved mandate from the Namespace cache and
 * every Node's labels from the Node cache (a pool's nodes: judged when a Pod names one in
 * spec.nodeName), plans the parameter (desired/exclusive-pools.ts) and writes it only when the cached object says
 * something else (or is missing: created; edited by hand: put back). A namespace whose resolved
 * annotation does not parse holds no pool here (the webhook ignores it too). A parameter larger
 * than EXCLUSIVE_POOLS_MAX_BYTES is not written: the last one stays, the error is logged and
 * retried with backoff, and the size gauge shows it; so is one holding more than
 * EXCLUSIVE_POOLS_MAX_NODES pool nodes (the CRD's maxProperties).
 *
 * Mandates that overlap (one namespace's own mandate reaches another's pool; the policy does not
 * refuse what a mandate prescribes: desired/exclusive-pools-overlaps.ts) are reported: a gauge of
 * how many namespaces overlap, a log line, and a Warning Event `ExclusivePoolsOverlap` on the
 * owning instance when a namespace's overlap first appears or changes (not at every reconcile).
 */
import { describeError, type Logger } from '@kubeplus-isolation/service';
import {
  MANAGED_BY_LABEL,
  MANAGED_BY_VALUE,
  NODE_ISOLATION_RESOLVED_ANNOTATION,
  parseNodeIsolation,
} from '@kubeplus-isolation/spec';
import type { KubernetesObject } from '@kubernetes/client-node';
import type { EventTarget, InstanceEvent } from '../../cluster/port.js';
import { EventReason } from '../../desired/event-reasons.js';
import {
  EXCLUSIVE_POOLS_MAX_BYTES,
  EXCLUSIVE_POOLS_MAX_NODES,
  EXCLUSIVE_POOLS_NAME,
  exclusivePoolsObject,
  exclusivePoolsSpec,
  type Mandate,
  type PoolNode,
  specBytes,
  specUpToDate,
} from '../../desired/exclusive-pools.js';
import { overlapMessage, poolOverlaps } from '../../desired/exclusive-pools-overlaps.js';
import type { InstanceIdentity } from '../../desired/instance.js';
import { ownerOf } from '../../desired/owner.js';
import type { Lister } from '../../runtime/informer.js';
import type { Reconciler } from '../../runtime/manager.js';
import type { ReconcileOutcome } from '../../runtime/worker-pool.js';

export const EXCLUSIVE_POOLS_CONTROLLER = 'exclusive-pools';

export interface ExclusivePoolsPort {
  /** Creates the object (`resourceVersion` undefined) or replaces it on that resourceVersion. */
  write(object: KubernetesObject, resourceVersion: string | undefined): Promise<void>;
}

export interface ExclusivePoolsHooks {
  /** After each plan: the namespaces it holds, its pool nodes and its size in bytes. */
  planned(namespaces: number, nodes: number, bytes: number): void;
  /** After each plan: how many namespaces' own mandates reach another namespace's pool. */
  overlapping(namespaces: number): void;
}

export interface ExclusivePoolsReconcilerOptions {
  /** The Namespaces labelled node-isolation-enabled. */
  namespaces: Lister<KubernetesObject>;
  /** The Nodes (names and labels are read). */
  nodes: Lister<KubernetesObject>;
  /** The cached ExclusivePools object(s) labelled managed-by. */
  params: Lister<KubernetesObject>;
  port: ExclusivePoolsPort;
  hooks: ExclusivePoolsHooks;
  logger: Logger;
  /** The watched instance an owner identity names, if cached (Events go there). */
  resolveOwner(owner: InstanceIdentity): EventTarget | undefined;
  recordEvent(target: EventTarget, event: InstanceEvent): Promise<void>;
}

/** The resolved mandates of `namespaces` (any shape): unparsable annotations hold nothing. */
export function mandatesOf(namespaces: readonly KubernetesObject[]): Mandate[] {
  const out: Mandate[] = [];
  for (const ns of namespaces) {
    const name = ns.metadata?.name;
    const parsed = parseNodeIsolation(ns.metadata?.annotations?.[NODE_ISOLATION_RESOLVED_ANNOTATION]);
    if (name !== undefined && parsed.ok) out.push({ namespace: name, spec: parsed.value });
  }
  return out;
}

/** The Nodes' names and labels (any shape): unnamed objects are skipped. */
export function poolNodesOf(nodes: readonly KubernetesObject[]): PoolNode[] {
  const out: PoolNode[] = [];
  for (const node of nodes) {
    const name = node.metadata?.name;
    if (name) out.push({ name, labels: node.metadata?.labels });
  }
  return out;
}

export class ExclusivePoolsReconciler implements Reconciler {
  readonly name = EXCLUSIVE_POOLS_CONTROLLER;

  /** Per namespace, the overlap last reported by an Event (its reached namespaces, joined). */
  private readonly reported = new Map<string, string>();

  constructor(private readonly options: ExclusivePoolsReconcilerOptions) {}

  async reconcile(): Promise<ReconcileOutcome> {
    const { namespaces, nodes, params, port, hooks, logger } = this.options;
    const objects = namespaces.list();
    const mandates = mandatesOf(objects);
    const spec = exclusivePoolsSpec(mandates, poolNodesOf(nodes.list()));
    const bytes = specBytes(spec);
    const poolNodes = Object.keys(spec.nodes).length;
    hooks.planned(spec.namespaces, poolNodes, bytes);
    await this.reportOverlaps(poolOverlaps(mandates, spec), objects);
    const stored = params.get(EXCLUSIVE_POOLS_NAME);
    if (stored !== undefined && specUpToDate((stored as { spec?: unknown }).spec, spec)) return;
    if (bytes > EXCLUSIVE_POOLS_MAX_BYTES) {
      throw new Error(
        `the exclusive-pools parameter of ${spec.namespaces} mandates would take ${bytes} bytes, more than the ${EXCLUSIVE_POOLS_MAX_BYTES} written at most (etcd's limit is 1.5 MiB): the last one written stays in force`,
      );
    }
    if (poolNodes > EXCLUSIVE_POOLS_MAX_NODES) {
      throw new Error(
        `the exclusive-pools parameter would hold ${poolNodes} pool nodes, more than the ${EXCLUSIVE_POOLS_MAX_NODES} its CRD admits: the last one written stays in force`,
      );
    }
    const object = exclusivePoolsObject(spec, { [MANAGED_BY_LABEL]: MANAGED_BY_VALUE });
    try {
      await port.write(object, stored?.metadata?.resourceVersion);
    } catch (err) {
      logger.debug('exclusive-pools write failed', { error: describeError(err) });
      throw err;
    }
    logger.info('exclusive pools written', { namespaces: spec.namespaces, nodes: poolNodes, bytes });
  }

  private async reportOverlaps(overlaps: Map<string, string[]>, objects: readonly KubernetesObject[]): Promise<void> {
    const { hooks, logger } = this.options;
    hooks.overlapping(overlaps.size);
    for (const ns of [...this.reported.keys()]) if (!overlaps.has(ns)) this.reported.delete(ns);
    for (const [namespace, reached] of overlaps) {
      const key = reached.join(',');
      if (this.reported.get(namespace) === key) continue;
      const message = overlapMessage(namespace, reached);
      logger.warn('a node-isolation mandate reaches another namespace’s exclusive pool', { namespace, reached });
      const meta = objects.find((o) => o.metadata?.name === namespace)?.metadata ?? {};
      const owner = ownerOf(meta);
      const target = owner === undefined ? undefined : this.options.resolveOwner(owner);
      // No watched instance (yet): the log and the gauge say it; the Event is tried again later.
      if (target === undefined) continue;
      try {
        await this.options.recordEvent(target, {
          type: 'Warning',
          reason: EventReason.ExclusivePoolsOverlap,
          message,
        });
        this.reported.set(namespace, key);
      } catch (err) {
        logger.warn('could not record an event', { namespace, error: describeError(err) });
      }
    }
  }
}
