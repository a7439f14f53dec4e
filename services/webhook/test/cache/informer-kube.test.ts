/** NamespaceListWatch (paged list, watch with bookmarks, resume, relist, slim objects) against a fake HTTPS API server. */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it, jest } from '@jest/globals';
import {
  LIST_PAGE_SIZE,
  type ListWatchOptions,
  MIN_WATCH_TIMEOUT_SECONDS,
  NamespaceListWatch,
  type SlimNamespace,
  slimNamespace,
} from '../../src/cache/informer.js';
import { KubeClient } from '../../src/kube/client.js';
import { kubeconfigConnection } from '../../src/kube/connection.js';
import { generatePair } from '../helpers/certs.js';
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

describe('NamespaceListWatch (against a fake HTTPS API server)', () => {
  let api: FakeApiServer;
  let client: KubeClient;
  let informer: NamespaceListWatch | undefined;

  beforeAll(async () => {
    const pair = await generatePair(mkdtempSync(join(tmpdir(), 'informer-kube-')), 'apiserver');
    api = new FakeApiServer({ tls: pair, token: 'informer-token' });
    await api.start();
    client = new KubeClient(await kubeconfigConnection(api.kubeconfig()));
  });
  afterEach(async () => {
    await informer?.stop();
    informer = undefined;
    api.listStatus = 200;
    api.watchStatus = 200;
    for (const name of [...api.namespaces.keys()]) api.delete(name, { announce: false });
  });
  afterAll(async () => {
    client.close();
    await api.stop();
  });

  function start(opts: ListWatchOptions = {}) {
    const events: Array<{ verb: string; ns: SlimNamespace }> = [];
    const errors: unknown[] = [];
    let connects = 0;
    let closes = 0;
    const i = new NamespaceListWatch(
      client,
      { connected: () => connects++, closed: () => closes++ },
      { quietCloseDelayMs: 20, ...opts },
    );
    for (const verb of ['add', 'update', 'delete'] as const) i.on(verb, (ns) => events.push({ verb, ns }));
    i.on('error', (e) => errors.push(e));
    informer = i;
    const running = i.start();
    return { informer: i, events, errors, running, connects: () => connects, closes: () => closes };
  }

  const lists = (from = 0) =>
    api.requests.slice(from).filter((r) => r.startsWith('GET /api/v1/namespaces?') && !r.includes('watch=true'));
  const watches = (from = 0) => api.requests.slice(from).filter((r) => r.includes('watch=true'));
  const param = (request: string, key: string) => new URL(request.slice(4), 'https://x').searchParams.get(key);

  it('lists in pages, then watches with bookmarks from the list resourceVersion; every object it delivers is slim', async () => {
    const count = LIST_PAGE_SIZE * 2 + 7;
    for (let i = 0; i < count; i++) api.put(fullNamespace(`ns-${i}`), { announce: false });
    api.put(namespace('unlabeled', { labeled: false }), { announce: false });
    const listRv = api.resourceVersion;
    const from = api.requests.length;
    const { events, connects } = start();
    await eventually(async () => connects() === 1, 'the watch');
    expect(lists(from)).toHaveLength(3);
    for (const r of lists(from)) {
      expect(param(r, 'limit')).toBe(String(LIST_PAGE_SIZE));
      expect(param(r, 'labelSelector')).toBe('kubeplus.io/node-isolation-enabled=true');
    }
    const [w] = watches(from);
    expect(param(w as string, 'resourceVersion')).toBe(listRv);
    expect(param(w as string, 'allowWatchBookmarks')).toBe('true');
    const timeout = Number(param(w as string, 'timeoutSeconds'));
    expect(timeout).toBeGreaterThanOrEqual(MIN_WATCH_TIMEOUT_SECONDS);
    expect(timeout).toBeLessThan(2 * MIN_WATCH_TIMEOUT_SECONDS);
    expect(api.authorizations.slice(from).every((a) => a === 'Bearer informer-token')).toBe(true);
    expect(events.filter((e) => e.verb === 'add')).toHaveLength(count);
    api.put(fullNamespace('late'));
    await eventually(async () => events.some((e) => e.ns.metadata.name === 'late'), 'the watch event');
    for (const { ns } of events) {
      expect(Object.keys(ns)).toEqual(['metadata']);
      expect(Object.keys(ns.metadata).sort()).toEqual(SLIM_KEYS);
      expect(Object.keys(ns.metadata.labels ?? {})).toEqual(['kubeplus.io/node-isolation-enabled']);
    }
  });

  it('delivers updates, and deletions seen by the watch and, after a 410 relist, deletions it missed', async () => {
    api.put(fullNamespace('keep'), { announce: false });
    api.put(fullNamespace('gone-while-watching'), { announce: false });
    api.put(fullNamespace('gone-unseen'), { announce: false });
    const { events, errors, connects } = start();
    await eventually(async () => connects() === 1, 'the watch');
    api.put(fullNamespace('keep'));
    await eventually(async () => events.some((e) => e.verb === 'update'), 'the MODIFIED event');
    api.delete('gone-while-watching');
    await eventually(async () => events.some((e) => e.verb === 'delete'), 'the DELETED event');
    // Missed by the watch, whose resourceVersion then turns out too old (410 ERROR event): relist.
    api.delete('gone-unseen', { announce: false });
    api.goneOnNextWatch = true;
    const from = api.requests.length;
    api.endWatches();
    await eventually(async () => events.filter((e) => e.verb === 'delete').length === 2, 'the relist');
    expect(events.filter((e) => e.verb === 'delete').map((e) => e.ns.metadata.name)).toEqual([
      'gone-while-watching',
      'gone-unseen',
    ]);
    expect(lists(from)).toHaveLength(1);
    // The relist returned `keep` unchanged (same resourceVersion): no event for it.
    expect(events.filter((e) => e.ns.metadata.name === 'keep').map((e) => e.verb)).toEqual(['add', 'update']);
    expect(errors).toEqual([]);
  });

  it('a watch answered 410 Gone (not an ERROR event) relists too', async () => {
    api.put(fullNamespace('a'), { announce: false });
    const s = start();
    await eventually(async () => s.connects() === 1, 'the watch');
    const from = api.requests.length;
    api.watchStatus = 410;
    api.endWatches();
    await eventually(async () => lists(from).length >= 1, 'the relist');
    api.watchStatus = 200;
    await eventually(async () => s.connects() === 2, 'the watch after the relist');
    expect(s.errors).toEqual([]);
  });

  it('a watch the server ends resumes from the last event or bookmark, without relisting', async () => {
    api.put(fullNamespace('a'), { announce: false });
    const { events, errors, connects, closes } = start();
    await eventually(async () => connects() === 1, 'the watch');
    api.put(fullNamespace('b'));
    await eventually(async () => events.some((e) => e.ns.metadata.name === 'b'), 'the ADDED event');
    const afterB = api.resourceVersion;
    let from = api.requests.length;
    api.endWatches();
    await eventually(async () => connects() === 2, 'the second watch');
    expect(closes()).toBe(1);
    expect(lists(from)).toEqual([]);
    expect(param(watches(from)[0] as string, 'resourceVersion')).toBe(afterB);

    // Namespaces elsewhere change the resourceVersion; the bookmark says how far the watch got.
    api.put(namespace('unlabeled', { labeled: false }), { announce: false });
    const bookmarked = api.bookmark();
    await eventually(async () => informer?.resourceVersion === bookmarked, 'the bookmark');
    from = api.requests.length;
    api.endWatches();
    await eventually(async () => connects() === 3, 'the third watch');
    expect(lists(from)).toEqual([]);
    expect(param(watches(from)[0] as string, 'resourceVersion')).toBe(bookmarked);
    expect(events.map((e) => e.ns.metadata.name)).toEqual(['a', 'b']);
    expect(errors).toEqual([]);
  });

  it('a watch idle for its timeout is reopened from its resourceVersion, not reported as an error', async () => {
    api.put(fullNamespace('a'), { announce: false });
    const from = api.requests.length;
    const { errors, connects, closes } = start({ watchIdleTimeoutMs: 300 });
    await eventually(async () => connects() === 2, 'a second watch after the idle timeout');
    expect(closes()).toBeGreaterThanOrEqual(1);
    expect(lists(from)).toHaveLength(1);
    const [first, second] = watches(from);
    expect(param(second as string, 'resourceVersion')).toBe(param(first as string, 'resourceVersion'));
    expect(errors).toEqual([]);
  });

  it('a list error, a watch error status and a non-410 ERROR event stop it with an error; start() resumes', async () => {
    api.listStatus = 500;
    let s = start();
    await s.running;
    expect(s.errors).toHaveLength(1);
    expect(String(s.errors[0])).toMatch(/GET \/api\/v1\/namespaces: 500 list answered 500 by the test/);
    expect(s.connects()).toBe(0);

    api.listStatus = 200;
    api.put(fullNamespace('a'), { announce: false });
    api.watchStatus = 403;
    const running = s.informer.start();
    await running;
    expect(s.errors).toHaveLength(2);
    expect(String(s.errors[1])).toMatch(/watch \/api\/v1\/namespaces: 403/);
    expect(s.events.map((e) => e.ns.metadata.name)).toEqual(['a']);

    // Resumes from the list's resourceVersion: no second list.
    api.watchStatus = 200;
    api.errorEventOnNextWatch = 500;
    const from = api.requests.length;
    await s.informer.start();
    expect(lists(from)).toEqual([]);
    expect(s.errors).toHaveLength(3);
    expect(String(s.errors[2])).toMatch(/ERROR event: 500/);
    await s.informer.stop();

    s = start();
    await eventually(async () => s.connects() === 1, 'the watch');
  });

  it('a 401 is an error like any other (the token is read again next time)', async () => {
    api.token = 'rotated';
    try {
      const s = start();
      await s.running;
      expect(String(s.errors[0])).toMatch(/401 Unauthorized/);
    } finally {
      api.token = 'informer-token';
    }
  });

  it('stop() ends the watch and start() is a no-op while running', async () => {
    const s = start();
    await eventually(async () => s.connects() === 1 && api.watcherCount === 1, 'the watch');
    void s.informer.start();
    expect(api.watcherCount).toBe(1);
    await s.informer.stop();
    await s.running;
    await eventually(async () => api.watcherCount === 0, 'the server to see the watch closed');
    expect(s.errors).toEqual([]);
  });

  it('a watch the server keeps ending at once, without an event, is reopened each time, without relisting', async () => {
    api.put(fullNamespace('a'), { announce: false });
    const s = start({ quietCloseDelayMs: 20, quietCloseMaxDelayMs: 40 });
    await eventually(async () => s.connects() === 1, 'the watch');
    const from = api.requests.length;
    for (let i = 0; i < 3; i++) {
      api.endWatches();
      await eventually(async () => s.connects() === i + 2, `watch ${i + 2}`);
    }
    // The delays between them: quietCloseDelayMs (tested in informer.test.ts).
    expect(watches(from)).toHaveLength(3);
    expect(lists(from)).toEqual([]);
    expect(s.errors).toEqual([]);
  });
});
