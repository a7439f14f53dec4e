import { describe, expect, it } from '@jest/globals';
import type { KubernetesObject } from '@kubernetes/client-node';
import { Caches } from '../../src/runtime/cache.js';
import { ResourceInformer, type SyncedInformer } from '../../src/runtime/informer.js';
import { informerKeySource, objectKey } from '../../src/runtime/key-sources.js';
import { LeaderElector } from '../../src/runtime/leader-election.js';
import { Manager, type ManagerExit, type Reconciler } from '../../src/runtime/manager.js';
import { createOperatorMetrics } from '../../src/runtime/runtime-metrics.js';
import type { ReconcileOutcome } from '../../src/runtime/worker-pool.js';
import { FakeClock, FakeInformerSource, flush, MemoryLease, type MemoryLeaseLock, obj } from './fakes.js';

/** A cache registry holding `mustSync` (waited for) and `others` (started only). */
function cachesOf(mustSync: SyncedInformer[], others: SyncedInformer[] = []): Caches {
  const caches = new Caches();
  for (const informer of mustSync) caches.add(informer);
  for (const informer of others) caches.add(informer, { mustSync: false });
  return caches;
}

interface Replica {
  manager: Manager;
  source: FakeInformerSource<KubernetesObject>;
  lock: MemoryLeaseLock;
  reconciled: string[];
  events: string[];
  stop: AbortController;
  done: Promise<ManagerExit>;
}

function replica(
  store: MemoryLease,
  clock: FakeClock,
  identity: string,
  opts: {
    objects?: KubernetesObject[];
    reconcile?: (key: string, signal: AbortSignal) => Promise<ReconcileOutcome>;
    leaderElection?: boolean;
    metrics?: ReturnType<typeof createOperatorMetrics>;
    drainTimeoutMs?: number;
  } = {},
): Replica {
  const source = new FakeInformerSource<KubernetesObject>();
  for (const o of opts.objects ?? []) source.objects.set(`${o.metadata?.namespace}/${o.metadata?.name}`, o);
  const informer = new ResourceInformer(source, { name: 'things', clock });
  const lock = store.view(identity);
  const reconciled: string[] = [];
  const events: string[] = [];
  const manager = new Manager({
    caches: cachesOf([informer]),
    clock,
    drainTimeoutMs: opts.drainTimeoutMs ?? 5_000,
    metrics: opts.metrics,
    leaderElection:
      opts.leaderElection === false
        ? undefined
        : (callbacks) =>
            new LeaderElector({
              lock,
              identity,
              clock,
              random: () => 0,
              callbacks: {
                ...callbacks,
                onStartedLeading: (signal) => {
                  events.push('leading');
                  return callbacks.onStartedLeading(signal);
                },
              },
            }),
    closers: [
      {
        name: 'http',
        close: async () => {
          events.push(`closed (lease holder "${store.lease?.record.holderIdentity}", informer stops ${source.stops})`);
        },
      },
    ],
  });
  const reconciler: Reconciler = {
    name: 'things',
    reconcile: async (key, signal) => {
      reconciled.push(key);
      return opts.reconcile?.(key, signal);
    },
  };
  manager.addController({ reconciler, sources: [informerKeySource(informer)], concurrency: 2 });
  const stop = new AbortController();
  const done = manager.run(stop.signal);
  return { manager, source, lock, reconciled, events, stop, done };
}

describe('Manager', () => {
  it('waits for the informers to sync before campaigning, then reconciles every cached object', async () => {
    const clock = new FakeClock();
    const store = new MemoryLease();
    const source = new FakeInformerSource<KubernetesObject>();
    source.objects.set('ns/a', obj('a', 'ns'));
    source.startPlan.push('list-error');
    const informer = new ResourceInformer(source, { name: 'things', clock });
    const order: string[] = [];
    const manager = new Manager({
      caches: cachesOf([informer]),
      clock,
      leaderElection: (callbacks) => {
        order.push(`campaign (synced=${informer.hasSynced()})`);
        return new LeaderElector({ lock: store.view('a'), identity: 'a', clock, callbacks });
      },
    });
    manager.addController({
      reconciler: {
        name: 'things',
        reconcile: async (key) => {
          order.push(`reconcile ${key}`);
        },
      },
      sources: [informerKeySource(informer)],
    });
    const stop = new AbortController();
    const done = manager.run(stop.signal);
    await clock.advance(500);
    expect(order).toEqual([]);
    expect(manager.readinessCheck().check()).toEqual({ ok: false, message: 'not synced: things' });
    await clock.advance(300); // informer restart after 800ms
    expect(order).toEqual(['campaign (synced=true)', 'reconcile ns/a']);
    stop.abort();
    await expect(done).resolves.toBe('shutdown');
  });

  it('waits only for the must-sync caches: one that never syncs is started and stopped, never waited for', async () => {
    const clock = new FakeClock();
    const source = new FakeInformerSource<KubernetesObject>();
    source.objects.set('ns/a', obj('a', 'ns'));
    const informer = new ResourceInformer(source, { name: 'things', clock });
    const neverSource = new FakeInformerSource<KubernetesObject>();
    neverSource.startPlan.push('list-error', 'list-error', 'list-error', 'list-error');
    const never = new ResourceInformer(neverSource, { name: 'late-kinds', clock });
    const order: string[] = [];
    const manager = new Manager({ caches: cachesOf([informer], [never]), clock });
    manager.addController({
      reconciler: {
        name: 'things',
        reconcile: async (key) => {
          order.push(`reconcile ${key}`);
        },
      },
      sources: [informerKeySource(informer)],
    });
    const stop = new AbortController();
    const done = manager.run(stop.signal);
    await clock.advance(10);
    expect(never.hasSynced()).toBe(false);
    expect(order).toEqual(['reconcile ns/a']);
    stop.abort();
    await expect(done).resolves.toBe('shutdown');
    expect(neverSource.stops).toBeGreaterThan(0);
  });

  it('a standby never reconciles, is ready, and takes over at once when the leader shuts down gracefully', async () => {
    const clock = new FakeClock();
    const store = new MemoryLease();
    const objects = [obj('a', 'team-a'), obj('b', 'team-b')];
    const a = replica(store, clock, 'a', { objects });
    await flush();
    const b = replica(store, clock, 'b', { objects });
    await clock.advance(1_000);
    expect(a.manager.isLeading()).toBe(true);
    expect(a.reconciled.sort()).toEqual(['team-a/a', 'team-b/b']);
    for (let i = 2; i < 10; i++) {
      a.source.upsert(obj('a', 'team-a', String(i)));
      b.source.upsert(obj('a', 'team-a', String(i)));
      await clock.advance(5_000);
    }
    expect(b.reconciled).toEqual([]);
    expect(b.manager.isLeading()).toBe(false);
    expect(b.manager.readinessCheck().check().ok).toBe(true);

    a.stop.abort();
    await expect(a.done).resolves.toBe('shutdown');
    await clock.advance(2_000); // one retry period, far less than the 15s lease
    expect(b.manager.isLeading()).toBe(true);
    expect(b.reconciled.sort()).toEqual(['team-a/a', 'team-b/b']);
    b.stop.abort();
    await b.done;
  });

  it('stops reconciling at once when leadership is lost, and run resolves leadership-lost', async () => {
    const clock = new FakeClock();
    const store = new MemoryLease();
    const metrics = createOperatorMetrics({
      controllers: ['things'],
      resources: [],
      annotations: [],
      defaultMetrics: false,
    });
    let inFlight: AbortSignal | undefined;
    const r = replica(store, clock, 'a', {
      objects: [obj('slow', 'ns')],
      metrics,
      reconcile: (key, signal) => {
        if (key !== 'ns/slow') return Promise.resolve(undefined);
        inFlight = signal;
        return new Promise((resolve) => signal.addEventListener('abort', () => resolve(undefined)));
      },
    });
    await flush();
    expect(r.manager.isLeading()).toBe(true);
    expect(await metrics.registry.getSingleMetricAsString('kubeplus_operator_leader')).toContain(
      'kubeplus_operator_leader 1',
    );
    r.lock.fault = 'error'; // the API server becomes unreachable for this replica
    await clock.advance(2_000 + 10_000);
    expect(r.manager.isLeading()).toBe(false);
    expect(inFlight?.aborted).toBe(true);
    r.source.upsert(obj('late', 'ns'));
    await clock.advance(60_000);
    expect(r.reconciled).toEqual(['ns/slow']);
    await expect(r.done).resolves.toBe('leadership-lost');
    expect(await metrics.registry.getSingleMetricAsString('kubeplus_operator_leader')).toContain(
      'kubeplus_operator_leader 0',
    );
  });

  it('shuts down in order: drain in-flight work while still leading, release the lease, stop informers, close servers', async () => {
    const clock = new FakeClock();
    const store = new MemoryLease();
    let finish: (() => void) | undefined;
    const r = replica(store, clock, 'a', {
      objects: [obj('x', 'ns')],
      reconcile: () =>
        new Promise((resolve) => {
          finish = () => resolve(undefined);
        }),
    });
    await flush();
    expect(r.reconciled).toEqual(['ns/x']);
    r.stop.abort();
    await clock.advance(3_000);
    expect(store.lease?.record.holderIdentity).toBe('a'); // still held while draining
    expect(r.events).toEqual(['leading']);
    finish?.();
    await clock.advance(0);
    await expect(r.done).resolves.toBe('shutdown');
    expect(store.lease?.record.holderIdentity).toBe('');
    expect(r.events).toEqual(['leading', 'closed (lease holder "", informer stops 1)']);
  });

  it('aborts in-flight work that outlives the drain bound and still shuts down', async () => {
    const clock = new FakeClock();
    const store = new MemoryLease();
    let signal: AbortSignal | undefined;
    const r = replica(store, clock, 'a', {
      objects: [obj('x', 'ns')],
      reconcile: (_key, s) => {
        signal = s;
        return new Promise(() => undefined); // ignores its signal entirely
      },
    });
    await flush();
    r.stop.abort();
    await clock.advance(5_000);
    expect(signal?.aborted).toBe(true);
    await expect(r.done).resolves.toBe('shutdown');
  });

  it('without leader election, reconciles as soon as the caches are synced', async () => {
    const clock = new FakeClock();
    const r = replica(new MemoryLease(), clock, 'solo', { objects: [obj('a', 'ns')], leaderElection: false });
    await flush();
    expect(r.manager.isLeading()).toBe(true);
    expect(r.reconciled).toEqual(['ns/a']);
    r.source.upsert(obj('b', 'ns'));
    await flush();
    expect(r.reconciled).toEqual(['ns/a', 'ns/b']);
    r.stop.abort();
    await expect(r.done).resolves.toBe('shutdown');
  });

  it('rejects invalid controller settings at registration, not when leadership starts', () => {
    const metrics = createOperatorMetrics({
      controllers: ['known'],
      resources: [],
      annotations: [],
      defaultMetrics: false,
    });
    const manager = new Manager({ caches: new Caches(), metrics });
    const reconcile = async () => undefined;
    expect(() => manager.addController({ reconciler: { name: 'unknown', reconcile }, sources: [] })).toThrow(
      /undeclared controller/,
    );
    expect(() =>
      manager.addController({ reconciler: { name: 'known', reconcile }, sources: [], concurrency: 0 }),
    ).toThrow(/concurrency/);
    expect(() =>
      manager.addController({ reconciler: { name: 'known', reconcile }, sources: [], baseDelayMs: -1 }),
    ).toThrow(/baseDelayMs/);
    expect(() => manager.addController({ reconciler: { name: '', reconcile }, sources: [] })).toThrow(/name/);
  });

  it('aborts work still draining at shutdown as soon as the lease is lost meanwhile', async () => {
    const clock = new FakeClock();
    const store = new MemoryLease();
    let signal: AbortSignal | undefined;
    const r = replica(store, clock, 'a', {
      objects: [obj('x', 'ns')],
      drainTimeoutMs: 60_000,
      reconcile: (_key, s) => {
        signal = s;
        return new Promise(() => undefined); // never finishes on its own
      },
    });
    await flush(); // leading since t=0, renewed at t=0
    r.stop.abort(); // graceful shutdown: drain for up to 60s while still renewing the lease
    r.lock.fault = 'error'; // ...but renewals now fail: the cycle starting at 2s hits its deadline at 12s
    await clock.advance(11_999);
    expect(signal?.aborted).toBe(false);
    await clock.advance(1);
    expect(signal?.aborted).toBe(true);
    expect(r.manager.isLeading()).toBe(false);
    await clock.advance(60_000);
    await expect(r.done).resolves.toBe('shutdown');
  });

  it('rejects duplicate controllers and registration after run', async () => {
    const manager = new Manager({ caches: new Caches() });
    const reconciler: Reconciler = { name: 'x', reconcile: async () => undefined };
    manager.addController({ reconciler, sources: [] });
    expect(() => manager.addController({ reconciler, sources: [] })).toThrow(/duplicate/);
    const stop = new AbortController();
    stop.abort();
    await manager.run(stop.signal);
    expect(() => manager.addController({ reconciler: { ...reconciler, name: 'y' }, sources: [] })).toThrow(/after run/);
  });
});

describe('objectKey and informerKeySource', () => {
  it('builds namespace/name keys, name alone for cluster-scoped objects, none without a name', () => {
    expect(objectKey(obj('a', 'ns'))).toBe('ns/a');
    expect(objectKey(obj('rc'))).toBe('rc');
    expect(objectKey({})).toBeUndefined();
  });

  it('maps events to keys with a custom mapping and skips empty keys', () => {
    const clock = new FakeClock();
    const source = new FakeInformerSource<KubernetesObject>();
    const informer = new ResourceInformer(source, { name: 'ns', clock });
    const keys: string[] = [];
    const off = informerKeySource(informer, (o) => [`${o.metadata?.name}/instance`, '']).subscribe((k) => keys.push(k));
    source.upsert(obj('team-a'));
    off();
    source.upsert(obj('team-b'));
    expect(keys).toEqual(['team-a/instance']);
  });
});
