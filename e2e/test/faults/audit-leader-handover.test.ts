/**
 * Issue 34: the operator's Pod watch continues across leadership terms, so no Pod admitted without
 * its mandate is lost between terms. On a real control plane, with the operator running under the
 * chart's RBAC and its Lease (short timings), in each scenario:
 *
 * - a leader runs and keeps its Pod watch position on its Lease (annotation
 *   isolation.kubeplus.io/pod-watch-position, carried by its renewals);
 * - the webhook is SIGKILLed (not answering: failurePolicy Ignore admits Pods unpatched), then the
 *   leader; a short Job runs in an isolated namespace: the Job controller creates its Pod, which is
 *   admitted unplaced and finishes — the harness's nodes run nothing and this Pod names no
 *   scheduler, so the test sets it Succeeded through pods/status, as its kubelet would, and the Job
 *   completes — all while no leader watches;
 * - a new leader, started only after the Pod finished, counts the Pod in
 *   kubeplus_operator_unisolated_pod_admissions_total and logs it, although its periodic audit
 *   (which skips finished Pods) never sees it:
 *   1. on the shared control plane it resumes the killed leader's watch (the API server replays
 *      the Pod's creation);
 *   2. on a control plane of its own, the position is too old to resume from (410 Gone), as for a
 *      leader down longer than the API server keeps history: there the API server serves Pod
 *      watches from etcd (`--watch-cache-sizes=pods#0`) and the test compacts etcd, as
 *      kube-apiserver itself does every 5 min; the new leader catches up by a LIST of every Pod.
 *
 * Before the fix each term's watch started from "now": both counts stayed 0 (checked by running
 * this suite against the operator without the change).
 */
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import {
  type Cluster,
  type ControlPlane,
  connectE2eCluster,
  createTestNamespace,
  deleteNamespace,
  type LogLine,
  type RunningOperator,
  type RunningWebhook,
  registerWebhook,
  scrapeMetrics,
  startControlPlane,
  startWebhook,
  sumMetric,
  testPod,
  unregisterWebhook,
  waitFor,
} from '@kubeplus-isolation/e2e';
import {
  BatchV1Api,
  CoordinationV1Api,
  CoreV1Api,
  type KubeConfig,
  PatchStrategy,
  setHeaderOptions,
  type V1Pod,
} from '@kubernetes/client-node';
import { uniqueName } from '../support/names.js';
import { isolationMetadata, poolMandate, waitForWebhookActive } from '../support/node-isolation.js';
import {
  applyChartOperatorRbac,
  type ChartRbac,
  operatorKubeconfig,
  startChartOperator,
} from './support/chart-rbac-operator.js';

const mergePatch = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);
/** No scheduler serves this name: nothing but the Job controller, the test and the operator touches these Pods. */
const UNSCHEDULED = 'kpi-e2e-no-scheduler';
/** The protocol, literally: the Lease annotation the leader keeps its Pod watch position in. */
const POSITION = 'isolation.kubeplus.io/pod-watch-position';
const ADMITTED_UNPLACED = 'Pod admitted without the node placement its namespace mandates';

const metric = async (op: RunningOperator, name: string, labels: Record<string, string> = {}) =>
  sumMetric(await scrapeMetrics(op.metricsUrl), name, labels);

/** One scenario's world: an isolated namespace, the webhook, the chart's RBAC, and the operators started. */
class Handover {
  readonly kc: KubeConfig;
  readonly core: CoreV1Api;
  readonly release = uniqueName('kpi-handover');
  readonly mandate = poolMandate(uniqueName('ho-pool'));
  private readonly configName = uniqueName('e2e-handover-webhook');
  private readonly operators: RunningOperator[] = [];
  private rbac: ChartRbac | undefined;
  private kubeconfigPath = '';
  private webhook: RunningWebhook | undefined;
  releaseNs = '';
  tenantNs = '';

  constructor(readonly cluster: Cluster) {
    this.kc = cluster.kc;
    this.core = this.kc.makeApiClient(CoreV1Api);
  }

  async setUp(): Promise<void> {
    this.releaseNs = await createTestNamespace(this.kc, 'kpi-handover-release');
    // Isolated by hand (as the operator would isolate an instance's namespace).
    this.tenantNs = await createTestNamespace(this.kc, 'kpi-handover-tenant', isolationMetadata(this.mandate));
    this.rbac = await applyChartOperatorRbac(this.cluster, this.release, this.releaseNs, {});
    this.kubeconfigPath = await operatorKubeconfig(this.cluster, this.releaseNs, this.rbac);
    this.webhook = await startWebhook(this.cluster);
    await registerWebhook(this.kc, { url: this.webhook.url, caPem: this.webhook.caPem, name: this.configName });
    await waitForWebhookActive(this.kc, this.tenantNs, this.mandate.nodeSelector);
  }

  async tearDown(): Promise<void> {
    for (const op of this.operators) await op.stop();
    await unregisterWebhook(this.kc, this.configName);
    await this.webhook?.stop();
    await this.rbac?.remove();
    await Promise.all([this.releaseNs, this.tenantNs].filter(Boolean).map((ns) => deleteNamespace(this.kc, ns)));
  }

  /** Starts an operator on the chart's Lease and waits until it leads. */
  async startLeader(name: string): Promise<RunningOperator> {
    if (this.rbac === undefined) throw new Error('not set up');
    const op = await startChartOperator(this.cluster, {
      name: `${this.release}-${name}`,
      namespace: this.releaseNs,
      rbac: this.rbac,
      kubeconfigPath: this.kubeconfigPath,
      args: ['--audit-interval=10m'],
      // Short Lease timings (as the other failover suites): a killed leader is replaced within ~6 s.
      lease: 'fast',
    });
    this.operators.push(op);
    await waitFor(
      `operator ${name} to lead (kubeplus_operator_leader 1)`,
      async () => (await metric(op, 'kubeplus_operator_leader')) === 1,
      { timeoutMs: 60_000, intervalMs: 250 },
    );
    return op;
  }

  /**
   * A Pod created while the webhook answers (placed, never counted), and the leader's position on
   * its Lease once its renewals carry it past that Pod; undefined if none came within 15 s (an
   * operator that keeps none: the scenario goes on, the test fails on what the next leader counts).
   */
  async positionPastAPlacedPod(): Promise<{ resourceVersion: string; seenAt: string } | undefined> {
    const placed = await this.core.createNamespacedPod({
      namespace: this.tenantNs,
      body: testPod('placed', { schedulerName: UNSCHEDULED }),
    });
    expect(placed.spec?.nodeSelector).toMatchObject(this.mandate.nodeSelector);
    return waitFor(
      'the leader’s renewals to carry its Pod watch position past the placed Pod',
      async (observe) => {
        const lease = await this.kc
          .makeApiClient(CoordinationV1Api)
          .readNamespacedLease({ name: this.rbac?.leaseName ?? '', namespace: this.releaseNs });
        const text = lease.metadata?.annotations?.[POSITION];
        observe(text);
        const position =
          text === undefined ? undefined : (JSON.parse(text) as { resourceVersion: string; seenAt: string });
        return Number(position?.resourceVersion ?? 0) >= Number(placed.metadata?.resourceVersion)
          ? position
          : undefined;
      },
      { timeoutMs: 15_000, intervalMs: 250 },
    ).catch(() => undefined);
  }

  /** The webhook stops answering, then the leader dies (SIGKILL both): nobody patches, nobody watches. */
  async killWebhookAndLeader(leader: RunningOperator): Promise<void> {
    this.webhook?.signal('SIGKILL');
    await this.webhook?.process.exit;
    this.webhook = undefined;
    leader.signal('SIGKILL');
    await leader.process.exit;
  }

  /** Runs a one-Pod Job in the tenant namespace; returns its Pod once it has finished (Succeeded). */
  async shortJob(): Promise<V1Pod> {
    const name = uniqueName('short-job');
    const batch = this.kc.makeApiClient(BatchV1Api);
    await batch.createNamespacedJob({
      namespace: this.tenantNs,
      body: {
        apiVersion: 'batch/v1',
        kind: 'Job',
        metadata: { name },
        spec: {
          backoffLimit: 0,
          template: { spec: testPod(name, { restartPolicy: 'Never', schedulerName: UNSCHEDULED }).spec },
        },
      },
    });
    const pod = await waitFor(
      `the Job controller to create the Pod of Job ${name}`,
      async () =>
        (await this.core.listNamespacedPod({ namespace: this.tenantNs, labelSelector: `job-name=${name}` })).items[0],
      { timeoutMs: 60_000, intervalMs: 250 },
    );
    const podName = pod.metadata?.name ?? '';
    // Finished, as its kubelet would report it (the harness's nodes run nothing).
    await this.core.patchNamespacedPodStatus(
      { namespace: this.tenantNs, name: podName, body: { status: { phase: 'Succeeded' } } },
      mergePatch,
    );
    await waitFor(
      `Job ${name} to complete`,
      async (observe) => {
        const job = await batch.readNamespacedJob({ namespace: this.tenantNs, name });
        observe(job.status);
        return job.status?.succeeded === 1;
      },
      { timeoutMs: 60_000, intervalMs: 250 },
    );
    const finished = await this.core.readNamespacedPod({ namespace: this.tenantNs, name: podName });
    expect(finished.spec?.nodeSelector).toBeUndefined(); // admitted unplaced (failurePolicy Ignore)
    expect(finished.spec?.tolerations?.some((t) => t.key === 'dedicated')).toBeFalsy();
    expect(finished.status?.phase).toBe('Succeeded');
    return finished;
  }

  /** Waits until `leader` has counted `pod` and returns the log lines naming Pods of the tenant namespace. */
  async counted(leader: RunningOperator, pod: V1Pod): Promise<LogLine[]> {
    await waitFor(
      'the new leader to count and log the finished Pod admitted while no leader watched',
      async (observe) => {
        const both = await metric(leader, 'kubeplus_operator_unisolated_pod_admissions_total', { missing: 'both' });
        const named = leader.logLines().some((l) => l.msg === ADMITTED_UNPLACED && l.pod === pod.metadata?.name);
        observe({ both, named });
        return both >= 1 && named;
      },
      { timeoutMs: 30_000, intervalMs: 250 },
    );
    return leader.logLines().filter((l) => l.msg === ADMITTED_UNPLACED && l.namespace === this.tenantNs);
  }

  /** The periodic audit alone would never see the Pod: it skips finished Pods. */
  async auditSeesNothing(leader: RunningOperator): Promise<void> {
    await waitFor(
      'the new leader’s audit of the tenant namespace',
      async () => (await metric(leader, 'kubeplus_operator_audit_pod_list_requests_total')) >= 1,
      { timeoutMs: 30_000, intervalMs: 250 },
    );
    expect(await metric(leader, 'kubeplus_operator_unisolated_pods')).toBe(0);
  }
}

/**
 * Compacts etcd's history up to its current revision through its gRPC gateway (plain HTTP on
 * loopback in the harness), as kube-apiserver does every --etcd-compaction-interval (5 min): a
 * watch served by etcd from an older resourceVersion then gets 410 Gone.
 */
async function compactEtcd(cluster: Cluster): Promise<string> {
  const base = `http://127.0.0.1:${cluster.state.ports.etcdClient}`;
  const post = async (path: string, body: unknown) => {
    const res = await fetch(`${base}${path}`, { method: 'POST', body: JSON.stringify(body) });
    if (!res.ok) throw new Error(`etcd ${path}: HTTP ${res.status} ${await res.text()}`);
    return (await res.json()) as { header?: { revision?: string } };
  };
  const revision = (await post('/v3/kv/range', { key: Buffer.from('/').toString('base64') })).header?.revision;
  if (revision === undefined) throw new Error('etcd gave no revision');
  await post('/v3/kv/compaction', { revision, physical: true });
  return revision;
}

describe('fault: a Pod admitted unplaced and finished while no leader watched is counted by the next leader', () => {
  let world: Handover;

  beforeAll(async () => {
    world = new Handover(await connectE2eCluster());
    await world.setUp();
  });

  afterAll(() => world.tearDown());

  test('the new leader resumes the killed leader’s watch from its Lease and counts the finished Job Pod', async () => {
    const first = await world.startLeader('a');
    const position = await world.positionPastAPlacedPod();
    await world.killWebhookAndLeader(first);
    const pod = await world.shortJob();

    // Only now a new leader: it takes the Lease once the killed leader's expires.
    const next = await world.startLeader('b');
    const lines = await world.counted(next, pod);
    expect(lines).toEqual([
      expect.objectContaining({
        level: 'warn',
        namespace: world.tenantNs,
        pod: pod.metadata?.name,
        uid: pod.metadata?.uid,
        missing: ['nodeSelector', 'tolerations'],
        via: 'watch',
      }),
    ]);
    expect(next.logLines().find((l) => l.msg === 'Pod watch resumes where the previous term left it')).toBeDefined();
    expect(await metric(next, 'kubeplus_operator_pod_watch_catch_ups_total')).toBe(0);
    await world.auditSeesNothing(next);
    expect(position?.resourceVersion).toMatch(/^\d+$/);
  });
});

describe('fault: the same, when the killed leader’s position is too old to resume from (410 Gone)', () => {
  let cp: ControlPlane | undefined;
  let world: Handover;

  beforeAll(async () => {
    // Pod watches served by etcd, so that compacting it makes a position too old (with the watch
    // cache the window is the cache's, minutes, which a test cannot wait out).
    cp = await startControlPlane({
      extraArgs: { 'kube-apiserver': ['--watch-cache-sizes=pods#0'] },
      log: (m) => process.stderr.write(`[handover 410] ${m}\n`),
    });
    world = new Handover(cp);
    await world.setUp();
  });

  afterAll(async () => {
    await world?.tearDown();
    await cp?.stop();
  });

  test('the new leader catches up by a LIST of every Pod and counts the finished Job Pod', async () => {
    const first = await world.startLeader('a');
    const position = await world.positionPastAPlacedPod();
    await world.killWebhookAndLeader(first);
    const pod = await world.shortJob();
    if (cp === undefined) throw new Error('no control plane');
    const compacted = await compactEtcd(cp);

    const next = await world.startLeader('b');
    const lines = await world.counted(next, pod);
    expect(lines).toEqual([
      expect.objectContaining({
        level: 'warn',
        namespace: world.tenantNs,
        pod: pod.metadata?.name,
        uid: pod.metadata?.uid,
        missing: ['nodeSelector', 'tolerations'],
        via: 'catch-up',
      }),
    ]);
    // Its own control plane: no other isolated namespace, so the count is exactly this Pod.
    expect(await metric(next, 'kubeplus_operator_unisolated_pod_admissions_total', { missing: 'both' })).toBe(1);
    expect(next.logLines().find((l) => l.msg.startsWith('Pod watch caught up'))).toMatchObject({
      reason: 'expired',
      unisolated: 1,
    });
    expect(await metric(next, 'kubeplus_operator_pod_watch_catch_ups_total', { reason: 'expired' })).toBe(1);
    await world.auditSeesNothing(next);
    // The killed leader's position is what etcd compacted away.
    expect(Number(compacted)).toBeGreaterThan(Number(position?.resourceVersion));
  });
});
