/**
 * The compliance reports as operator.ts wires them, on the in-memory world of the wiring tests:
 * the leader writes one Report per audited namespace from the audit's own Pod LIST, a
 * sandbox-isolated namespace is audited every period, the metrics, and `--reports=false`.
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
import { captureLogger, FakeClock } from '../../runtime/fakes.js';

const NODE = 'kubeplus.io/node-isolation';
const SANDBOX = 'kubeplus.io/sandbox-isolation';
const ENABLED = 'kubeplus.io/node-isolation-enabled';
const RESOLVED = 'kubeplus.io/node-isolation-resolved';
const MANDATE = JSON.stringify({ nodeSelector: { pool: 'team-a-pool' }, tolerations: [] });
const LABELLED = { 'registered-by': 'kubeplus' };
const SELF = { apiVersion: 'v1', kind: 'Pod', namespace: 'kubeplus-isolation', name: 'operator-0' };

const bare = (name: string): PodLike => ({ metadata: { name, uid: `uid-${name}` }, spec: {} });
const placed = (name: string): PodLike => ({ metadata: { name }, spec: { nodeSelector: { pool: 'team-a-pool' } } });

interface Replica {
  operator: Operator;
  events: CoreV1Event[];
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

function replica(world: FakeWorld, clock: FakeClock, cfg: Config): Replica {
  const events: CoreV1Event[] = [];
  const sink: EventSink = {
    create: async (_namespace, event) => {
      events.push(event);
      return event;
    },
    patch: async (_namespace, _name, update) => ({ involvedObject: {}, metadata: {}, count: update.count }),
  };
  const operator = createOperator({
    config: cfg,
    logger: captureLogger('debug').logger,
    identity: 'solo',
    version: '0.0.0-test',
    policyApis: { validating: true, mutatingVersion: 'admissionregistration.k8s.io/v1' },
    sources: world.informerSources(),
    clusterPort: (options) => world.port(options, []),
    eventSink: sink,
    pods: world.podLister(),
    reports: world.reportIo(),
    self: SELF,
    leaseLock: undefined,
    clock,
    random: () => 0,
  });
  const stop = new AbortController();
  const r = { operator, events, stop, done: operator.run(stop.signal) };
  running.push(r);
  return r;
}

const metrics = (r: Replica): Promise<string> => operatorMetrics(r.operator);

function world(): FakeWorld {
  const w = new FakeWorld();
  w.putCrd(crd({ labels: LABELLED }));
  w.cluster.putNamespace('team-a');
  w.cluster.putInstance({ name: 'agent-x', namespace: 'team-a', annotations: { [NODE]: MANDATE } });
  w.cluster.putNamespace('team-b');
  w.cluster.putInstance({
    name: 'agent-y',
    namespace: 'team-b',
    annotations: { [SANDBOX]: '{"minRuntimeClass":"kata","enforce":false}' },
  });
  w.cluster.putNamespace('manual', { [ENABLED]: 'true' }, { [RESOLVED]: MANDATE });
  w.pods.set('team-a', [placed('ok'), bare('down-1')]);
  w.pods.set('manual', [bare('m-1'), bare('m-2'), bare('m-3')]);
  w.sandboxes.set('team-b', [
    { metadata: { name: 'strong' }, spec: { podTemplate: { spec: { runtimeClassName: 'kubeplus-sandbox-agent-y' } } } },
    { metadata: { name: 'unset' }, spec: { podTemplate: { spec: {} } } },
  ]);
  w.sync();
  return w;
}

describe('compliance reports, wired', () => {
  it('the audit writes a Report per isolated namespace from its own LIST, and a sandbox-isolated one at once and each period', async () => {
    const w = world();
    const clock = new FakeClock();
    const r = replica(
      w,
      clock,
      testConfig('--leader-elect=false', '--audit-interval=1m', '--unisolated-namespaces-metric-limit=1'),
    );
    await settle(clock);
    const podLists = (): number => Number(/^kubeplus_operator_audit_pod_list_requests_total (\d+)$/m.exec(text)?.[1]);
    let text = await metrics(r);
    expect(w.reports.get('team-a')).toMatchObject({
      summary: { pass: 1, fail: 1 },
      results: [
        expect.objectContaining({ policy: 'node-isolation', message: expect.stringContaining('pool=team-a-pool') }),
      ],
    });
    expect(w.reports.get('manual')).toMatchObject({ summary: { pass: 0, fail: 3 } });
    // The sandbox-isolated namespace too, without waiting for the period (its policy became known).
    expect(w.reports.get('team-b')).toMatchObject({
      summary: { pass: 1, fail: 1 },
      results: [
        expect.objectContaining({
          policy: 'sandbox-isolation',
          resources: [expect.objectContaining({ kind: 'Sandbox', name: 'unset' })],
        }),
      ],
    });
    expect(podLists()).toBe(2);

    await settle(clock, 60_000);
    text = await metrics(r);
    // The period listed Pods once more per node-isolated namespace, never for team-b, and wrote
    // nothing new: every Report was current.
    expect(podLists()).toBe(4);
    expect(text).toMatch(/^kubeplus_operator_report_writes_total\{result="created"\} 3$/m);
    expect(text).toMatch(/^kubeplus_operator_reports_unchanged_total 3$/m);
    expect(text).toMatch(/^kubeplus_operator_reports_api_available 1$/m);
    expect(text).toMatch(/^kubeplus_operator_audit_sandbox_list_requests_total 2$/m);
    // Bounded: the one namespace with the most unisolated Pods only.
    expect(text.match(/^kubeplus_operator_unisolated_pods_by_namespace\{.*$/gm)).toEqual([
      'kubeplus_operator_unisolated_pods_by_namespace{tenant_namespace="manual"} 3',
    ]);
    expect(text).toMatch(/^kubeplus_operator_sandbox_isolation_instances\{mode="advisory"\} 1$/m);
    expect(text).toMatch(/^kubeplus_operator_sandbox_isolation_instances\{mode="enforce"\} 0$/m);

    // The unisolated Pod is recreated placed: it leaves the Report at the next audit.
    w.pods.set('team-a', [placed('ok'), placed('down-1-again')]);
    await settle(clock, 60_000);
    expect(w.reports.get('team-a')).toMatchObject({ summary: { pass: 2, fail: 0 }, results: [] });
    expect(r.events.filter((e) => e.reason?.startsWith('ReportsApi'))).toEqual([]);
  });

  it('a raised minimum is reported at once: the Sandbox left weaker fails, the one on the recreated class passes', async () => {
    const w = world();
    w.cluster.putRuntimeClass('platform-runc', 'runc');
    w.cluster.putInstance({
      name: 'agent-y',
      namespace: 'team-b',
      annotations: { [SANDBOX]: '{"minRuntimeClass":"runc","enforce":true}' },
    });
    w.sandboxes.set('team-b', [
      { metadata: { name: 'own' }, spec: { podTemplate: { spec: { runtimeClassName: 'kubeplus-sandbox-agent-y' } } } },
      { metadata: { name: 'platform' }, spec: { podTemplate: { spec: { runtimeClassName: 'platform-runc' } } } },
    ]);
    w.sync();
    const clock = new FakeClock();
    const r = replica(w, clock, testConfig('--leader-elect=false', '--audit-interval=1h'));
    await settle(clock);
    expect(w.cluster.stored('RuntimeClass', 'kubeplus-sandbox-agent-y')?.handler).toBe('runc');
    expect(w.reports.get('team-b')).toMatchObject({ summary: { pass: 2, fail: 0 } });

    // Raised to kata: no period passes (1 h), yet the Report names the Sandbox left on runc, and
    // only it: the operator recreated the instance's own class with the kata handler, and that
    // change brought a second audit that judges the new handler.
    w.cluster.putInstance({
      name: 'agent-y',
      namespace: 'team-b',
      annotations: { [SANDBOX]: '{"minRuntimeClass":"kata","enforce":true}' },
    });
    w.sync();
    await settle(clock, 5_000);
    expect(w.cluster.stored('RuntimeClass', 'kubeplus-sandbox-agent-y')?.handler).toBe('kata');
    expect(w.reports.get('team-b')).toMatchObject({
      summary: { pass: 1, fail: 1 },
      results: [
        expect.objectContaining({
          policy: 'sandbox-isolation',
          resources: [expect.objectContaining({ kind: 'Sandbox', name: 'platform' })],
        }),
      ],
    });

    // The annotation made invalid: the operator keeps the last good policies and class, and the
    // Report keeps judging by that minimum (kata, read from the kept class), and names the instance
    // and its error at once (issue 39: the Event expires, the Report stays while it is bad).
    const before = w.reports.get('team-b')?.metadata.resourceVersion;
    w.cluster.putInstance({ name: 'agent-y', namespace: 'team-b', annotations: { [SANDBOX]: '{"minRuntimeClass":' } });
    w.sync();
    await settle(clock, 5_000);
    expect(r.events.some((e) => e.reason === 'InvalidSandboxIsolation')).toBe(true);
    expect(w.cluster.stored('RuntimeClass', 'kubeplus-sandbox-agent-y')?.handler).toBe('kata');
    expect(w.reports.get('team-b')).toMatchObject({ summary: { pass: 1, fail: 1, error: 1 } });
    expect(w.reports.get('team-b')).toMatchObject({
      results: [
        {
          policy: 'sandbox-isolation',
          result: 'error',
          resources: [expect.objectContaining({ kind: 'Agent', namespace: 'team-b', name: 'agent-y' })],
        },
        expect.objectContaining({ policy: 'sandbox-isolation', result: 'fail' }),
      ],
    });
    const withError = w.reports.get('team-b')?.metadata.resourceVersion;
    expect(withError).not.toBe(before);
    // ... and no write at every period after that (an hour on).
    await settle(clock, 3_700_000);
    expect(w.reports.get('team-b')?.metadata.resourceVersion).toBe(withError);

    // Sandbox isolation removed: the Report goes at once too.
    w.cluster.putInstance({ name: 'agent-y', namespace: 'team-b', annotations: {} });
    w.sync();
    await settle(clock, 5_000);
    expect(w.reports.has('team-b')).toBe(false);
    // An unrelated change of the instance (same policy) audits nothing more.
    const lists = (await metrics(r)).match(/^kubeplus_operator_audit_sandbox_list_requests_total (\d+)$/m)?.[1];
    w.cluster.putInstance({
      name: 'agent-y',
      namespace: 'team-b',
      annotations: { note: 'unrelated' },
    });
    w.sync();
    await settle(clock, 5_000);
    expect((await metrics(r)).match(/^kubeplus_operator_audit_sandbox_list_requests_total (\d+)$/m)?.[1]).toBe(lists);
  });

  it('without the Report API: one Warning Event on the operator Pod, the gauge at 0, and the audit goes on', async () => {
    const w = world();
    w.reportsServed = false;
    const clock = new FakeClock();
    const r = replica(w, clock, testConfig('--leader-elect=false', '--audit-interval=1m'));
    await settle(clock);
    await settle(clock, 60_000);
    const warnings = r.events.filter((e) => e.reason === 'ReportsApiUnavailable');
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toMatchObject({ type: 'Warning', involvedObject: SELF });
    const text = await metrics(r);
    expect(text).toMatch(/^kubeplus_operator_reports_api_available 0$/m);
    expect(text).toMatch(/^kubeplus_operator_unisolated_pods\{missing="node_selector"\} 4$/m);
    expect(r.events.some((e) => e.reason === 'PodsNotIsolated')).toBe(true);

    w.reportsServed = true;
    await settle(clock, 60_000);
    expect(r.events.filter((e) => e.reason === 'ReportsApiAvailable')).toHaveLength(1);
    expect([...w.reports.keys()].sort()).toEqual(['manual', 'team-a', 'team-b']);
    expect(await metrics(r)).toMatch(/^kubeplus_operator_reports_api_available 1$/m);
  });

  it('a Report left by a previous leader in a namespace no longer isolated is deleted at the first period', async () => {
    const w = world();
    w.reports.set('was-isolated', {
      metadata: { resourceVersion: '1', labels: { 'app.kubernetes.io/managed-by': 'kubeplus-isolation' } },
    });
    const clock = new FakeClock();
    replica(w, clock, testConfig('--leader-elect=false', '--audit-interval=1m'));
    await settle(clock);
    expect(w.reports.has('was-isolated')).toBe(true);
    await settle(clock, 60_000);
    expect(w.reports.has('was-isolated')).toBe(false);
    expect(w.reportWrites).toContain('delete was-isolated');
    expect([...w.reports.keys()].sort()).toEqual(['manual', 'team-a', 'team-b']);
  });

  it('--reports=false writes no Report and registers no report series', async () => {
    const w = world();
    const clock = new FakeClock();
    const r = replica(w, clock, testConfig('--leader-elect=false', '--audit-interval=1m', '--reports=false'));
    await settle(clock);
    await settle(clock, 60_000);
    expect(w.reportWrites).toEqual([]);
    const text = await metrics(r);
    expect(text).not.toMatch(/kubeplus_operator_report_writes_total/);
    expect(text).toMatch(/^kubeplus_operator_unisolated_pods\{missing="node_selector"\} 4$/m);
  });
});
