/**
 * Fault: the webhook dies (SIGKILL) in the middle of a burst of Pod creations in an isolated
 * namespace, and is started again behind the same URL while the burst goes on.
 *
 * `failurePolicy: Ignore` must admit every Pod. Which Pods lack the mandate is decided by
 * when each create request ran, measured by the client: a Pod whose request ended before the
 * kill, or started once the new process listened, must be patched (the new process listens
 * before its informer has synced and patches from then on, through its live lookup); one whose
 * request ran entirely while no process listened must not be. Requests straddling the kill or
 * the restart may go either way (a few, bounded by how long each edge lasted) and are
 * reported. The API server's stored Pods are the evidence (not the create responses alone),
 * and its own fail-open counter must have counted exactly the unpatched ones.
 */
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import {
  type Cluster,
  connectE2eCluster,
  deleteNamespace,
  type RunningWebhook,
  registerWebhook,
  scrapeApiServerMetrics,
  sleep,
  startWebhook,
  sumMetric,
  testPod,
  unregisterWebhook,
  waitFor,
} from '@kubeplus-isolation/e2e';
import { NODE_ISOLATION_WEBHOOK_NAME } from '@kubeplus-isolation/spec';
import { CoreV1Api, type KubeConfig, type V1Pod } from '@kubernetes/client-node';
import { uniqueName } from '../support/names.js';
import { createIsolatedNamespace, type Mandate, poolMandate, waitForWebhookActive } from '../support/node-isolation.js';

const CREATORS = 4;
/** Between one creator's requests: the burst stays a few dozen Pods per second. */
const PAUSE_MS = 100;
/** Pods each phase must have before the next fault step. */
const PER_PHASE = 20;
/**
 * The new process listens a moment before it logs "webhook serving" (it still opens its metrics
 * port): a request ending within this margin before that line counts as straddling the restart.
 */
const LISTEN_MARGIN_MS = 50;
/**
 * The Pods' own selector, which no node matches: an unpatched Pod must not be bound to some
 * other suite's fake node (a bound Pod needs that node's kubelet to be deleted with the namespace).
 */
const NEVER_SCHEDULED = { 'faults.e2e.kubeplus.io/never': 'scheduled' };

/** When the last "webhook serving" line of a webhook log was written (ms since the epoch). */
function servingSince(log: string): number {
  const lines = log.split('\n').filter((l) => l.includes('"webhook serving"'));
  const last = lines.at(-1);
  if (last === undefined) throw new Error(`no "webhook serving" line in the webhook log:\n${log.slice(-2000)}`);
  return Date.parse((JSON.parse(last) as { ts: string }).ts);
}

interface Created {
  name: string;
  startedAt: number;
  endedAt: number;
  error?: string;
}

/**
 * Pods the last started webhook process logged as admitted without node isolation (fail open),
 * by name. The log file is shared by both processes (same port); the old one's lines come first.
 */
function failOpenLogged(log: string): string[] {
  const lines = log.split('\n');
  const start = lines.findLastIndex((l) => l.includes('"webhook serving"'));
  return lines
    .slice(Math.max(0, start))
    .filter((l) => l.includes('WITHOUT node isolation'))
    .map((l) => (JSON.parse(l) as { pod?: string }).pod ?? '')
    .filter((name) => name.startsWith('burst-'));
}

function isPatched(pod: V1Pod, mandate: Mandate): boolean {
  const tolerated = (pod.spec?.tolerations ?? []).some(
    (t) => t.key === 'dedicated' && t.value === mandate.tolerations[0]?.value && t.effect === 'NoSchedule',
  );
  return pod.spec?.nodeSelector?.pool === mandate.nodeSelector.pool && tolerated;
}

describe('fault: the webhook is killed during a burst of Pod creations', () => {
  let cluster: Cluster;
  let kc: KubeConfig;
  let webhook: RunningWebhook | undefined;
  let ns = '';
  const configName = uniqueName('faults-burst');
  const pool = uniqueName('burst-pool');
  const mandate = poolMandate(pool);
  const created: Created[] = [];
  // Wall-clock times (Date.now(), the clock of the webhook's log timestamps too).
  const times = { killAt: 0, exitedAt: 0, listeningAt: 0, readyAt: 0 };
  let failOpenBefore = 0;

  beforeAll(async () => {
    cluster = await connectE2eCluster();
    kc = cluster.kc;
    webhook = await startWebhook(cluster);
    ns = await createIsolatedNamespace(kc, 'faults-burst', mandate);
    await registerWebhook(kc, { url: webhook.url, caPem: webhook.caPem, name: configName });
    await waitForWebhookActive(kc, ns, mandate.nodeSelector);
  });

  afterAll(async () => {
    await unregisterWebhook(kc, configName);
    await webhook?.stop();
    if (ns) await deleteNamespace(kc, ns);
  });

  test('every Pod is admitted; exactly those created while no webhook listened lack the mandate', async () => {
    const core = kc.makeApiClient(CoreV1Api);
    const failOpenCount = async (): Promise<number> =>
      sumMetric(await scrapeApiServerMetrics(kc), 'apiserver_admission_webhook_fail_open_count', {
        name: NODE_ISOLATION_WEBHOOK_NAME,
      });
    failOpenBefore = await failOpenCount();

    let stop = false;
    const creator = async (c: number): Promise<void> => {
      for (let i = 0; !stop; i++) {
        const name = `burst-${c}-${i}`;
        const startedAt = Date.now();
        try {
          await core.createNamespacedPod({ namespace: ns, body: testPod(name, { nodeSelector: NEVER_SCHEDULED }) });
          created.push({ name, startedAt, endedAt: Date.now() });
        } catch (error) {
          created.push({ name, startedAt, endedAt: Date.now(), error: (error as Error).message });
        }
        await sleep(PAUSE_MS);
      }
    };
    const creators = Array.from({ length: CREATORS }, (_, c) => creator(c));
    const count = (from: number): number => created.filter((p) => p.startedAt > from).length;
    try {
      await waitFor(`${PER_PHASE} Pods created while the webhook runs`, async () => created.length >= PER_PHASE, {
        timeoutMs: 60_000,
        intervalMs: 20,
      });
      const w = webhook as RunningWebhook;
      times.killAt = Date.now();
      expect(w.signal('SIGKILL')).toBe(true);
      await w.process.exit;
      times.exitedAt = Date.now();
      await waitFor(
        `${PER_PHASE} Pods created while no webhook listens`,
        async () => count(times.exitedAt) >= PER_PHASE,
        { timeoutMs: 60_000, intervalMs: 20 },
      );
      webhook = await startWebhook(cluster, { port: w.port });
      times.readyAt = Date.now();
      times.listeningAt = servingSince(webhook.logTail(100_000));
      await waitFor(
        `${PER_PHASE} Pods created after the webhook is back`,
        async () => count(times.listeningAt) >= PER_PHASE,
        { timeoutMs: 60_000, intervalMs: 20 },
      );
    } finally {
      stop = true;
      await Promise.all(creators);
    }

    // Admitted, every one of them (fail open).
    expect(created.filter((p) => p.error !== undefined).map((p) => `${p.name}: ${p.error}`)).toEqual([]);

    // What the API server stored, judged by when each request ran.
    const stored = new Map((await core.listNamespacedPod({ namespace: ns })).items.map((p) => [p.metadata?.name, p]));
    expect(created.filter((p) => !stored.has(p.name)).map((p) => p.name)).toEqual([]);
    // Up: ended before the kill, or started once the new process listened. Down: ran entirely between.
    const phase = (p: Created): 'up' | 'down' | 'boundary' => {
      if (p.endedAt < times.killAt || p.startedAt > times.listeningAt) return 'up';
      if (p.startedAt > times.exitedAt && p.endedAt < times.listeningAt - LISTEN_MARGIN_MS) return 'down';
      return 'boundary';
    };
    const unpatched = created
      .filter((p) => !isPatched(stored.get(p.name) as V1Pod, mandate))
      .map((p) => p.name)
      .sort();
    const down = created.filter((p) => phase(p) === 'down').map((p) => p.name);
    const boundary = created.filter((p) => phase(p) === 'boundary');
    const boundaryUnpatched = boundary.map((p) => p.name).filter((n) => unpatched.includes(n));
    // Before its informer synced, the new process answers from a live GET of the namespace; if
    // that GET times out (a loaded machine) it fails open visibly, naming the Pod in its log.
    const failedOpenByWebhook = failOpenLogged((webhook as RunningWebhook).logTail(100_000));
    process.stderr.write(
      `[faults] burst: ${created.length} Pods, ${down.length} while down, ${boundary.length} straddling the kill/restart (${boundaryUnpatched.length} of them unpatched), ${failedOpenByWebhook.length} failed open by the restarted webhook, ${unpatched.length} unpatched in all\n`,
    );
    expect(down.length).toBeGreaterThanOrEqual(PER_PHASE);
    // Only requests overlapping an edge may straddle: per creator (one request at a time, then a
    // pause) at most 2 + floor(edge length / pause) per edge — the kill edge lasts until the
    // exit was seen, the restart edge is the listen margin.
    const perEdge = (lengthMs: number): number => 2 + Math.floor(lengthMs / PAUSE_MS);
    const maxStraddling = CREATORS * (perEdge(times.exitedAt - times.killAt) + perEdge(LISTEN_MARGIN_MS));
    expect(boundary.length).toBeLessThanOrEqual(maxStraddling);
    // A webhook fail-open can only have happened before the restarted webhook was ready.
    expect(
      created.filter((p) => failedOpenByWebhook.includes(p.name) && p.startedAt > times.readyAt).map((p) => p.name),
    ).toEqual([]);
    // Exactly: the down Pods, plus whichever straddling ones the API server could not get an
    // answer for, plus any the starting webhook visibly failed open for.
    expect(unpatched).toEqual([...new Set([...down, ...boundaryUnpatched, ...failedOpenByWebhook])].sort());

    // The API server's own account: one fail-open per Pod it admitted without an answer.
    const apiServerFailOpens = unpatched.length - failedOpenByWebhook.length;
    await waitFor(
      'the API server fail-open counter to match the unpatched Pods it got no answer for',
      async (observe) => {
        const delta = (await failOpenCount()) - failOpenBefore;
        observe({ delta, expected: apiServerFailOpens });
        return delta === apiServerFailOpens;
      },
      { timeoutMs: 10_000 },
    );

    // ---- AUDIT EXTENSION POINT -------------------------------------------------------------
    // `unpatched` is the precise set the operator's fail-open audit (Pods in isolated namespaces
    // lacking the mandate, reported via metric + Event; proven on its own in
    // e2e/test/faults/audit.test.ts) must report for namespace `ns`, and nothing else. To check
    // the audit against a crash mid-burst too, start the operator here (as that suite does, with
    // `ns` owned by an instance) and compare its report with this set.
  });
});
