/**
 * The audit's paged Pod LISTs (kube/pod-lister.ts, and the Pod watch's catch-up LIST in
 * kube/pod-watch.ts) bounded by bytes as well as by count, against a fake API server that serves
 * large Pods: the limit of each request and the bytes of each response are asserted, not timed.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from '@jest/globals';
import { CoreV1Api } from '@kubernetes/client-node';
import { LARGEST_POD_BYTES, PodPageSizer } from '../../src/controllers/audit/page-budget.js';
import { kubePodLister, listUnfinishedPods, UNFINISHED_PODS_FIELD_SELECTOR } from '../../src/kube/pod-lister.js';
import { kubePodWatch } from '../../src/kube/pod-watch.js';
import { type FakeApiServer, type SeenRequest, startFakeApiServer } from './fake-api-server.js';

const KiB = 1024;
const MiB = 1024 * KiB;
const BUDGET = 8 * MiB;

/** A Pod of about `bytes` bytes of JSON (a large annotation, as last-applied-configuration makes). */
function podOfSize(namespace: string, i: number, bytes: number) {
  return {
    metadata: {
      namespace,
      name: `p-${i}`,
      uid: `${namespace}-${i}`,
      resourceVersion: String(1000 + i),
      creationTimestamp: '2026-01-01T00:00:00Z',
      annotations: { 'kubectl.kubernetes.io/last-applied-configuration': 'x'.repeat(Math.max(0, bytes - 300)) },
    },
    spec: { containers: [{ name: 'c', image: 'registry.example/app:1' }] },
    status: { phase: 'Running' },
  };
}

let server: FakeApiServer;
const store = new Map<string, ReturnType<typeof podOfSize>[]>();

beforeAll(async () => {
  server = await startFakeApiServer();
  server.handle((req) => {
    const m = /^\/api\/v1\/(?:namespaces\/([^/]+)\/)?pods$/.exec(req.path);
    if (req.method !== 'GET' || !m) return { status: 404, body: { kind: 'Status', code: 404 } };
    const all = m[1] === undefined ? [...store.values()].flat() : (store.get(m[1]) ?? []);
    const from = Number(req.query.get('continue') ?? 0);
    const limit = Number(req.query.get('limit') ?? all.length);
    const items = all.slice(from, from + limit);
    const next = from + items.length;
    return {
      status: 200,
      body: {
        apiVersion: 'v1',
        kind: 'PodList',
        metadata: { resourceVersion: '5000', ...(next < all.length ? { continue: String(next) } : {}) },
        items,
      },
    };
  });
});

afterAll(() => server.close());

beforeEach(() => {
  server.seen.length = 0;
  store.clear();
});

/** Every page of `namespace`, the way the auditor asks (limit 500 each time). */
async function listAll(list: ReturnType<typeof kubePodLister>, namespace: string): Promise<number> {
  let n = 0;
  let continueToken: string | undefined;
  do {
    const page = await list.listPods(namespace, { limit: 500, continueToken });
    n += page.items.length;
    continueToken = page.continueToken || undefined;
  } while (continueToken !== undefined);
  return n;
}

const limits = (seen: readonly SeenRequest[]): number[] => seen.map((r) => Number(r.query.get('limit')));

describe('paged Pod LISTs under a byte budget', () => {
  it('lowers the limit for large Pods so no page passes the budget, and raises it again up to 500 for small ones', async () => {
    store.set(
      'big',
      Array.from({ length: 130 }, (_, i) => podOfSize('big', i, 200 * KiB)),
    );
    store.set(
      'small',
      Array.from({ length: 1200 }, (_, i) => podOfSize('small', i, 2 * KiB)),
    );
    const pods = kubePodLister(server.kc.makeApiClient(CoreV1Api), new PodPageSizer());

    expect(await listAll(pods, 'big')).toBe(130);
    const big = [...server.seen];
    // First page: as if Pods were the largest etcd keeps (5 × 1.5 MiB ≤ 8 MiB); then 40 of ~200 KiB.
    expect(limits(big)).toEqual([Math.floor(BUDGET / LARGEST_POD_BYTES), 40, 40, 40, 40]);
    for (const r of big) expect(r.responseBytes).toBeLessThanOrEqual(BUDGET);
    expect(Math.max(...big.map((r) => r.responseBytes))).toBeGreaterThan(BUDGET * 0.9);
    for (const r of big) expect(r.query.get('fieldSelector')).toBe(UNFINISHED_PODS_FIELD_SELECTOR);

    server.seen.length = 0;
    expect(await listAll(pods, 'small')).toBe(1200);
    // Starts from what the last page taught (40), then back to full pages.
    expect(limits(server.seen)).toEqual([40, 500, 500, 500]);
    for (const r of server.seen) expect(r.responseBytes).toBeLessThanOrEqual(BUDGET);
  });

  it('listUnfinishedPods is sized when given a sizer (label-selected too), and passes the limit as is without one', async () => {
    store.set(
      'sbx',
      Array.from({ length: 12 }, (_, i) => podOfSize('sbx', i, 1 * MiB)),
    );
    const core = server.kc.makeApiClient(CoreV1Api);
    const pages = new PodPageSizer();
    let token: string | undefined;
    do {
      const page = await listUnfinishedPods(
        core,
        'sbx',
        { limit: 500, continueToken: token },
        'agents.x-k8s.io/sandbox-name-hash',
        pages,
      );
      token = page.continueToken;
    } while (token);
    expect(limits(server.seen)).toEqual([5, 7]);
    expect(server.seen.every((r) => r.query.get('labelSelector') === 'agents.x-k8s.io/sandbox-name-hash')).toBe(true);
    for (const r of server.seen) expect(r.responseBytes).toBeLessThanOrEqual(BUDGET);

    server.seen.length = 0;
    const unsized = await listUnfinishedPods(core, 'sbx', { limit: 500 }, 'agents.x-k8s.io/sandbox-name-hash');
    expect(unsized.items).toHaveLength(12);
    expect(limits(server.seen)).toEqual([500]);
  });

  it('sizes the Pod watch’s catch-up LIST of every Pod (all namespaces, finished included) the same way', async () => {
    store.set(
      'a',
      Array.from({ length: 30 }, (_, i) => podOfSize('a', i, 400 * KiB)),
    );
    store.set(
      'b',
      Array.from({ length: 30 }, (_, i) => podOfSize('b', i, 400 * KiB)),
    );
    const watch = kubePodWatch(server.kc, undefined, new PodPageSizer());
    let token: string | undefined;
    let n = 0;
    let resourceVersion: string | undefined;
    do {
      const page = await watch.listPods({ limit: 500, continueToken: token });
      n += page.items.length;
      resourceVersion ??= page.resourceVersion;
      token = page.continueToken;
    } while (token);
    expect(n).toBe(60);
    expect(resourceVersion).toBe('5000');
    expect(server.seen.every((r) => r.path === '/api/v1/pods' && !r.query.has('fieldSelector'))).toBe(true);
    expect(limits(server.seen)[0]).toBe(5);
    expect(
      limits(server.seen)
        .slice(1)
        .every((l) => l === 20),
    ).toBe(true);
    for (const r of server.seen) expect(r.responseBytes).toBeLessThanOrEqual(BUDGET);
  });
});
