/** The live GET of one namespace (KubeNamespaceReader) against a fake HTTPS API server. */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { KubeNamespaceReader } from '../../src/cache/namespace-reader.js';
import { KubeApiError, KubeClient } from '../../src/kube/client.js';
import { kubeconfigConnection } from '../../src/kube/connection.js';
import { generatePair } from '../helpers/certs.js';
import { FakeApiServer } from '../helpers/fake-apiserver.js';
import { namespace, TEAM_A_ANNOTATION } from '../helpers/fixtures.js';

describe('KubeNamespaceReader (against a fake HTTPS API server)', () => {
  let api: FakeApiServer;
  let client: KubeClient;
  let reader: KubeNamespaceReader;

  beforeAll(async () => {
    api = new FakeApiServer({
      tls: await generatePair(mkdtempSync(join(tmpdir(), 'kube-api-')), 'apiserver'),
      token: 't',
    });
    await api.start();
    api.put(namespace('team-a', { annotation: TEAM_A_ANNOTATION }));
    client = new KubeClient(await kubeconfigConnection(api.kubeconfig()));
    reader = new KubeNamespaceReader(client);
  });
  afterAll(async () => {
    client.close();
    await api.stop();
  });

  it('returns the namespace', async () => {
    const ns = await reader.read('team-a', AbortSignal.timeout(5_000));
    expect(ns?.metadata?.name).toBe('team-a');
    expect(ns?.metadata?.annotations?.['kubeplus.io/node-isolation-resolved']).toBe(TEAM_A_ANNOTATION);
    expect(api.requests).toContain('GET /api/v1/namespaces/team-a');
  });

  it('returns undefined for a namespace that does not exist (404)', async () => {
    expect(await reader.read('nope', AbortSignal.timeout(5_000))).toBeUndefined();
  });

  it('rejects on any other answer (403, 401)', async () => {
    api.token = 'other';
    try {
      const err = await reader.read('team-a', AbortSignal.timeout(5_000)).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(KubeApiError);
      expect(err).toMatchObject({ statusCode: 401 });
    } finally {
      api.token = 't';
    }
  });

  it('aborts the HTTP request when the signal fires', async () => {
    api.getDelayMs = 2_000;
    try {
      const controller = new AbortController();
      const pending = reader.read('team-a', controller.signal);
      setTimeout(() => controller.abort(new Error('deadline passed')), 50);
      await expect(pending).rejects.toThrow('deadline passed');
      expect(api.requests.filter((r) => r === 'GET /api/v1/namespaces/team-a').length).toBeGreaterThan(0);
    } finally {
      api.getDelayMs = 0;
    }
  });
});
