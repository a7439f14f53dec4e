/**
 * The audit as operator.ts wires it, on the in-memory world of the wiring tests: only the leader
 * lists Pods and reports; the metric, log and Event; namespace events and the period trigger it;
 * `--audit-interval=0` leaves no trace of it.
 */
import { afterEach, describe, expect, it } from '@jest/globals';
import type { PodLike } from '@kubeplus-isolation/spec';
import type { CoreV1Event } from '@kubernetes/client-node';
import type { Config } from '../../../src/config.js';
import { createOperator, type Operator } from '../../../src/operator.js';
import type { EventSink } from '../../../src/runtime/event-recorder.js';
import type { ManagerExit } from '../../../src/runtime/manager.js';
import { FakeWorld } from '../../fake-world.js';
import { crd } from '../../fixtures.js';
import { operatorMetrics, settle, testConfig } from '../../operator-harness.js';
import { captureLogger, FakeClock, MemoryLease } from '../../runtime/fakes.js';

const NODE = 'kubeplus.io/node-isolation';
const ENABLED = 'kubeplus.io/node-isolation-enabled';
const RESOLVED = 'kubeplus.io/node-isolation-resolved';
const DEDICATED = { key: 'dedicated', operator: 'Equal', value: 'team-a-pool', effect: 'NoSchedule' } as const;
const MANDATE = JSON.stringify({ nodeSelector: { pool: 'team-a-pool' }, tolerations: [DEDICATED] });
const LABELLED = { 'registered-by': 'kubeplus' };

const bare = (name: string): PodLike => ({ metadata: { name }, spec: {} });
const placed = (name: string): PodLike => ({
  metadata: { name },
  spec: { nodeSelector: { pool: 'team-a-pool' }, tolerations: [DEDICATED] },
});
const tolerationOnly = (name: string): PodLike => ({ metadata: { name }, spec: { tolerations: [DEDICATED] } });

interface Replica {
  operator: Operator;
  pods: ReturnType<FakeWorld['podLister']>;
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

function replica(world: FakeWorld, clock: FakeClock, identity: string, cfg: Config, lease?: MemoryLease): Replica {
  const events: CoreV1Event[] = [];
  const sink: EventSink = {
    create: async (_namespace, event) => {
      events.push(event);
      return event;
    },
    patch: async (_namespace, _name, update) => ({ involvedObject: {}, metadata: {}, count: update.count }),
  };
  const { logger, lines } = captureLogger('debug');
  const pods = world.podLister();
  const operator = createOperator({
    config: cfg,
    logger,
    identity,
    version: '0.0.0-test',
    policyApis: { validating: true, mutatingVersion: 'admissionregistration.k8s.io/v1' },
    sources: world.informerSources(),
    clusterPort: (options) => world.port(options, []),
    eventSink: sink,
    pods,
    reports: world.reportIo(),
    leaseLock: lease?.view(identity),
    clock,
    random: () => 0,
  });
  const stop = new AbortController();
  const r = { operator, pods, events, logs: lines, stop, done: operator.run(stop.signal) };
  running.push(r);
  return r;
}

const metrics = (r: Replica): Promise<string> => operatorMetrics(r.operator);

function unisolated(text: string): Record<string, number> {
  const out: Record<string, number> = {};
  for (const m of text.matchAll(/^kubeplus_operator_unisolated_pods\{missing="(\w+)"\} (\d+)$/gm)) {
    out[m[1] as string] = Number(m[2]);
  }
  return out;
}

const warned = (r: Replica): Array<Record<string, unknown>> =>
  r.logs().filter((l) => String(l.msg).startsWith('Pods lack the mandated node placement'));

describe('the fail-open audit, wired', () => {
  it('only the leader lists Pods and reports them; the standby reports zero; a new leader takes over the audit', async () => {
    const world = new FakeWorld();
    const clock = new FakeClock();
    const lease = new MemoryLease();
    world.putCrd(crd({ labels: LABELLED }));
    world.cluster.putNamespace('team-a');
    world.cluster.putInstance({ name: 'agent-x', namespace: 'team-a', annotations: { [NODE]: MANDATE } });
    world.cluster.putNamespace('manual', { [ENABLED]: 'true' }, { [RESOLVED]: MANDATE }); // isolated by hand
    world.pods.set('team-a', [placed('ok'), bare('down-1'), tolerationOnly('down-2')]);
    world.pods.set('manual', [bare('m-1')]);
    world.sync();

    const a = replica(world, clock, 'a', testConfig('--audit-interval=1m'), lease);
    await settle(clock);
    const b = replica(world, clock, 'b', testConfig('--audit-interval=1m'), lease);
    await settle(clock);
    expect(a.operator.manager.isLeading()).toBe(true);
    // The operator isolated team-a, which made the audit look at it (a namespace event).
    expect(world.cluster.namespaces.get('team-a')?.labels[ENABLED]).toBe('true');

    expect(unisolated(await metrics(a))).toEqual({ node_selector: 1, tolerations: 0, both: 2 });
    expect(unisolated(await metrics(b))).toEqual({ node_selector: 0, tolerations: 0, both: 0 });
    expect(b.pods.listCalls).toEqual([]);
    expect(await metrics(a)).toMatch(/^kubeplus_operator_isolated_namespaces\{annotation="valid"\} 2$/m);
    expect(await metrics(b)).toMatch(/^kubeplus_operator_isolated_namespaces\{annotation="valid"\} 2$/m);
    expect(await metrics(a)).toMatch(
      /^kubeplus_operator_reconcile_total\{controller="node-isolation-audit",result="success"\} [1-9]/m,
    );

    const [event] = a.events.filter((e) => e.reason === 'PodsNotIsolated');
    expect(event).toMatchObject({
      type: 'Warning',
      involvedObject: { apiVersion: 'cloudark.io/v1', kind: 'Agent', namespace: 'team-a', name: 'agent-x' },
      message: expect.stringMatching(
        /^2 Pods in namespace team-a lack .*: down-1 \(nodeSelector, tolerations\), down-2 \(nodeSelector\)\./,
      ),
    });
    expect(event?.involvedObject.uid).toBeTruthy();
    expect(a.events.filter((e) => e.reason === 'PodsNotIsolated')).toHaveLength(1); // none for `manual`
    expect(warned(a).map((l) => [l.namespace, l.unisolatedPods])).toEqual(
      expect.arrayContaining([
        ['team-a', ['down-1 (nodeSelector, tolerations)', 'down-2 (nodeSelector)']],
        ['manual', ['m-1 (nodeSelector, tolerations)']],
      ]),
    );

    // Graceful handover: A releases the Lease; B leads, audits everything at once and reports.
    a.stop.abort();
    await a.done;
    await settle(clock, 2_000);
    expect(b.operator.manager.isLeading()).toBe(true);
    expect(new Set(b.pods.listCalls)).toEqual(new Set(['team-a', 'manual']));
    expect(unisolated(await metrics(b))).toEqual({ node_selector: 1, tolerations: 0, both: 2 });
  });

  it('audits each isolated namespace every period, and at once when a namespace becomes isolated or its mandate changes', async () => {
    const world = new FakeWorld();
    const clock = new FakeClock();
    world.cluster.putNamespace('manual', { [ENABLED]: 'true' }, { [RESOLVED]: MANDATE });
    world.pods.set('manual', [placed('ok')]);
    world.sync();
    const r = replica(world, clock, 'solo', testConfig('--leader-elect=false', '--audit-interval=10m'));
    await settle(clock);
    expect(r.pods.listCalls).toEqual(['manual']);
    expect(unisolated(await metrics(r)).both).toBe(0);

    // A Pod admitted unpatched is found by the next periodic audit (10 min + jitter; random is 0 here).
    world.pods.set('manual', [placed('ok'), bare('late')]);
    await settle(clock, 9 * 60_000);
    expect(r.pods.listCalls).toEqual(['manual']);
    await settle(clock, 60_000);
    expect(r.pods.listCalls).toEqual(['manual', 'manual']);
    expect(unisolated(await metrics(r)).both).toBe(1);

    // A namespace that becomes isolated is audited at once, without waiting for the period.
    world.pods.set('later', [bare('x'), bare('y')]);
    world.cluster.putNamespace('later', { [ENABLED]: 'true' }, { [RESOLVED]: MANDATE });
    world.sync();
    await settle(clock);
    expect(r.pods.listCalls).toEqual(['manual', 'manual', 'later']);
    expect(unisolated(await metrics(r)).both).toBe(3);

    // A changed mandate is audited at once too; an unrelated namespace change is not.
    const relaxed = JSON.stringify({ nodeSelector: {}, tolerations: [DEDICATED] });
    world.cluster.putNamespace('later', { [ENABLED]: 'true', team: 'x' }, { [RESOLVED]: MANDATE });
    world.sync();
    await settle(clock);
    expect(r.pods.listCalls).toHaveLength(3);
    world.pods.set('later', [tolerationOnly('x'), tolerationOnly('y')]);
    world.cluster.putNamespace('later', { [ENABLED]: 'true', team: 'x' }, { [RESOLVED]: relaxed });
    world.sync();
    await settle(clock);
    expect(r.pods.listCalls).toEqual(['manual', 'manual', 'later', 'later']);
    expect(unisolated(await metrics(r))).toEqual({ node_selector: 0, tolerations: 0, both: 1 });

    // Unlabelled: it leaves the cache (the watch says deleted) and its Pods no longer count.
    world.cluster.putNamespace('manual', {}, { [RESOLVED]: MANDATE });
    world.sync();
    await settle(clock);
    expect(unisolated(await metrics(r)).both).toBe(0);
    expect(await metrics(r)).toMatch(/^kubeplus_operator_audit_pod_list_requests_total 4$/m);
    expect(await metrics(r)).toMatch(/^kubeplus_operator_audit_pods_checked_total 7$/m);
  });

  it('counts and logs a labelled namespace whose mandate is invalid, without listing it', async () => {
    const world = new FakeWorld();
    const clock = new FakeClock();
    world.cluster.putNamespace('broken', { [ENABLED]: 'true' }, { [RESOLVED]: '{"nodeSelector": 3}' });
    world.sync();
    const r = replica(world, clock, 'solo', testConfig('--leader-elect=false'));
    await settle(clock);
    expect(r.pods.listCalls).toEqual([]);
    expect(await metrics(r)).toMatch(/^kubeplus_operator_isolated_namespaces\{annotation="invalid"\} 1$/m);
    expect(r.logs().find((l) => l.namespace === 'broken' && l.level === 'warn')?.msg).toMatch(/not audited/);
  });

  it('with --audit-interval=0 there is no audit: no Pod LIST, no isolated-namespace informer, no audit metrics', async () => {
    const world = new FakeWorld();
    const clock = new FakeClock();
    world.cluster.putNamespace('manual', { [ENABLED]: 'true' }, { [RESOLVED]: MANDATE });
    world.pods.set('manual', [bare('p')]);
    world.sync();
    const r = replica(world, clock, 'solo', testConfig('--leader-elect=false', '--audit-interval=0'));
    await settle(clock, 3_600_000);
    expect(r.pods.listCalls).toEqual([]);
    const text = await metrics(r);
    expect(text).not.toMatch(/unisolated_pods|isolated_namespaces|audit_|node-isolation-audit|isolated-namespaces/);
    expect(r.logs().find((l) => l.msg === 'operator starting')?.auditInterval).toBe('disabled');
  });

  it('refuses to start the audit without a Pod lister', () => {
    const world = new FakeWorld();
    expect(() =>
      createOperator({
        config: testConfig('--leader-elect=false'),
        logger: captureLogger().logger,
        identity: 'x',
        version: '0.0.0-test',
        policyApis: { validating: true, mutatingVersion: undefined },
        sources: world.informerSources(),
        clusterPort: (options) => world.port(options, []),
        eventSink: { create: async (_n, e) => e, patch: async () => ({ involvedObject: {}, metadata: {} }) },
        leaseLock: undefined,
      }),
    ).toThrow('operator: the audit needs a Pod lister');
  });
});
