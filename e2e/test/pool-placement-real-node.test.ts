/**
 * Where Pods really run (issue 38), on the harness's real node with the chart installed: the
 * operator's audit judges each running Pod against its namespace's current mandate AND the node it
 * runs on, and reports in the tenant's compliance Report what a spec judged once at admission
 * cannot show.
 *
 * - A foreign Pod: a namespace without isolation selects team-a's pool label and tolerates every
 *   taint (`{operator: Exists}`). Kubernetes binds it to team-a's tainted node. team-a's Report
 *   names the pool node and how many foreign Pods run on it, never whose they are (another
 *   tenant's name is not team-a's to read); the foreign Pod gets a Warning Event in its own
 *   namespace, where its owner and the platform see it.
 * - A re-pooling: team-a's Pod gains `{operator: Exists}` by an UPDATE (Kubernetes allows adding
 *   tolerations to a running Pod), then the platform relabels the node for team-b and adds team-b's
 *   NoExecute taint. The Pod keeps running there (nodeSelector is IgnoredDuringExecution, and it
 *   tolerates the taint); team-a's Report names it off its pool (the node and the missing label) and
 *   tolerating beyond its mandate (the toleration that reaches another tenant's pool).
 *
 * The chart's own Pods tolerate the `dedicated` taints (the platform's own workloads on a
 * one-node cluster); the node is restored afterwards.
 */

import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { installOpenReportsCrds, isApiStatus, type RealNodeCluster, waitFor } from '@kubeplus-isolation/e2e';
import { CoreV1Api, CustomObjectsApi, type V1Pod } from '@kubernetes/client-node';
import {
  installChart,
  isolateTenant,
  kubectl,
  poolMandate,
  prepareChartNode,
  startProjectNode,
  tenantPod,
} from './support/real-node.js';

const RELEASE = 'kpi';
const POOL_A = 'team-a-pool';
const POOL_B = 'team-b-pool';
const FOREIGN_NS = 'unpooled';
const REPORT = { group: 'openreports.io', version: 'v1alpha1', plural: 'reports' };
/** The audit's period here: the interval-driven findings (foreign Pods) come within a few of them. */
const AUDIT_PERIOD_S = 5;

interface ReportResult {
  policy: string;
  rule?: string;
  result: string;
  message: string;
  properties?: Record<string, string>;
  resources: Array<{ kind: string; name: string; namespace?: string }>;
}
interface ReportObject {
  summary: { pass: number; fail: number };
  results?: ReportResult[];
}

describe('where Pods really run: the audit judges the node (real node)', () => {
  let cluster: RealNodeCluster;
  let core: CoreV1Api;
  let custom: CustomObjectsApi;

  const readReport = async (namespace: string): Promise<ReportObject | undefined> => {
    try {
      return (await custom.getNamespacedCustomObject({
        ...REPORT,
        namespace,
        name: 'kubeplus-isolation',
      })) as ReportObject;
    } catch (error) {
      if (isApiStatus(error, 404)) return undefined;
      throw error;
    }
  };
  const waitForResult = (namespace: string, what: string, predicate: (r: ReportResult) => boolean) =>
    waitFor(
      `team-a's Report to ${what}`,
      async (observe) => {
        const report = await readReport(namespace);
        observe({
          summary: report?.summary,
          results: report?.results?.map((r) => ({ rule: r.rule, message: r.message })),
        });
        return report?.results?.find(predicate);
      },
      { timeoutMs: 12 * AUDIT_PERIOD_S * 1000, intervalMs: 500 },
    );
  const running = (namespace: string, name: string) =>
    waitFor(
      `Pod ${namespace}/${name} Running`,
      async (observe) => {
        const pod = await core.readNamespacedPod({ namespace, name });
        observe({ phase: pod.status?.phase, node: pod.spec?.nodeName, conditions: pod.status?.conditions });
        return pod.status?.phase === 'Running' ? pod : undefined;
      },
      { timeoutMs: 90_000 },
    );

  beforeAll(async () => {
    cluster = await startProjectNode();
    core = cluster.cp.kc.makeApiClient(CoreV1Api);
    custom = cluster.cp.kc.makeApiClient(CustomObjectsApi);
    await installOpenReportsCrds(cluster.cp.kc);
    await prepareChartNode(cluster, { pool: POOL_A });
    const platformTolerations = JSON.stringify([{ key: 'dedicated', operator: 'Exists' }]);
    await installChart(
      cluster,
      RELEASE,
      '--set-json',
      `operator.tolerations=${platformTolerations}`,
      '--set-json',
      `webhook.tolerations=${platformTolerations}`,
      '--set-json',
      `operator.extraArgs=["--audit-interval=${AUDIT_PERIOD_S}s"]`,
    );
    await kubectl(cluster, 'taint', 'node', cluster.nodeName, `dedicated=${POOL_A}:NoSchedule`);
    await isolateTenant(cluster, 'team-a', poolMandate(POOL_A));
    await isolateTenant(cluster, 'team-b', poolMandate(POOL_B));
  });

  afterAll(async () => {
    if (cluster === undefined) return;
    // Restore the node as it was before the re-pooling (best effort: the cluster goes next).
    await kubectl(cluster, 'label', 'node', cluster.nodeName, `pool=${POOL_A}`, '--overwrite').catch(() => '');
    await kubectl(cluster, 'taint', 'node', cluster.nodeName, `dedicated=${POOL_B}:NoExecute-`).catch(() => '');
    await kubectl(cluster, 'taint', 'node', cluster.nodeName, `dedicated=${POOL_A}:NoSchedule-`).catch(() => '');
    await cluster.stop();
  });

  test("a foreign Pod on team-a's pool node is reported: team-a's Report counts it on the node, the Pod gets a Warning Event", async () => {
    await kubectl(cluster, 'create', 'namespace', FOREIGN_NS);
    await waitFor(
      `ServiceAccount default in ${FOREIGN_NS}`,
      () => core.readNamespacedServiceAccount({ name: 'default', namespace: FOREIGN_NS }),
      { timeoutMs: 30_000 },
    );
    const foreign = tenantPod('squatter');
    await core.createNamespacedPod({
      namespace: FOREIGN_NS,
      body: {
        ...foreign,
        spec: {
          ...foreign.spec,
          containers: foreign.spec?.containers ?? [],
          nodeSelector: { pool: POOL_A },
          tolerations: [{ operator: 'Exists' }],
        },
      },
    });
    expect((await running(FOREIGN_NS, 'squatter')).spec?.nodeName).toBe(cluster.nodeName);
    // team-a runs a Pod of its own there, so its namespace has something to report on.
    await core.createNamespacedPod({ namespace: 'team-a', body: tenantPod('runner') });
    await running('team-a', 'runner');

    const result = await waitForResult(
      'team-a',
      'count the foreign Pod on the pool node',
      (r) => r.rule === 'foreign-pods-on-pool',
    );
    expect(result).toMatchObject({
      policy: 'node-isolation',
      result: 'fail',
      properties: { node: cluster.nodeName, foreignPods: '1' },
      resources: [{ kind: 'Node', name: cluster.nodeName }],
    });
    expect(result.message).toContain(cluster.nodeName);
    // Not another tenant's to read: neither the foreign namespace nor the Pod's name.
    expect(JSON.stringify(result)).not.toContain(FOREIGN_NS);
    expect(JSON.stringify(result)).not.toContain('squatter');

    const events = await waitFor(
      'a ForeignPodOnPool Event on the foreign Pod',
      async () => {
        const list = (
          await core.listNamespacedEvent({
            namespace: FOREIGN_NS,
            fieldSelector: 'involvedObject.name=squatter,reason=ForeignPodOnPool',
          })
        ).items;
        return list.length > 0 ? list : undefined;
      },
      { timeoutMs: 12 * AUDIT_PERIOD_S * 1000 },
    );
    expect(events[0]?.type).toBe('Warning');
    expect(events[0]?.message).toContain(cluster.nodeName);
    expect(events[0]?.message).toContain('team-a');
  });

  test('a tenant Pod that gained {operator: Exists} by an UPDATE stays on a re-pooled node: reported off its pool and tolerating beyond its mandate', async () => {
    const runner = await running('team-a', 'runner');
    expect(runner.spec?.nodeSelector).toEqual({ pool: POOL_A });
    // Kubernetes lets a running Pod gain tolerations (additions only).
    await kubectl(
      cluster,
      'patch',
      'pod',
      'runner',
      '-n',
      'team-a',
      '--type=json',
      '-p',
      JSON.stringify([{ op: 'add', path: '/spec/tolerations/-', value: { operator: 'Exists' } }]),
    );
    // The platform re-pools the node for team-b: its label, and team-b's NoExecute taint.
    await kubectl(cluster, 'label', 'node', cluster.nodeName, `pool=${POOL_B}`, '--overwrite');
    await kubectl(cluster, 'taint', 'node', cluster.nodeName, `dedicated=${POOL_A}:NoSchedule-`);
    await kubectl(cluster, 'taint', 'node', cluster.nodeName, `dedicated=${POOL_B}:NoExecute`);

    const offPool = await waitForResult('team-a', 'name the Pod off its pool', (r) => r.rule === 'off-pool');
    expect(offPool).toMatchObject({
      policy: 'node-isolation',
      result: 'fail',
      properties: { node: cluster.nodeName, missingNodeLabels: `pool=${POOL_A}` },
      resources: [{ kind: 'Pod', namespace: 'team-a', name: 'runner' }],
    });
    expect(offPool.message).toContain(cluster.nodeName);
    const beyond = await waitForResult(
      'team-a',
      'name the Pod tolerating beyond its mandate',
      (r) => r.rule === 'tolerates-beyond-mandate',
    );
    expect(beyond).toMatchObject({
      policy: 'node-isolation',
      result: 'fail',
      properties: { tolerations: '* Exists' },
      resources: [{ kind: 'Pod', namespace: 'team-a', name: 'runner' }],
    });
    expect(JSON.stringify(beyond)).not.toContain('team-b');

    // It still runs: the audit reports, it never evicts.
    const after: V1Pod = await core.readNamespacedPod({ namespace: 'team-a', name: 'runner' });
    expect({ phase: after.status?.phase, node: after.spec?.nodeName }).toEqual({
      phase: 'Running',
      node: cluster.nodeName,
    });
  });
});
