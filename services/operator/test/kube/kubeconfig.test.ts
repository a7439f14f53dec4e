/**
 * PooledKubeConfig against a real HTTP server: API requests share connections (client-node
 * 2.0.1 alone opens one per request), and changed TLS material gets a new pool.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { CoreV1Api, Watch } from '@kubernetes/client-node';
import { type ApiRequestRecord, isWatchRequest } from '../../src/kube/api-requests.js';
import { PooledKubeConfig } from '../../src/kube/kubeconfig.js';

let server: Server;
let connections = 0;
let port = 0;

beforeAll(async () => {
  server = createServer((req, res) => {
    res.setHeader('content-type', 'application/json');
    if (req.url?.includes('watch=true')) {
      // A watch: one event, then open until the client goes.
      res.write(
        `${JSON.stringify({ type: 'ADDED', object: { apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'x' } } })}\n`,
      );
      return;
    }
    if (req.url?.endsWith('/missing')) {
      res.statusCode = 404;
      res.end(JSON.stringify({ apiVersion: 'v1', kind: 'Status', status: 'Failure', reason: 'NotFound', code: 404 }));
      return;
    }
    res.end(JSON.stringify({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'x' } }));
  });
  server.on('connection', () => {
    connections++;
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  port = (server.address() as AddressInfo).port;
});

afterAll(async () => {
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
});

function config(caData?: string): PooledKubeConfig {
  const kc = new PooledKubeConfig();
  kc.loadFromOptions({
    // skipTLSVerify: client-node refuses plain http otherwise; it still builds a dispatcher per request.
    clusters: [{ name: 'c', server: `http://127.0.0.1:${port}`, skipTLSVerify: true, caData }],
    users: [{ name: 'u', token: 't' }],
    contexts: [{ name: 'x', cluster: 'c', user: 'u' }],
    currentContext: 'x',
  });
  return kc;
}

describe('PooledKubeConfig', () => {
  it('reuses connections across API requests, sequential or concurrent', async () => {
    const api = config().makeApiClient(CoreV1Api);
    connections = 0;
    for (let i = 0; i < 20; i++) await api.readNamespace({ name: 'x' });
    // client-node alone: 20 (one per request). A second one may open while the first is released.
    expect(connections).toBeLessThanOrEqual(2);
    connections = 0;
    await Promise.all(Array.from({ length: 8 }, () => api.readNamespace({ name: 'x' })));
    expect(connections).toBeLessThanOrEqual(8);
    connections = 0;
    for (let i = 0; i < 20; i++) await api.readNamespace({ name: 'x' });
    expect(connections).toBe(0);
  });

  it('starts a new pool when the TLS material changes (a rotated CA file), and keeps it', async () => {
    const kc = config(Buffer.from('ca-1').toString('base64'));
    const api = kc.makeApiClient(CoreV1Api);
    await api.readNamespace({ name: 'x' });
    connections = 0;
    const cluster = kc.getCurrentCluster() as { caData?: string };
    cluster.caData = Buffer.from('ca-2').toString('base64');
    for (let i = 0; i < 5; i++) await api.readNamespace({ name: 'x' });
    expect(connections).toBeGreaterThanOrEqual(1);
    expect(connections).toBeLessThanOrEqual(2);
    connections = 0;
    for (let i = 0; i < 5; i++) await api.readNamespace({ name: 'x' });
    expect(connections).toBe(0);
  });
});

describe('API requests observed through the pool', () => {
  it('reports each request once it has ended (those before the observer, to it first): method, path without query, status, duration; a 404 as a 404', async () => {
    const kc = config();
    const api = kc.makeApiClient(CoreV1Api);
    // Made before there is an observer (as start-up discovery is): handed to the first one.
    await api.readNamespace({ name: 'early' });
    const seen: ApiRequestRecord[] = [];
    kc.observeApiRequests((r) => seen.push(r));
    await api.readNamespace({ name: 'x' });
    await expect(api.readNamespace({ name: 'missing' })).rejects.toThrow();
    await api.listNamespace({ labelSelector: 'a=b', limit: 5 });
    expect(seen.map(({ seconds, ...r }) => r)).toEqual([
      { method: 'GET', path: '/api/v1/namespaces/early', watch: false, status: 200 },
      { method: 'GET', path: '/api/v1/namespaces/x', watch: false, status: 200 },
      { method: 'GET', path: '/api/v1/namespaces/missing', watch: false, status: 404 },
      { method: 'GET', path: '/api/v1/namespaces', watch: false, status: 200 },
    ]);
    for (const r of seen) expect(r.seconds).toBeGreaterThan(0);
  });

  it('reports a watch as a watch when it ends, and a request that got no response as an error', async () => {
    const kc = config();
    const seen: ApiRequestRecord[] = [];
    kc.observeApiRequests((r) => seen.push(r));
    const events: string[] = [];
    const ended = new Promise<void>((resolve) => {
      void new Watch(kc)
        .watch(
          '/api/v1/namespaces',
          {},
          (type) => events.push(type),
          () => resolve(),
        )
        .then(async (controller) => {
          while (events.length === 0) await new Promise((r) => setTimeout(r, 10));
          controller.abort();
        });
    });
    await ended;
    expect(events).toEqual(['ADDED']);
    await new Promise((r) => setTimeout(r, 50));
    expect(seen).toEqual([
      expect.objectContaining({ method: 'GET', path: '/api/v1/namespaces', watch: true, status: 200 }),
    ]);

    // A port nothing listens on (fetch refuses port 1 before dispatching anything).
    const closed = createServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const closedPort = (closed.address() as AddressInfo).port;
    await new Promise((resolve) => closed.close(resolve));
    const unreachable = new PooledKubeConfig();
    unreachable.loadFromOptions({
      clusters: [{ name: 'c', server: `http://127.0.0.1:${closedPort}`, skipTLSVerify: true }],
      users: [{ name: 'u', token: 't' }],
      contexts: [{ name: 'x', cluster: 'c', user: 'u' }],
      currentContext: 'x',
    });
    const failed: ApiRequestRecord[] = [];
    unreachable.observeApiRequests((r) => failed.push(r));
    await expect(unreachable.makeApiClient(CoreV1Api).readNamespace({ name: 'x' })).rejects.toThrow();
    expect(failed).toEqual([
      expect.objectContaining({
        method: 'GET',
        path: '/api/v1/namespaces/x',
        status: undefined,
        error: expect.any(String),
      }),
    ]);
  });

  it('isWatchRequest: watch=true or watch=1 in the query, nothing else', () => {
    expect(isWatchRequest('/api/v1/pods?watch=true&resourceVersion=5')).toBe(true);
    expect(isWatchRequest('/api/v1/pods?allowWatchBookmarks=true&watch=1')).toBe(true);
    expect(isWatchRequest('/api/v1/pods?watch=false')).toBe(false);
    expect(isWatchRequest('/api/v1/pods?labelSelector=watch%3Dtrue')).toBe(false);
    expect(isWatchRequest('/api/v1/namespaces/watch')).toBe(false);
  });
});
