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
import { findUnisolatedPods, type PodLike } from '@kubeplus-isolation/spec';
import type { KubernetesObject } from '@kubernetes/client-node';
import type { EventTarget, InstanceEvent } from '../../cluster/port.js';
import { type InstanceIdentity, instanceIdentity } from '../../desired/instance.js';
import { type Clock, systemClock } from '../../runtime/clock.js';
import type { Lister } from '../../runtime/informer.js';
import type { Reconciler } from '../../runtime/manager.js';
import type { ReconcileOutcome } from '../../runtime/worker-pool.js';
import type { PodFindings } from '../compliance/openreport.js';
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
  items: readonly PodLike[];
  /** Set when more Pods follow (the list's `metadata.continue`). */
  continueToken?: string | undefined;
}

/** One paginated LIST of a namespace's Pods that have not finished; errors carry the HTTP status. */
export interface PodLister {
  listPods(namespace: string, page: { limit: number; continueToken?: string | undefined }): Promise<PodPage>;
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

  /** Forgets every finding (a leadership term begins or ends: only the leader reports). */
  reset(): void {
    this.counts.clear();
  }

  async reconcile(namespace: string, signal: AbortSignal): Promise<ReconcileOutcome> {
    const startedAt = this.clock.now();
    const ns = this.options.namespaces.get(namespace);
    const audited = ns === undefined ? ({ state: 'not-isolated' } as const) : auditedNamespace(ns.metadata ?? {});
    if (audited.state !== 'isolated') {
      this.counts.delete(namespace);
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
    let continueToken: string | undefined;
    let pages = 0;
    do {
      if (signal.aborted) throw signal.reason;
      const page = await this.options.pods.listPods(namespace, { limit: this.pageSize, continueToken });
      pages++;
      this.options.hooks?.podListRequest();
      this.options.hooks?.podsChecked(page.items.length);
      findings = addPage(findings, page.items.length, findUnisolatedPods(audited.spec, page.items), this.keepPods);
      continueToken = page.continueToken || undefined;
    } while (continueToken !== undefined);
    // A replica that lost the Lease meanwhile reports nothing.
    if (signal.aborted) throw signal.reason;

    const previous = this.counts.get(namespace);
    this.counts.set(namespace, findings.counts);
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
    await this.options.reports?.sync(
      namespace,
      { checked: findings.checked, unisolated: total, pods: findings.pods },
      signal,
    );
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
