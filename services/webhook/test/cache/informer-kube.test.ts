/** createNamespaceInformer (client-node ListWatch, slim objects, paged list) against a fake API server. */
import { afterAll, afterEach, beforeAll, describe, expect, it, jest } from '@jest/globals';
import { KubeConfig } from '@kubernetes/client-node';
import {
  createNamespaceInformer,
  type InformerLike,
  LIST_PAGE_SIZE,
  type SlimNamespace,
  slimNamespace,
} from '../../src/cache/informer.js';
import { FakeApiServer } from '../helpers/fake-apiserver.js';
import { namespace, TEAM_A_ANNOTATION } from '../helpers/fixtures.js';
import { eventually } from '../helpers/https-client.js';

/** A namespace as a real API server returns it: managedFields, status, others' labels and annotations. */
function fullNamespace(name: string) {
  const ns = namespace(name, { annotation: TEAM_A_ANNOTATION });
  return {
    ...ns,
    metadata: {
      ...ns.metadata,
      uid: `uid-${name}`,
      creationTimestamp: '2026-01-01T00:00:00Z',
      labels: { ...ns.metadata.labels, team: 'a' },
      annotations: { ...ns.metadata.annotations, 'example.com/notes': 'x'.repeat(200) },
      managedFields: [
        { manager: 'kubectl', operation: 'Update', fieldsType: 'FieldsV1', fieldsV1: { 'f:metadata': {} } },
      ],
    },
    spec: { finalizers: ['kubernetes'] },
    status: { phase: 'Active' },
  };
}

// Real sockets on a shared 2-core machine: generous per-test bounds.
jest.setTimeout(30_000);

const SLIM_KEYS = ['annotations', 'labels', 'name', 'resourceVersion'];

describe('slimNamespace', () => {
  it('keeps name, resourceVersion, the isolation label and the resolved annotation only', () => {
    const slim = slimNamespace(fullNamespace('team-a'));
    expect(slim).toEqual({
      metadata: {
        name: 'team-a',
        resourceVersion: '1',
        labels: { 'kubeplus.io/node-isolation-enabled': 'true' },
        annotations: { 'kubeplus.io/node-isolation-resolved': TEAM_A_ANNOTATION },
      },
    });
    expect(slimNamespace({ metadata: { name: 'plain' } })).toEqual({ metadata: { name: 'plain' } });
  });
});

describe('createNamespaceInformer (against a fake API server)', () => {
  const api = new FakeApiServer();
  let kc: KubeConfig;
  let informer: InformerLike<SlimNamespace> | undefined;

  beforeAll(async () => {
    await api.start();
    kc = new KubeConfig();
    kc.loadFromFile(api.kubeconfig());
  });
  afterEach(async () => {
    await informer?.stop();
    informer = undefined;
  });
  afterAll(() => api.stop());

  function start() {
    const events: Array<{ verb: string; ns: SlimNamespace }> = [];
    let connects = 0;
    const i = createNamespaceInformer(kc, { connected: () => connects++, closed: () => undefined });
    for (const verb of ['add', 'update', 'delete'] as const) i.on(verb, (ns) => events.push({ verb, ns }));
    i.on('error', (e) => events.push({ verb: 'error', ns: { metadata: { name: String(e) } } }));
    informer = i;
    void i.start();
    return { events, connects: () => connects };
  }

  it('lists in pages, then watches; every object it delivers is slim', async () => {
    const count = LIST_PAGE_SIZE * 2 + 7;
    for (let i = 0; i < count; i++) api.put(fullNamespace(`ns-${i}`), { announce: false });
    api.put(namespace('unlabeled', { labeled: false }), { announce: false });
    api.requests.length = 0;
    const { events, connects } = start();
    await eventually(async () => connects() === 1, 'the watch');
    const lists = api.requests.filter((r) => r.startsWith('GET /api/v1/namespaces?') && !r.includes('watch=true'));
    expect(lists).toHaveLength(3);
    for (const r of lists) expect(r).toContain(`limit=${LIST_PAGE_SIZE}`);
    expect(events.filter((e) => e.verb === 'add')).toHaveLength(count);
    api.put(fullNamespace('late'));
    await eventually(async () => events.some((e) => e.ns.metadata.name === 'late'), 'the watch event');
    for (const { ns } of events) {
      expect(Object.keys(ns)).toEqual(['metadata']);
      expect(Object.keys(ns.metadata).sort()).toEqual(SLIM_KEYS);
      expect(Object.keys(ns.metadata.labels ?? {})).toEqual(['kubeplus.io/node-isolation-enabled']);
    }
    for (let i = 0; i < count; i++) api.delete(`ns-${i}`, { announce: false });
    api.delete('late', { announce: false });
  });

  it('delivers deletions seen by the watch and, after a relist, deletions it missed', async () => {
    api.put(fullNamespace('keep'), { announce: false });
    api.put(fullNamespace('gone-while-watching'), { announce: false });
    api.put(fullNamespace('gone-unseen'), { announce: false });
    const { events, connects } = start();
    await eventually(async () => connects() === 1, 'the watch');
    api.delete('gone-while-watching');
    await eventually(async () => events.some((e) => e.verb === 'delete'), 'the DELETED event');
    // Missed by the watch, whose resourceVersion then turns out too old (410): ListWatch relists.
    api.delete('gone-unseen', { announce: false });
    api.goneOnNextWatch = true;
    api.endWatches();
    await eventually(async () => events.filter((e) => e.verb === 'delete').length === 2, 'the relist');
    expect(events.filter((e) => e.verb === 'delete').map((e) => e.ns.metadata.name)).toEqual([
      'gone-while-watching',
      'gone-unseen',
    ]);
    expect(events.some((e) => e.verb === 'error')).toBe(false);
    api.delete('keep', { announce: false });
  });
});
