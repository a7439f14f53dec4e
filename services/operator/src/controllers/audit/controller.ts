/**
 * The fail-open audit, composed: a controller (leader only) keyed by namespace over the
 * isolated-namespace informer, its key sources and its metrics. setup.ts asks the caches for the
 * informer and builds it when `--audit-interval` is not 0.
 */

import type { Logger } from '@kubeplus-isolation/service';
import { NODE_ISOLATION_ENABLED_LABEL, NODE_ISOLATION_ENABLED_VALUE } from '@kubeplus-isolation/spec';
import type { KubernetesObject } from '@kubernetes/client-node';
import type { Registry } from 'prom-client';
import type { EventTarget, InstanceEvent } from '../../cluster/port.js';
import type { InstanceIdentity } from '../../desired/instance.js';
import type { Clock } from '../../runtime/clock.js';
import type { EventHandlers, Lister } from '../../runtime/informer.js';
import type { KeySource } from '../../runtime/key-sources.js';
import type { ControllerOptions } from '../../runtime/manager.js';
import { registerAuditMetrics } from './audit-metrics.js';
import { isolatedNamespaceEvents, periodicAudit } from './audit-sources.js';
import { type NamespaceReports, NodeIsolationAuditor, type PlacementOptions, type PodLister } from './auditor.js';
import { nodePoolChanges } from './nodes.js';
import { type PodWatchApi, unisolatedPodAdmissions } from './pod-admissions.js';

export { kubePodLister } from '../../kube/pod-lister.js';
export { AUDIT_CONTROLLER, NodeIsolationAuditor, type PodLister } from './auditor.js';
export type { PodWatchApi } from './pod-admissions.js';

/** The webhook's namespaceSelector, as a label selector: the namespaces whose Pods it patches. */
export const ISOLATED_NAMESPACE_SELECTOR = `${NODE_ISOLATION_ENABLED_LABEL}=${NODE_ISOLATION_ENABLED_VALUE}`;

export interface NodeIsolationAuditOptions {
  intervalMs: number;
  /** Informer of the namespaces matching ISOLATED_NAMESPACE_SELECTOR. */
  namespaces: Lister<KubernetesObject> & { addEventHandler(handlers: EventHandlers<KubernetesObject>): () => void };
  pods: PodLister;
  /**
   * The watch of new Pods (leader only): a Pod created lacking its namespace's mandate is counted
   * and its namespace audited at once (pod-admissions.ts); with `checkpoints` it continues across
   * leadership terms. Absent: the other triggers only.
   */
  podWatch?: PodWatchApi | undefined;
  resolveOwner(owner: InstanceIdentity): EventTarget | undefined;
  recordEvent(target: EventTarget, event: InstanceEvent): Promise<void>;
  registry: Registry;
  logger: Logger;
  clock: Clock;
  random?: () => number;
  /** The compliance reports, when on: handed every audit's findings. */
  reports?: NamespaceReports | undefined;
  /** Unisolated Pods kept by name per namespace for the reports (their result cap). */
  reportPods?: number;
  /** Further namespaces audited every period (the reports' sandbox-isolated namespaces). */
  extraKeys?: () => Iterable<string>;
  /** Further triggers of an audit (the reports': a namespace's sandbox policy changed). */
  extraSources?: readonly KeySource[];
  /** Called when a leadership term starts (the reports learn which namespaces hold one). */
  onTermStart?: () => void;
  /** Namespaces shown in kubeplus_operator_unisolated_pods_by_namespace. */
  namespaceMetricLimit?: number;
  /**
   * Judge where Pods really run (the Node cache and the exempt namespaces); with it, a Node's
   * label or taint change brings forward the audits of the pools it left or joined.
   */
  placement?:
    | (PlacementOptions & { nodes: { addEventHandler(handlers: EventHandlers<KubernetesObject>): () => void } })
    | undefined;
}

export interface NodeIsolationAudit {
  auditor: NodeIsolationAuditor;
  /** For Manager.addController. One worker: the audit is background work, its LISTs go one at a time. */
  controller: ControllerOptions;
}

export function createNodeIsolationAudit(options: NodeIsolationAuditOptions): NodeIsolationAudit {
  const metrics = registerAuditMetrics(options.registry, options.namespaces, options.namespaceMetricLimit);
  const audit = new NodeIsolationAuditor({
    pods: options.pods,
    namespaces: options.namespaces,
    resolveOwner: options.resolveOwner,
    recordEvent: options.recordEvent,
    hooks: metrics.hooks,
    logger: options.logger,
    clock: options.clock,
    reports: options.reports,
    reportPods: options.reportPods,
    placement: options.placement,
  });
  metrics.trackTotals(() => audit.totals());
  metrics.trackPlacement(() => audit.placementTotals());
  metrics.trackNamespaces(() => audit.countsByNamespace());
  return {
    auditor: audit,
    controller: {
      reconciler: audit,
      sources: [
        isolatedNamespaceEvents(options.namespaces),
        periodicAudit(options.namespaces, {
          intervalMs: options.intervalMs,
          clock: options.clock,
          random: options.random,
          onTerm: () => audit.reset(),
          extraKeys: options.extraKeys,
          onTermStart: options.onTermStart,
        }),
        ...(options.podWatch === undefined
          ? []
          : [
              unisolatedPodAdmissions(options.podWatch, {
                namespaces: options.namespaces,
                counted: metrics.unisolatedAdmission,
                caughtUp: metrics.podWatchCatchUp,
                hooks: metrics.hooks,
                logger: options.logger,
                clock: options.clock,
              }),
            ]),
        ...(options.placement === undefined ? [] : [nodePoolChanges(options.placement.nodes, options.namespaces)]),
        ...(options.extraSources ?? []),
      ],
      concurrency: 1,
    },
  };
}
