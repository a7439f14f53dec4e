/**
 * Fault: the operator leader is SIGKILLed in the middle of reconciling a batch of instances.
 *
 * Two replicas share a Lease with short timings. The leader (A) reaches the API server through
 * the harness's gating proxy; the standby (B) directly. Once A has made some writes, the proxy
 * withholds the responses of A's further writes: the API server has applied them, A has not
 * seen the result — the worst moment to die. While A is stuck there, three instances are
 * deleted (one A had finished, one it was working on, one it had not touched); then A is
 * SIGKILLed. B must take the Lease after it expires and finish: every remaining instance owns
 * exactly its namespace, RuntimeClass and policies, once each; a deleted instance owns nothing
 * and is gone at once (no finalizer), and B's orphan cleanup takes what it owned; nothing else
 * carries the suite's owner labels.
 */
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import {
  type ApiProxy,
  type Cluster,
  connectE2eCluster,
  createTestNamespace,
  deleteNamespace,
  type Hold,
  type ProxiedRequest,
  type RunningOperator,
  startApiProxy,
  waitFor,
} from '@kubeplus-isolation/e2e';
import { FINALIZER, OWNER_NAME_LABEL } from '@kubeplus-isolation/spec';
import type { KubeConfig } from '@kubernetes/client-node';
import { uniqueName } from '../support/names.js';
import {
  createInstanceKind,
  deleteInstanceKind,
  deleteLeftovers,
  expectedObjects,
  type InstanceKind,
  type InstanceSpec,
  instanceApi,
  type Level,
  ownedObjects,
  sortObjects,
  startReplica,
  waitForLeader,
} from './support/operator.js';

const BATCH = 12;
/** A's writes let through before the gate closes: a few instances' worth, far from the batch's ~70. */
const WRITES_BEFORE_GATE = 20;
const LEVELS: readonly Level[] = ['kata', 'runsc', 'runc'];

/** Writes that reconcile (not Lease renewals, which keep A the leader, nor Events). */
function isReconcileWrite(r: ProxiedRequest): boolean {
  return ['POST', 'PUT', 'PATCH', 'DELETE'].includes(r.method) && !/\/(leases|events)(\/|$)/.test(r.path);
}

describe('fault: the operator leader is SIGKILLed mid-reconcile', () => {
  let cluster: Cluster;
  let kc: KubeConfig;
  let kind: InstanceKind | undefined;
  let proxy: ApiProxy | undefined;
  let gate: Hold | undefined;
  let a: RunningOperator | undefined;
  let b: RunningOperator | undefined;
  let platform = '';
  const id = uniqueName('lk');
  const leaseName = `${id}-operator`;
  const specs: InstanceSpec[] = Array.from({ length: BATCH }, (_, i) => ({
    name: `${id}-${String(i).padStart(2, '0')}`,
    pool: `${id}-pool-${i}`,
    sandbox: { level: LEVELS[i % LEVELS.length] as Level, enforce: i % 2 === 0 },
  }));
  const deleted = new Set<string>();

  beforeAll(async () => {
    cluster = await connectE2eCluster();
    kc = cluster.kc;
    kind = await createInstanceKind(kc, `${id}.faults.e2e.kubeplus.io`);
    platform = await createTestNamespace(kc, `${id}-platform`);
    proxy = await startApiProxy(cluster, { kubeconfigName: `${id}-a.kubeconfig` });
    const common = { kind, platformNamespace: platform, leaseNamespace: platform, leaseName };
    a = await startReplica(cluster, {
      ...common,
      name: `${id}-operator-a`,
      identity: `${id}-a`,
      kubeconfigPath: proxy.kubeconfigPath,
    });
    await waitForLeader(kc, platform, leaseName, `${id}-a`, 30_000, 'the only replica');
    b = await startReplica(cluster, {
      ...common,
      name: `${id}-operator-b`,
      identity: `${id}-b`,
      kubeconfigPath: cluster.kubeconfigPath,
    });
  });

  afterAll(async () => {
    gate?.release();
    const api = kind ? instanceApi(kc, kind) : undefined;
    if (api && platform) {
      // B (if the test got that far) removes what they owned (orphan cleanup); give it the chance.
      for (const s of specs) await api.delete(platform, s.name);
      try {
        await waitFor('every instance to be gone', async () => (await api.list(platform)).length === 0, {
          timeoutMs: b ? 60_000 : 1_000,
        });
      } catch {
        for (const s of specs) await api.dropFinalizers(platform, s.name);
      }
    }
    if (platform && b) {
      // Namespaces B deleted finish terminating on their own; anything else left is a leftover.
      await waitFor(
        'the operator to delete what it owned',
        async () => (await ownedObjects(kc, platform)).every((o) => o.detail?.includes('"Terminating"')),
        { timeoutMs: 60_000 },
      ).catch(() => undefined);
    }
    await b?.stop();
    await a?.stop();
    await proxy?.close();
    if (platform) {
      const left = await deleteLeftovers(kc, platform);
      await deleteNamespace(kc, platform);
      if (left.length > 0) process.stderr.write(`[faults] ${id}: deleted leftovers ${left.join(', ')}\n`);
    }
    if (kind) await deleteInstanceKind(kc, kind);
  });

  test('A is stuck with writes applied but unacknowledged, part of the batch done', async () => {
    const api = instanceApi(kc, kind as InstanceKind);
    const p = proxy as ApiProxy;
    const mark = p.mark();
    const writes = (): ProxiedRequest[] => p.requests(mark).filter(isReconcileWrite);
    await Promise.all(specs.map((s) => api.create(platform, s)));
    await waitFor(
      `the leader to make ${WRITES_BEFORE_GATE} reconcile writes`,
      async (observe) => {
        observe(writes().map((r) => `${r.method} ${r.path}`));
        return writes().length >= WRITES_BEFORE_GATE;
      },
      { timeoutMs: 60_000, intervalMs: 20 },
    );
    gate = p.hold(isReconcileWrite);
    const held = await waitFor(
      'a write of the leader to be applied by the API server with its response withheld',
      async (observe) => {
        const h = (gate as Hold).held();
        observe({ writes: writes().length });
        return h.length > 0 ? h : undefined;
      },
      { timeoutMs: 30_000, intervalMs: 50 },
    );
    // Let the other worker get stuck too (concurrency 2), then look at what A leaves behind.
    await new Promise((resolve) => setTimeout(resolve, 500));
    const inventory = await ownedObjects(kc, platform);
    const instances = await api.list(platform);
    const complete = specs.filter((s) => {
      const want = expectedObjects(s, kind as InstanceKind, platform);
      const have = inventory.filter((o) => o.owner === s.name);
      return JSON.stringify(sortObjects(have)) === JSON.stringify(sortObjects(want));
    });
    // The operator never writes an instance (issue 35): none carries a finalizer.
    expect(instances.filter((o) => (o.metadata?.finalizers ?? []).includes(FINALIZER))).toEqual([]);
    // In progress: the owners of the writes A is waiting for (the withheld response bodies name them).
    const inProgress = new Set(
      (gate as Hold).held().map((h) => {
        const body = JSON.parse(h.data) as { metadata?: { name?: string; labels?: Record<string, string> } };
        return body.metadata?.labels?.[OWNER_NAME_LABEL] ?? body.metadata?.name ?? '';
      }),
    );
    // Started: A created something for it, or is creating it.
    const started = new Set([...inventory.map((o) => o.owner), ...inProgress]);
    process.stderr.write(
      `[faults] ${id}: at the kill point A made ${writes().length} writes, ${(gate as Hold).held().length} applied but unacknowledged (${held.map((h) => `${h.request.method} ${h.request.path}`).join('; ')}) for ${[...inProgress].join(', ')}; ${complete.length}/${BATCH} instances complete, ${started.size} started\n`,
    );
    // Mid-reconcile for real: writes in flight for a started instance, and not everything done.
    expect(specs.filter((s) => inProgress.has(s.name)).length).toBeGreaterThan(0);
    expect(complete.length).toBeLessThan(BATCH);

    // Deletions A will never act on: one it finished, one it is in the middle of, one untouched.
    const finished = complete.find((s) => !inProgress.has(s.name));
    const current = specs.find((s) => inProgress.has(s.name));
    const untouched = specs.find((s) => !started.has(s.name));
    for (const s of [finished, current, untouched]) {
      if (s === undefined) continue;
      deleted.add(s.name);
      await api.delete(platform, s.name);
    }
    process.stderr.write(`[faults] ${id}: deleted ${[...deleted].join(', ')} before the kill\n`);
    expect(current).toBeDefined();
    expect(untouched).toBeDefined();
  });

  test('SIGKILL of the leader: the standby takes the Lease once it expires', async () => {
    const leader = a as RunningOperator;
    expect(leader.signal('SIGKILL')).toBe(true);
    const exit = await leader.process.exit;
    expect(exit.signal).toBe('SIGKILL');
    // The dead leader's last renewal stands until --lease-duration (4 s) has passed.
    await waitForLeader(kc, platform, leaseName, `${id}-b`, 30_000, 'after the leader was SIGKILLed');
    expect((b as RunningOperator).process.exited()).toBeUndefined();
  });

  test('B finishes the batch: exactly one of everything per instance, nothing for deleted ones', async () => {
    const k = kind as InstanceKind;
    const api = instanceApi(kc, k);
    const live = specs.filter((s) => !deleted.has(s.name));
    const want = sortObjects(live.flatMap((s) => expectedObjects(s, k, platform)));
    const state = async () => {
      const have = sortObjects(await ownedObjects(kc, platform));
      const instances = await api.list(platform);
      return {
        objects: have,
        instances: instances.map((o) => o.metadata?.name ?? '').sort(),
        withFinalizer: instances
          .filter((o) => (o.metadata?.finalizers ?? []).includes(FINALIZER))
          .map((o) => o.metadata?.name),
      };
    };
    const expected = {
      objects: want,
      instances: live.map((s) => s.name).sort(),
      withFinalizer: [],
    };
    try {
      await waitFor(
        'the new leader to converge the batch',
        async (observe) => {
          const s = await state();
          observe({
            missing: want.filter((w) => !s.objects.some((o) => JSON.stringify(o) === JSON.stringify(w))),
            unexpected: s.objects.filter((o) => !want.some((w) => JSON.stringify(o) === JSON.stringify(w))),
            instances: s.instances.length,
          });
          return JSON.stringify(s) === JSON.stringify(expected);
        },
        { timeoutMs: 120_000, intervalMs: 500 },
      );
    } finally {
      // Compared whole, so a failure shows every duplicate, orphan and missing object at once.
      expect(await state()).toEqual(expected);
    }
    // B did the work as the leader, without an error it could not recover from.
    const log = (b as RunningOperator).logTail(10_000);
    expect(log).toContain('became leader');
  });
});
