/**
 * Where Pods really run (issue 38), on the real API server alone: the operator as the chart runs it
 * (its ServiceAccount and RBAC: `nodes` list/watch, `pods` list/watch), fake nodes, Pods bound to a
 * node by name (nothing runs them; they stay Pending, bound). The judgement's wiring on every
 * supported minor: the Node cache, the foreign-Pod search by `spec.nodeName` field selector, the
 * Report's rules, the Events, and a Node's relabelling bringing the audit forward.
 *
 * The same on the real node, with Pods really running: pool-placement-real-node.test.ts.
 */
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import {
  type FakeNodes,
  installOpenReportsCrds,
  isApiStatus,
  startFakeNodes,
  testPod,
  waitFor,
} from '@kubeplus-isolation/e2e';
import { NODE_ISOLATION_ENABLED_LABEL, NODE_ISOLATION_RESOLVED_ANNOTATION } from '@kubeplus-isolation/spec';
import { CoreV1Api, CustomObjectsApi, type V1Pod } from '@kubernetes/client-node';
import { uniqueName } from './support/names.js';
import { poolMandate } from './support/node-isolation.js';
import { operatorSuite } from './support/operator-suite.js';

/** Long enough that a test must not wait for it: only the Node event can bring an audit forward in time. */
const LONG_PERIOD_S = 600;
const PERIOD_S = 3;
const REPORT = { group: 'openreports.io', version: 'v1alpha1', plural: 'reports' };

interface ReportResult {
  policy: string;
  rule?: string;
  message: string;
  properties?: Record<string, string>;
  resources: Array<{ kind: string; name: string; namespace?: string }>;
}

describe('operator: where Pods really run, judged on the real API server (fake nodes)', () => {
  const suffix = uniqueName('pp');
  const poolA = `${suffix}-a`;
  const poolB = `${suffix}-b`;
  const node = `${suffix}-node`;
  let nodes: FakeNodes | undefined;
  let teamA = '';
  let teamB = '';
  let foreignNs = '';
  const isolated = (pool: string) => ({
    labels: { [NODE_ISOLATION_ENABLED_LABEL]: 'true' },
    annotations: { [NODE_ISOLATION_RESOLVED_ANNOTATION]: JSON.stringify(poolMandate(pool)) },
  });
  const suite = operatorSuite({
    name: 'pp',
    chart: { values: {} },
    args: [`--audit-interval=${PERIOD_S}s`],
    startOperator: false,
    beforeOperator: async ({ kc }) => {
      await installOpenReportsCrds(kc);
      teamA = await suite.tenantNamespace('kpi-pp-a', isolated(poolA));
      teamB = await suite.tenantNamespace('kpi-pp-b', isolated(poolB));
      foreignNs = await suite.tenantNamespace('kpi-pp-foreign');
      nodes = await startFakeNodes(kc, [node], { labels: { pool: poolA } });
    },
  });
  let core: CoreV1Api;
  let custom: CustomObjectsApi;

  const readResults = async (namespace: string): Promise<ReportResult[] | undefined> => {
    try {
      const report = (await custom.getNamespacedCustomObject({
        ...REPORT,
        namespace,
        name: 'kubeplus-isolation',
      })) as { results?: ReportResult[] };
      return report.results ?? [];
    } catch (error) {
      if (isApiStatus(error, 404)) return undefined;
      throw error;
    }
  };
  const waitForResult = (namespace: string, what: string, predicate: (r: ReportResult) => boolean, timeoutMs: number) =>
    waitFor(
      `the Report of ${namespace} to ${what}`,
      async (observe) => {
        const results = await readResults(namespace);
        observe(results?.map((r) => ({ rule: r.rule, message: r.message })));
        return results?.find(predicate);
      },
      { timeoutMs, intervalMs: 250 },
    );
  const bound = (name: string, spec: Partial<NonNullable<V1Pod['spec']>>): V1Pod =>
    testPod(name, { nodeName: node, ...spec });

  beforeAll(() => {
    core = suite.kc.makeApiClient(CoreV1Api);
    custom = suite.kc.makeApiClient(CustomObjectsApi);
  });

  afterAll(async () => {
    await nodes?.stop();
  });

  test('a foreign Pod bound to a pool node: the owner’s Report counts it on the node (not whose), the Pod gets a Warning Event', async () => {
    await suite.startOperator();
    const mandate = poolMandate(poolA);
    await core.createNamespacedPod({
      namespace: teamA,
      body: bound('runner', { nodeSelector: mandate.nodeSelector, tolerations: mandate.tolerations }),
    });
    await core.createNamespacedPod({
      namespace: foreignNs,
      body: bound('squatter', { nodeSelector: mandate.nodeSelector, tolerations: [{ operator: 'Exists' }] }),
    });
    const foreign = await waitForResult(
      teamA,
      'count the foreign Pod',
      (r) => r.rule === 'foreign-pods-on-pool',
      10 * PERIOD_S * 1000,
    );
    expect(foreign).toMatchObject({
      policy: 'node-isolation',
      properties: { node, foreignPods: '1' },
      resources: [{ kind: 'Node', name: node }],
    });
    expect(JSON.stringify(foreign)).not.toContain(foreignNs);
    const events = await waitFor(
      'a ForeignPodOnPool Event on the foreign Pod',
      async () => {
        const list = (
          await core.listNamespacedEvent({
            namespace: foreignNs,
            fieldSelector: 'involvedObject.name=squatter,reason=ForeignPodOnPool',
          })
        ).items;
        return list.length > 0 ? list : undefined;
      },
      { timeoutMs: 10 * PERIOD_S * 1000 },
    );
    expect(events[0]?.message).toContain(`node ${node}`);
    expect(events[0]?.message).toContain(teamA);
    // No finding about team-a's own Pod: it runs in its pool and tolerates only its own taint.
    expect((await readResults(teamA))?.filter((r) => r.resources[0]?.name === 'runner')).toEqual([]);
  });

  test('an UPDATE adds {operator: Exists}, then the node is re-pooled: reported at once (the Node event), off-pool and beyond the mandate', async () => {
    // An operator whose period cannot deliver in time: the Node's relabelling must bring the audit forward.
    await suite.operator.stop();
    const op = await suite.startOperator({ args: [`--audit-interval=${LONG_PERIOD_S}s`] });
    await waitFor('the new operator to lead', async () => (await op.metric('kubeplus_operator_leader')) === 1, {
      timeoutMs: 60_000,
    });
    const runner = await core.readNamespacedPod({ namespace: teamA, name: 'runner' });
    await core.replaceNamespacedPod({
      namespace: teamA,
      name: 'runner',
      body: {
        ...runner,
        spec: {
          ...runner.spec,
          containers: runner.spec?.containers ?? [],
          tolerations: [...(runner.spec?.tolerations ?? []), { operator: 'Exists' }],
        },
      },
    });
    await nodes?.label(node, { pool: poolB });

    const offPool = await waitForResult(teamA, 'name the Pod off its pool', (r) => r.rule === 'off-pool', 30_000);
    expect(offPool).toMatchObject({
      properties: { node, missingNodeLabels: `pool=${poolA}` },
      resources: [{ kind: 'Pod', namespace: teamA, name: 'runner' }],
    });
    const beyond = await waitForResult(
      teamA,
      'name the Pod tolerating beyond its mandate',
      (r) => r.rule === 'tolerates-beyond-mandate',
      30_000,
    );
    expect(beyond).toMatchObject({ properties: { tolerations: '* Exists' } });
    expect(JSON.stringify(beyond)).not.toContain(teamB);
    // The node is team-b's pool now: both Pods are foreign there, in team-b's Report.
    const onB = await waitForResult(
      teamB,
      'count the two foreign Pods',
      (r) => r.rule === 'foreign-pods-on-pool',
      30_000,
    );
    expect(onB.properties).toEqual({ node, foreignPods: '2' });
    // The leader's gauge, by finding (no namespace label): team-a's two findings, team-b's two foreign Pods.
    await waitFor(
      'the placement gauge to count every finding',
      async (observe) => {
        const counts = {
          off_pool: await op.metric('kubeplus_operator_pool_placement_pods', { finding: 'off_pool' }),
          tolerates_beyond_mandate: await op.metric('kubeplus_operator_pool_placement_pods', {
            finding: 'tolerates_beyond_mandate',
          }),
          foreign_on_pool: await op.metric('kubeplus_operator_pool_placement_pods', { finding: 'foreign_on_pool' }),
        };
        observe(counts);
        // At least: the shared cluster may hold other suites' isolated namespaces, which this leader audits too.
        return counts.off_pool >= 1 && counts.tolerates_beyond_mandate >= 1 && counts.foreign_on_pool >= 2;
      },
      { timeoutMs: 30_000 },
    );
    // And team-a's pool has no node any more: its foreign-Pod result is gone.
    expect((await readResults(teamA))?.some((r) => r.rule === 'foreign-pods-on-pool')).toBe(false);
  });
});
