/**
 * The compliance reports' Prometheus series. Every label value is fixed by code (`result` ∈
 * REPORT_WRITE_RESULTS): no namespace or object name is a label.
 */
import { Counter, Gauge, type Registry } from 'prom-client';
import { REPORT_WRITE_RESULTS, type ReportHooks } from './reporter.js';

export function registerReportMetrics(registry: Registry): ReportHooks {
  const registers = [registry];
  const writes = new Counter({
    name: 'kubeplus_operator_report_writes_total',
    help: 'Writes of compliance Reports (openreports.io/v1alpha1), by result: created, updated, deleted, or error (a read or write that failed; retried at the next audit).',
    labelNames: ['result'] as const,
    registers,
  });
  const unchanged = new Counter({
    name: 'kubeplus_operator_reports_unchanged_total',
    help: 'Audits whose compliance Report was already up to date: read, not written.',
    registers,
  });
  const available = new Gauge({
    name: 'kubeplus_operator_reports_api_available',
    help: 'Whether the OpenReports API (openreports.io/v1alpha1 reports) was served at the last audit: 1 yes, 0 no (no Report is written; a ReportsApiUnavailable Warning Event is on the operator Pod) or not yet checked. Leader only.',
    registers,
  });
  const sandboxLists = new Counter({
    name: 'kubeplus_operator_audit_sandbox_list_requests_total',
    help: 'LIST requests for Sandboxes made by the compliance reports (one per sandbox-isolated namespace per audit, more over 500 Sandboxes).',
    registers,
  });
  const sandboxPodLists = new Counter({
    name: 'kubeplus_operator_audit_sandbox_pod_list_requests_total',
    help: "LIST requests for Sandboxes' Pods (label agents.x-k8s.io/sandbox-name-hash) made by the compliance reports, to judge the runtime class each Sandbox actually runs (one per sandbox-isolated namespace holding Sandboxes per audit, more over 500 Pods).",
    registers,
  });
  for (const result of REPORT_WRITE_RESULTS) writes.inc({ result }, 0);
  unchanged.inc(0);
  available.set(0);
  sandboxLists.inc(0);
  sandboxPodLists.inc(0);
  return {
    write: (result) => writes.inc({ result }),
    unchanged: () => unchanged.inc(),
    apiAvailable: (yes) => available.set(yes ? 1 : 0),
    sandboxListRequest: () => sandboxLists.inc(),
    sandboxPodListRequest: () => sandboxPodLists.inc(),
  };
}
