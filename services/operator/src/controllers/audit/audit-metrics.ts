/**
 * The audit's Prometheus series, on the operator's registry. Every label value is fixed by code
 * (`missing` ∈ MISSING_KINDS, `annotation` ∈ valid/invalid): no Pod or instance name ever becomes
 * a label, and a namespace only in the per-namespace gauge, which shows at most a fixed number of
 * them (the ones with the most unisolated Pods). Gauges are read at scrape time.
 */
import type { KubernetesObject } from '@kubernetes/client-node';
import { Counter, Gauge, type Registry } from 'prom-client';
import type { Lister } from '../../runtime/informer.js';
import type { AuditHooks } from './auditor.js';
import { PLACEMENT_FINDINGS, type PlacementCounts, zeroPlacementCounts } from './placement.js';
import { auditedNamespace, MISSING_KINDS, type MissingCounts, type MissingKind, zeroCounts } from './report.js';
import { CATCH_UP_REASONS, type CatchUpReason } from './watch-checkpoint.js';

/** Default of --unisolated-namespaces-metric-limit. */
export const DEFAULT_NAMESPACE_LIMIT = 20;

export interface AuditMetrics {
  hooks: AuditHooks;
  /** A Pod was seen admitted without its mandate (the Pod watch), lacking `missing`. */
  unisolatedAdmission(missing: MissingKind): void;
  /** The Pod watch had to catch up by a LIST of every Pod, for `reason`. */
  podWatchCatchUp(reason: CatchUpReason): void;
  /** Where the unisolated-Pod gauge reads its values at scrape time (the auditor's totals). */
  trackTotals(totals: () => MissingCounts): void;
  /** Where the per-namespace gauge reads unisolated Pods per namespace at scrape time. */
  trackNamespaces(counts: () => ReadonlyMap<string, number>): void;
  /** Where the placement gauge reads its values at scrape time (the auditor's placement totals). */
  trackPlacement(totals: () => PlacementCounts): void;
}

/**
 * The namespaces the per-namespace gauge shows: those with unisolated Pods, the `limit` with
 * the most (ties by name), so the series count never exceeds `limit` however many tenants exist.
 */
export function topNamespaces(counts: ReadonlyMap<string, number>, limit: number): Array<[string, number]> {
  return [...counts]
    .filter(([, n]) => n > 0)
    .sort(([a, x], [b, y]) => y - x || (a < b ? -1 : a > b ? 1 : 0))
    .slice(0, Math.max(0, limit));
}

/**
 * `namespaces`: the isolated-namespace cache. `namespaceLimit`: at most this many namespaces in
 * kubeplus_operator_unisolated_pods_by_namespace (0: none).
 */
export function registerAuditMetrics(
  registry: Registry,
  namespaces: Lister<KubernetesObject>,
  namespaceLimit = DEFAULT_NAMESPACE_LIMIT,
): AuditMetrics {
  const registers = [registry];
  let totals: () => MissingCounts = zeroCounts;
  let byNamespace: () => ReadonlyMap<string, number> = () => new Map();
  let placement: () => PlacementCounts = zeroPlacementCounts;
  new Gauge({
    name: 'kubeplus_operator_unisolated_pods_by_namespace',
    help: 'Pods lacking the mandated node placement, per namespace: only namespaces with at least one, and only the ones with the most (at most --unisolated-namespaces-metric-limit), so the series stay bounded however many tenants there are. Leader only; the unlabelled total is kubeplus_operator_unisolated_pods.',
    // Not `namespace`: Prometheus sets that target label to the operator's own namespace, and a
    // scraped label of the same name would be renamed exported_namespace.
    labelNames: ['tenant_namespace'] as const,
    registers,
    collect() {
      this.reset();
      for (const [ns, n] of topNamespaces(byNamespace(), namespaceLimit)) this.set({ tenant_namespace: ns }, n);
    },
  });
  new Gauge({
    name: 'kubeplus_operator_unisolated_pods',
    help: 'Pods in isolated namespaces lacking the mandated node placement (admitted while the webhook failed open), by what they lack: node_selector, tolerations or both. Reported by the leader only; sum() for the total.',
    labelNames: ['missing'] as const,
    registers,
    collect() {
      const now = totals();
      for (const missing of MISSING_KINDS) this.set({ missing }, now[missing]);
    },
  });
  new Gauge({
    name: 'kubeplus_operator_pool_placement_pods',
    help: "Where Pods really run, at the last audit of each isolated namespace, by finding: off_pool (a Pod of an isolated namespace on a node whose labels lack its mandated nodeSelector, e.g. left on a re-pooled node), tolerates_beyond_mandate (a Pod of an isolated namespace whose tolerations reach another isolated namespace's pool taints, e.g. {operator: Exists} added by an UPDATE), foreign_on_pool (a Pod of another, non-exempt namespace on a node of an isolated namespace's pool, counted once per pool it is on). Leader only.",
    labelNames: ['finding'] as const,
    registers,
    collect() {
      const now = placement();
      for (const finding of PLACEMENT_FINDINGS) this.set({ finding }, now[finding]);
    },
  });
  new Gauge({
    name: 'kubeplus_operator_isolated_namespaces',
    help: 'Namespaces labelled kubeplus.io/node-isolation-enabled=true, by whether their kubeplus.io/node-isolation-resolved annotation is valid (audited) or not (the webhook admits their Pods unpatched).',
    labelNames: ['annotation'] as const,
    registers,
    collect() {
      let valid = 0;
      let invalid = 0;
      for (const ns of namespaces.list()) {
        const state = auditedNamespace(ns.metadata ?? {}).state;
        if (state === 'isolated') valid++;
        else if (state === 'invalid') invalid++;
      }
      this.set({ annotation: 'valid' }, valid);
      this.set({ annotation: 'invalid' }, invalid);
    },
  });
  const listRequests = new Counter({
    name: 'kubeplus_operator_audit_pod_list_requests_total',
    help: "LIST requests for Pods made by the fail-open audit (one per isolated namespace per audit, more for namespaces with over 500 Pods or pages of large Pods: a page carries at most 500 Pods and, sized by the last page measured, about 8 MiB; plus one per node of the namespace's pool, the Pods bound to it, to find foreign ones), and by the Pod watch's catch-ups.",
    registers,
  });
  const podsChecked = new Counter({
    name: 'kubeplus_operator_audit_pods_checked_total',
    help: 'Pods examined by the fail-open audit.',
    registers,
  });
  const unisolatedAdmissions = new Counter({
    name: 'kubeplus_operator_unisolated_pod_admissions_total',
    help: "Pods of isolated namespaces the Pod watch saw lacking the mandated node placement (admitted while the webhook or policy failed open), each counted once per leadership term, by what they lacked: node_selector, tolerations or both. Counts Pods that finished before any audit listed them, also while no leader watched (a new leader resumes the previous one's watch, or catches up). Leader only.",
    labelNames: ['missing'] as const,
    registers,
  });
  const catchUps = new Counter({
    name: 'kubeplus_operator_pod_watch_catch_ups_total',
    help: 'Times the Pod watch could not resume from its position and caught up instead: a paged LIST of every Pod of the cluster, judging those created since (finished ones included). reason: expired (410 Gone, the resourceVersion too old: at the start of a leadership term or within one) or missing (the previous term left no position). Leader only.',
    labelNames: ['reason'] as const,
    registers,
  });
  listRequests.inc(0);
  podsChecked.inc(0);
  for (const missing of MISSING_KINDS) unisolatedAdmissions.inc({ missing }, 0);
  for (const reason of CATCH_UP_REASONS) catchUps.inc({ reason }, 0);
  return {
    hooks: {
      podListRequest: () => listRequests.inc(),
      podsChecked: (n) => podsChecked.inc(n),
    },
    unisolatedAdmission: (missing) => unisolatedAdmissions.inc({ missing }),
    podWatchCatchUp: (reason) => catchUps.inc({ reason }),
    trackTotals(read) {
      totals = read;
    },
    trackNamespaces(read) {
      byNamespace = read;
    },
    trackPlacement(read) {
      placement = read;
    },
  };
}
