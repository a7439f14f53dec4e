/**
 * Observability objects: ServiceMonitors scrape the ports the containers expose, the alerts the
 * brief asks for exist, and every metric (and label value) the alerts and the Grafana dashboard
 * query is one the services actually export: the names are read from the services' own
 * prom-client registries, so renaming a metric in code fails here.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, jest, test } from '@jest/globals';
import { PROJECT, readVersion, runbookBaseUrl } from '../../scripts/release/release.js';
import { registerAuditMetrics } from '../../services/operator/src/controllers/audit/audit-metrics.js';
import { registerReportMetrics } from '../../services/operator/src/controllers/compliance/report-metrics.js';
import { REPORT_WRITE_RESULTS } from '../../services/operator/src/controllers/compliance/reporter.js';
import { createWiringMetrics } from '../../services/operator/src/controllers/instances/reconcile-metrics.js';
import { createOperatorMetrics, RECONCILE_RESULTS } from '../../services/operator/src/runtime/runtime-metrics.js';
import { ADMISSION_RESULTS } from '../../services/webhook/src/admission/metric-labels.js';
import { createMetrics } from '../../services/webhook/src/metrics.js';
import { CHART_DIR, type K8sObject, NAMESPACE, one, RELEASE, REPO_ROOT, render } from './helm.js';

jest.setTimeout(60_000);

const ALL_ON = {
  webhook: { serviceMonitor: { enabled: true }, prometheusRule: { enabled: true } },
  operator: { serviceMonitor: { enabled: true }, prometheusRule: { enabled: true } },
  grafanaDashboard: { enabled: true },
};

async function exportedMetricNames(): Promise<Set<string>> {
  const webhook = createMetrics({ defaultMetrics: false });
  const operator = createOperatorMetrics({
    controllers: ['instances'],
    resources: [],
    annotations: [],
    defaultMetrics: false,
  });
  // The series registered beside the runtime's: the wiring's (instance Kinds, conflicts) and the audit's.
  createWiringMetrics(operator);
  registerAuditMetrics(operator.registry, { get: () => undefined, list: () => [] });
  registerReportMetrics(operator.registry);
  const names = new Set<string>();
  for (const registry of [webhook.registry, operator.registry]) {
    for (const metric of await registry.getMetricsAsJSON()) {
      names.add(metric.name);
      // prom-client types `type` as a numeric enum, but the JSON carries the Prometheus type name.
      if (String(metric.type) === 'histogram') {
        for (const suffix of ['_bucket', '_sum', '_count']) names.add(`${metric.name}${suffix}`);
      }
    }
  }
  return names;
}

/** Every kubeplus_* metric a PromQL expression reads. */
function metricsIn(expr: string): string[] {
  return [...expr.matchAll(/\bkubeplus_[a-z0-9_]+/g)].map((m) => m[0]);
}

interface Rule {
  alert: string;
  expr: string;
  for: string;
  labels: { severity: string };
  annotations: { summary: string; description: string; runbook_url?: string };
}

function alerts(objects: K8sObject[]): Rule[] {
  return objects
    .filter((o) => o.kind === 'PrometheusRule')
    .flatMap((o) => (o.spec as { groups: { rules: Rule[] }[] }).groups.flatMap((g) => g.rules));
}

function dashboardExprs(): string[] {
  const dashboard = JSON.parse(readFileSync(join(CHART_DIR, 'files', 'dashboard.json'), 'utf8')) as {
    panels: { targets?: { expr: string }[] }[];
  };
  return dashboard.panels.flatMap((p) => (p.targets ?? []).map((t) => t.expr));
}

/** Every PromQL function (and aggregation) the chart's expressions may call; a typo is not one. */
const PROMQL_CALLS = new Set([
  'abs',
  'absent',
  'avg',
  'by',
  'ceil',
  'clamp_max',
  'clamp_min',
  'count',
  'delta',
  'deriv',
  'floor',
  'histogram_quantile',
  'idelta',
  'increase',
  'irate',
  'label_replace',
  'max',
  'max_over_time',
  'min',
  'min_over_time',
  'on',
  'rate',
  'round',
  'sum',
  'time',
  'topk',
  'vector',
  'without',
]);

describe('monitoring', () => {
  test('dashboard and alert expressions call only PromQL functions (a mangled histogram_quantile is caught)', async () => {
    const rules = alerts(await render(ALL_ON));
    const calls = [...dashboardExprs(), ...rules.map((r) => r.expr)].flatMap((e) =>
      [...e.matchAll(/([A-Za-z_][A-Za-z0-9_.]*)\s*\(/g)].map((m) => m[1] as string),
    );
    expect(calls.length).toBeGreaterThan(0);
    expect(calls.filter((c) => !PROMQL_CALLS.has(c))).toEqual([]);
  });

  test('nothing monitoring-related is rendered by default', async () => {
    const kinds = (await render()).map((o) => o.kind);
    expect(kinds).not.toContain('ServiceMonitor');
    expect(kinds).not.toContain('PrometheusRule');
    // The only ConfigMap by default is the helm test's script (a test hook), never a dashboard.
    expect(
      (await render()).filter((o) => o.kind === 'ConfigMap').map((o) => o.metadata.annotations?.['helm.sh/hook']),
    ).toEqual(['test']);
  });

  test('ServiceMonitors select the metrics Service port the container serves', async () => {
    const objects = await render(ALL_ON);
    for (const [monitor, service, deployment] of [
      [`${RELEASE}-webhook`, `${RELEASE}-webhook`, `${RELEASE}-webhook`],
      [`${RELEASE}-operator`, `${RELEASE}-operator-metrics`, `${RELEASE}-operator`],
    ] as const) {
      const sm = one(objects, 'ServiceMonitor', monitor).spec as {
        selector: { matchLabels: Record<string, string> };
        endpoints: { port: string; path: string }[];
      };
      const svc = one(objects, 'Service', service);
      for (const [k, v] of Object.entries(sm.selector.matchLabels)) expect(svc.metadata.labels?.[k]).toBe(v);
      // No other Service of the chart matches the selector (no double scraping).
      const matching = objects.filter(
        (o) =>
          o.kind === 'Service' &&
          Object.entries(sm.selector.matchLabels).every(([k, v]) => o.metadata.labels?.[k] === v),
      );
      expect(matching.map((s) => s.metadata.name)).toEqual([service]);
      expect(sm.endpoints).toEqual([expect.objectContaining({ port: 'metrics', path: '/metrics' })]);
      const ports = (svc.spec as { ports: { name: string; targetPort: string }[] }).ports;
      expect(ports.find((p) => p.name === 'metrics')?.targetPort).toBe('metrics');
      const container = (
        one(objects, 'Deployment', deployment).spec as {
          template: { spec: { containers: { ports: { name: string; containerPort: number }[]; args: string[] }[] } };
        }
      ).template.spec.containers[0];
      const port = container?.ports.find((p) => p.name === 'metrics')?.containerPort;
      expect(container?.args).toContain(`--metrics-port=${port}`);
    }
  });

  test('the alerts the platform needs exist, scoped to the release namespace', async () => {
    const rules = alerts(await render(ALL_ON));
    const byName = Object.fromEntries(rules.map((r) => [r.alert, r]));
    expect(Object.keys(byName).sort()).toEqual(
      [
        'KubeplusIsolationOperatorForbiddenInstanceKinds',
        'KubeplusIsolationOperatorNoLeader',
        'KubeplusIsolationOperatorReconcileErrors',
        'KubeplusIsolationPodsAdmittedUnplaced',
        'KubeplusIsolationPodsMisplaced',
        'KubeplusIsolationUnisolatedPods',
        'KubeplusIsolationWebhookCertificateExpiring',
        'KubeplusIsolationWebhookDown',
        'KubeplusIsolationWebhookFailingOpen',
        'KubeplusIsolationWebhookSlow',
        'KubeplusIsolationWebhookUnreachable',
        'KubeplusIsolationInvalidAnnotations',
        'KubeplusIsolationHoldRefusals',
      ].sort(),
    );
    // The API server's own counts of its calls of the webhook (issue 34): reviews anyone else
    // sends to the webhook's port are not in them.
    const failingOpen = byName.KubeplusIsolationWebhookFailingOpen?.expr ?? '';
    expect(failingOpen).toContain(
      'apiserver_admission_webhook_fail_open_count{name="node-isolation.kubeplus.io",type="admit"}',
    );
    expect(failingOpen).toContain(
      'apiserver_admission_webhook_admission_duration_seconds_count{name="node-isolation.kubeplus.io",type="admit"}',
    );
    expect(failingOpen).not.toContain('kubeplus_webhook_');
    expect(byName.KubeplusIsolationWebhookSlow?.expr).toMatch(
      /histogram_quantile\(0\.99,[\s\S]*kubeplus_webhook_admission_duration_seconds_bucket/,
    );
    expect(byName.KubeplusIsolationOperatorReconcileErrors?.expr).toContain(
      'kubeplus_operator_reconcile_total{namespace="kubeplus-system",result="error"}',
    );
    expect(byName.KubeplusIsolationUnisolatedPods?.expr).toContain(
      'sum(kubeplus_operator_unisolated_pods{namespace="kubeplus-system"}) > 0',
    );
    // Every Pod admitted unplaced as the API server's watch showed it, finished ones too (issue 34).
    expect(byName.KubeplusIsolationPodsAdmittedUnplaced?.expr).toContain(
      'sum(increase(kubeplus_operator_unisolated_pod_admissions_total{namespace="kubeplus-system"}[15m])) > 0',
    );
    // Pods admitted unplaced while the webhook counted no admission: the API server does not reach
    // it, so its own alerts cannot fire (issue 39).
    expect(byName.KubeplusIsolationWebhookUnreachable?.expr).toBe(
      [
        'sum(increase(kubeplus_operator_unisolated_pod_admissions_total{namespace="kubeplus-system"}[15m])) > 0',
        '  unless on()',
        'sum(increase(kubeplus_webhook_admissions_total{namespace="kubeplus-system"}[15m])) > 0',
        '',
      ].join('\n'),
    );
    expect(byName.KubeplusIsolationWebhookUnreachable?.labels.severity).toBe('critical');
    // A rejected isolation annotation, by annotation key, for an hour (the Event's life; issue 39).
    expect(byName.KubeplusIsolationInvalidAnnotations?.expr).toContain(
      'sum by (annotation) (increase(kubeplus_operator_invalid_annotations_total{namespace="kubeplus-system"}[1h])) > 0',
    );
    // Where Pods really run (issue 38): off-pool, beyond the mandate, foreign on a pool.
    expect(byName.KubeplusIsolationPodsMisplaced?.expr).toContain(
      'sum(kubeplus_operator_pool_placement_pods{namespace="kubeplus-system"}) > 0',
    );
    expect(byName.KubeplusIsolationOperatorForbiddenInstanceKinds?.expr).toContain(
      'kubeplus_operator_instance_kinds{namespace="kubeplus-system",state="forbidden"}',
    );
    // The hold (issue 35) refused a Pod or Sandbox CREATE of a KubePlus install because its
    // namespace was not settled in time (or the hold was full): helm does not retry, so the install
    // failed. Retryable refusals only; a release on shutdown is part of a rollout.
    expect(byName.KubeplusIsolationHoldRefusals?.expr).toBe(
      'sum by (outcome) (increase(kubeplus_webhook_hold_outcomes_total{namespace="kubeplus-system",outcome=~"timeout|over_capacity"}[15m])) > 0\n',
    );
    expect(byName.KubeplusIsolationHoldRefusals?.labels.severity).toBe('warning');
    const noLeader = byName.KubeplusIsolationOperatorNoLeader?.expr ?? '';
    expect(noLeader).toContain('max(kubeplus_operator_leader{namespace="kubeplus-system"}) < 1');
    expect(noLeader).toContain('absent(kubeplus_operator_leader{namespace="kubeplus-system"})');
    for (const rule of rules) {
      expect(rule.labels.severity).toMatch(/^(warning|critical)$/);
      expect(rule.annotations.summary.length).toBeGreaterThan(10);
      // The release's own series are selected by its namespace; the API server's by the webhook's name.
      for (const selector of rule.expr.match(/[a-z_:]+\{[^}]*\}/g) ?? []) {
        if (selector.startsWith('apiserver_')) expect(selector).toContain('name="node-isolation.kubeplus.io"');
        else expect(selector).toContain(`namespace="${NAMESPACE}"`);
      }
    }
  });

  test('every metric the alerts and the dashboard query is exported by the services', async () => {
    const exported = await exportedMetricNames();
    const queried = new Set(
      [...alerts(await render(ALL_ON)).map((r) => r.expr), ...dashboardExprs()].flatMap(metricsIn),
    );
    expect(queried.size).toBeGreaterThan(10);
    expect([...queried].filter((name) => !exported.has(name))).toEqual([]);
  });

  test('KubeplusIsolationWebhookUnreachable is not rendered with the policy engine alone (no webhook to reach)', async () => {
    const names = (objects: K8sObject[]) => alerts(objects).map((r) => r.alert);
    const withEngine = (engine: string) =>
      render({ global: { nodeIsolation: { engine } }, operator: { prometheusRule: { enabled: true } } });
    expect(names(await withEngine('admissionPolicy'))).not.toContain('KubeplusIsolationWebhookUnreachable');
    expect(names(await withEngine('both'))).toContain('KubeplusIsolationWebhookUnreachable');
  });

  test('result label values in queries are ones the services emit', async () => {
    const exprs = [...alerts(await render(ALL_ON)).map((r) => r.expr), ...dashboardExprs()];
    for (const expr of exprs) {
      for (const m of expr.matchAll(/kubeplus_webhook_admissions_total\{[^}]*result="([a-z_]+)"/g)) {
        expect(ADMISSION_RESULTS).toContain(m[1]);
      }
      for (const m of expr.matchAll(/kubeplus_operator_reconcile_total\{[^}]*result="([a-z_]+)"/g)) {
        expect(RECONCILE_RESULTS).toContain(m[1]);
      }
      for (const m of expr.matchAll(/kubeplus_operator_report_writes_total\{[^}]*result="([a-z_]+)"/g)) {
        expect(REPORT_WRITE_RESULTS).toContain(m[1]);
      }
    }
  });

  test('the dashboard shows the audit: unisolated Pods by namespace, policies in force, reconcile errors, reports', () => {
    const exprs = dashboardExprs();
    const uses = (metric: string, by?: string): boolean =>
      exprs.some((e) => e.includes(metric) && (by === undefined || e.includes(`by (${by})`)));
    expect(uses('kubeplus_operator_unisolated_pods_by_namespace', 'tenant_namespace')).toBe(true);
    expect(uses('kubeplus_operator_sandbox_isolation_instances', 'mode')).toBe(true);
    expect(uses('kubeplus_operator_isolated_namespaces', 'annotation')).toBe(true);
    expect(
      exprs.some(
        (e) => /kubeplus_operator_reconcile_total\{[^}]*result="error"\}/.test(e) && e.includes('by (controller)'),
      ),
    ).toBe(true);
    expect(uses('kubeplus_operator_report_writes_total', 'result')).toBe(true);
    expect(uses('kubeplus_operator_reports_api_available')).toBe(true);
  });

  test('the dashboard ConfigMap carries the Grafana sidecar label and the dashboard JSON', async () => {
    const objects = await render({
      grafanaDashboard: {
        enabled: true,
        namespace: 'monitoring',
        labels: { grafana_dashboard: '0', team: 'platform' },
      },
    });
    const cm = one(objects, 'ConfigMap', 'kpi-kubeplus-isolation-dashboard');
    expect(cm.metadata.namespace).toBe('monitoring');
    expect(cm.metadata.labels).toEqual(expect.objectContaining({ grafana_dashboard: '1', team: 'platform' }));
    const json = JSON.parse((cm.data as Record<string, string>)['kubeplus-isolation.json'] as string) as {
      uid: string;
      panels: unknown[];
    };
    expect(json.uid).toBe('kubeplus-isolation');
    expect(json.panels.length).toBeGreaterThan(10);
  });
});

/** GitHub's anchor of a markdown heading: lower case, punctuation dropped, spaces as hyphens. */
const headingAnchor = (heading: string): string =>
  heading
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\s_-]/gu, '')
    .replace(/\s/g, '-');

describe('runbooks', () => {
  test("headingAnchor is GitHub's", () => {
    expect(headingAnchor('KubeplusIsolationWebhookDown')).toBe('kubeplusisolationwebhookdown');
    expect(headingAnchor('The API server cannot reach the webhook (GKE, EKS)')).toBe(
      'the-api-server-cannot-reach-the-webhook-gke-eks',
    );
  });

  test('every alert links docs/runbooks.md of this repository at the release tag, at an anchor that exists there', async () => {
    const runbooks = readFileSync(join(REPO_ROOT, 'docs', 'runbooks.md'), 'utf8');
    const anchors = new Set([...runbooks.matchAll(/^#{1,6} (.+)$/gm)].map((m) => headingAnchor(m[1] as string)));
    const base = runbookBaseUrl({ version: readVersion(REPO_ROOT), ...PROJECT });
    const rules = alerts(await render(ALL_ON));
    expect(rules.length).toBeGreaterThan(0);
    for (const rule of rules) {
      const url = rule.annotations.runbook_url ?? '';
      const [page, anchor = ''] = url.split('#');
      expect({ alert: rule.alert, page, anchorExists: anchors.has(anchor) }).toEqual({
        alert: rule.alert,
        page: base,
        anchorExists: true,
      });
      // Each alert has a section of its own, named after it.
      expect(anchor).toBe(rule.alert.toLowerCase());
    }
    // And every section named like an alert is one (no runbook of a removed alert).
    const alertSections = [...runbooks.matchAll(/^## (KubeplusIsolation\S+)$/gm)].map((m) => m[1] as string);
    expect([...alertSections].sort()).toEqual([...new Set(rules.map((r) => r.alert))].sort());
  });

  test('runbookBaseUrl moves every link', async () => {
    const base = 'https://wiki.example.com/kpi';
    const rules = alerts(
      await render({
        webhook: { prometheusRule: { enabled: true, runbookBaseUrl: base } },
        operator: { prometheusRule: { enabled: true, runbookBaseUrl: base } },
      }),
    );
    for (const rule of rules) expect(rule.annotations.runbook_url).toBe(`${base}#${rule.alert.toLowerCase()}`);
  });
});
