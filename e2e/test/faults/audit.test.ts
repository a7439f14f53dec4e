/**
 * Fault: the node-isolation webhook is down (failurePolicy Ignore), so Pods created meanwhile in
 * isolated namespaces are admitted without their mandated placement. The operator's fail-open
 * audit finds exactly those Pods, on the real control plane:
 *
 * - the operator runs as the chart's ServiceAccount under the chart's RBAC (`pods: list, watch`),
 *   reaching the API server through a recording proxy, so every request it makes is seen;
 * - Pods created while the webhook runs are patched and never reported; Pods created while it is
 *   stopped are counted by what they lack (`kubeplus_operator_unisolated_pods{missing}`), listed
 *   in the log and reported by a Warning Event on the instance owning the namespace (a
 *   namespace isolated by hand counts in the metric and the log only);
 * - a namespace becoming isolated is audited at once; the others every `--audit-interval`;
 * - the audit never changes a Pod (their resourceVersions stay; the operator sends only LISTs of a
 *   namespace's Pods, and the list + watch of new Pods of audit/pod-admissions.ts), and costs one
 *   LIST per isolated namespace per period (measured here).
 */
import { beforeAll, describe, expect, test } from '@jest/globals';
import {
  type ApiProxy,
  type Cluster,
  type InstanceKind,
  isApiStatus,
  type ProxiedRequest,
  type RunningOperator,
  type RunningWebhook,
  registerWebhook,
  scrapeMetrics,
  startApiProxy,
  startWebhook,
  sumMetric,
  testPod,
  unregisterWebhook,
  waitFor,
} from '@kubeplus-isolation/e2e';
import {
  NODE_ISOLATION_ANNOTATION,
  NODE_ISOLATION_ENABLED_LABEL,
  NODE_ISOLATION_RESOLVED_ANNOTATION,
} from '@kubeplus-isolation/spec';
import {
  CoreV1Api,
  CustomObjectsApi,
  type KubeConfig,
  PatchStrategy,
  setHeaderOptions,
  type V1Pod,
} from '@kubernetes/client-node';
import { uniqueName } from '../support/names.js';
import { poolMandate, waitForWebhookActive } from '../support/node-isolation.js';
import { operatorSuite } from '../support/operator-suite.js';
import { createInstanceCrd, deleteInstanceCrd } from './support/chart-rbac-operator.js';

const mergePatch = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);
/** No scheduler serves this name: nothing but the test and the audit ever touches these Pods. */
const UNSCHEDULED = 'kpi-e2e-no-scheduler';
const PERIOD_S = 3;

const POD_LIST = /^\/api\/v1\/namespaces\/([^/]+)\/pods$/;
/** The Pod watch's list and watch (every namespace). */
const ALL_PODS = '/api/v1/pods';

describe('fault: Pods admitted while the webhook fails open are found by the audit', () => {
  let cluster: Cluster;
  let kc: KubeConfig;
  let core: CoreV1Api;
  let proxy: ApiProxy | undefined;
  let webhook: RunningWebhook | undefined;
  let operator: RunningOperator | undefined;
  const suffix = uniqueName('audit');
  const widgets: InstanceKind = { group: `${suffix}.e2e.kubeplus.io`, kind: 'Widget', plural: 'widgets' };
  const widget = { group: widgets.group, version: 'v1', plural: widgets.plural };
  const instance = 'widget-1';
  const mandate = poolMandate(`${suffix}-pool`);
  const configName = uniqueName('e2e-audit-webhook');
  let crdCreated = false;
  let tenantNs = '';
  let manualNs = '';
  /** The proxy's request mark when the periodic operator started. */
  let periodicMark = 0;
  /** resourceVersion of every Pod right after it was created. */
  const created = new Map<string, string>();

  const unisolated = async (): Promise<Record<string, number>> => {
    const samples = await scrapeMetrics(operator?.metricsUrl ?? '');
    const out: Record<string, number> = {};
    for (const missing of ['node_selector', 'tolerations', 'both']) {
      out[missing] = sumMetric(samples, 'kubeplus_operator_unisolated_pods', { missing });
    }
    return out;
  };

  async function createPod(namespace: string, name: string, spec: Partial<NonNullable<V1Pod['spec']>> = {}) {
    const pod = await core.createNamespacedPod({
      namespace,
      body: testPod(name, { schedulerName: UNSCHEDULED, ...spec }),
    });
    created.set(`${namespace}/${name}`, pod.metadata?.resourceVersion ?? '');
    return pod;
  }

  const suite = operatorSuite({
    name: 'audit',
    chart: { values: { operator: { instanceGroups: [{ group: widgets.group, resources: [widgets.plural] }] } } },
    // The operator's requests, recorded, forwarded with the chart ServiceAccount's identity.
    kubeconfigPath: () => proxy?.kubeconfigPath ?? '',
    // The tests start theirs.
    startOperator: false,
    afterOperatorsStop: async () => {
      await unregisterWebhook(kc, configName);
      await webhook?.stop();
      await proxy?.close();
      try {
        await kc
          .makeApiClient(CustomObjectsApi)
          .patchNamespacedCustomObject(
            { ...widget, namespace: tenantNs, name: instance, body: { metadata: { finalizers: null } } },
            mergePatch,
          );
      } catch (error) {
        if (!isApiStatus(error, 404)) throw error;
      }
      if (crdCreated) await deleteInstanceCrd(kc, widgets);
    },
  });
  const release = suite.release;
  const startOperator = (name: string, auditInterval: string): Promise<RunningOperator> =>
    suite.startOperator({ name, args: [`--audit-interval=${auditInterval}`] });

  async function instanceEvents(reason: string) {
    const list = await core.listNamespacedEvent({
      namespace: tenantNs,
      fieldSelector: `involvedObject.name=${instance},reason=${reason}`,
    });
    return list.items;
  }

  beforeAll(async () => {
    ({ cluster, kc } = suite);
    core = kc.makeApiClient(CoreV1Api);
    tenantNs = await suite.tenantNamespace('kpi-audit-tenant');
    manualNs = await suite.tenantNamespace('kpi-audit-manual');
    await createInstanceCrd(kc, widgets);
    crdCreated = true;
    proxy = await startApiProxy(cluster, {
      upstreamUser: {
        name: suite.rbac.user,
        groups: ['system:serviceaccounts', `system:serviceaccounts:${suite.leaseNamespace}`],
      },
    });
    webhook = await startWebhook(cluster);
    await registerWebhook(kc, { url: webhook.url, caPem: webhook.caPem, name: configName });
  });

  test('with the webhook running, the instance’s namespace is isolated and its Pods are placed', async () => {
    operator = await startOperator(`${release}-op-events`, '10m');
    await kc.makeApiClient(CustomObjectsApi).createNamespacedCustomObject({
      ...widget,
      namespace: tenantNs,
      body: {
        apiVersion: `${widgets.group}/v1`,
        kind: widgets.kind,
        metadata: { name: instance, annotations: { [NODE_ISOLATION_ANNOTATION]: JSON.stringify(mandate) } },
      },
    });
    await waitFor(
      `the operator to isolate namespace ${tenantNs}`,
      async () => {
        const ns = await core.readNamespace({ name: tenantNs });
        return (
          ns.metadata?.labels?.[NODE_ISOLATION_ENABLED_LABEL] === 'true' &&
          ns.metadata.annotations?.[NODE_ISOLATION_RESOLVED_ANNOTATION] !== undefined
        );
      },
      { timeoutMs: 60_000, intervalMs: 250 },
    );
    await waitForWebhookActive(kc, tenantNs, mandate.nodeSelector);
    const pod = await createPod(tenantNs, 'while-up');
    expect(pod.spec?.nodeSelector).toMatchObject(mandate.nodeSelector);
    expect(pod.spec?.tolerations).toEqual(
      expect.arrayContaining([expect.objectContaining(mandate.tolerations[0] ?? {})]),
    );
    expect(await unisolated()).toEqual({ node_selector: 0, tolerations: 0, both: 0 });
  });

  test('with the webhook stopped, Pods are admitted without the mandate', async () => {
    await webhook?.stop();
    webhook = undefined;
    const [toleration] = mandate.tolerations;
    const pods = [
      await createPod(tenantNs, 'down-bare'),
      await createPod(tenantNs, 'down-selector', { nodeSelector: mandate.nodeSelector }),
      await createPod(tenantNs, 'down-toleration', { tolerations: [{ ...toleration }] }),
    ];
    expect(pods.map((p) => [p.metadata?.name, p.spec?.nodeSelector?.pool])).toEqual([
      ['down-bare', undefined],
      ['down-selector', mandate.nodeSelector.pool],
      ['down-toleration', undefined],
    ]);
    // The operator's watch of new Pods sees each one and audits the namespace at once, though
    // the period is 10 min.
    await waitFor(
      'the audit to count the three Pods as soon as they are created',
      async (observe) => {
        const counts = await unisolated();
        observe(counts);
        return counts.node_selector === 1 && counts.tolerations === 1 && counts.both === 1;
      },
      { timeoutMs: 30_000, intervalMs: 200 },
    );
  });

  test('a namespace that becomes isolated is audited at once, not at the next period', async () => {
    if (operator === undefined) throw new Error('no operator');
    const op = operator;
    await createPod(manualNs, 'manual-1');
    const listsBefore = proxy?.mark() ?? 0;
    // Isolated by hand: no instance owns it.
    await core.patchNamespace(
      {
        name: manualNs,
        body: {
          metadata: {
            labels: { [NODE_ISOLATION_ENABLED_LABEL]: 'true' },
            annotations: { [NODE_ISOLATION_RESOLVED_ANNOTATION]: JSON.stringify(mandate) },
          },
        },
      },
      mergePatch,
    );
    const labelledAt = Date.now();
    await waitFor(
      'the audit to report the Pod of the namespace isolated by hand',
      async (observe) => {
        const counts = await unisolated();
        observe(counts);
        return counts.both === 2;
      },
      { timeoutMs: 30_000, intervalMs: 200 },
    );
    // Well within the 10 min period; and the tenant namespace (no event since its Pods came) is not audited again.
    expect(Date.now() - labelledAt).toBeLessThan(30_000);
    expect(await unisolated()).toEqual({ node_selector: 1, tolerations: 1, both: 2 });
    const lists = (proxy?.requests(listsBefore) ?? []).filter((r) => r.method === 'GET' && POD_LIST.test(r.path));
    expect(lists.map((r) => POD_LIST.exec(r.path)?.[1])).toEqual([manualNs]);
    const line = op.logLines().find((l) => l.namespace === manualNs && l.msg.startsWith('Pods lack'));
    expect(line).toMatchObject({
      level: 'warn',
      unisolated: 1,
      unisolatedPods: ['manual-1 (nodeSelector, tolerations)'],
      event: 'none (no watched instance owns the namespace)',
    });
    await op.stop();
    operator = undefined;
  });

  test('the periodic audit reports exactly the Pods admitted unpatched, by what they lack, with an Event on the instance', async () => {
    periodicMark = proxy?.mark() ?? 0;
    operator = await startOperator(`${release}-op-periodic`, `${PERIOD_S}s`);
    const op = operator;
    // The new leader audits every isolated namespace when its term starts.
    await waitFor(
      'the audit to count the four Pods admitted without the mandate',
      async (observe) => {
        const counts = await unisolated();
        observe(counts);
        return counts.node_selector === 1 && counts.tolerations === 1 && counts.both === 2;
      },
      { timeoutMs: 60_000, intervalMs: 250 },
    );
    // A Pod admitted unpatched now is found at once (the Pod watch), at the latest by the period.
    await createPod(tenantNs, 'down-late');
    const createdAt = Date.now();
    await waitFor(
      'the next periodic audit to count the late Pod',
      async (observe) => {
        const counts = await unisolated();
        observe(counts);
        return counts.both === 3;
      },
      { timeoutMs: 4 * PERIOD_S * 1000, intervalMs: 200 },
    );
    expect(Date.now() - createdAt).toBeLessThan(2.5 * PERIOD_S * 1000);
    expect(await unisolated()).toEqual({ node_selector: 1, tolerations: 1, both: 3 });

    const [event] = await waitFor(
      'the Warning Event on the instance to name the late Pod',
      async () => {
        const events = await instanceEvents('PodsNotIsolated');
        return events.some((e) => e.message?.includes('down-late')) ? events : undefined;
      },
      { timeoutMs: 4 * PERIOD_S * 1000, intervalMs: 250 },
    ).then((events) => events.filter((e) => e.message?.includes('down-late')));
    expect(event).toMatchObject({
      type: 'Warning',
      involvedObject: { apiVersion: `${widgets.group}/v1`, kind: widgets.kind, namespace: tenantNs, name: instance },
      source: { component: 'kubeplus.io/isolation-operator' },
    });
    expect(event?.message).toMatch(
      new RegExp(`^4 Pods in namespace ${tenantNs} lack the node placement it mandates: `),
    );
    for (const described of [
      'down-bare (nodeSelector, tolerations)',
      'down-selector (tolerations)',
      'down-toleration (nodeSelector)',
      'down-late (nodeSelector, tolerations)',
    ]) {
      expect(event?.message).toContain(described);
    }
    expect(event?.message).not.toContain('while-up');
    // No Event anywhere about the namespace isolated by hand.
    expect(
      (await core.listNamespacedEvent({ namespace: manualNs })).items.filter((e) => e.reason === 'PodsNotIsolated'),
    ).toEqual([]);

    // Re-reported every period: the same Event's count grows.
    const firstCount = event?.count ?? 0;
    await waitFor(
      'the Event to be repeated by the next periods',
      async () => {
        const again = (await instanceEvents('PodsNotIsolated')).find((e) => e.metadata?.name === event?.metadata?.name);
        return (again?.count ?? 0) >= firstCount + 2;
      },
      { timeoutMs: 5 * PERIOD_S * 1000, intervalMs: 250 },
    );
    const lines = op.logLines().filter((l) => l.msg.startsWith('Pods lack') && l.namespace === tenantNs);
    expect(lines.at(-1)).toMatchObject({
      level: 'warn',
      owner: `${widgets.group}/${widgets.kind}/${tenantNs}/${instance}`,
      unisolated: 4,
      missing: { node_selector: 1, tolerations: 1, both: 2 },
    });
    expect([...((lines.at(-1)?.unisolatedPods as string[] | undefined) ?? [])].sort()).toEqual(
      [
        'down-bare (nodeSelector, tolerations)',
        'down-late (nodeSelector, tolerations)',
        'down-selector (tolerations)',
        'down-toleration (nodeSelector)',
      ].sort(),
    );
  });

  test('the audit never changes a Pod, and costs one LIST per isolated namespace per period', async () => {
    if (operator === undefined || proxy === undefined) throw new Error('not running');
    const op = operator;
    const mark = proxy.mark();
    const from = Date.now();
    const periods = 5;
    await new Promise((resolve) => setTimeout(resolve, periods * PERIOD_S * 1000));
    const window = proxy.requests(mark);
    const seconds = (Date.now() - from) / 1000;

    // Every Pod is exactly as created.
    for (const [key, resourceVersion] of created) {
      const [namespace, name] = key.split('/') as [string, string];
      const pod = await core.readNamespacedPod({ namespace, name });
      expect({ key, resourceVersion: pod.metadata?.resourceVersion }).toEqual({ key, resourceVersion });
    }
    // Over the whole run the operator only ever listed a namespace's Pods, and listed and watched
    // every Pod (the Pod watch): no get or write.
    const allPods = proxy.requests().filter((r) => r.path === ALL_PODS);
    expect(allPods.length).toBeGreaterThan(0);
    expect(allPods.filter((r) => r.method !== 'GET')).toEqual([]);
    const podRequests = proxy.requests().filter((r) => /\/pods(\/|$)/.test(r.path) && r.path !== ALL_PODS);
    expect(podRequests.length).toBeGreaterThan(0);
    expect(podRequests.filter((r) => r.method !== 'GET' || r.watch || !POD_LIST.test(r.path))).toEqual([]);
    for (const r of podRequests) {
      // At most 500, fewer for large Pods: pages are bounded in bytes too (issue 34), and the first
      // page an operator lists, its Pods' size not yet measured, asks for 5.
      expect(Number(r.query.get('limit'))).toBeGreaterThanOrEqual(1);
      expect(Number(r.query.get('limit'))).toBeLessThanOrEqual(500);
      expect(r.query.get('fieldSelector')).toBe('status.phase!=Succeeded,status.phase!=Failed');
    }

    // Cost: LISTs per namespace per period.
    const lists = window.filter((r) => r.method === 'GET' && POD_LIST.test(r.path));
    // These Pods are small: once measured, every page asks for 500.
    for (const r of lists) expect(r.query.get('limit')).toBe('500');
    const byNamespace = (ns: string): ProxiedRequest[] => lists.filter((r) => POD_LIST.exec(r.path)?.[1] === ns);
    const expected = seconds / (PERIOD_S * 1.05); // the mean period, with its 0–10% jitter
    for (const ns of [tenantNs, manualNs]) {
      expect(byNamespace(ns).length).toBeGreaterThanOrEqual(Math.floor(expected) - 1);
      expect(byNamespace(ns).length).toBeLessThanOrEqual(Math.ceil(seconds / PERIOD_S) + 1);
    }
    expect(lists.length).toBe(byNamespace(tenantNs).length + byNamespace(manualNs).length);
    // Events: one write per period for the owned namespace with findings (the repeat's count patch).
    const eventWrites = window.filter(
      (r) => r.method !== 'GET' && r.path.startsWith(`/api/v1/namespaces/${tenantNs}/events`),
    );
    expect(eventWrites.length).toBeLessThanOrEqual(byNamespace(tenantNs).length + 1);
    expect(window.filter((r) => r.method !== 'GET' && r.path.includes(`/namespaces/${manualNs}/events`))).toEqual([]);
    // The operator's own counter agrees with what the proxy saw since it started (± one in flight).
    const counted = sumMetric(await scrapeMetrics(op.metricsUrl), 'kubeplus_operator_audit_pod_list_requests_total');
    const seen = proxy.requests(periodicMark).filter((r) => r.method === 'GET' && POD_LIST.test(r.path)).length;
    expect(Math.abs(counted - seen)).toBeLessThanOrEqual(1);
    process.stdout.write(
      `[audit] ${seconds.toFixed(1)} s at --audit-interval=${PERIOD_S}s, 2 isolated namespaces: ` +
        `${byNamespace(tenantNs).length} + ${byNamespace(manualNs).length} Pod LISTs, ` +
        `${eventWrites.length} Event writes, ${window.length} requests in all\n`,
    );
  });

  test('recreated with the webhook back, the Pods are placed and the report clears', async () => {
    webhook = await startWebhook(cluster);
    await registerWebhook(kc, { url: webhook.url, caPem: webhook.caPem, name: configName });
    await waitForWebhookActive(kc, tenantNs, mandate.nodeSelector);
    for (const name of ['down-bare', 'down-selector', 'down-toleration', 'down-late']) {
      await core.deleteNamespacedPod({ namespace: tenantNs, name, gracePeriodSeconds: 0 });
      created.delete(`${tenantNs}/${name}`);
      const pod = await createPod(tenantNs, `${name}-again`);
      expect(pod.spec?.nodeSelector).toMatchObject(mandate.nodeSelector);
    }
    await waitFor(
      'the audit to report only the namespace isolated by hand',
      async (observe) => {
        const counts = await unisolated();
        observe(counts);
        return counts.node_selector === 0 && counts.tolerations === 0 && counts.both === 1;
      },
      { timeoutMs: 6 * PERIOD_S * 1000, intervalMs: 250 },
    );
    const [normal] = await waitFor(
      'a Normal PodsIsolated Event on the instance',
      async () => {
        const events = await instanceEvents('PodsIsolated');
        return events.length > 0 ? events : undefined;
      },
      { timeoutMs: 4 * PERIOD_S * 1000, intervalMs: 250 },
    );
    expect(normal).toMatchObject({ type: 'Normal' });
    // How many the last audit before it saw depends on when it ran during the recreation.
    expect(normal?.message).toMatch(
      new RegExp(
        `^No Pod in namespace ${tenantNs} lacks the mandated node placement any more \\([1-4] did at the previous audit\\)\\.$`,
      ),
    );
  });
});
