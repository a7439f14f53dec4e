import https from 'node:https';
import { afterEach, describe, expect, it } from '@jest/globals';
import type { AccessReviewer } from '@kubeplus-isolation/service';
import type { CoreV1Event } from '@kubernetes/client-node';
import type { Config } from '../src/config.js';
import { createOperator, type Operator, type OperatorDeps } from '../src/operator.js';
import type { EventSink } from '../src/runtime/event-recorder.js';
import type { ManagerExit } from '../src/runtime/manager.js';
import { agentPolicy } from './desired/helpers.js';
import { FakeWorld } from './fake-world.js';
import { crd } from './fixtures.js';
import { settle, testConfig } from './operator-harness.js';
import { captureLogger, FakeClock, MemoryLease, type MemoryLeaseLock } from './runtime/fakes.js';

const SANDBOX = 'kubeplus.io/sandbox-isolation';
const NODE = 'kubeplus.io/node-isolation';
const KATA = '{"minRuntimeClass":"kata","enforce":true}';
const RUNSC = '{"minRuntimeClass":"runsc","enforce":true}';
const NODE_SPEC = '{"nodeSelector":{"pool":"team-a-pool"},"tolerations":[]}';
const LABELLED = { 'registered-by': 'kubeplus' };

interface Replica {
  operator: Operator;
  lock: MemoryLeaseLock | undefined;
  calls: string[];
  events: CoreV1Event[];
  logs(): Array<Record<string, unknown>>;
  stop: AbortController;
  done: Promise<ManagerExit>;
}

const running: Replica[] = [];

afterEach(async () => {
  for (const r of running.splice(0)) {
    r.stop.abort();
    await r.done.catch(() => undefined);
  }
});

function replica(
  world: FakeWorld,
  clock: FakeClock,
  identity: string,
  cfg: Config,
  lease?: MemoryLease,
  extra: Partial<OperatorDeps> = {},
): Replica {
  const calls: string[] = [];
  const events: CoreV1Event[] = [];
  const sink: EventSink = {
    create: async (_namespace, event) => {
      events.push(event);
      return event;
    },
    patch: async (_namespace, _name, update) => ({ involvedObject: {}, metadata: {}, count: update.count }),
  };
  const { logger, lines } = captureLogger('debug');
  const lock = lease?.view(identity);
  const operator = createOperator({
    config: cfg,
    logger,
    identity,
    version: '0.0.0-test',
    policyApis: { validating: true, mutatingVersion: 'admissionregistration.k8s.io/v1' },
    sources: world.informerSources(),
    clusterPort: (options) => world.port(options, calls),
    eventSink: sink,
    pods: world.podLister(),
    reports: world.reportIo(),
    leaseLock: lock,
    clock,
    random: () => 0,
    ...extra,
  });
  const stop = new AbortController();
  const done = operator.run(stop.signal);
  const r = { operator, lock, calls, events, logs: lines, stop, done };
  running.push(r);
  return r;
}

/** Lets watch events, queues and reconciles run to quiescence (plus `ms` of fake time). */

async function httpGet(r: Replica, path: string): Promise<{ status: number; body: string }> {
  const port = r.operator.server()?.port;
  if (port === undefined) throw new Error('not serving');
  const res = await fetch(`http://127.0.0.1:${port}${path}`);
  return { status: res.status, body: await res.text() };
}

function reconciledKeys(r: Replica): unknown[] {
  return r
    .logs()
    .filter((l) => l.msg === 'reconciled' && l.controller === 'instances')
    .map((l) => l.key);
}

const writes = (r: Replica): string[] =>
  r.calls.filter((c) => /^(create|replace|patch|delete|set)/.test(c) && c !== 'recordEvent');

describe('operator wiring', () => {
  it('a standby keeps warm caches and is ready but never reconciles; the leader does; a graceful stop hands over at once', async () => {
    const world = new FakeWorld();
    const clock = new FakeClock();
    const lease = new MemoryLease();
    world.putCrd(crd({ labels: LABELLED }));
    const key = world.cluster.putInstance({ name: 'agent-x', namespace: 'team-a', annotations: { [SANDBOX]: KATA } });
    world.sync();

    const a = replica(world, clock, 'a', testConfig(), lease);
    await settle(clock);
    const b = replica(world, clock, 'b', testConfig(), lease);
    await settle(clock);

    expect(a.operator.manager.isLeading()).toBe(true);
    expect(reconciledKeys(a)).toContain('cloudark.io/v1/Agent/agents/team-a/agent-x');
    expect(world.cluster.stored('RuntimeClass', 'kubeplus-sandbox-agent-x')?.handler).toBe('kata');
    expect(
      world.cluster.stored('ValidatingAdmissionPolicy', agentPolicy('team-a', 'agent-x', 'enforce')),
    ).toBeDefined();
    expect(world.cluster.finalizersOf(key)).toEqual([]); // the instance is never written
    expect(a.events.map((e) => e.reason)).toContain('SandboxIsolationApplied');

    // Changes keep coming; the standby sees them in its caches and does nothing.
    for (const min of [RUNSC, KATA, RUNSC]) {
      world.cluster.putInstance({ name: 'agent-x', namespace: 'team-a', annotations: { [SANDBOX]: min } });
      world.sync();
      await settle(clock, 5_000);
    }
    expect(world.cluster.stored('RuntimeClass', 'kubeplus-sandbox-agent-x')?.handler).toBe('runsc');
    expect(b.calls).toEqual([]);
    expect(b.events).toEqual([]);
    expect(reconciledKeys(b)).toEqual([]);
    expect(b.operator.manager.isLeading()).toBe(false);
    expect((await httpGet(b, '/readyz')).status).toBe(200);
    expect((await httpGet(b, '/metrics')).body).toMatch(/^kubeplus_operator_leader 0$/m);
    expect((await httpGet(a, '/metrics')).body).toMatch(/^kubeplus_operator_leader 1$/m);
    expect((await httpGet(a, '/metrics')).body).toContain(
      `kubeplus_operator_build_info{version="0.0.0-test",nodejs_version="${process.versions.node}"} 1`,
    );

    // Graceful stop of the leader: it releases the Lease and B takes over on its next retry.
    a.stop.abort();
    await expect(a.done).resolves.toBe('shutdown');
    expect(lease.lease?.record.holderIdentity).toBe('');
    await settle(clock, 2_000);
    expect(b.operator.manager.isLeading()).toBe(true);
    expect(reconciledKeys(b)).toContain('cloudark.io/v1/Agent/agents/team-a/agent-x');

    const before = writes(b).length;
    world.cluster.putInstance({ name: 'agent-x', namespace: 'team-a', annotations: { [SANDBOX]: KATA } });
    world.sync();
    await settle(clock);
    expect(writes(b).length).toBeGreaterThan(before);
    expect(world.cluster.stored('RuntimeClass', 'kubeplus-sandbox-agent-x')?.handler).toBe('kata');
  });

  it('a leader that cannot renew stops at once and exits leadership-lost; the standby takes over after the lease expires', async () => {
    const world = new FakeWorld();
    const clock = new FakeClock();
    const lease = new MemoryLease();
    world.putCrd(crd({ labels: LABELLED }));
    world.cluster.putInstance({ name: 'agent-x', namespace: 'team-a', annotations: { [SANDBOX]: KATA } });
    world.sync();
    const a = replica(world, clock, 'a', testConfig(), lease);
    await settle(clock);
    const b = replica(world, clock, 'b', testConfig(), lease);
    await settle(clock);
    expect(a.operator.manager.isLeading()).toBe(true);

    // A is cut off from the Lease (but not from the rest of the API).
    if (a.lock === undefined) throw new Error('no lock');
    a.lock.fault = 'error';
    const lostAt = clock.now();
    let exit: ManagerExit | undefined;
    void a.done.then((e) => {
      exit = e;
    });
    while (exit === undefined && clock.now() - lostAt < 30_000) await clock.advance(500);
    expect(exit).toBe('leadership-lost');
    // Within the renew deadline (10s) after the first failed renewal (at most a retry period, 2s, later).
    expect(clock.now() - lostAt).toBeLessThanOrEqual(12_500);
    expect(a.operator.manager.isLeading()).toBe(false);
    const writesOfA = writes(a).length;

    world.cluster.putInstance({ name: 'agent-x', namespace: 'team-a', annotations: { [SANDBOX]: RUNSC } });
    world.sync();
    await settle(clock, 5_000); // B takes over once 15s have passed since it saw the last renewal
    expect(b.operator.manager.isLeading()).toBe(true);
    expect(world.cluster.stored('RuntimeClass', 'kubeplus-sandbox-agent-x')?.handler).toBe('runsc');
    expect(writes(b).length).toBeGreaterThan(0);
    expect(writes(a).length).toBe(writesOfA);
  });

  it('picks up an instance Kind registered after start, and forgets one that is removed', async () => {
    const world = new FakeWorld();
    const clock = new FakeClock();
    const r = replica(world, clock, 'solo', testConfig('--leader-elect=false'));
    await settle(clock);
    expect(r.operator.kinds.list()).toEqual([]);

    world.cluster.putInstance({
      name: 'agent-y',
      namespace: 'kubeplus',
      annotations: { [NODE]: NODE_SPEC },
    });
    world.putCrd(crd({ labels: LABELLED }));
    await settle(clock);
    expect(r.operator.kinds.list().map((k) => k.kind)).toEqual(['Agent']);
    // An instance in the platform namespace gets a namespace named after it, node-isolated.
    const ns = world.cluster.namespaces.get('agent-y');
    expect(ns?.labels['kubeplus.io/node-isolation-enabled']).toBe('true');
    expect(ns?.annotations['kubeplus.io/created-for']).toBe('cloudark.io/Agent/kubeplus/agent-y');
    expect(JSON.parse(ns?.annotations['kubeplus.io/node-isolation-resolved'] ?? '{}')).toEqual({
      nodeSelector: { pool: 'team-a-pool' },
      tolerations: [],
    });
    expect((await httpGet(r, '/metrics')).body).toMatch(/^kubeplus_operator_instance_kinds\{state="synced"\} 1$/m);

    world.deleteCrd('agents.cloudark.io');
    await settle(clock);
    expect(r.operator.kinds.list()).toEqual([]);
    expect((await httpGet(r, '/metrics')).body).toMatch(/^kubeplus_operator_instance_kinds\{state="synced"\} 0$/m);
  });

  it('a Kind it may not list stays out of readiness, is reported once and retried; the others keep working; granted later, it is watched', async () => {
    const world = new FakeWorld();
    const clock = new FakeClock();
    world.putCrd(crd({ labels: LABELLED }));
    world.forbid('cloudark.io/v1/robots');
    world.putCrd(crd({ kind: 'Robot', plural: 'robots', labels: LABELLED }));
    world.cluster.putNamespace('team-r');
    world.cluster.putInstance({
      name: 'robot-1',
      namespace: 'team-r',
      kind: 'Robot',
      annotations: { [NODE]: NODE_SPEC },
    });
    world.cluster.putInstance({ name: 'agent-y', namespace: 'kubeplus', annotations: { [NODE]: NODE_SPEC } });
    world.sync();
    // Present before start (the fake lists CRDs at once): leadership must not wait for it either.
    const r = replica(world, clock, 'solo', testConfig('--leader-elect=false'));
    await settle(clock, 60_000);

    const readyz = await httpGet(r, '/readyz');
    expect(readyz.status).toBe(200);
    expect(JSON.parse(readyz.body).checks.informers.message).toBe(
      'informers synced; forbidden by RBAC (not watched, retried): cloudark.io/v1/robots',
    );
    const metrics = (await httpGet(r, '/metrics')).body;
    expect(metrics).toMatch(/^kubeplus_operator_instance_kinds\{state="forbidden"\} 1$/m);
    expect(metrics).toMatch(/^kubeplus_operator_instance_kinds\{state="synced"\} 1$/m);
    expect(metrics).toMatch(/^kubeplus_operator_informer_synced\{resource="instances"\} 1$/m);
    // The permitted Kind is reconciled: its instance's namespace is isolated.
    expect(world.cluster.namespaces.get('agent-y')?.labels['kubeplus.io/node-isolation-enabled']).toBe('true');
    expect(world.cluster.namespaces.get('team-r')?.labels['kubeplus.io/node-isolation-enabled']).toBeUndefined();
    // One warning for the Kind, though it was retried many times (backoff: 0.8s doubling, capped at 30s).
    const warnings = r.logs().filter((l) => l.level === 'warn' || l.level === 'error');
    expect(warnings.map((l) => [l.msg, l.gvr])).toEqual([
      [expect.stringMatching(/^instance Kind forbidden: /), 'cloudark.io/v1/robots'],
    ]);
    const retries = r
      .logs()
      .filter((l) => l.informer === 'cloudark.io/v1/robots' && l.msg === 'informer list/watch failed; restarting');
    expect(retries.length).toBeGreaterThanOrEqual(6);
    expect(retries.every((l) => l.level === 'debug')).toBe(true);

    // RBAC granted later (e.g. ClusterRole aggregation): the next retry lists it, and its instance is isolated.
    world.permit('cloudark.io/v1/robots');
    await settle(clock, 30_000);
    expect(world.cluster.namespaces.get('team-r')?.labels['kubeplus.io/node-isolation-enabled']).toBe('true');
    expect((await httpGet(r, '/metrics')).body).toMatch(/^kubeplus_operator_instance_kinds\{state="forbidden"\} 0$/m);
    expect(JSON.parse((await httpGet(r, '/readyz')).body).checks.informers.message).toBe('informers synced');
    expect(r.logs().filter((l) => l.msg === 'instance Kind readable again: watching its instances')).toEqual([
      expect.objectContaining({ level: 'info', gvr: 'cloudark.io/v1/robots' }),
    ]);
  });

  it('re-reconciles every sandbox instance when any RuntimeClass changes, from the informer cache', async () => {
    const world = new FakeWorld();
    const clock = new FakeClock();
    world.putCrd(crd({ labels: LABELLED }));
    world.cluster.putInstance({ name: 'agent-x', namespace: 'team-a', annotations: { [SANDBOX]: RUNSC } });
    world.cluster.putInstance({ name: 'plain', namespace: 'team-b', annotations: {} });
    world.sync();
    const r = replica(world, clock, 'solo', testConfig('--leader-elect=false'));
    await settle(clock);
    const vap = (): string =>
      JSON.stringify(world.cluster.stored('ValidatingAdmissionPolicy', agentPolicy('team-a', 'agent-x', 'enforce')));
    expect(vap()).not.toContain('gvisor');

    const reconcilesBefore = reconciledKeys(r).length;
    world.cluster.putRuntimeClass('gvisor', 'runsc');
    world.sync();
    await settle(clock);
    expect(vap()).toContain('gvisor');
    const fannedOut = reconciledKeys(r).slice(reconcilesBefore);
    expect(fannedOut).toContain('cloudark.io/v1/Agent/agents/team-a/agent-x');
    expect(fannedOut).not.toContain('cloudark.io/v1/Agent/agents/team-b/plain');
  });

  it('a generated class change re-queues only its owner; a class gaining the markers leaves every sandbox instance’s list', async () => {
    const world = new FakeWorld();
    const clock = new FakeClock();
    world.putCrd(crd({ labels: LABELLED }));
    world.cluster.putInstance({ name: 'agent-x', namespace: 'team-a', annotations: { [SANDBOX]: KATA } });
    world.cluster.putInstance({ name: 'agent-y', namespace: 'team-b', annotations: { [SANDBOX]: KATA } });
    world.sync();
    const r = replica(world, clock, 'solo', testConfig('--leader-elect=false'));
    await settle(clock);
    const vap = (instance: string): string =>
      JSON.stringify(
        world.cluster.stored(
          'ValidatingAdmissionPolicy',
          agentPolicy(instance === 'agent-x' ? 'team-a' : 'team-b', instance, 'enforce'),
        ),
      );
    // Each tenant's list names its own class only, though the other's is a kata class too.
    expect(world.cluster.stored('RuntimeClass', 'kubeplus-sandbox-agent-y')?.handler).toBe('kata');
    expect(vap('agent-x')).toContain('[\\"kubeplus-sandbox-agent-x\\"]');
    expect(vap('agent-y')).toContain('[\\"kubeplus-sandbox-agent-y\\"]');

    let before = reconciledKeys(r).length;
    world.cluster.edit('RuntimeClass', 'kubeplus-sandbox-agent-y', (rc) => {
      rc.metadata.labels = { ...rc.metadata.labels, 'example.com/touched': 'yes' };
    });
    world.sync();
    await settle(clock);
    expect(new Set(reconciledKeys(r).slice(before))).toEqual(new Set(['cloudark.io/v1/Agent/agents/team-b/agent-y']));

    world.cluster.putRuntimeClass('kata-qemu', 'kata-qemu');
    world.sync();
    await settle(clock);
    expect(vap('agent-x')).toContain('kata-qemu');
    expect(vap('agent-y')).toContain('kata-qemu');

    // An update carries only the new object: the fan-out remembers that kata-qemu was a platform class.
    before = reconciledKeys(r).length;
    world.cluster.edit('RuntimeClass', 'kata-qemu', (rc) => {
      rc.metadata.annotations = { ...rc.metadata.annotations, 'kubeplus.io/owner': 'cloudark.io/Agent/team-q/q' };
    });
    world.sync();
    await settle(clock);
    expect(new Set(reconciledKeys(r).slice(before))).toEqual(
      new Set(['cloudark.io/v1/Agent/agents/team-a/agent-x', 'cloudark.io/v1/Agent/agents/team-b/agent-y']),
    );
    expect(vap('agent-x')).not.toContain('kata-qemu');
    expect(vap('agent-y')).not.toContain('kata-qemu');
  });

  it('restores an owned object deleted by hand, and counts invalid annotations', async () => {
    const world = new FakeWorld();
    const clock = new FakeClock();
    world.putCrd(crd({ labels: LABELLED }));
    world.cluster.putInstance({ name: 'agent-x', namespace: 'team-a', annotations: { [SANDBOX]: KATA } });
    world.cluster.putInstance({
      name: 'broken',
      namespace: 'team-c',
      annotations: { [SANDBOX]: '{"minRuntimeClass":"vm"}' },
    });
    world.sync();
    const r = replica(world, clock, 'solo', testConfig('--leader-elect=false'));
    await settle(clock);
    // A binding: nothing but its own deletion event points back at its owner.
    const binding = agentPolicy('team-a', 'agent-x', 'enforce');
    const uid = world.cluster.stored('ValidatingAdmissionPolicyBinding', binding)?.metadata.uid;
    expect(uid).toBeDefined();

    world.cluster.objects.delete(`ValidatingAdmissionPolicyBinding/${binding}`);
    world.sync();
    await settle(clock);
    const restored = world.cluster.stored('ValidatingAdmissionPolicyBinding', binding);
    expect(restored?.spec).toMatchObject({ policyName: binding, validationActions: ['Deny'] });
    expect(restored?.metadata.uid).not.toBe(uid);

    const metrics = (await httpGet(r, '/metrics')).body;
    expect(metrics).toMatch(
      /^kubeplus_operator_invalid_annotations_total\{annotation="kubeplus.io\/sandbox-isolation"\} [1-9]\d*$/m,
    );
    expect(metrics).toMatch(/^kubeplus_operator_reconcile_total\{controller="instances",result="success"\} [1-9]\d*$/m);
    expect(metrics).toMatch(/^kubeplus_operator_informer_synced\{resource="instances"\} 1$/m);
    expect(metrics).toMatch(/^kubeplus_operator_informer_synced\{resource="mutatingadmissionpolicies"\} 1$/m);
    expect(r.events.map((e) => e.reason)).toContain('InvalidSandboxIsolation');
  });

  it('deletes an object whose owner is gone when it is seen (orphan cleanup)', async () => {
    const world = new FakeWorld();
    const clock = new FakeClock();
    world.putCrd(crd({ labels: LABELLED }));
    const key = world.cluster.putInstance({ name: 'agent-x', namespace: 'team-a', annotations: { [SANDBOX]: KATA } });
    world.sync();
    const first = replica(world, clock, 'first', testConfig('--leader-elect=false'));
    await settle(clock);
    expect(world.cluster.stored('RuntimeClass', 'kubeplus-sandbox-agent-x')).toBeDefined();
    first.stop.abort();
    await first.done;

    // While no operator runs, the instance is deleted (no finalizer holds it).
    world.cluster.deleteInstance(key);
    expect(world.cluster.instance(key)).toBeUndefined();
    world.sync();
    const second = replica(world, clock, 'second', testConfig('--leader-elect=false'));
    await settle(clock);
    expect(world.cluster.storedOfKind('RuntimeClass')).toEqual([]);
    expect(world.cluster.storedOfKind('ValidatingAdmissionPolicy')).toEqual([]);
    expect(second.logs().some((l) => l.controller === 'owned-objects' && l.msg === 'reconciled')).toBe(true);
  });

  it('deletes what an instance owned when it is deleted while the operator runs (its delete event), never writing the instance', async () => {
    const world = new FakeWorld();
    const clock = new FakeClock();
    world.putCrd(crd({ labels: LABELLED }));
    const key = world.cluster.putInstance({ name: 'agent-x', namespace: 'team-a', annotations: { [SANDBOX]: KATA } });
    world.sync();
    const op = replica(world, clock, 'only', testConfig('--leader-elect=false'));
    await settle(clock);
    expect(world.cluster.stored('RuntimeClass', 'kubeplus-sandbox-agent-x')).toBeDefined();
    world.cluster.deleteInstance(key);
    world.sync();
    await settle(clock);
    expect(world.cluster.storedOfKind('RuntimeClass')).toEqual([]);
    expect(world.cluster.storedOfKind('ValidatingAdmissionPolicy')).toEqual([]);
    expect(world.cluster.storedOfKind('ValidatingAdmissionPolicyBinding')).toEqual([]);
    expect(world.cluster.writes.filter((w) => w.op === 'setFinalizers')).toEqual([]);
    op.stop.abort();
    await op.done;
  });
});

/** GET over HTTPS without verifying the (self-signed) certificate, as the kubelet's probes do. */
function httpsGet(port: number, path: string, token?: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    https
      .get(
        `https://127.0.0.1:${port}${path}`,
        {
          rejectUnauthorized: false,
          agent: false,
          headers: token === undefined ? {} : { Authorization: `Bearer ${token}` },
        },
        (res) => {
          let body = '';
          res.on('data', (c: Buffer) => {
            body += c.toString();
          });
          res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
        },
      )
      .on('error', reject);
  });
}

describe('secure metrics (--metrics-secure)', () => {
  const PROMETHEUS = 'system:serviceaccount:monitoring:prometheus';
  /** Two tokens the cluster knows; only Prometheus's user may get /metrics. */
  function reviewer(calls: string[]): AccessReviewer {
    const users: Record<string, string> = {
      'prometheus-token': PROMETHEUS,
      'tenant-token': 'system:serviceaccount:t:x',
    };
    return {
      async authenticate(token) {
        calls.push('TokenReview');
        const username = users[token];
        return username === undefined
          ? { authenticated: false, reason: 'invalid bearer token' }
          : { authenticated: true, user: { username, groups: ['system:authenticated'] } };
      },
      async authorize(user, attributes) {
        calls.push(`SubjectAccessReview ${attributes.verb} ${attributes.path}`);
        return user.username === PROMETHEUS ? { allowed: true } : { allowed: false, reason: 'no RBAC policy matched' };
      },
    };
  }

  it('the port is HTTPS; the probes are open, /metrics only for a token allowed to get it', async () => {
    const world = new FakeWorld();
    const clock = new FakeClock();
    world.sync();
    const calls: string[] = [];
    const r = replica(world, clock, 'a', testConfig('--leader-elect=false', '--metrics-secure=true'), undefined, {
      accessReviewer: reviewer(calls),
    });
    await settle(clock);
    // The self-signed certificate is made before the port opens: real time, not the fake clock's.
    let port: number | undefined;
    for (let i = 0; i < 200 && port === undefined; i++) {
      await new Promise((resolve) => setTimeout(resolve, 20));
      port = r.operator.server()?.port;
    }
    if (port === undefined) throw new Error('not serving');
    await settle(clock);
    expect((await httpsGet(port, '/healthz')).status).toBe(200);
    expect((await httpsGet(port, '/readyz')).status).toBe(200);
    const anonymous = await httpsGet(port, '/metrics');
    expect(anonymous.status).toBe(401);
    expect(JSON.parse(anonymous.body)).toMatchObject({ error: 'unauthorized' });
    expect((await httpsGet(port, '/metrics', 'made-up')).status).toBe(401);
    const tenant = await httpsGet(port, '/metrics', 'tenant-token');
    expect(tenant.status).toBe(403);
    expect(tenant.body).not.toContain('kubeplus_operator');
    const scrape = await httpsGet(port, '/metrics', 'prometheus-token');
    expect(scrape.status).toBe(200);
    expect(scrape.body).toMatch(/^kubeplus_operator_leader 1$/m);
    // The next scrape is answered from the cache: no further review.
    expect((await httpsGet(port, '/metrics', 'prometheus-token')).status).toBe(200);
    expect(calls).toEqual([
      'TokenReview',
      'TokenReview',
      'SubjectAccessReview get /metrics',
      'TokenReview',
      'SubjectAccessReview get /metrics',
    ]);
    await expect(fetch(`http://127.0.0.1:${port}/healthz`)).rejects.toThrow();
    expect(r.logs().find((l) => l.msg === 'operator starting')?.metrics).toBe(
      'https, token and access reviewed (self-signed certificate)',
    );
  });

  it('refuses to start secure without an access reviewer', () => {
    const cfg = testConfig('--leader-elect=false', '--metrics-secure=true');
    expect(() => replica(new FakeWorld(), new FakeClock(), 'a', cfg)).toThrow(
      'operator: --metrics-secure needs an access reviewer (TokenReview and SubjectAccessReview)',
    );
  });
});
