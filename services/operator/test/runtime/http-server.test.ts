import { describe, expect, it } from '@jest/globals';
import request from 'supertest';
import { createHttpApp, EventLoopMonitor, runChecks, startHttpServer } from '../../src/runtime/http-server.js';
import { createOperatorMetrics } from '../../src/runtime/runtime-metrics.js';
import { WorkQueue } from '../../src/runtime/work-queue.js';
import { FakeClock } from './fakes.js';

const ANNOTATIONS = ['kubeplus.io/node-isolation', 'kubeplus.io/sandbox-isolation'];

function metrics(defaultMetrics = false) {
  return createOperatorMetrics({
    controllers: ['node-isolation', 'sandbox-isolation'],
    resources: ['namespaces', 'instances'],
    annotations: ANNOTATIONS,
    defaultMetrics,
  });
}

async function scrape(m: ReturnType<typeof metrics>): Promise<string> {
  return m.registry.metrics();
}

describe('operator metrics', () => {
  it('initialises every declared series to 0 so rate() works from the first scrape', async () => {
    const text = await scrape(metrics());
    for (const result of ['success', 'error', 'requeue']) {
      expect(text).toContain(`kubeplus_operator_reconcile_total{controller="node-isolation",result="${result}"} 0`);
    }
    expect(text).toContain('kubeplus_operator_workqueue_depth{controller="sandbox-isolation"} 0');
    expect(text).toContain('kubeplus_operator_workqueue_retries_total{controller="node-isolation"} 0');
    expect(text).toContain('kubeplus_operator_invalid_annotations_total{annotation="kubeplus.io/node-isolation"} 0');
    expect(text).toContain('kubeplus_operator_leader 0');
    expect(text).toContain('kubeplus_operator_reconcile_duration_seconds_count{controller="node-isolation"} 0');
  });

  it('counts reconciles by result and observes their duration', async () => {
    const m = metrics();
    m.observeReconcile('node-isolation', 'success', 0.2);
    m.observeReconcile('node-isolation', 'success', 0.3);
    m.observeReconcile('node-isolation', 'error', 1.5);
    const text = await scrape(m);
    expect(text).toContain('kubeplus_operator_reconcile_total{controller="node-isolation",result="success"} 2');
    expect(text).toContain('kubeplus_operator_reconcile_total{controller="node-isolation",result="error"} 1');
    expect(text).toContain('kubeplus_operator_reconcile_duration_seconds_sum{controller="node-isolation"} 2');
    expect(text).toContain('kubeplus_operator_reconcile_duration_seconds_count{controller="node-isolation"} 3');
  });

  it('refuses label values that were not declared, so user data can never become a label', () => {
    const m = metrics();
    expect(() => m.observeReconcile('team-a/agent-x', 'success', 1)).toThrow(/undeclared controller/);
    expect(() => m.workQueue('nope')).toThrow(/undeclared controller/);
    expect(() => m.invalidAnnotation('user.example/anything')).toThrow(/undeclared annotation/);
    expect(() => m.trackInformer('cloudark.io/v1/agents', { hasSynced: () => true, isStale: () => false })).toThrow(
      /undeclared resource/,
    );
    expect(() =>
      createOperatorMetrics({ controllers: ['Bad Name'], resources: [], annotations: [], defaultMetrics: false }),
    ).toThrow(/invalid controller/);
  });

  it('reports leadership, invalid annotations and informer sync state', async () => {
    const m = metrics();
    let synced = false;
    m.trackInformer('namespaces', { hasSynced: () => synced, isStale: () => false });
    m.trackInformer('instances', { hasSynced: () => true, isStale: () => true });
    m.setLeader(true);
    m.invalidAnnotation('kubeplus.io/sandbox-isolation');
    let text = await scrape(m);
    expect(text).toContain('kubeplus_operator_leader 1');
    expect(text).toContain('kubeplus_operator_invalid_annotations_total{annotation="kubeplus.io/sandbox-isolation"} 1');
    expect(text).toContain('kubeplus_operator_informer_synced{resource="namespaces"} 0');
    expect(text).toContain('kubeplus_operator_informer_synced{resource="instances"} 0'); // stale
    synced = true;
    text = await scrape(m);
    expect(text).toContain('kubeplus_operator_informer_synced{resource="namespaces"} 1');
  });

  it('exports a work queue’s depth, adds, retries, work duration and longest running item', async () => {
    const m = metrics();
    const clock = new FakeClock();
    const queue = new WorkQueue({ clock, metrics: m.workQueue('node-isolation') });
    queue.add('a');
    queue.add('b');
    queue.add('a');
    await queue.get();
    await clock.advance(3000);
    queue.addRateLimited('c');
    let text = await scrape(m);
    expect(text).toContain('kubeplus_operator_workqueue_depth{controller="node-isolation"} 1');
    expect(text).toContain('kubeplus_operator_workqueue_adds_total{controller="node-isolation"} 2');
    expect(text).toContain('kubeplus_operator_workqueue_retries_total{controller="node-isolation"} 1');
    expect(text).toContain(
      'kubeplus_operator_workqueue_longest_running_processor_seconds{controller="node-isolation"} 3',
    );
    queue.done('a');
    text = await scrape(m);
    expect(text).toContain('kubeplus_operator_workqueue_work_duration_seconds_sum{controller="node-isolation"} 3');
  });

  it('includes the default process metrics when asked', async () => {
    const text = await scrape(metrics(true));
    expect(text).toContain('process_cpu_user_seconds_total');
    expect(text).toContain('nodejs_eventloop_lag_seconds');
  });
});

describe('runChecks', () => {
  it('fails when any check fails or throws', () => {
    const report = runChecks([
      { name: 'ok', check: () => ({ ok: true }) },
      {
        name: 'boom',
        check: () => {
          throw new Error('broken check');
        },
      },
    ]);
    expect(report.ok).toBe(false);
    expect(report.checks.boom).toEqual({ ok: false, message: 'check threw: broken check' });
  });
});

describe('HTTP app', () => {
  it('serves /metrics in the Prometheus text format', async () => {
    const m = metrics();
    const res = await request(createHttpApp({ registry: m.registry })).get('/metrics');
    expect(res.status).toBe(200);
    expect(res.headers['content-type']).toContain('text/plain');
    expect(res.text).toContain('# TYPE kubeplus_operator_reconcile_total counter');
  });

  it('/readyz reports the readiness checks, with 503 and the failing reasons until they pass', async () => {
    let synced = false;
    const app = createHttpApp({
      registry: metrics().registry,
      readiness: [
        { name: 'informers', check: () => ({ ok: synced, message: synced ? 'synced' : 'not synced: namespaces' }) },
      ],
    });
    let res = await request(app).get('/readyz');
    expect(res.status).toBe(503);
    expect(res.body).toEqual({
      status: 'fail',
      checks: { informers: { ok: false, message: 'not synced: namespaces' } },
    });
    synced = true;
    res = await request(app).get('/readyz');
    expect(res.status).toBe(200);
    expect(res.body.status).toBe('ok');
  });

  it('/healthz fails after the event loop was blocked and recovers on the next on-time heartbeat', async () => {
    const clock = new FakeClock();
    const monitor = new EventLoopMonitor({ clock, intervalMs: 1000, maxLagMs: 5000 });
    monitor.start();
    const app = createHttpApp({ registry: metrics().registry, liveness: [monitor.healthCheck()] });
    await clock.advance(3000);
    expect((await request(app).get('/healthz')).status).toBe(200);
    clock.jump(7000); // the loop was blocked for 7s: the heartbeat fires 7s late
    await clock.advance(0);
    const res = await request(app).get('/healthz');
    expect(res.status).toBe(503);
    expect(res.body.checks['event-loop'].message).toMatch(/blocked for \d+ms/);
    await clock.advance(1000);
    expect((await request(app).get('/healthz')).status).toBe(200);
    monitor.stop();
    expect(clock.pendingTimers()).toBe(0);
  });

  it('answers unknown paths with a JSON 404', async () => {
    const res = await request(createHttpApp({ registry: metrics().registry })).get('/nope');
    expect(res.status).toBe(404);
    expect(res.body).toEqual({ status: 'fail', error: 'not found' });
  });

  it('starts on a free loopback port and closes', async () => {
    const server = await startHttpServer(createHttpApp({ registry: metrics().registry }), {
      port: 0,
      host: '127.0.0.1',
    });
    const res = await fetch(`http://127.0.0.1:${server.port}/healthz`);
    expect(res.status).toBe(200);
    await server.close();
    await expect(fetch(`http://127.0.0.1:${server.port}/healthz`)).rejects.toThrow();
  });
});
