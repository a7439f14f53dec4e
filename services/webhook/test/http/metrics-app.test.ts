/** The metrics port (http/metrics-app.ts): open without a guard; with one, only for an allowed token, over the webhook's HTTPS server. */
import { mkdtempSync } from 'node:fs';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeAll, describe, expect, it } from '@jest/globals';
import { type AccessReviewer, MetricsAccessGuard } from '@kubeplus-isolation/service';
import request from 'supertest';
import { createMetricsApp } from '../../src/http/metrics-app.js';
import { createMetrics } from '../../src/metrics.js';
import { createHttpsServer } from '../../src/tls.js';
import { type GeneratedPair, generatePair } from '../helpers/certs.js';

/** Prometheus's token may get /metrics, a tenant's may not; TokenReviews counted. */
function reviewer(): AccessReviewer & { tokenReviews: number } {
  const users: Record<string, string> = { 'prometheus-token': 'prometheus', 'tenant-token': 'tenant' };
  const r = {
    tokenReviews: 0,
    async authenticate(token: string) {
      r.tokenReviews += 1;
      const username = users[token];
      return username === undefined
        ? { authenticated: false as const, reason: 'invalid bearer token' }
        : { authenticated: true as const, user: { username, groups: [] } };
    },
    async authorize(user: { username: string }) {
      return user.username === 'prometheus' ? { allowed: true as const } : { allowed: false as const, reason: 'no' };
    },
  };
  return r;
}

describe('createMetricsApp', () => {
  it('without a guard: /metrics for anyone, 404 elsewhere', async () => {
    const app = createMetricsApp({ registry: createMetrics().registry });
    const res = await request(app).get('/metrics');
    expect(res.status).toBe(200);
    expect(res.headers['content-type']).toMatch(/text\/plain/);
    expect(res.text).toContain('kubeplus_webhook_admissions_total{result="failopen"} 0');
    const other = await request(app).get('/healthz');
    expect(other.status).toBe(404);
    expect(other.body).toEqual({ error: 'not_found', message: 'no route for GET /healthz; metrics are at /metrics' });
  });

  it('with a guard: 401 without or with an unknown token, 403 unless allowed, 200 for the allowed user (then cached)', async () => {
    const r = reviewer();
    const app = createMetricsApp({
      registry: createMetrics().registry,
      guard: new MetricsAccessGuard({ reviewer: r }),
    });
    const none = await request(app).get('/metrics');
    expect(none.status).toBe(401);
    expect(none.headers['www-authenticate']).toBe('Bearer realm="metrics"');
    expect(none.body).toEqual({
      error: 'unauthorized',
      message: 'a bearer token is required (Authorization: Bearer <token>)',
    });
    expect((await request(app).get('/metrics').set('Authorization', 'Bearer made-up')).status).toBe(401);
    const tenant = await request(app).get('/metrics').set('Authorization', 'Bearer tenant-token');
    expect(tenant.status).toBe(403);
    expect(tenant.body.error).toBe('forbidden');
    expect(tenant.text).not.toContain('kubeplus_webhook');
    for (let i = 0; i < 3; i++) {
      const ok = await request(app).get('/metrics').set('Authorization', 'Bearer prometheus-token');
      expect(ok.status).toBe(200);
      expect(ok.text).toContain('kubeplus_webhook_admissions_total');
    }
    expect(r.tokenReviews).toBe(3);
  });
});

describe('secure metrics over the webhook’s HTTPS server', () => {
  let pair: GeneratedPair;
  let server: https.Server | undefined;

  beforeAll(async () => {
    pair = await generatePair(join(mkdtempSync(join(tmpdir(), 'webhook-metrics-')), 'tls'), 'webhook');
  });

  afterEach(async () => {
    server?.closeAllConnections();
    await new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve()));
    server = undefined;
  });

  function get(port: number, token?: string): Promise<{ status: number; body: string }> {
    return new Promise((resolve, reject) => {
      https
        .get(
          `https://127.0.0.1:${port}/metrics`,
          { ca: pair.cert, agent: false, headers: token === undefined ? {} : { Authorization: `Bearer ${token}` } },
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

  it('serves the guarded app with the serving certificate (createHttpsServer, TLS 1.2+)', async () => {
    const app = createMetricsApp({
      registry: createMetrics().registry,
      guard: new MetricsAccessGuard({ reviewer: reviewer() }),
    });
    server = createHttpsServer(app, { cert: pair.cert, key: pair.key });
    await new Promise<void>((resolve) => server?.listen(0, '127.0.0.1', resolve));
    const port = (server.address() as AddressInfo).port;
    expect((await get(port)).status).toBe(401);
    expect((await get(port, 'tenant-token')).status).toBe(403);
    const ok = await get(port, 'prometheus-token');
    expect(ok.status).toBe(200);
    expect(ok.body).toContain('kubeplus_webhook_admissions_total');
  });
});
