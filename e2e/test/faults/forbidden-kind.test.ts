/**
 * Fault: a CRD labelled `registered-by: kubeplus` in a group the operator's RBAC does not cover.
 *
 * The operator runs as the chart's ServiceAccount under the chart's RBAC (instance groups by
 * ClusterRole aggregation, as `operator.instanceRoleAggregation` sets it up). One labelled Kind is
 * granted, one is not. Proven on the real control plane: the operator becomes and stays ready
 * (/readyz names the forbidden Kind), counts it (`kubeplus_operator_instance_kinds{state="forbidden"}`),
 * warns once though it keeps retrying, and isolates an instance of the permitted Kind; when RBAC
 * for the other group is granted later — a ClusterRole aggregated into the chart's — the same
 * process watches it and isolates its instance, without a restart.
 */
import { beforeAll, describe, expect, test } from '@jest/globals';
import {
  type InstanceKind,
  isApiStatus,
  loadKubeConfig,
  type RunningOperator,
  reportsRefusal,
  scrapeMetrics,
  sumMetric,
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
  RbacAuthorizationV1Api,
  setHeaderOptions,
} from '@kubernetes/client-node';
import { uniqueName } from '../support/names.js';
import { operatorSuite } from '../support/operator-suite.js';
import { can, createInstanceCrd, deleteInstanceCrd, operatorKubeconfig } from './support/chart-rbac-operator.js';

const mergePatch = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);
const AGGREGATE_LABEL = 'isolation.kubeplus.io/aggregate-to-operator';

describe('fault: an instance Kind the operator may not read', () => {
  let kc: KubeConfig;
  let operator: RunningOperator | undefined;
  let operatorKc: KubeConfig;
  const suffix = uniqueName('fk');
  const permitted: InstanceKind = {
    group: `permitted-${suffix}.e2e.kubeplus.io`,
    kind: 'Widget',
    plural: 'widgets',
  };
  const forbidden: InstanceKind = {
    group: `forbidden-${suffix}.e2e.kubeplus.io`,
    kind: 'Gadget',
    plural: 'gadgets',
  };
  const forbiddenGvr = `${forbidden.group}/v1/${forbidden.plural}`;
  const grant = uniqueName('kpi-fk-grant');
  const crds: InstanceKind[] = [];
  let widgetNs = '';
  let gadgetNs = '';
  const mandate = { nodeSelector: { pool: `${suffix}-pool` }, tolerations: [] };
  const suite = operatorSuite({
    name: 'fk',
    chart: {
      values: {
        operator: {
          instanceGroups: [{ group: permitted.group, resources: [permitted.plural] }],
          instanceRoleAggregation: true,
        },
      },
    },
    // The tests start it.
    startOperator: false,
    afterOperatorsStop: async () => {
      const custom = kc.makeApiClient(CustomObjectsApi);
      for (const [crd, namespace, name] of [
        [permitted, widgetNs, 'widget-1'],
        [forbidden, gadgetNs, 'gadget-1'],
      ] as const) {
        try {
          await custom.patchNamespacedCustomObject(
            {
              group: crd.group,
              version: 'v1',
              plural: crd.plural,
              namespace,
              name,
              body: { metadata: { finalizers: null } },
            },
            mergePatch,
          );
        } catch (error) {
          if (!isApiStatus(error, 404)) throw error;
        }
      }
      for (const crd of crds) await deleteInstanceCrd(kc, crd);
      try {
        await kc.makeApiClient(RbacAuthorizationV1Api).deleteClusterRole({ name: grant });
      } catch (error) {
        if (!isApiStatus(error, 404)) throw error;
      }
    },
  });

  const metric = async (name: string, labels: Record<string, string> = {}): Promise<number> =>
    sumMetric(await scrapeMetrics(operator?.metricsUrl ?? ''), name, labels);

  async function createInstance(crd: InstanceKind, namespace: string, name: string): Promise<void> {
    await kc.makeApiClient(CustomObjectsApi).createNamespacedCustomObject({
      group: crd.group,
      version: 'v1',
      plural: crd.plural,
      namespace,
      body: {
        apiVersion: `${crd.group}/v1`,
        kind: crd.kind,
        metadata: { name, annotations: { [NODE_ISOLATION_ANNOTATION]: JSON.stringify(mandate) } },
      },
    });
  }

  async function isolated(namespace: string): Promise<boolean> {
    const ns = await kc.makeApiClient(CoreV1Api).readNamespace({ name: namespace });
    return (
      ns.metadata?.labels?.[NODE_ISOLATION_ENABLED_LABEL] === 'true' &&
      ns.metadata.annotations?.[NODE_ISOLATION_RESOLVED_ANNOTATION] !== undefined
    );
  }

  beforeAll(async () => {
    kc = suite.kc;
    widgetNs = await suite.tenantNamespace('kpi-fk-widgets');
    gadgetNs = await suite.tenantNamespace('kpi-fk-gadgets');
    for (const crd of [permitted, forbidden]) {
      await createInstanceCrd(kc, crd);
      crds.push(crd);
    }
    operatorKc = loadKubeConfig(await operatorKubeconfig(suite.cluster, suite.leaseNamespace, suite.rbac));
    // The aggregation controller has filled the chart's instances role: the permitted Kind is
    // readable, the other one is not.
    await waitFor(
      `the chart's aggregated role to grant ${permitted.plural}.${permitted.group}`,
      () => can(operatorKc, 'list', permitted.group, permitted.plural),
      { timeoutMs: 30_000, intervalMs: 250 },
    );
    expect(await can(operatorKc, 'list', forbidden.group, forbidden.plural)).toBe(false);
  });

  test('the operator becomes ready, naming the forbidden Kind and counting it', async () => {
    // Readiness (200) is what the launcher waits for.
    const startedAt = Date.now();
    operator = await suite.startOperator({ name: `${suite.release}-operator`, args: ['--log-level=debug'] });
    process.stdout.write(`[forbidden-kind] process start → /readyz 200 in ${Date.now() - startedAt} ms\n`);
    await waitFor(
      'the operator to count one forbidden and one synced instance Kind',
      async (observe) => {
        const counts = {
          forbidden: await metric('kubeplus_operator_instance_kinds', { state: 'forbidden' }),
          synced: await metric('kubeplus_operator_instance_kinds', { state: 'synced' }),
        };
        observe(counts);
        // At least ours (a labelled CRD another suite left behind would be forbidden too).
        return counts.forbidden >= 1 && counts.synced >= 1;
      },
      { timeoutMs: 30_000, intervalMs: 250 },
    );
    const readyz = await fetch(operator.readyzUrl);
    expect(readyz.status).toBe(200);
    const body = (await readyz.json()) as { checks: { informers: { ok: boolean; message: string } } };
    expect(body.checks.informers.message).toMatch(/^informers synced; forbidden by RBAC \(not watched, retried\): /);
    expect(body.checks.informers.message).toContain(forbiddenGvr);
    expect(await metric('kubeplus_operator_informer_synced', { resource: 'instances' })).toBe(1);
  });

  test('it still isolates an instance of a permitted Kind; the forbidden Kind’s instance is left alone', async () => {
    await createInstance(permitted, widgetNs, 'widget-1');
    await createInstance(forbidden, gadgetNs, 'gadget-1');
    await waitFor(`namespace ${widgetNs} isolated by the operator`, () => isolated(widgetNs), {
      timeoutMs: 60_000,
      intervalMs: 250,
    });
    expect(await isolated(gadgetNs)).toBe(false);
  });

  test('it warned once about the forbidden Kind while retrying it with backoff', async () => {
    if (operator === undefined) throw new Error('no operator');
    const op = operator;
    // 0.8 + 1.6 + 3.2 + 6.4 s: at least four retries about 12 s after start.
    await waitFor(
      'the operator to have retried the forbidden Kind at least four times',
      async (observe) => {
        const retries = op
          .logLines()
          .filter((l) => l.informer === forbiddenGvr && l.msg === 'informer list/watch failed; restarting');
        observe(retries.map((l) => `${l.level} failures=${String(l.failures)}`));
        return retries.length >= 4;
      },
      { timeoutMs: 60_000, intervalMs: 500 },
    );
    const lines = op.logLines();
    const retries = lines.filter((l) => l.informer === forbiddenGvr && l.msg.startsWith('informer list/watch failed'));
    expect(retries.every((l) => l.level === 'debug' && /forbidden/i.test(String(l.error)))).toBe(true);
    const warnings = lines.filter((l) => l.level === 'warn' || l.level === 'error');
    // Ours was reported exactly once. (A CRD this new may also answer 429 "storage is
    // (re)initializing" for a moment: a transient warning of another kind, allowed.)
    const ours = warnings.filter((l) => l.gvr === forbiddenGvr || l.informer === forbiddenGvr);
    expect(ours.map((l) => l.msg.split(':')[0])).toEqual(['instance Kind forbidden']);
    expect(String(ours[0]?.error)).toMatch(/cannot list resource "gadgets"/);
    // Nothing else was refused.
    const refused = warnings.filter((l) => l !== ours[0] && reportsRefusal(l));
    expect(refused).toEqual([]);
  });

  test('RBAC granted later through the chart’s aggregation is picked up without a restart', async () => {
    if (operator === undefined) throw new Error('no operator');
    const op = operator;
    const pid = op.process.pid;
    const forbiddenBefore = await metric('kubeplus_operator_instance_kinds', { state: 'forbidden' });
    await kc.makeApiClient(RbacAuthorizationV1Api).createClusterRole({
      body: {
        metadata: { name: grant, labels: { [AGGREGATE_LABEL]: 'true' } },
        rules: [
          { apiGroups: [forbidden.group], resources: [forbidden.plural], verbs: ['get', 'list', 'watch', 'patch'] },
        ],
      },
    });
    const grantedAt = Date.now();
    await waitFor(
      `the operator to watch ${forbiddenGvr} and isolate ${gadgetNs}`,
      async (observe) => {
        const state = {
          forbidden: await metric('kubeplus_operator_instance_kinds', { state: 'forbidden' }),
          isolated: await isolated(gadgetNs),
        };
        observe(state);
        return state.forbidden === forbiddenBefore - 1 && state.isolated;
      },
      // Aggregation, then at most one capped backoff (30 s) until the next retry lists it.
      { timeoutMs: 60_000, intervalMs: 500 },
    );
    process.stdout.write(`[forbidden-kind] granted → watched and isolated in ${Date.now() - grantedAt} ms\n`);
    expect(op.process.pid).toBe(pid);
    expect(op.process.exited()).toBeUndefined();
    expect(await metric('kubeplus_operator_instance_kinds', { state: 'synced' })).toBeGreaterThanOrEqual(2);
    expect(op.logLines().filter((l) => l.msg === 'instance Kind readable again: watching its instances')).toEqual([
      expect.objectContaining({ level: 'info', gvr: forbiddenGvr }),
    ]);
    expect((await fetch(op.readyzUrl)).status).toBe(200);
  });
});
