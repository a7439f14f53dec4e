/**
 * The fail-open audit sets itself up, when on (`--audit-interval` > 0: `AuditFeature` present):
 * the informer of the isolated namespaces (the webhook's namespaceSelector), the audit controller
 * over it (controller.ts) and, with the compliance reports on, what they add (compliance/setup.ts).
 */
import type { KubernetesObject } from '@kubernetes/client-node';
import type { EventTarget } from '../../cluster/port.js';
import type { InstanceIdentity } from '../../desired/instance.js';
import type { KeySource } from '../../runtime/key-sources.js';
import type { ControllerOptions } from '../../runtime/manager.js';
import { recordEvent, type SetupContext } from '../setup.js';
import type { NamespaceReports, PodLister } from './auditor.js';
import { AUDIT_CONTROLLER, createNodeIsolationAudit, ISOLATED_NAMESPACE_SELECTOR } from './controller.js';
import { NODES_RESOURCE, trimNode } from './nodes.js';
import type { PodWatchApi } from './pod-admissions.js';

export { AUDIT_CONTROLLER };

export const ISOLATED_NAMESPACES_RESOURCE = 'isolated-namespaces';

export interface AuditFeature {
  intervalMs: number;
  pods: PodLister;
  /** The watch of new Pods (pod-admissions.ts); absent: no such watch. */
  podWatch?: PodWatchApi | undefined;
  /** Namespaces shown in kubeplus_operator_unisolated_pods_by_namespace. */
  namespaceMetricLimit: number;
  /**
   * Namespaces whose Pods are never foreign on a pool (system ones, the release's,
   * --pool-exempt-namespaces). Where Pods really run is judged whenever the audit is on.
   */
  exemptNamespaces: readonly string[];
}

/** What the compliance reports add to the audit (compliance/setup.ts). */
export interface AuditReports {
  reports: NamespaceReports;
  /** Unisolated Pods kept by name per namespace (the Reports' result cap). */
  reportPods: number;
  /** Further namespaces audited every period. */
  extraKeys(): Iterable<string>;
  /** A leadership term starts. */
  onTermStart(): void;
  /** Further triggers of an audit. */
  extraSources: readonly KeySource[];
}

export function setupAudit(
  ctx: SetupContext,
  feature: AuditFeature,
  deps: { resolveOwner(owner: InstanceIdentity): EventTarget | undefined; reports?: AuditReports | undefined },
): ControllerOptions {
  const namespaces = ctx.caches.informer<KubernetesObject>({
    name: ISOLATED_NAMESPACES_RESOURCE,
    resource: 'v1/namespaces',
    labelSelector: ISOLATED_NAMESPACE_SELECTOR,
    source: () => ctx.sources.namespaces(ISOLATED_NAMESPACE_SELECTOR),
  });
  const { reports } = deps;
  // Where Pods really run: the nodes' labels and taints, trimmed to those (nodes.ts).
  const nodes = ctx.caches.informer<KubernetesObject>({
    name: NODES_RESOURCE,
    resource: 'v1/nodes',
    source: () => ctx.sources.nodes(),
    transform: trimNode,
  });
  return createNodeIsolationAudit({
    intervalMs: feature.intervalMs,
    namespaces,
    pods: feature.pods,
    podWatch: feature.podWatch,
    // Events go to an instance that exists and is watched, else only the metric and log report.
    resolveOwner: deps.resolveOwner,
    recordEvent: recordEvent(ctx),
    registry: ctx.metrics.registry,
    logger: ctx.logger,
    clock: ctx.clock,
    random: ctx.random,
    reports: reports?.reports,
    reportPods: reports?.reportPods,
    extraKeys: reports?.extraKeys,
    onTermStart: reports?.onTermStart,
    extraSources: reports?.extraSources,
    namespaceMetricLimit: feature.namespaceMetricLimit,
    placement: { nodes, exempt: new Set(feature.exemptNamespaces) },
  }).controller;
}
