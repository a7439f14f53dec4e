/**
 * PooledKubeConfig against a real HTTP server: API requests share connections (client-node
 * 2.0.1 alone opens one per request), and changed TLS material gets a new pool.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { CoreV1Api, type KubeConfig } from '@kubernetes/client-node';
import { PooledKubeConfig } from '../../src/kube/kubeconfig.js';

let server: Server;
let connections = 0;
let port = 0;

beforeAll(async () => {
  server = createServer((_req, res) => {
    res.setHeader('content-type', 'application/json');
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

function config(caData?: string): KubeConfig {
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
