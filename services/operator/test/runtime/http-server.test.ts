import { mkdtempSync, writeFileSync } from 'node:fs';
import https from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TLSSocket } from 'node:tls';
import { describe, expect, it } from '@jest/globals';
import { type AccessReviewer, MetricsAccessGuard } from '@kubeplus-isolation/service';
import request from 'supertest';
import { createHttpApp, EventLoopMonitor, runChecks, startHttpServer } from '../../src/runtime/http-server.js';
import { loadKeyPair, metricsTls, selfSignedPair } from '../../src/runtime/metrics-tls.js';
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

  it('declares further controllers and resources after creation, each series at 0, still refusing bad values', async () => {
    const m = metrics();
    expect(() => m.workQueue('owned-objects')).toThrow(/undeclared controller/);
    m.declare({ controllers: ['owned-objects', 'node-isolation'], resources: ['runtimeclasses'] });
    m.workQueue('owned-objects').add();
    m.trackInformer('runtimeclasses', { hasSynced: () => true, isStale: () => false });
    const text = await scrape(m);
    expect(text).toContain('kubeplus_operator_reconcile_total{controller="owned-objects",result="error"} 0');
    expect(text).toContain('kubeplus_operator_workqueue_adds_total{controller="owned-objects"} 1');
    expect(text).toContain('kubeplus_operator_informer_synced{resource="runtimeclasses"} 1');
    expect(() => m.declare({ resources: ['Bad Name'] })).toThrow(/invalid resource/);
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

/** Prometheus's token is allowed to get /metrics, a tenant's is not; every TokenReview counted. */
function reviewer(): AccessReviewer & { tokenReviews: number } {
  const users: Record<string, string> = { 'prometheus-token': 'prometheus', 'tenant-token': 'tenant' };
  const r = {
    tokenReviews: 0,
    async authenticate(token: string) {
      r.tokenReviews += 1;
      const username = users[token];
      return username === undefined
        ? { authenticated: false as const, reason: 'invalid' }
        : { authenticated: true as const, user: { username, groups: [] } };
    },
    async authorize(user: { username: string }) {
      return user.username === 'prometheus' ? { allowed: true as const } : { allowed: false as const, reason: 'no' };
    },
  };
  return r;
}

/** GET over HTTPS trusting `ca` (or nothing verified), with the server's certificate. */
function httpsGet(
  url: string,
  options: { ca?: string; servername?: string; token?: string; maxVersion?: 'TLSv1.1' } = {},
): Promise<{ status: number; body: string; fingerprint: string | undefined }> {
  return new Promise((resolve, reject) => {
    const req = https.get(
      url,
      {
        ...(options.ca === undefined ? { rejectUnauthorized: false } : { ca: options.ca }),
        ...(options.servername === undefined ? {} : { servername: options.servername }),
        ...(options.maxVersion === undefined ? {} : { maxVersion: options.maxVersion, minVersion: 'TLSv1' }),
        headers: options.token === undefined ? {} : { Authorization: `Bearer ${options.token}` },
        agent: false,
      },
      (res) => {
        const fingerprint = (res.socket as TLSSocket).getPeerCertificate().fingerprint256;
        let body = '';
        res.on('data', (c: Buffer) => {
          body += c.toString();
        });
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body, fingerprint }));
      },
    );
    req.on('error', reject);
  });
}

describe('secure metrics (--metrics-secure)', () => {
  it('/metrics needs an allowed bearer token; the probes stay open', async () => {
    const r = reviewer();
    const app = createHttpApp({
      registry: metrics().registry,
      metricsGuard: new MetricsAccessGuard({ reviewer: r }),
      readiness: [{ name: 'informers', check: () => ({ ok: true }) }],
    });
    const none = await request(app).get('/metrics');
    expect(none.status).toBe(401);
    expect(none.headers['www-authenticate']).toBe('Bearer realm="metrics"');
    expect(none.body).toEqual({
      error: 'unauthorized',
      message: 'a bearer token is required (Authorization: Bearer <token>)',
    });
    const bad = await request(app).get('/metrics').set('Authorization', 'Bearer made-up');
    expect(bad.status).toBe(401);
    expect(bad.body.error).toBe('unauthorized');
    const tenant = await request(app).get('/metrics').set('Authorization', 'Bearer tenant-token');
    expect(tenant.status).toBe(403);
    expect(tenant.body.error).toBe('forbidden');
    expect(tenant.text).not.toContain('kubeplus_operator');
    for (let i = 0; i < 2; i++) {
      const ok = await request(app).get('/metrics').set('Authorization', 'Bearer prometheus-token');
      expect(ok.status).toBe(200);
      expect(ok.text).toContain('# TYPE kubeplus_operator_reconcile_total counter');
    }
    // The second scrape was answered from the cache.
    expect(r.tokenReviews).toBe(3);
    expect((await request(app).get('/healthz')).status).toBe(200);
    expect((await request(app).get('/readyz')).status).toBe(200);
  });

  it('serves HTTPS (TLS 1.2+) with a self-signed certificate for localhost and 127.0.0.1', async () => {
    const tls = await metricsTls();
    expect(tls.source).toBe('self-signed');
    const server = await startHttpServer(createHttpApp({ registry: metrics().registry }), {
      port: 0,
      host: '127.0.0.1',
      tls,
    });
    try {
      const url = `https://127.0.0.1:${server.port}/healthz`;
      // Verified against its own chain (the throwaway CA is sent with it), by IP and by name.
      expect((await httpsGet(url, { ca: tls.pair.cert })).status).toBe(200);
      expect((await httpsGet(url, { ca: tls.pair.cert, servername: 'localhost' })).status).toBe(200);
      await expect(httpsGet(url, { ca: tls.pair.cert, servername: 'elsewhere.example' })).rejects.toThrow();
      await expect(httpsGet(url, { maxVersion: 'TLSv1.1' })).rejects.toThrow();
      await expect(fetch(`http://127.0.0.1:${server.port}/healthz`)).rejects.toThrow();
    } finally {
      await server.close();
    }
  });

  it('a provided pair is served, checked, and reloaded without restart when its files change', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'operator-metrics-tls-'));
    const files = { certFile: join(dir, 'tls.crt'), keyFile: join(dir, 'tls.key') };
    const first = await selfSignedPair();
    const second = await selfSignedPair();
    writeFileSync(files.certFile, first.cert);
    writeFileSync(files.keyFile, first.key);
    const tls = await metricsTls({ files, reloadIntervalMs: 20 });
    expect(tls.source).toBe('files');
    const server = await startHttpServer(createHttpApp({ registry: metrics().registry }), {
      port: 0,
      host: '127.0.0.1',
      tls,
    });
    try {
      const url = `https://127.0.0.1:${server.port}/healthz`;
      const before = (await httpsGet(url)).fingerprint;
      // A mismatched pair is refused and the previous one kept...
      writeFileSync(files.keyFile, second.key);
      await new Promise((r) => setTimeout(r, 100));
      expect((await httpsGet(url)).fingerprint).toBe(before);
      // ...until the certificate that goes with the key arrives.
      writeFileSync(files.certFile, second.cert);
      let after = before;
      for (let i = 0; i < 100 && after === before; i++) {
        await new Promise((r) => setTimeout(r, 20));
        after = (await httpsGet(url)).fingerprint;
      }
      expect(after).not.toBe(before);
      expect((await httpsGet(url, { ca: second.cert })).status).toBe(200);
    } finally {
      await server.close();
    }
    writeFileSync(files.certFile, 'not a certificate');
    await expect(loadKeyPair(files)).rejects.toThrow(/are not a valid pair/);
    await expect(loadKeyPair({ ...files, certFile: join(dir, 'missing.crt') })).rejects.toThrow(
      /cannot read the metrics certificate file/,
    );
  });
});
