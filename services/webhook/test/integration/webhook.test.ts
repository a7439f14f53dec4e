import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it, jest } from '@jest/globals';
import { parseConfig } from '../../src/config.js';
import { KubeClient } from '../../src/kube/client.js';
import { kubeconfigConnection } from '../../src/kube/connection.js';
import { createLogger } from '../../src/log.js';
import { type RunningWebhook, startWebhook } from '../../src/webhook.js';
import { generatePair } from '../helpers/certs.js';
import { FakeApiServer } from '../helpers/fake-apiserver.js';
import { decodePatch, namespace, review, TEAM_A, TEAM_A_ANNOTATION } from '../helpers/fixtures.js';
import { eventually, httpsJson } from '../helpers/https-client.js';

// Real sockets and TLS on a shared 2-core machine: generous per-test bounds.
jest.setTimeout(30_000);

interface ReviewBody {
  response: { allowed: boolean; patchType?: string; patch?: string; warnings?: string[] };
}

describe('startWebhook wired to a (fake) API server over real TLS', () => {
  let api: FakeApiServer;
  let client: KubeClient;
  let webhook: RunningWebhook;
  let port: number;

  beforeAll(async () => {
    api = new FakeApiServer({
      tls: await generatePair(mkdtempSync(join(tmpdir(), 'webhook-it-api-')), 'apiserver'),
      token: 'webhook-token',
    });
    await api.start();
    api.put(namespace('team-a', { annotation: TEAM_A_ANNOTATION }));
    api.put(namespace('unrelated', { labeled: false }));
    const pair = await generatePair(mkdtempSync(join(tmpdir(), 'webhook-it-')), 'webhook');
    const parsed = parseConfig(
      [
        '--port=0',
        '--metrics-port=0',
        // Read over plain HTTP below; secure metrics: test/http/metrics-app.test.ts.
        '--metrics-secure=false',
        '--bind-address=127.0.0.1',
        `--tls-cert-file=${pair.certFile}`,
        `--tls-key-file=${pair.keyFile}`,
        '--shutdown-delay=200ms',
        '--shutdown-timeout=2s',
      ],
      {},
    );
    if (parsed.kind !== 'config') throw new Error('config');
    client = new KubeClient(await kubeconfigConnection(api.kubeconfig()));
    webhook = await startWebhook(parsed.config, client, createLogger({ level: 'error', silent: true }));
    port = webhook.ports().port;
  });

  afterAll(async () => {
    await webhook.shutdown();
    client.close();
    await api.stop();
  });

  const admit = async (ns: string): Promise<ReviewBody> =>
    (await httpsJson(port, 'POST', '/mutate/pods?timeout=5s', review({ namespace: ns }))).body as ReviewBody;

  it('becomes ready once both informers have listed and are watching labeled namespaces only', async () => {
    await eventually(async () => (await httpsJson(port, 'GET', '/readyz')).status === 200, 'readiness');
    expect(
      api.requests.some((r) =>
        r.startsWith('GET /api/v1/namespaces?labelSelector=kubeplus.io%2Fnode-isolation-enabled%3Dtrue'),
      ),
    ).toBe(true);
    // The hold's informer: KubePlus's namespaces only.
    expect(api.requests.some((r) => r.startsWith('GET /api/v1/namespaces?labelSelector=managedby%3Dkubeplus'))).toBe(
      true,
    );
    await eventually(async () => api.watcherCount === 2, 'two watches');
  });

  it('patches a Pod in a namespace from the initial list', async () => {
    const res = await admit('team-a');
    expect(res.response.patchType).toBe('JSONPatch');
    expect(decodePatch(res.response.patch ?? '')).toEqual(
      expect.arrayContaining([{ op: 'add', path: '/spec/nodeSelector', value: TEAM_A.nodeSelector }]),
    );
  });

  it('follows watch events: a namespace labeled later is patched, an annotation change is applied', async () => {
    api.put(namespace('team-b', { annotation: JSON.stringify({ nodeSelector: { pool: 'b' }, tolerations: [] }) }));
    await eventually(async () => (await admit('team-b')).response.patchType === 'JSONPatch', 'team-b patched');
    api.put(namespace('team-b', { annotation: JSON.stringify({ nodeSelector: { pool: 'b2' }, tolerations: [] }) }));
    await eventually(
      async () => JSON.stringify(decodePatch((await admit('team-b')).response.patch ?? 'bnVsbA==')).includes('b2'),
      'team-b updated',
    );
  });

  it('a namespace the watch has not delivered yet is found by a live GET', async () => {
    api.put(namespace('team-c', { annotation: TEAM_A_ANNOTATION }), { announce: false });
    expect((await admit('team-c')).response.patchType).toBe('JSONPatch');
    expect(api.requests).toContain('GET /api/v1/namespaces/team-c');
  });

  it('fails open, with a warning, for a namespace that does not exist', async () => {
    const res = await admit('ghost');
    expect(res.response.allowed).toBe(true);
    expect(res.response.patch).toBeUndefined();
    expect(res.response.warnings?.[0]).toContain('namespace_not_found');
  });

  it('exposes metrics on the plain-HTTP port', async () => {
    const res = await fetch(`http://127.0.0.1:${webhook.ports().metricsPort}/metrics`);
    const text = await res.text();
    expect(text).toMatch(/kubeplus_webhook_informer_synced 1/);
    expect(text).toMatch(/kubeplus_webhook_live_lookups_total\{result="found"\} 1/);
    expect(text).toMatch(/kubeplus_webhook_tls_certificate_expiry_timestamp_seconds \d{10}/);
  });

  it('on shutdown: unready but still admitting during the delay, then refuses connections', async () => {
    const stopping = webhook.shutdown();
    const ready = await httpsJson(port, 'GET', '/readyz');
    expect(ready.status).toBe(503);
    expect((await admit('team-a')).response.patchType).toBe('JSONPatch');
    await stopping;
    await expect(httpsJson(port, 'GET', '/healthz')).rejects.toMatchObject({ code: 'ECONNREFUSED' });
  });
});
