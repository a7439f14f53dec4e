/**
 * Compliance reports in the OpenReports format, on the real control plane: the operator runs as
 * the chart's ServiceAccount under the chart's RBAC (reports.enabled, the default), through a
 * recording proxy, with the OpenReports CRDs of the pinned Go module
 * (e2e/components/openreports, fetched by e2e/scripts/module-crds.sh):
 *
 * - without the Report API it says so once (a Warning Event on its own Pod, the gauge at 0) and
 *   isolation and the audit go on; the CRD installed later is picked up without a restart;
 * - the namespace's Report has a fail result per Pod admitted without its node placement (no
 *   webhook is registered here, so every Pod is admitted unpatched), naming what each lacks, and
 *   per Sandbox admitted before the minimum was raised; the summary counts exactly;
 * - an unchanged namespace costs no write across audits (same resourceVersion, no write request);
 * - a Pod deleted or recreated placed, and a weak Sandbox deleted, leave it at the next audit;
 * - a namespace no longer isolated loses its Report;
 * - with an audit period of an hour, a sandbox policy applied, raised and removed is reported at
 *   once (the namespace's policy and its generated RuntimeClass changing bring the audit forward):
 *   after the raise only the Sandbox left on a platform runc class fails, not the one on the
 *   instance's own class, which the operator recreated with the kata handler; the annotation
 *   made invalid is named in the Report at once (an `error` result with the instance and the
 *   operator's message, issue 39), whose findings are still judged by the last good minimum.
 */
import { beforeAll, describe, expect, test } from '@jest/globals';
import {
  type ApiProxy,
  type InstanceKind,
  installOpenReportsCrds,
  isApiStatus,
  type RunningOperator,
  scrapeMetrics,
  startApiProxy,
  sumMetric,
  testPod,
  waitFor,
} from '@kubeplus-isolation/e2e';
import {
  NODE_ISOLATION_ANNOTATION,
  NODE_ISOLATION_ENABLED_LABEL,
  SANDBOX_ISOLATION_ANNOTATION,
} from '@kubeplus-isolation/spec';
import {
  ApiextensionsV1Api,
  CoreV1Api,
  CustomObjectsApi,
  type KubeConfig,
  NodeV1Api,
  PatchStrategy,
  setHeaderOptions,
  type V1Pod,
} from '@kubernetes/client-node';
import { createInstanceCrd, deleteInstanceCrd } from './faults/support/chart-rbac-operator.js';
import { uniqueName } from './support/names.js';
import { poolMandate } from './support/node-isolation.js';
import { operatorSuite } from './support/operator-suite.js';

const mergePatch = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);
/** No scheduler serves this name: nothing but the test and the audit ever touches these Pods. */
const UNSCHEDULED = 'kpi-e2e-no-scheduler';
const PERIOD_S = 3;
const REPORT_CRDS = ['reports.openreports.io', 'clusterreports.openreports.io'];
const REPORT = { group: 'openreports.io', version: 'v1alpha1', plural: 'reports' };
const SANDBOX = { group: 'agents.x-k8s.io', version: 'v1beta1', plural: 'sandboxes' };
const REPORT_PATH = /^\/apis\/openreports\.io\//;

interface ReportObject {
  metadata: { resourceVersion: string; annotations?: Record<string, string> };
  source: string;
  scope: { kind: string; name: string };
  summary: { pass: number; fail: number; warn: number; error: number; skip: number };
  results?: Array<{
    source: string;
    policy: string;
    result: string;
    message: string;
    properties?: Record<string, string>;
    resources: Array<{ kind: string; name: string; uid?: string }>;
  }>;
}

const sandboxAnnotation = (minRuntimeClass: string): string => JSON.stringify({ minRuntimeClass, enforce: true });

async function deleteReportCrds(kc: KubeConfig): Promise<void> {
  const ext = kc.makeApiClient(ApiextensionsV1Api);
  for (const name of REPORT_CRDS) {
    try {
      await ext.deleteCustomResourceDefinition({ name });
    } catch (error) {
      if (!isApiStatus(error, 404)) throw error;
    }
  }
  await waitFor(
    'the OpenReports CRDs to be gone',
    async () => {
      for (const name of REPORT_CRDS) {
        try {
          await ext.readCustomResourceDefinition({ name });
          return false;
        } catch (error) {
          if (!isApiStatus(error, 404)) throw error;
        }
      }
      return true;
    },
    { timeoutMs: 60_000, intervalMs: 250 },
  );
}

describe('operator: compliance reports (OpenReports) on the real control plane', () => {
  let proxy: ApiProxy | undefined;
  let operator: RunningOperator | undefined;
  const suffix = uniqueName('rep');
  const widgets: InstanceKind = { group: `${suffix}.e2e.kubeplus.io`, kind: 'Widget', plural: 'widgets' };
  const widget = { group: widgets.group, version: 'v1', plural: widgets.plural };
  const instance = uniqueName('rep-widget');
  const ownClass = `kubeplus-sandbox-${instance}`;
  const plainClass = uniqueName('kpi-rep-plain');
  const mandate = poolMandate(`${suffix}-pool`);
  let crdCreated = false;
  let plainCreated = false;
  const suite = operatorSuite({
    name: 'rep',
    chart: { values: { operator: { instanceGroups: [{ group: widgets.group, resources: [widgets.plural] }] } } },
    // The operator's requests, recorded, forwarded with the chart ServiceAccount's identity.
    kubeconfigPath: () => proxy?.kubeconfigPath ?? '',
    args: [`--audit-interval=${PERIOD_S}s`],
    startOperator: false,
    beforeOperator: async ({ cluster, kc, leaseNamespace, rbac }) => {
      // This suite decides when the Report API exists.
      await deleteReportCrds(kc);
      tenantNs = await suite.tenantNamespace('kpi-rep-tenant');
      await createInstanceCrd(kc, widgets);
      crdCreated = true;
      // A platform RuntimeClass of runc strength: allowed while the minimum is runc.
      await kc.makeApiClient(NodeV1Api).createRuntimeClass({
        body: { apiVersion: 'node.k8s.io/v1', kind: 'RuntimeClass', metadata: { name: plainClass }, handler: 'runc' },
      });
      plainCreated = true;
      proxy = await startApiProxy(cluster, {
        upstreamUser: {
          name: rbac.user,
          groups: ['system:serviceaccounts', `system:serviceaccounts:${leaseNamespace}`],
        },
      });
      operator = await suite.startOperator();
    },
    // The instance deleted while the operator runs: it removes what it generated (RuntimeClass, policies).
    beforeTeardown: async () => {
      try {
        await custom.deleteNamespacedCustomObject({ ...widget, namespace: tenantNs, name: instance });
        await waitFor(
          `instance ${instance} to be finalized by the operator`,
          async () => {
            try {
              await custom.getNamespacedCustomObject({ ...widget, namespace: tenantNs, name: instance });
              return false;
            } catch (error) {
              if (isApiStatus(error, 404)) return true;
              throw error;
            }
          },
          { timeoutMs: 30_000, intervalMs: 250 },
        );
      } catch (error) {
        if (!isApiStatus(error, 404)) process.stderr.write(`[reports] cleanup: ${String(error)}\n`);
      }
    },
    afterOperatorsStop: async ({ kc }) => {
      await proxy?.close();
      try {
        await custom.patchNamespacedCustomObject(
          { ...widget, namespace: tenantNs, name: instance, body: { metadata: { finalizers: null } } },
          mergePatch,
        );
      } catch (error) {
        if (!isApiStatus(error, 404)) throw error;
      }
      if (crdCreated) await deleteInstanceCrd(kc, widgets);
      if (plainCreated) await kc.makeApiClient(NodeV1Api).deleteRuntimeClass({ name: plainClass });
      await deleteReportCrds(kc);
    },
  });
  const operatorName = `${suite.release}-op`;
  let kc: KubeConfig;
  let core: CoreV1Api;
  let custom: CustomObjectsApi;
  let releaseNs = '';
  let tenantNs = '';

  const metric = async (name: string, labels: Record<string, string> = {}): Promise<number> =>
    sumMetric(await scrapeMetrics(operator?.metricsUrl ?? ''), name, labels);

  const readReport = async (): Promise<ReportObject | undefined> => {
    try {
      return (await custom.getNamespacedCustomObject({
        ...REPORT,
        namespace: tenantNs,
        name: 'kubeplus-isolation',
      })) as ReportObject;
    } catch (error) {
      if (isApiStatus(error, 404)) return undefined;
      throw error;
    }
  };

  const waitForReport = (what: string, predicate: (r: ReportObject) => boolean): Promise<ReportObject> =>
    waitFor(
      `the Report to ${what}`,
      async (observe) => {
        const report = await readReport();
        observe({ summary: report?.summary, results: report?.results?.map((r) => r.resources[0]?.name) });
        return report !== undefined && predicate(report) ? report : undefined;
      },
      { timeoutMs: 8 * PERIOD_S * 1000, intervalMs: 250 },
    );

  const operatorEvents = async (reason: string) =>
    (
      await core.listNamespacedEvent({
        namespace: releaseNs,
        fieldSelector: `involvedObject.name=${operatorName},reason=${reason}`,
      })
    ).items;

  const createPod = (name: string, spec: Partial<NonNullable<V1Pod['spec']>> = {}) =>
    core.createNamespacedPod({ namespace: tenantNs, body: testPod(name, { schedulerName: UNSCHEDULED, ...spec }) });

  const createSandbox = (name: string, runtimeClassName: string) =>
    custom.createNamespacedCustomObject({
      ...SANDBOX,
      namespace: tenantNs,
      body: {
        apiVersion: `${SANDBOX.group}/${SANDBOX.version}`,
        kind: 'Sandbox',
        metadata: { name },
        spec: {
          podTemplate: {
            spec: { runtimeClassName, containers: [{ name: 'agent', image: 'registry.k8s.io/pause:3.10' }] },
          },
        },
      },
    });

  const setSandboxMinimum = (minRuntimeClass: string) =>
    custom.patchNamespacedCustomObject(
      {
        ...widget,
        namespace: tenantNs,
        name: instance,
        body: { metadata: { annotations: { [SANDBOX_ISOLATION_ANNOTATION]: sandboxAnnotation(minRuntimeClass) } } },
      },
      mergePatch,
    );

  beforeAll(() => {
    ({ kc, leaseNamespace: releaseNs } = suite);
    core = kc.makeApiClient(CoreV1Api);
    custom = kc.makeApiClient(CustomObjectsApi);
  });

  test('without the Report API: one Warning Event on the operator Pod, the gauge at 0, and isolation goes on', async () => {
    await custom.createNamespacedCustomObject({
      ...widget,
      namespace: tenantNs,
      body: {
        apiVersion: `${widgets.group}/v1`,
        kind: widgets.kind,
        metadata: {
          name: instance,
          annotations: {
            [NODE_ISOLATION_ANNOTATION]: JSON.stringify(mandate),
            [SANDBOX_ISOLATION_ANNOTATION]: sandboxAnnotation('runc'),
          },
        },
      },
    });
    await waitFor(
      `the operator to isolate namespace ${tenantNs} and create ${ownClass}`,
      async () => {
        const ns = await core.readNamespace({ name: tenantNs });
        const classes = await kc.makeApiClient(NodeV1Api).listRuntimeClass();
        return (
          ns.metadata?.labels?.[NODE_ISOLATION_ENABLED_LABEL] === 'true' &&
          classes.items.some((rc) => rc.metadata?.name === ownClass)
        );
      },
      { timeoutMs: 60_000, intervalMs: 250 },
    );
    // No webhook is registered: every Pod is admitted as written.
    const [toleration] = mandate.tolerations;
    await createPod('placed', { nodeSelector: mandate.nodeSelector, tolerations: [{ ...toleration }] });
    await createPod('down-bare');
    await createPod('down-selector', { nodeSelector: mandate.nodeSelector });

    await waitFor(
      'the audit to count the two unisolated Pods, and the API to be reported missing',
      async (observe) => {
        const unisolated = await metric('kubeplus_operator_unisolated_pods');
        const events = await operatorEvents('ReportsApiUnavailable');
        observe({ unisolated, events: events.length });
        return unisolated === 2 && events.length === 1;
      },
      { timeoutMs: 30_000, intervalMs: 250 },
    );
    // Said once: more audits pass, the same single Event, never repeated.
    await new Promise((resolve) => setTimeout(resolve, 2 * PERIOD_S * 1000));
    const [event, ...more] = await operatorEvents('ReportsApiUnavailable');
    expect(more).toEqual([]);
    expect(event).toMatchObject({
      type: 'Warning',
      count: 1,
      involvedObject: { kind: 'Pod', namespace: releaseNs, name: operatorName },
    });
    expect(event?.message).toContain('openreports.io/v1alpha1');
    expect(await metric('kubeplus_operator_reports_api_available')).toBe(0);
    expect(await metric('kubeplus_operator_report_writes_total')).toBe(0);
    expect(
      await metric('kubeplus_operator_reconcile_total', { controller: 'node-isolation-audit', result: 'error' }),
    ).toBe(0);
  });

  test('installed later, the Report appears without a restart: a fail per unisolated Pod naming what it lacks', async () => {
    await installOpenReportsCrds(kc);
    const report = await waitForReport('name both unisolated Pods', (r) => r.summary.fail === 2);
    expect(report).toMatchObject({
      source: 'kubeplus-isolation',
      scope: { kind: 'Namespace', name: tenantNs },
      summary: { pass: 1, fail: 2, warn: 0, error: 0, skip: 0 },
      metadata: { annotations: { 'kubeplus.io/report-results-omitted': '0' } },
    });
    const byPod = new Map((report.results ?? []).map((r) => [r.resources[0]?.name, r]));
    expect([...byPod.keys()].sort()).toEqual(['down-bare', 'down-selector']);
    const pool = mandate.nodeSelector.pool;
    expect(byPod.get('down-bare')).toMatchObject({
      source: 'kubeplus-isolation',
      policy: 'node-isolation',
      result: 'fail',
      properties: { missingNodeSelector: `pool=${pool}`, missingTolerations: `dedicated=${pool}:NoSchedule` },
      resources: [{ kind: 'Pod', name: 'down-bare', uid: expect.any(String) }],
    });
    expect(byPod.get('down-bare')?.message).toContain(
      `lacks the mandated node placement: nodeSelector pool=${pool}; toleration dedicated=${pool}:NoSchedule.`,
    );
    expect(byPod.get('down-selector')?.properties).toEqual({ missingTolerations: `dedicated=${pool}:NoSchedule` });
    expect(await metric('kubeplus_operator_reports_api_available')).toBe(1);
    const [available] = await operatorEvents('ReportsApiAvailable');
    expect(available).toMatchObject({ type: 'Normal', involvedObject: { kind: 'Pod', name: operatorName } });
  });

  test('a Sandbox admitted before the minimum was raised is reported under sandbox-isolation', async () => {
    await createSandbox('before', plainClass);
    await setSandboxMinimum('kata');
    await waitFor(
      `${ownClass} to carry the kata handler`,
      async () => (await kc.makeApiClient(NodeV1Api).readRuntimeClass({ name: ownClass })).handler === 'kata',
      { timeoutMs: 30_000, intervalMs: 250 },
    );
    await createSandbox('after', ownClass);
    // The raise is reported at once (before 'after' exists); 'after' is counted at the next
    // period (Sandbox events do not trigger an audit).
    const report = await waitForReport(
      'name the Sandbox left weaker than kata, and count the one created after',
      (r) => (r.results ?? []).some((x) => x.policy === 'sandbox-isolation') && r.summary.pass === 2,
    );
    expect(report.summary).toEqual({ pass: 2, fail: 3, warn: 0, error: 0, skip: 0 });
    const sandboxResults = (report.results ?? []).filter((r) => r.policy === 'sandbox-isolation');
    expect(sandboxResults).toEqual([
      expect.objectContaining({
        result: 'fail',
        properties: { minimum: 'kata', runtimeClassName: plainClass, handler: 'runc', level: 'runc' },
        resources: [expect.objectContaining({ kind: 'Sandbox', name: 'before' })],
      }),
    ]);
    expect(sandboxResults[0]?.message).toContain("weaker than the namespace's minimum kata");
  });

  test('an unchanged namespace costs no write across audits', async () => {
    if (proxy === undefined) throw new Error('no proxy');
    const before = await readReport();
    const unchangedBefore = await metric('kubeplus_operator_reports_unchanged_total');
    const mark = proxy.mark();
    await new Promise((resolve) => setTimeout(resolve, 4 * PERIOD_S * 1000));
    const window = proxy.requests(mark).filter((r) => REPORT_PATH.test(r.path));
    // Audits happened (each reads the Report) ...
    expect(window.filter((r) => r.method === 'GET').length).toBeGreaterThanOrEqual(2);
    expect(await metric('kubeplus_operator_reports_unchanged_total')).toBeGreaterThanOrEqual(unchangedBefore + 2);
    // ... and wrote nothing: no write request, the same resourceVersion.
    expect(window.filter((r) => r.method !== 'GET')).toEqual([]);
    expect((await readReport())?.metadata.resourceVersion).toBe(before?.metadata.resourceVersion);
  });

  test('a Pod deleted or recreated placed, and the weak Sandbox deleted, leave the Report at the next audit', async () => {
    const [toleration] = mandate.tolerations;
    await core.deleteNamespacedPod({ namespace: tenantNs, name: 'down-bare', gracePeriodSeconds: 0 });
    await core.deleteNamespacedPod({ namespace: tenantNs, name: 'down-selector', gracePeriodSeconds: 0 });
    await createPod('down-selector-again', { nodeSelector: mandate.nodeSelector, tolerations: [{ ...toleration }] });
    await custom.deleteNamespacedCustomObject({ ...SANDBOX, namespace: tenantNs, name: 'before' });
    const report = await waitForReport('be clean', (r) => r.summary.fail === 0);
    expect(report.summary).toEqual({ pass: 3, fail: 0, warn: 0, error: 0, skip: 0 });
    expect(report.results ?? []).toEqual([]);
    expect(await metric('kubeplus_operator_unisolated_pods')).toBe(0);
  });
  test('a namespace no longer isolated loses its Report', async () => {
    // (Errors before this test are possible and fine: right after the CRD is installed the API
    // server may answer 429 "storage is (re)initializing"; counted, retried at the next audit.)
    const errorsBefore = await metric('kubeplus_operator_report_writes_total', { result: 'error' });
    await custom.patchNamespacedCustomObject(
      {
        ...widget,
        namespace: tenantNs,
        name: instance,
        body: {
          metadata: { annotations: { [NODE_ISOLATION_ANNOTATION]: null, [SANDBOX_ISOLATION_ANNOTATION]: null } },
        },
      },
      mergePatch,
    );
    await waitFor('the Report to be deleted', async () => (await readReport()) === undefined, {
      timeoutMs: 8 * PERIOD_S * 1000,
      intervalMs: 250,
    });
    expect(await metric('kubeplus_operator_report_writes_total', { result: 'deleted' })).toBe(1);
    expect(await metric('kubeplus_operator_report_writes_total', { result: 'error' })).toBe(errorsBefore);
  });

  test('auditing hourly, a sandbox policy applied, raised and removed is reported at once', async () => {
    // The suite's operator (3 s period) makes way for one auditing hourly: whatever is reported
    // from now on comes from a change, never from a period.
    await operator?.stop();
    operator = await suite.startOperator({ name: operatorName, args: ['--audit-interval=1h'] });
    const sandboxFailures = (r: ReportObject): string[] =>
      (r.results ?? [])
        .filter((x) => x.policy === 'sandbox-isolation' && x.result === 'fail')
        .map((x) => x.resources[0]?.name ?? '');
    const within = { timeoutMs: 60_000, intervalMs: 250 };

    await setSandboxMinimum('runc');
    await waitFor(
      `${ownClass} to carry the runc handler`,
      async () => {
        try {
          return (await kc.makeApiClient(NodeV1Api).readRuntimeClass({ name: ownClass })).handler === 'runc';
        } catch (error) {
          if (isApiStatus(error, 404)) return false;
          throw error;
        }
      },
      within,
    );
    await createSandbox('platform-runc', plainClass);
    await waitFor('a Report of the sandbox-isolated namespace', async () => (await readReport()) !== undefined, within);

    await setSandboxMinimum('kata');
    // Exactly that one: the Sandbox on the own class, recreated with the kata handler, passes.
    await waitFor(
      'the Report to fail the Sandbox left on the platform runc class, and only it',
      async (observe) => {
        const report = await readReport();
        observe({ failing: report && sandboxFailures(report) });
        return report !== undefined && sandboxFailures(report).join() === 'platform-runc' ? true : undefined;
      },
      within,
    );
    expect((await kc.makeApiClient(NodeV1Api).readRuntimeClass({ name: ownClass })).handler).toBe('kata');

    // The annotation made invalid: its last good policies stay (and the class with its kata
    // handler), so the Report judges by kata still, and it names the instance and the error at
    // once (issue 39: the API server accepts a bad annotation; the Event expires, this stays).
    const kept = await readReport();
    await custom.patchNamespacedCustomObject(
      {
        ...widget,
        namespace: tenantNs,
        name: instance,
        body: { metadata: { annotations: { [SANDBOX_ISOLATION_ANNOTATION]: '{"minRuntimeClass":' } } },
      },
      mergePatch,
    );
    const annotationErrors = (r: ReportObject) => (r.results ?? []).filter((x) => x.result === 'error');
    const judged = await waitFor(
      'the Report to name the instance whose annotation turned invalid, with its error',
      async (observe) => {
        const report = await readReport();
        observe({ errors: report && annotationErrors(report).map((x) => x.message), summary: report?.summary });
        return report !== undefined && annotationErrors(report).length > 0 ? report : undefined;
      },
      within,
    );
    expect(judged.metadata.resourceVersion).not.toBe(kept?.metadata.resourceVersion);
    expect(annotationErrors(judged)).toEqual([
      expect.objectContaining({
        policy: 'sandbox-isolation',
        message: expect.stringMatching(
          new RegExp(
            `^Widget ${tenantNs}/${instance}: ${SANDBOX_ISOLATION_ANNOTATION} is invalid: .+\\. The operator keeps`,
          ),
        ),
        resources: [expect.objectContaining({ kind: 'Widget', namespace: tenantNs, name: instance })],
      }),
    ]);
    expect(judged.summary).toMatchObject({ error: 1 });
    // Still judged by the last good minimum (kata).
    expect(sandboxFailures(judged)).toEqual(['platform-runc']);
    const invalid = await core.listNamespacedEvent({
      namespace: tenantNs,
      fieldSelector: `involvedObject.name=${instance},reason=InvalidSandboxIsolation`,
    });
    expect(invalid.items.length).toBeGreaterThan(0);

    await custom.patchNamespacedCustomObject(
      {
        ...widget,
        namespace: tenantNs,
        name: instance,
        body: { metadata: { annotations: { [SANDBOX_ISOLATION_ANNOTATION]: null } } },
      },
      mergePatch,
    );
    await waitFor('the Report to be deleted', async () => (await readReport()) === undefined, within);
  });
});
