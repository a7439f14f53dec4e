import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { CoreV1Api, KubeConfig } from '@kubernetes/client-node';
import { KubeNamespaceReader } from '../../src/cache/kube-api.js';
import { FakeApiServer } from '../helpers/fake-apiserver.js';
import { namespace, TEAM_A_ANNOTATION } from '../helpers/fixtures.js';

describe('KubeNamespaceReader (against a fake API server)', () => {
  const api = new FakeApiServer();
  let reader: KubeNamespaceReader;

  beforeAll(async () => {
    await api.start();
    api.put(namespace('team-a', { annotation: TEAM_A_ANNOTATION }));
    const kc = new KubeConfig();
    kc.loadFromFile(api.kubeconfig());
    reader = new KubeNamespaceReader(kc.makeApiClient(CoreV1Api));
  });
  afterAll(() => api.stop());

  it('returns the namespace', async () => {
    const ns = await reader.read('team-a', AbortSignal.timeout(5_000));
    expect(ns?.metadata?.name).toBe('team-a');
    expect(ns?.metadata?.annotations?.['kubeplus.io/node-isolation-resolved']).toBe(TEAM_A_ANNOTATION);
    expect(api.requests).toContain('GET /api/v1/namespaces/team-a');
  });

  it('returns undefined for a namespace that does not exist (404)', async () => {
    expect(await reader.read('nope', AbortSignal.timeout(5_000))).toBeUndefined();
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
