import { mkdtempSync } from 'node:fs';
import http from 'node:http';
import type https from 'node:https';
import type { AddressInfo } from 'node:net';
import { Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { NamespaceCache } from '../../src/cache/namespace-cache.js';
import { IsolationResolver } from '../../src/cache/resolver.js';
import { createWebhookApp } from '../../src/http/app.js';
import { BodyBudget, defaultBodyBudget } from '../../src/http/body-budget.js';
import { expressMessageClasses } from '../../src/http/express-messages.js';
import { createLogger } from '../../src/log.js';
import { createMetrics } from '../../src/metrics.js';
import { createHttpsServer, type KeyPair, loadKeyPair } from '../../src/tls.js';
import { generatePair } from '../helpers/certs.js';
import { decodePatch, namespace, review, TEAM_A_ANNOTATION } from '../helpers/fixtures.js';
import { httpsJson, type JsonResponse } from '../helpers/https-client.js';

function webhookApp() {
  const cache = new NamespaceCache();
  cache.upsert(namespace('team-a', { annotation: TEAM_A_ANNOTATION }));
  return createWebhookApp({
    resolve: (ns) =>
      new IsolationResolver(cache, { read: async () => undefined }, { liveLookupTimeoutMs: 50 }).resolve(ns),
    readiness: () => ({ ready: true }),
    metrics: createMetrics({ defaultMetrics: false, sources: { cacheCounts: () => cache.counts() } }),
    logger: createLogger({ level: 'error', silent: true }),
    maxBodyBytes: 1024 * 1024,
    budget: new BodyBudget(defaultBodyBudget(1024 * 1024)),
    bodyReadTimeoutMs: 5_000,
  });
}

describe('expressMessageClasses', () => {
  it("constructs requests and responses with express's prototypes, still node:http's classes", () => {
    const app = webhookApp();
    const { IncomingMessage, ServerResponse } = expressMessageClasses(app);
    const req = new IncomingMessage(new Socket());
    const res = new ServerResponse(req);
    expect(Object.getPrototypeOf(req)).toBe(app.request);
    expect(Object.getPrototypeOf(res)).toBe(app.response);
    expect(req).toBeInstanceOf(http.IncomingMessage);
    expect(res).toBeInstanceOf(http.ServerResponse);
    expect(req.headers).toEqual({}); // node's constructor ran
  });
});

describe('the webhook app served by createHttpsServer with and without them', () => {
  let pair: KeyPair;
  const servers: https.Server[] = [];

  beforeAll(async () => {
    const files = await generatePair(mkdtempSync(join(tmpdir(), 'express-messages-')), 'webhook');
    pair = loadKeyPair(files);
  });
  afterAll(async () => {
    await Promise.all(servers.map((s) => new Promise((r) => s.close(r))));
  });

  /** Serves a fresh webhook app; records whether each request arrived with express's prototype already. */
  async function serve(withClasses: boolean): Promise<{ port: number; bornExpress: boolean[] }> {
    const app = webhookApp();
    const server = createHttpsServer(app, pair, withClasses ? expressMessageClasses(app) : undefined);
    servers.push(server);
    const bornExpress: boolean[] = [];
    // Runs before express's app.handle (the server's first 'request' listener) switches prototypes.
    server.prependListener('request', (req, res) => {
      bornExpress.push(Object.getPrototypeOf(req) === app.request && Object.getPrototypeOf(res) === app.response);
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    return { port: (server.address() as AddressInfo).port, bornExpress };
  }

  async function exchange(port: number): Promise<JsonResponse[]> {
    return [
      await httpsJson(port, 'POST', '/mutate/pods', review()),
      await httpsJson(port, 'POST', '/mutate/pods', { kind: 'Pod' }),
      await httpsJson(port, 'GET', '/healthz'),
      await httpsJson(port, 'GET', '/nowhere'),
    ];
  }

  it('answers every route the same, and only with them are requests born with express’s prototypes', async () => {
    const plain = await serve(false);
    const born = await serve(true);
    const strip = (r: JsonResponse) => ({ status: r.status, type: r.headers['content-type'], body: r.body });
    const [a, b] = [(await exchange(plain.port)).map(strip), (await exchange(born.port)).map(strip)];
    expect(b).toEqual(a);
    expect(a.map((r) => r.status)).toEqual([200, 400, 200, 404]);
    const first = a[0]?.body as { response?: { patch?: string } } | undefined;
    const patch = decodePatch(first?.response?.patch ?? '');
    expect(patch).toEqual(expect.arrayContaining([expect.objectContaining({ path: '/spec/nodeSelector' })]));
    expect(plain.bornExpress).toEqual([false, false, false, false]);
    expect(born.bornExpress).toEqual([true, true, true, true]);
  });
});
