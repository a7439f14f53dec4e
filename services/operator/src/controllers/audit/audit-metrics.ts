/**
 * The audit's Prometheus series, on the operator's registry. Every label value is fixed by code
 * (`missing` ∈ MISSING_KINDS, `annotation` ∈ valid/invalid): no namespace, Pod or instance
 * name ever becomes a label. Gauges are read at scrape time.
 */
import type { KubernetesObject } from '@kubernetes/client-node';
import { Counter, Gauge, type Registry } from 'prom-client';
import type { Lister } from '../../runtime/informer.js';
import type { AuditHooks } from './auditor.js';
import { auditedNamespace, MISSING_KINDS, type MissingCounts, zeroCounts } from './report.js';

export interface AuditMetrics {
  hooks: AuditHooks;
  /** Where the unisolated-Pod gauge reads its values at scrape time (the auditor's totals). */
  trackTotals(totals: () => MissingCounts): void;
}

/** `namespaces`: the isolated-namespace cache. */
export function registerAuditMetrics(registry: Registry, namespaces: Lister<KubernetesObject>): AuditMetrics {
  const registers = [registry];
  let totals: () => MissingCounts = zeroCounts;
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
    help: 'LIST requests for Pods made by the fail-open audit (one per isolated namespace per audit, more for namespaces with over 500 Pods).',
    registers,
  });
  const podsChecked = new Counter({
    name: 'kubeplus_operator_audit_pods_checked_total',
    help: 'Pods examined by the fail-open audit.',
    registers,
  });
  listRequests.inc(0);
  podsChecked.inc(0);
  return {
    hooks: {
      podListRequest: () => listRequests.inc(),
      podsChecked: (n) => podsChecked.inc(n),
    },
    trackTotals(read) {
      totals = read;
    },
  };
}
