/**
 * The operator's controller machinery on the real control plane, with real operator processes:
 *
 * - leader election on one Lease: only the holder reconciles; a SIGKILLed leader is replaced
 *   within the lease duration plus a few seconds; a SIGTERMed leader releases the Lease at once;
 *   every new leader reconciles new instances;
 * - an up-to-date instance costs no write: the operator runs behind a recording API proxy, and
 *   forced resyncs (an unrelated label on the instance, an unrelated RuntimeClass, a restart)
 *   produce reads only, leaving every owned object's and the namespace's resourceVersion alone;
 * - deletion while the operator is down: the instance goes at once (no finalizer), what it owned
 *   stays until an operator comes back, whose start-up replay cleans it up.
 *
 * Each describe block runs its own operators on its own Lease and removes its instances before
 * stopping them.
 */
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import {
  type ApiProxy,
  type Cluster,
  isApiStatus,
  LEASE_PRESETS,
  type RunningOperator,
  startApiProxy,
  waitFor,
} from '@kubeplus-isolation/e2e';
import {
  NODE_ISOLATION_ANNOTATION,
  NODE_ISOLATION_ENABLED_LABEL,
  SANDBOX_ISOLATION_ANNOTATION,
} from '@kubeplus-isolation/spec';
import { CoordinationV1Api, CustomObjectsApi, type KubeConfig, NodeV1Api } from '@kubernetes/client-node';
import { uniqueName } from './support/names.js';
import {
  AGENT,
  agentKey,
  createAgent,
  deleteAgent,
  expectedSandboxObjects,
  getAgent,
  isolationKeys,
  ownedObjects,
  patchAgent,
  readNamespace,
  sharedClusterDefaults,
  waitForNamespace,
  waitForOwned,
  waitForSettled,
} from './support/operator.js';
import { operatorSuite } from './support/operator-suite.js';

const FAST_LEASE = LEASE_PRESETS.fast;
const RECONCILES = 'kubeplus_operator_reconcile_total';
const LEADER = 'kubeplus_operator_leader';

const annotations = (pool: string, enforce: boolean): Record<string, string> => ({
  [NODE_ISOLATION_ANNOTATION]: JSON.stringify({
    nodeSelector: { pool },
    tolerations: [{ key: 'dedicated', operator: 'Equal', value: pool, effect: 'NoSchedule' }],
  }),
  [SANDBOX_ISOLATION_ANNOTATION]: JSON.stringify({ minRuntimeClass: 'kata', enforce }),
});

async function leaseHolder(kc: KubeConfig, namespace: string, name: string): Promise<string | undefined> {
  try {
    const lease = await kc.makeApiClient(CoordinationV1Api).readNamespacedLease({ name, namespace });
    return lease.spec?.holderIdentity ?? '';
  } catch (error) {
    if (isApiStatus(error, 404)) return undefined;
    throw error;
  }
}

/** Waits until the operator's queues are empty, nothing runs, and the reconcile count holds still between two scrapes. */
async function waitIdle(op: RunningOperator): Promise<void> {
  let previous = -1;
  await waitFor(
    `operator ${op.identity} to be idle (empty queues, nothing in flight, no new reconciles)`,
    async (observe) => {
      const samples = await op.metrics();
      const sum = (name: string): number =>
        samples.filter((s) => s.name === name).reduce((total, s) => total + s.value, 0);
      const state = {
        depth: sum('kubeplus_operator_workqueue_depth'),
        running: sum('kubeplus_operator_workqueue_longest_running_processor_seconds'),
        reconciles: sum(RECONCILES),
      };
      observe(state);
      const idle = state.depth === 0 && state.running === 0 && state.reconciles === previous;
      previous = state.reconciles;
      return idle;
    },
    { timeoutMs: 30_000, intervalMs: 500 },
  );
}

describe('operator: controller machinery on the real control plane', () => {
  const suite = operatorSuite({ name: 'op-ctl', startOperator: false, waitForServiceAccount: false });
  const { tenantNamespace } = suite;
  let cluster: Cluster;
  let kc: KubeConfig;
  let leaseNamespace = '';
  beforeAll(() => {
    ({ cluster, kc, leaseNamespace } = suite);
  });

  describe('two replicas on one Lease', () => {
    const lease = uniqueName('op-ctl-lease');
    const operators: RunningOperator[] = [];
    let ns = '';
    let leader: RunningOperator;
    let standby: RunningOperator;
    const start = async (name: string): Promise<RunningOperator> => {
      const op = await suite.startOperator({ name, leaseName: lease });
      operators.push(op);
      return op;
    };

    beforeAll(async () => {
      ns = await tenantNamespace('kpi-op-ctl-election');
      await Promise.all([start('op-ctl-a'), start('op-ctl-b')]);
    });

    afterAll(async () => {
      // Instances first, while a leader still runs to release them.
      const custom = kc.makeApiClient(CustomObjectsApi);
      const list = (await custom.listNamespacedCustomObject({ ...AGENT, namespace: ns })) as {
        items: { metadata: { name: string } }[];
      };
      await Promise.all(list.items.map((a) => deleteAgent(kc, ns, a.metadata.name)));
      await Promise.all(operators.map((op) => op.stop()));
    });

    test('only the Lease holder reconciles; the standby is ready but writes and reconciles nothing', async () => {
      const holder = await waitFor(
        `one of ${operators.map((o) => o.identity).join(', ')} to hold Lease ${leaseNamespace}/${lease}`,
        async (observe) => {
          const h = await leaseHolder(kc, leaseNamespace, lease);
          observe(h);
          return operators.find((o) => o.identity === h);
        },
        { timeoutMs: 20_000 },
      );
      leader = holder;
      standby = operators.find((o) => o !== holder) as RunningOperator;
      await waitFor(`the leader gauge of ${leader.identity} to be 1`, async () => (await leader.metric(LEADER)) === 1, {
        timeoutMs: 10_000,
      });

      const name = uniqueName('elected-agent');
      await createAgent(kc, ns, name, annotations(uniqueName('pool'), true));
      await waitForOwned(kc, name, expectedSandboxObjects(ns, name, true));
      await waitForNamespace(
        kc,
        ns,
        'to be node-isolated',
        (n) => n?.metadata?.labels?.[NODE_ISOLATION_ENABLED_LABEL] === 'true',
      );
      // The objects exist before the reconcile that wrote them has finished and been counted.
      await leader.waitReconciled(agentKey(ns, name), 0);
      await waitIdle(leader);

      expect(await leader.metric(RECONCILES, { controller: 'instances', result: 'success' })).toBeGreaterThan(0);
      expect(await standby.metric(LEADER)).toBe(0);
      expect(await standby.metric(RECONCILES)).toBe(0);
      // The standby reports the holder once it has read the Lease held: at its first try, or, when
      // both replicas created the Lease at once and its create lost (client-go's tryAcquireOrRenew
      // does not read it back then), at its next retry. A fresh-clone run once checked within that
      // retry period and found the line not yet written.
      const observed = (l: { msg?: unknown; leader?: unknown }): boolean =>
        l.msg === 'new leader observed' && l.leader === leader.identity;
      await waitFor(
        `${standby.identity} to log that it observed ${leader.identity} as the leader (on its next retry at the latest, ${FAST_LEASE.retryPeriodS}s plus jitter and slack)`,
        async () => standby.logLines().some(observed) || undefined,
        { timeoutMs: (2.2 * FAST_LEASE.retryPeriodS + 5) * 1000, intervalMs: 100 },
      );
      const standbyLines = standby.logLines();
      expect(standbyLines.filter((l) => l.msg === 'reconciled' || l.msg === 'controller started')).toEqual([]);
      expect(standbyLines.some(observed)).toBe(true);
      // Readiness is not leadership: the standby is ready to take over with warm caches.
      expect((await fetch(`${standby.baseUrl}/readyz`)).status).toBe(200);
    });

    test('SIGKILL of the leader: the standby takes over within the lease duration plus a few seconds and reconciles a new instance', async () => {
      leader.signal('SIGKILL');
      const exit = await leader.process.exit;
      expect(exit.signal).toBe('SIGKILL');
      // A standby waits out the lease duration after the last renewal it saw, retrying every retry period.
      const boundMs = (FAST_LEASE.durationS + 2.2 * FAST_LEASE.retryPeriodS + 5) * 1000;
      await waitFor(
        `standby ${standby.identity} to take over Lease ${lease} (lease ${FAST_LEASE.durationS}s + retry jitter + 5s slack for a loaded machine)`,
        async (observe) => {
          const h = await leaseHolder(kc, leaseNamespace, lease);
          observe(h);
          return h === standby.identity;
        },
        { timeoutMs: boundMs, intervalMs: 200 },
      );
      expect(await standby.metric(LEADER)).toBe(1);

      const name = uniqueName('after-kill-agent');
      const mark = standby.logMark();
      await createAgent(kc, ns, name, { [SANDBOX_ISOLATION_ANNOTATION]: JSON.stringify({ minRuntimeClass: 'runsc' }) });
      await standby.waitReconciled(agentKey(ns, name), mark);
      const owned = await waitForOwned(kc, name, expectedSandboxObjects(ns, name, true));
      expect(owned.find((o) => o.kind === 'RuntimeClass')?.raw.handler).toBe('runsc');
      leader = standby;
    });

    test('SIGTERM of the leader: it releases the Lease before exiting (status 0) and a new standby takes over on its next retry', async () => {
      const next = await start('op-ctl-c');
      await waitFor(
        `new replica ${next.identity} to observe ${leader.identity} as leader`,
        async () => next.logLines().some((l) => l.msg === 'new leader observed' && l.leader === leader.identity),
        { timeoutMs: 10_000 },
      );
      expect(await next.metric(LEADER)).toBe(0);

      leader.signal('SIGTERM');
      const exit = await leader.process.exit;
      expect(exit).toEqual({ code: 0, signal: null });
      expect(leader.logLines().some((l) => l.msg === 'released leader lease')).toBe(true);
      // The leader exits only after releasing: the Lease no longer names it, although its lease
      // duration has not passed (it renewed at most a retry period ago).
      expect(await leaseHolder(kc, leaseNamespace, lease)).not.toBe(leader.identity);
      await waitFor(
        `${next.identity} to acquire the released Lease on its next retry (${FAST_LEASE.retryPeriodS}s, plus jitter and slack)`,
        async (observe) => {
          const h = await leaseHolder(kc, leaseNamespace, lease);
          observe(h);
          return h === next.identity;
        },
        { timeoutMs: (2.2 * FAST_LEASE.retryPeriodS + 5) * 1000, intervalMs: 100 },
      );
      const name = uniqueName('after-term-agent');
      await createAgent(kc, ns, name, { [SANDBOX_ISOLATION_ANNOTATION]: JSON.stringify({ minRuntimeClass: 'kata' }) });
      await waitForOwned(kc, name, expectedSandboxObjects(ns, name, true));
    });
  });

  describe('one replica behind a recording API proxy', () => {
    let proxy: ApiProxy;
    let operator: RunningOperator | undefined;
    let ns = '';
    const name = uniqueName('steady-agent');
    const lease = uniqueName('op-ctl-proxy-lease');
    const leasePath = (): string => `/apis/coordination.k8s.io/v1/namespaces/${leaseNamespace}/leases/${lease}`;
    const start = async (): Promise<RunningOperator> => {
      operator = await suite.startOperator({
        name: 'op-ctl-proxied',
        leaseName: lease,
        kubeconfigPath: proxy.kubeconfigPath,
      });
      return operator;
    };
    /** Every request after `mark` that is not a read and not the operator's own Lease upkeep. */
    const writesSince = (mark: number): string[] =>
      proxy
        .requests(mark)
        .filter((r) => r.method !== 'GET' && r.path !== leasePath())
        .map((r) => `${r.method} ${r.url}`);

    /** resourceVersion of everything the instance owns, its namespace's, and whether it is node-isolated. */
    const snapshot = async (): Promise<Record<string, string | undefined>> => {
      const out: Record<string, string | undefined> = {};
      for (const o of await waitForSettled(kc, name, expectedSandboxObjects(ns, name, false))) {
        out[`${o.kind}/${o.name}`] = o.resourceVersion;
      }
      const namespace = await readNamespace(kc, ns);
      out[`Namespace/${ns}`] = namespace?.metadata?.resourceVersion;
      out.label = namespace?.metadata?.labels?.[NODE_ISOLATION_ENABLED_LABEL];
      return out;
    };

    beforeAll(async () => {
      ns = await tenantNamespace('kpi-op-ctl-steady');
      proxy = await startApiProxy(cluster);
      await start();
    });

    afterAll(async () => {
      if (ns && operator) await deleteAgent(kc, ns, name);
      await operator?.stop();
      await proxy?.close();
    });

    test('an up-to-date instance costs no write: forced resyncs (an unrelated label, an unrelated RuntimeClass) only read', async () => {
      const op = operator as RunningOperator;
      await createAgent(kc, ns, name, annotations(uniqueName('pool'), false));
      await waitForOwned(kc, name, expectedSandboxObjects(ns, name, false));
      await waitForNamespace(
        kc,
        ns,
        'to be node-isolated',
        (n) => n?.metadata?.labels?.[NODE_ISOLATION_ENABLED_LABEL] === 'true',
      );
      await waitIdle(op);
      // Creating it did write (through the proxy): the recording sees the operator's writes.
      expect(writesSince(0).length).toBeGreaterThan(0);
      const converged = await snapshot();

      // 1. An unrelated label on the instance: a watch event, a full reconcile, no write.
      let mark = proxy.mark();
      let logMark = op.logMark();
      await patchAgent(kc, ns, name, { labels: { 'example.com/touched': 'yes' } });
      await op.waitReconciled(agentKey(ns, name), logMark);
      await waitIdle(op);
      // The reconcile ran (its log line above); it reads from the operator's informer caches, so an
      // up-to-date instance may cost no request at all — what matters is that nothing was written.
      expect(writesSince(mark)).toEqual([]);
      expect(await snapshot()).toEqual(converged);

      // 2. An unrelated RuntimeClass (too weak to be allowed): every sandbox instance is re-reconciled, no write.
      const weak = uniqueName('kpi-unrelated-runc');
      const node = kc.makeApiClient(NodeV1Api);
      mark = proxy.mark();
      logMark = op.logMark();
      await node.createRuntimeClass({ body: { metadata: { name: weak }, handler: 'runc' } });
      try {
        await op.waitReconciled(agentKey(ns, name), logMark);
        await waitIdle(op);
        expect(writesSince(mark)).toEqual([]);
        expect(await snapshot()).toEqual(converged);
      } finally {
        await node.deleteRuntimeClass({ name: weak });
      }
    });

    test('its API request metrics count exactly the requests the proxy saw, method by method (watches: once they end)', async () => {
      const op = operator as RunningOperator;
      await waitIdle(op);
      const METHODS = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE'] as const;
      const seen = (): Record<string, number> =>
        Object.fromEntries(METHODS.map((m) => [m, proxy.requests().filter((r) => r.method === m && !r.watch).length]));
      // The proxy counts a request when it arrives, the operator once its response has ended: they
      // agree between two requests (the Lease upkeep goes on), so compare until they do.
      await waitFor(
        "the operator's kubeplus_operator_api_requests_total to match the proxy's record",
        async (observe) => {
          const before = seen();
          const counted = Object.fromEntries(
            await Promise.all(
              METHODS.map(
                async (m) => [m, await op.metric('kubeplus_operator_api_requests_total', { method: m })] as const,
              ),
            ),
          );
          // Each non-watch request is also timed.
          const timedGets = await op.metric('kubeplus_operator_api_request_duration_seconds_count', { method: 'GET' });
          const after = seen();
          observe({ proxy: after, metrics: counted, timedGets });
          return JSON.stringify(before) === JSON.stringify(after) &&
            JSON.stringify(counted) === JSON.stringify(after) &&
            timedGets === after.GET
            ? true
            : undefined;
        },
        { timeoutMs: 20_000, intervalMs: 200 },
      );
      expect(seen().GET).toBeGreaterThan(0);
      expect(seen().PUT).toBeGreaterThan(0); // the Lease upkeep
    });

    test('a restarted operator finds what it owns and writes nothing', async () => {
      const before = await snapshot();
      await operator?.stop();
      const mark = proxy.mark();
      const op = await start();
      const logMark = 0; // a new log file: everything this process did
      await op.waitReconciled(agentKey(ns, name), logMark);
      await waitIdle(op);
      // It did replay everything: one owned-objects reconcile per owned object.
      const replayed = op
        .logLines(logMark)
        .filter((l) => l.msg === 'reconciled' && l.controller === 'owned-objects')
        .map((l) => l.object);
      expect(new Set(replayed)).toEqual(new Set([...expectedSandboxObjects(ns, name, false), `Namespace/${ns}`]));
      // Where advisory mode cannot default (no MutatingAdmissionPolicy: Kubernetes < 1.36), the new
      // process announces that standing condition once, as a Warning Event; nothing else is written.
      expect(writesSince(mark)).toEqual(sharedClusterDefaults() ? [] : [`POST /api/v1/namespaces/${ns}/events`]);
      expect(await snapshot()).toEqual(before);
    });

    test('deleted while the operator is down: the instance goes at once, and the operator cleans up once it is back', async () => {
      await operator?.stop();
      operator = undefined;
      await kc.makeApiClient(CustomObjectsApi).deleteNamespacedCustomObject({ ...AGENT, namespace: ns, name });
      // No finalizer holds it (issue 35): nothing of the operator's stands between KubePlus and the instance.
      expect(await getAgent(kc, ns, name)).toBeUndefined();
      expect((await ownedObjects(kc, name)).length).toBe(expectedSandboxObjects(ns, name, false).length);
      expect((await readNamespace(kc, ns))?.metadata?.labels?.[NODE_ISOLATION_ENABLED_LABEL]).toBe('true');

      await start();
      await waitFor(
        `the restarted operator to delete what ${ns}/${name} owned`,
        async (observe) => {
          const left = await ownedObjects(kc, name);
          observe(left.map((o) => `${o.kind}/${o.name}`));
          return left.length === 0;
        },
        { timeoutMs: 30_000 },
      );
      await waitForNamespace(kc, ns, 'to lose its isolation keys', (n) => isolationKeys(n).label === undefined);
      // A namespace the operator did not create keeps existing, without the isolation keys.
      const kept = await readNamespace(kc, ns);
      expect(kept?.status?.phase).toBe('Active');
      expect(isolationKeys(kept)).toEqual({
        label: undefined,
        resolved: undefined,
        owner: undefined,
        ownerName: undefined,
      });
    });
  });
});
