/**
 * The fail-open audit as a Manager reconciler keyed by namespace name: it lists the namespace's
 * Pods (paginated), finds those lacking the mandated placement (`findUnisolatedPods`), keeps the
 * counts for the `kubeplus_operator_unisolated_pods` gauge, logs the Pods and records a Warning
 * Event on the instance owning the namespace. It never writes a Pod.
 *
 * Memory: one page of Pods at a time, the first `maxLogPods` names of one namespace while it is
 * audited, and three counters per isolated namespace. No Pod cache: see README "Fail-open audit".
 */

import { createSilentLogger, describeError, type Logger } from '@kubeplus-isolation/service';
import {
  ForeignPoolIndex,
  findUnisolatedPods,
  foreignPodsOnNode,
  judgePlacement,
  type MisplacedPod,
  type NodeIsolationSpec,
  type NodeLike,
  type PlacedPodLike,
  type PodLike,
  poolNodes,
} from '@kubeplus-isolation/spec';
import type { KubernetesObject } from '@kubernetes/client-node';
import type { EventTarget, InstanceEvent } from '../../cluster/port.js';
import { type InstanceIdentity, instanceIdentity } from '../../desired/instance.js';
import { type Clock, systemClock } from '../../runtime/clock.js';
import type { Lister } from '../../runtime/informer.js';
import type { Reconciler } from '../../runtime/manager.js';
import type { ReconcileOutcome } from '../../runtime/worker-pool.js';
import type { PodFindings } from '../compliance/openreport.js';
import { isolatedMandates } from './nodes.js';
import {
  addForeign,
  addMisplaced,
  emptyPlacement,
  FOREIGN_POD_ON_POOL_REASON,
  foreignPodMessage,
  logMisplaced,
  misplacedMessage,
  otherMandates,
  type PlacementCounts,
  type PlacementFindings,
  PODS_MISPLACED_REASON,
  placementTotal,
  zeroPlacementCounts,
} from './placement.js';
import {
  addPage,
  auditedNamespace,
  describePod,
  emptyFindings,
  type Findings,
  isolatedAgainMessage,
  type MissingCounts,
  notIsolatedMessage,
  PODS_ISOLATED_REASON,
  PODS_NOT_ISOLATED_REASON,
  totalOf,
  zeroCounts,
} from './report.js';

export const AUDIT_CONTROLLER = 'node-isolation-audit';

export interface PodPage {
  items: ReadonlyArray<PodLike & PlacedPodLike>;
  /** Set when more Pods follow (the list's `metadata.continue`). */
  continueToken?: string | undefined;
}

/** One paginated LIST of a namespace's Pods that have not finished; errors carry the HTTP status. */
export interface PodLister {
  listPods(namespace: string, page: { limit: number; continueToken?: string | undefined }): Promise<PodPage>;
  /**
   * One paginated LIST of the unfinished Pods bound to `node`, in every namespace (field selector
   * `spec.nodeName`): the foreign-Pod search of a pool's nodes. Absent: no such search.
   */
  listPodsOnNode?(node: string, page: { limit: number; continueToken?: string | undefined }): Promise<PodPage>;
}

/** Where Pods really run (issue 38): what the audit reads to judge it. */
export interface PlacementOptions {
  /** The Node cache (name, labels, taints). */
  nodes: Lister<KubernetesObject>;
  /** Namespaces whose Pods are never foreign on a pool (system, the release's, --pool-exempt-namespaces). */
  exempt: ReadonlySet<string>;
}

/** Counters the auditor reports its API cost through. */
export interface AuditHooks {
  /** One LIST request was made. */
  podListRequest(): void;
  /** `n` Pods were examined. */
  podsChecked(n: number): void;
}

export interface NodeIsolationAuditorOptions {
  pods: PodLister;
  /** The isolated namespaces (informer cache, label-selected). */
  namespaces: Lister<KubernetesObject>;
  /** The instance to put the Event on, if it exists and is watched; undefined otherwise. */
  resolveOwner(owner: InstanceIdentity): EventTarget | undefined;
  /** Never rejects (the runtime's EventRecorder). */
  recordEvent(target: EventTarget, event: InstanceEvent): Promise<void>;
  hooks?: AuditHooks;
  logger?: Logger;
  clock?: Clock;
  /** Pods per LIST page. Default 500 (kubectl's chunk size). */
  pageSize?: number;
  /** Pods named in the Event. Default 10. */
  maxEventPods?: number;
  /** Pods named in the log line. Default 100. */
  maxLogPods?: number;
  /**
   * The compliance reports (controllers/compliance): handed every audited namespace's findings
   * (undefined for a namespace not, or no longer, node-isolated), reusing this audit's Pod LIST.
   */
  reports?: NamespaceReports | undefined;
  /** Unisolated Pods kept by name per namespace, for the reports. Default 0 (the log's alone). */
  reportPods?: number;
  /** Judge where Pods really run: off-pool, tolerating beyond the mandate, foreign Pods on the pool. */
  placement?: PlacementOptions | undefined;
}

/** Where the audit hands its findings on (compliance/reporter.ts NamespaceReporter). */
export interface NamespaceReports {
  /** Never rejects but with `signal`'s reason. */
  sync(namespace: string, pods: PodFindings | undefined, signal: AbortSignal): Promise<void>;
}

export class NodeIsolationAuditor implements Reconciler {
  readonly name = AUDIT_CONTROLLER;
  /** Unisolated Pods per audited namespace, this leadership term. */
  private readonly counts = new Map<string, MissingCounts>();
  /** Placement findings per audited namespace, this leadership term. */
  private readonly placementCounts = new Map<string, PlacementCounts>();
  private readonly logger: Logger;
  private readonly clock: Clock;
  private readonly pageSize: number;
  private readonly maxEventPods: number;
  private readonly maxLogPods: number;
  private readonly keepPods: number;

  constructor(private readonly options: NodeIsolationAuditorOptions) {
    this.logger = (options.logger ?? createSilentLogger()).child({ controller: AUDIT_CONTROLLER });
    this.clock = options.clock ?? systemClock;
    this.pageSize = options.pageSize ?? 500;
    this.maxEventPods = options.maxEventPods ?? 10;
    this.maxLogPods = options.maxLogPods ?? 100;
    this.keepPods = Math.max(this.maxLogPods, options.reportPods ?? 0);
  }

  /** Unisolated Pods per namespace still isolated (for the bounded per-namespace gauge). */
  countsByNamespace(): Map<string, number> {
    const out = new Map<string, number>();
    for (const [namespace, counts] of this.counts) {
      if (this.options.namespaces.get(namespace) !== undefined) out.set(namespace, totalOf(counts));
    }
    return out;
  }

  /** Unisolated Pods over every namespace still isolated, by what they lack. */
  totals(): MissingCounts {
    const sum = zeroCounts();
    for (const [namespace, counts] of this.counts) {
      if (this.options.namespaces.get(namespace) === undefined) continue;
      sum.node_selector += counts.node_selector;
      sum.tolerations += counts.tolerations;
      sum.both += counts.both;
    }
    return sum;
  }

  /** Placement findings over every namespace still isolated, by finding. */
  placementTotals(): PlacementCounts {
    const sum = zeroPlacementCounts();
    for (const [namespace, counts] of this.placementCounts) {
      if (this.options.namespaces.get(namespace) === undefined) continue;
      sum.off_pool += counts.off_pool;
      sum.tolerates_beyond_mandate += counts.tolerates_beyond_mandate;
      sum.foreign_on_pool += counts.foreign_on_pool;
    }
    return sum;
  }

  /** Forgets every finding (a leadership term begins or ends: only the leader reports). */
  reset(): void {
    this.counts.clear();
    this.placementCounts.clear();
  }

  async reconcile(namespace: string, signal: AbortSignal): Promise<ReconcileOutcome> {
    const startedAt = this.clock.now();
    const ns = this.options.namespaces.get(namespace);
    const audited = ns === undefined ? ({ state: 'not-isolated' } as const) : auditedNamespace(ns.metadata ?? {});
    if (audited.state !== 'isolated') {
      this.counts.delete(namespace);
      this.placementCounts.delete(namespace);
      if (audited.state === 'invalid') {
        this.logger.warn('isolated namespace not audited: no valid mandate, so the webhook admits its Pods unpatched', {
          namespace,
          errors: audited.errors,
        });
      }
      await this.options.reports?.sync(namespace, undefined, signal);
      return;
    }

    let findings = emptyFindings();
    let placement = emptyPlacement();
    let failingPods = 0;
    const placed = this.options.placement;
    const mandates = placed === undefined ? undefined : isolatedMandates(this.options.namespaces);
    const others = mandates === undefined ? [] : otherMandates(namespace, mandates);
    const foreignPools = new ForeignPoolIndex(audited.spec, others);
    let continueToken: string | undefined;
    let pages = 0;
    do {
      if (signal.aborted) throw signal.reason;
      const page = await this.options.pods.listPods(namespace, { limit: this.pageSize, continueToken });
      pages++;
      this.options.hooks?.podListRequest();
      this.options.hooks?.podsChecked(page.items.length);
      const unisolated = findUnisolatedPods(audited.spec, page.items);
      findings = addPage(findings, page.items.length, unisolated, this.keepPods);
      const misplaced: MisplacedPod[] = [];
      if (placed !== undefined) {
        for (const pod of page.items) {
          const nodeName = pod.spec?.nodeName;
          const node = nodeName ? (placed.nodes.get(nodeName) as NodeLike | undefined) : undefined;
          const found = judgePlacement(audited.spec, pod, node, foreignPools);
          if (found !== undefined) misplaced.push(found);
        }
        placement = addMisplaced(placement, misplaced, this.keepPods);
      }
      failingPods += new Set([...unisolated.map((p) => p.name), ...misplaced.map((p) => p.name)]).size;
      continueToken = page.continueToken || undefined;
    } while (continueToken !== undefined);
    if (placed !== undefined && mandates !== undefined) {
      const listed = await this.foreignPods(namespace, audited.spec, placed, mandates, placement, signal);
      placement = listed.placement;
      pages += listed.requests;
    }
    // A replica that lost the Lease meanwhile reports nothing.
    if (signal.aborted) throw signal.reason;

    const previous = this.counts.get(namespace);
    this.counts.set(namespace, findings.counts);
    const previousPlacement = this.placementCounts.get(namespace);
    if (placed !== undefined) this.placementCounts.set(namespace, placement.counts);
    const owner = audited.owner === undefined ? undefined : instanceIdentity(audited.owner);
    const total = totalOf(findings.counts);
    const fields = { namespace, pods: findings.checked, listRequests: pages, durationMs: this.clock.now() - startedAt };
    if (total > 0) {
      await this.report(namespace, audited.owner, findings, fields);
    } else if (previous !== undefined && totalOf(previous) > 0) {
      this.logger.info('no Pod lacks the mandated node placement any more', { ...fields, owner });
      await this.event(namespace, audited.owner, {
        type: 'Normal',
        reason: PODS_ISOLATED_REASON,
        message: isolatedAgainMessage(namespace, totalOf(previous)),
      });
    } else {
      this.logger.debug('namespace audited: every Pod carries the mandated node placement', { ...fields, owner });
    }
    if (placed !== undefined)
      await this.reportPlacement(namespace, audited.owner, placement, previousPlacement, fields);
    await this.options.reports?.sync(
      namespace,
      {
        checked: findings.checked,
        unisolated: total,
        pods: findings.pods,
        failingPods,
        ...(placed === undefined
          ? {}
          : {
              placement: {
                offPool: placement.counts.off_pool,
                beyondMandate: placement.counts.tolerates_beyond_mandate,
                pods: placement.pods,
                foreign: placement.foreign.map((f) => ({ node: f.node, count: f.count })),
              },
            }),
      },
      signal,
    );
  }

  /**
   * The foreign Pods on the namespace's pool nodes: per pool node (from the Node cache), one paged
   * LIST of the Pods bound to it, in every namespace. Returns the findings and the requests made.
   */
  private async foreignPods(
    namespace: string,
    spec: NodeIsolationSpec,
    placed: PlacementOptions,
    mandates: ReadonlyMap<string, NodeIsolationSpec>,
    start: PlacementFindings,
    signal: AbortSignal,
  ): Promise<{ placement: PlacementFindings; requests: number }> {
    const lister = this.options.pods;
    if (lister.listPodsOnNode === undefined) return { placement: start, requests: 0 };
    let placement = start;
    let requests = 0;
    const nodes = poolNodes(spec, placed.nodes.list() as NodeLike[]);
    nodes.sort((a, b) => ((a.metadata?.name ?? '') < (b.metadata?.name ?? '') ? -1 : 1));
    for (const node of nodes) {
      const nodeName = node.metadata?.name;
      if (!nodeName) continue;
      let continueToken: string | undefined;
      do {
        if (signal.aborted) throw signal.reason;
        const page = await lister.listPodsOnNode(nodeName, { limit: this.pageSize, continueToken });
        requests++;
        this.options.hooks?.podListRequest();
        const found = foreignPodsOnNode(namespace, spec, node, page.items, mandates, placed.exempt);
        placement = addForeign(placement, nodeName, found, this.maxEventPods);
        continueToken = page.continueToken || undefined;
      } while (continueToken !== undefined);
    }
    return { placement, requests };
  }

  /** Logs and Events of the placement findings (the Report is written by the reports). */
  private async reportPlacement(
    namespace: string,
    owner: InstanceIdentity | undefined,
    placement: PlacementFindings,
    previous: PlacementCounts | undefined,
    fields: Record<string, unknown>,
  ): Promise<void> {
    const own = placement.counts.off_pool + placement.counts.tolerates_beyond_mandate;
    if (own > 0) {
      this.logger.warn('Pods of an isolated namespace run outside their pool or tolerate beyond their mandate', {
        ...fields,
        owner: owner === undefined ? undefined : instanceIdentity(owner),
        offPool: placement.counts.off_pool,
        toleratesBeyondMandate: placement.counts.tolerates_beyond_mandate,
        misplacedPods: placement.pods.slice(0, this.maxLogPods).map(logMisplaced),
      });
      await this.event(namespace, owner, {
        type: 'Warning',
        reason: PODS_MISPLACED_REASON,
        message: misplacedMessage(namespace, placement, this.maxEventPods),
      });
    }
    if (placement.counts.foreign_on_pool > 0) {
      this.logger.warn("Pods of other namespaces run on an isolated namespace's dedicated pool", {
        ...fields,
        foreignOnPool: placement.counts.foreign_on_pool,
        nodes: placement.foreign.map((f) => ({
          node: f.node,
          count: f.count,
          pods: f.pods.map((p) => `${p.namespace}/${p.name}`),
        })),
      });
      for (const f of placement.foreign) {
        for (const pod of f.pods) {
          await this.podEvent(pod, {
            type: 'Warning',
            reason: FOREIGN_POD_ON_POOL_REASON,
            message: foreignPodMessage(pod, f.node, namespace),
          });
        }
      }
    } else if (previous !== undefined && placementTotal(previous) > 0 && placementTotal(placement.counts) === 0) {
      this.logger.info('every Pod runs in its pool again, and no foreign Pod on it', { ...fields });
    }
  }

  /** An Event on a Pod (its own namespace); a failure is only logged. */
  private async podEvent(pod: { namespace: string; name: string; uid?: string }, event: InstanceEvent): Promise<void> {
    const target: EventTarget = {
      apiVersion: 'v1',
      kind: 'Pod',
      namespace: pod.namespace,
      name: pod.name,
      uid: pod.uid ?? '',
    };
    try {
      await this.options.recordEvent(target, event);
    } catch (err) {
      this.logger.warn('could not record an event', { pod: `${pod.namespace}/${pod.name}`, error: describeError(err) });
    }
  }

  private async report(
    namespace: string,
    owner: InstanceIdentity | undefined,
    findings: Findings,
    fields: Record<string, unknown>,
  ): Promise<void> {
    const total = totalOf(findings.counts);
    const target = owner === undefined ? undefined : this.options.resolveOwner(owner);
    this.logger.warn('Pods lack the mandated node placement (admitted while the webhook did not patch them)', {
      ...fields,
      owner: owner === undefined ? undefined : instanceIdentity(owner),
      // Where the Warning Event went: none for a namespace no watched instance owns.
      event:
        target === undefined
          ? 'none (no watched instance owns the namespace)'
          : `${target.kind} ${target.namespace}/${target.name}`,
      unisolated: total,
      missing: findings.counts,
      unisolatedPods: findings.pods.slice(0, this.maxLogPods).map(describePod),
      ...(total > Math.min(findings.pods.length, this.maxLogPods)
        ? { morePods: total - Math.min(findings.pods.length, this.maxLogPods) }
        : {}),
    });
    await this.event(namespace, owner, {
      type: 'Warning',
      reason: PODS_NOT_ISOLATED_REASON,
      message: notIsolatedMessage(namespace, findings, this.maxEventPods),
    });
  }

  /** An Event on the namespace's owner, if a watched instance owns it; a failure is only logged. */
  private async event(namespace: string, owner: InstanceIdentity | undefined, event: InstanceEvent): Promise<void> {
    const target = owner === undefined ? undefined : this.options.resolveOwner(owner);
    if (target === undefined) return;
    try {
      await this.options.recordEvent(target, event);
    } catch (err) {
      this.logger.warn('could not record an event', { namespace, reason: event.reason, error: describeError(err) });
    }
  }
}
