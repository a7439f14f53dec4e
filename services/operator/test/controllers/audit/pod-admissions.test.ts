import { describe, expect, it } from '@jest/globals';
import type { WatchStream } from '@kubeplus-isolation/service';
import type { KubernetesObject } from '@kubernetes/client-node';
import {
  type PodWatchApi,
  unisolatedAdmission,
  unisolatedPodAdmissions,
  type WatchCheckpoints,
  type WatchedPod,
} from '../../../src/controllers/audit/pod-admissions.js';
import type { MissingKind } from '../../../src/controllers/audit/report.js';
import {
  CLOCK_SKEW_MARGIN_MS,
  formatPosition,
  type PreviousTerm,
  type WatchPosition,
} from '../../../src/controllers/audit/watch-checkpoint.js';
import { ResourceInformer } from '../../../src/runtime/informer.js';
import { captureLogger, FakeClock, FakeInformerSource } from '../../runtime/fakes.js';

const ENABLED = 'kubeplus.io/node-isolation-enabled';
const RESOLVED = 'kubeplus.io/node-isolation-resolved';
const MANDATE = {
  nodeSelector: { pool: 'a' },
  tolerations: [{ key: 'dedicated', operator: 'Equal', value: 'a', effect: 'NoSchedule' }],
};

function ns(name: string, annotation: string | undefined = JSON.stringify(MANDATE), labelled = true): KubernetesObject {
  return {
    apiVersion: 'v1',
    kind: 'Namespace',
    metadata: {
      name,
      resourceVersion: '1',
      labels: labelled ? { [ENABLED]: 'true' } : {},
      annotations: annotation === undefined ? {} : { [RESOLVED]: annotation },
    },
  };
}

function pod(
  namespace: string,
  name: string,
  spec: Record<string, unknown> = {},
  uid = `${namespace}-${name}`,
  created?: number,
  phase = 'Pending',
): WatchedPod {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: {
      namespace,
      name,
      uid,
      resourceVersion: '1',
      labels: { app: 'x' },
      managedFields: [{}],
      ...(created === undefined ? {} : { creationTimestamp: new Date(created).toISOString() }),
    },
    spec: { containers: [{ name: 'c', image: 'i', args: ['<'.repeat(100)] }], ...spec },
    status: { phase },
  } as WatchedPod;
}

describe('unisolatedAdmission', () => {
  it('names what a Pod of an isolated namespace lacks, by the audit’s rule', () => {
    expect(unisolatedAdmission(ns('t'), pod('t', 'bare'))).toEqual({
      missing: ['nodeSelector', 'tolerations'],
      kind: 'both',
    });
    expect(unisolatedAdmission(ns('t'), pod('t', 's', { nodeSelector: { pool: 'a', extra: 'y' } }))).toEqual({
      missing: ['tolerations'],
      kind: 'tolerations',
    });
    expect(unisolatedAdmission(ns('t'), pod('t', 't', { tolerations: MANDATE.tolerations }))).toEqual({
      missing: ['nodeSelector'],
      kind: 'node_selector',
    });
  });

  it('says nothing of a compliant Pod, of a namespace not (or not validly) isolated, or of an unknown one', () => {
    const compliant = pod('t', 'ok', { nodeSelector: MANDATE.nodeSelector, tolerations: MANDATE.tolerations });
    expect(unisolatedAdmission(ns('t'), compliant)).toBeUndefined();
    expect(unisolatedAdmission(ns('t', JSON.stringify(MANDATE), false), pod('t', 'bare'))).toBeUndefined();
    expect(unisolatedAdmission(ns('t', 'not json'), pod('t', 'bare'))).toBeUndefined();
    const unannotated = ns('t');
    if (unannotated.metadata) unannotated.metadata.annotations = {};
    expect(unisolatedAdmission(unannotated, pod('t', 'bare'))).toBeUndefined();
    expect(unisolatedAdmission(undefined, pod('t', 'bare'))).toBeUndefined();
    // Odd shapes never throw.
    expect(
      unisolatedAdmission(ns('t'), { metadata: { name: 'x' }, spec: 'nonsense' } as unknown as WatchedPod),
    ).toEqual({
      missing: ['nodeSelector', 'tolerations'],
      kind: 'both',
    });
  });
});

/** A fake API server side of the watch: the test drives events and the end of each watch. */
class FakeWatch implements PodWatchApi {
  rv = 100;
  starts: string[] = [];
  listCalls = 0;
  failList: unknown;
  /** The cluster's Pods, for a catch-up LIST of every Pod; served at most `pageCap` a page. */
  pods: WatchedPod[] = [];
  pageCap = 2;
  pageRequests: Array<{ limit: number; continueToken?: string | undefined }> = [];
  failPods: unknown[] = [];
  /** Set: the next LIST of Pods waits for it. */
  holdPods: Promise<void> | undefined;
  checkpoints?: FakeCheckpoints;
  private current: WatchStream | undefined;
  stopped = 0;

  async currentResourceVersion(): Promise<string> {
    this.listCalls += 1;
    if (this.failList !== undefined) throw this.failList;
    return String(this.rv);
  }

  async listPods(page: { limit: number; continueToken?: string | undefined }) {
    this.pageRequests.push(page);
    if (this.holdPods) await this.holdPods;
    const failure = this.failPods.shift();
    if (failure !== undefined) throw failure;
    const from = Number(page.continueToken ?? 0);
    const to = Math.min(this.pods.length, from + Math.min(page.limit, this.pageCap));
    return {
      items: this.pods.slice(from, to),
      continueToken: to < this.pods.length ? String(to) : undefined,
      resourceVersion: String(this.rv),
    };
  }

  watch(resourceVersion: string, stream: WatchStream, signal: AbortSignal): void {
    this.starts.push(resourceVersion);
    this.current = stream;
    signal.addEventListener(
      'abort',
      () => {
        this.stopped += 1;
        stream.closed(signal.reason);
      },
      { once: true },
    );
    stream.connected();
  }

  event(type: string, obj: KubernetesObject): void {
    this.current?.event(type, obj);
  }

  end(err?: unknown): void {
    const c = this.current;
    this.current = undefined;
    c?.closed(err);
  }
}

/** The Lease side: what the previous term left, and this term's position as the next renewal would write it. */
class FakeCheckpoints implements WatchCheckpoints {
  private position: (() => WatchPosition | undefined) | undefined;
  constructor(private readonly previous: PreviousTerm | undefined) {}
  previousTerm(): PreviousTerm | undefined {
    return this.previous;
  }
  track(position: () => WatchPosition | undefined): void {
    this.position = position;
  }
  /** What a Lease write now would carry. */
  written(): WatchPosition | undefined {
    return this.position?.();
  }
}

async function setup(checkpoints?: FakeCheckpoints) {
  const namespaces = new FakeInformerSource<KubernetesObject>();
  const nsInformer = new ResourceInformer(namespaces, { name: 'isolated-namespaces', clock: new FakeClock() });
  nsInformer.start();
  await nsInformer.waitForSync();
  const clock = new FakeClock();
  const api = new FakeWatch();
  if (checkpoints) api.checkpoints = checkpoints;
  const counted: MissingKind[] = [];
  const catchUps: string[] = [];
  const cost = { lists: 0, checked: 0 };
  const { logger, lines } = captureLogger('debug');
  const source = unisolatedPodAdmissions(api, {
    namespaces: nsInformer,
    counted: (kind) => counted.push(kind),
    caughtUp: (reason) => catchUps.push(reason),
    hooks: {
      podListRequest: () => {
        cost.lists += 1;
      },
      podsChecked: (n) => {
        cost.checked += n;
      },
    },
    logger,
    clock,
  });
  const keys: string[] = [];
  const flush = () => new Promise((resolve) => setImmediate(resolve));
  const warned = () =>
    lines()
      .filter((l) => l.msg === 'Pod admitted without the node placement its namespace mandates')
      .map((l) => `${l.namespace}/${l.pod}`);
  return { namespaces, api, source, counted, catchUps, cost, keys, clock, flush, warned, lines };
}

describe('unisolatedPodAdmissions', () => {
  const added = (p: WatchedPod, rv: number): WatchedPod => ({
    ...p,
    metadata: { ...p.metadata, resourceVersion: String(rv) },
  });

  it('counts each Pod created lacking its mandate, enqueues its namespace at once, and ignores the rest', async () => {
    const { namespaces, api, source, counted, keys, flush } = await setup();
    namespaces.upsert(ns('tenant'));
    namespaces.upsert(ns('broken', 'not json'));
    const unsubscribe = source.subscribe((k) => keys.push(k));
    await flush();
    expect(api.starts).toEqual(['100']); // from "now": no list of existing Pods
    api.event('ADDED', added(pod('tenant', 'job', { nodeSelector: { pool: 'a' } }), 101));
    api.event(
      'ADDED',
      added(pod('tenant', 'ok', { nodeSelector: MANDATE.nodeSelector, tolerations: MANDATE.tolerations }), 102),
    );
    api.event('ADDED', added(pod('plain', 'elsewhere'), 103));
    api.event('ADDED', added(pod('broken', 'invalid-mandate'), 104));
    api.event('MODIFIED', added(pod('tenant', 'job'), 105)); // only creations count
    api.event('DELETED', added(pod('tenant', 'bare'), 106));
    expect(keys).toEqual(['tenant']);
    expect(counted).toEqual(['tolerations']);
    unsubscribe();
    expect(api.stopped).toBe(1);
    api.event('ADDED', added(pod('tenant', 'after-term'), 107));
    expect(counted).toHaveLength(1);
  });

  it('resumes from the last resourceVersion (bookmarks included); after 410 Gone catches up by a LIST, not from now', async () => {
    const { namespaces, api, source, keys, clock, flush } = await setup();
    namespaces.upsert(ns('tenant'));
    namespaces.upsert(ns('other'));
    const unsubscribe = source.subscribe((k) => keys.push(k));
    await flush();
    api.event('ADDED', added(pod('plain', 'p'), 150));
    api.event('BOOKMARK', { apiVersion: 'v1', kind: 'Pod', metadata: { resourceVersion: '160' } });
    api.end(); // the server closed the watch
    await clock.advance(0);
    await flush();
    expect(api.starts).toEqual(['100', '160']);
    expect(keys).toEqual([]);

    api.event('ERROR', { apiVersion: 'v1', kind: 'Status', code: 410 } as unknown as KubernetesObject);
    api.end();
    api.rv = 500;
    await clock.advance(0);
    await flush();
    // Not "now": the Pods created meanwhile are listed (none here), then the watch goes on from the LIST.
    expect(api.pageRequests).toEqual([{ limit: 500, continueToken: undefined }]);
    expect(api.listCalls).toBe(1);
    expect(api.starts).toEqual(['100', '160', '500']);
    expect(keys).toEqual([]);
    unsubscribe();
  });

  it('retries a failed list or watch with backoff, and stops retrying when unsubscribed', async () => {
    const { api, source, keys, clock, flush } = await setup();
    api.failList = Object.assign(new Error('Forbidden'), { statusCode: 403 });
    const unsubscribe = source.subscribe((k) => keys.push(k));
    await flush();
    expect(api.listCalls).toBe(1);
    await clock.advance(799);
    await flush();
    expect(api.listCalls).toBe(1);
    await clock.advance(1);
    await flush();
    expect(api.listCalls).toBe(2);
    await clock.advance(1600);
    await flush();
    expect(api.listCalls).toBe(3);
    unsubscribe();
    await clock.advance(60_000);
    await flush();
    expect(api.listCalls).toBe(3);
    expect(api.starts).toEqual([]);
  });
});

describe('unisolatedPodAdmissions across leadership terms (issue 34)', () => {
  const T0 = Date.UTC(2026, 0, 1); // FakeClock's start
  const PLACED = { nodeSelector: MANDATE.nodeSelector, tolerations: MANDATE.tolerations };
  const SEEN = T0 - 20_000; // where the killed leader's watch got to, 20 s before this term

  async function term(previous: PreviousTerm | undefined) {
    const checkpoints = new FakeCheckpoints(previous);
    const env = await setup(checkpoints);
    env.namespaces.upsert(ns('tenant'));
    return { ...env, checkpoints };
  }

  const previousTerm = (checkpoint: WatchPosition | undefined): PreviousTerm => ({
    checkpoint: checkpoint === undefined ? undefined : formatPosition(checkpoint),
    holderIdentity: 'killed-leader_1',
    acquiredAt: T0 - 3_600_000,
    leaseTransitions: 3,
    createdAt: T0 - 86_400_000,
  });

  /** The cluster's Pods when the new leader lists them. */
  const cluster = (): WatchedPod[] => [
    pod('tenant', 'long-ago', {}, 'u-long-ago', SEEN - 2 * CLOCK_SKEW_MARGIN_MS, 'Succeeded'),
    pod('tenant', 'skewed', {}, 'u-skewed', SEEN - CLOCK_SKEW_MARGIN_MS / 2, 'Running'),
    pod('tenant', 'job-done', {}, 'u-job-done', SEEN + 5_000, 'Succeeded'),
    pod('tenant', 'placed', PLACED, 'u-placed', SEEN + 6_000, 'Succeeded'),
    pod('plain', 'elsewhere', {}, 'u-elsewhere', SEEN + 7_000, 'Succeeded'),
    pod('tenant', 'failed', { tolerations: MANDATE.tolerations }, 'u-failed', SEEN + 8_000, 'Failed'),
  ];

  it('the very first term starts from now, as before, and keeps its position for the next term', async () => {
    const { api, source, keys, clock, flush, checkpoints } = await term(undefined);
    const unsubscribe = source.subscribe((k) => keys.push(k));
    await flush();
    expect(api.starts).toEqual(['100']);
    expect(api.pageRequests).toEqual([]);
    expect(checkpoints.written()).toEqual({ resourceVersion: '100', seenAt: T0 });
    await clock.advance(3_000);
    api.event('ADDED', { ...pod('plain', 'p'), metadata: { namespace: 'plain', name: 'p', resourceVersion: '101' } });
    expect(checkpoints.written()).toEqual({ resourceVersion: '101', seenAt: T0 + 3_000 });
    await clock.advance(60_000);
    api.event('BOOKMARK', { apiVersion: 'v1', kind: 'Pod', metadata: { resourceVersion: '180' } });
    expect(checkpoints.written()).toEqual({ resourceVersion: '180', seenAt: T0 + 63_000 });
    unsubscribe();
    // What the release writes, after the term ended.
    expect(checkpoints.written()).toEqual({ resourceVersion: '180', seenAt: T0 + 63_000 });
  });

  it('resumes where the previous term’s watch got to: a Pod admitted unplaced and finished meanwhile is counted and logged', async () => {
    const { api, source, counted, keys, flush, checkpoints, warned, catchUps } = await term(
      previousTerm({ resourceVersion: '90', seenAt: SEEN }),
    );
    const unsubscribe = source.subscribe((k) => keys.push(k));
    await flush();
    expect(api.starts).toEqual(['90']);
    expect(api.listCalls).toBe(0);
    expect(api.pageRequests).toEqual([]);
    // Until it sees more, the position is the previous term's (a leader killed now loses nothing).
    expect(checkpoints.written()).toEqual({ resourceVersion: '90', seenAt: SEEN });
    // The API server replays what happened since resourceVersion 90: the Job's Pod, created bare, then finished.
    const job = pod('tenant', 'job-done', {}, 'u-job-done', SEEN + 5_000);
    api.event('ADDED', { ...job, metadata: { ...job.metadata, resourceVersion: '95' } });
    api.event('MODIFIED', {
      ...job,
      metadata: { ...job.metadata, resourceVersion: '96' },
      status: { phase: 'Succeeded' },
    } as KubernetesObject);
    expect(counted).toEqual(['both']);
    expect(warned()).toEqual(['tenant/job-done']);
    expect(keys).toEqual(['tenant']);
    expect(catchUps).toEqual([]);
    expect(checkpoints.written()).toEqual({ resourceVersion: '96', seenAt: T0 });
    unsubscribe();
  });

  it('when resuming fails (410 Gone) it lists every Pod and judges those created since the position (less the skew margin), finished ones included, each once', async () => {
    const { api, source, counted, keys, clock, flush, checkpoints, warned, catchUps, cost } = await term(
      previousTerm({ resourceVersion: '90', seenAt: SEEN }),
    );
    api.pods = cluster();
    api.rv = 700;
    const unsubscribe = source.subscribe((k) => keys.push(k));
    await flush();
    expect(api.starts).toEqual(['90']);
    api.event('ERROR', {
      apiVersion: 'v1',
      kind: 'Status',
      code: 410,
      reason: 'Expired',
      message: 'too old resource version: 90 (650)',
    } as unknown as KubernetesObject);
    api.end();
    await clock.advance(0);
    await flush();
    // One paged LIST of every Pod (3 pages of at most 2 here), then the watch from the LIST's resourceVersion.
    expect(api.pageRequests).toEqual([
      { limit: 500, continueToken: undefined },
      { limit: 500, continueToken: '2' },
      { limit: 500, continueToken: '4' },
    ]);
    expect(api.starts).toEqual(['90', '700']);
    expect(warned().sort()).toEqual(['tenant/failed', 'tenant/job-done', 'tenant/skewed']);
    expect([...counted].sort()).toEqual(['both', 'both', 'node_selector']);
    expect(new Set(keys)).toEqual(new Set(['tenant']));
    expect(catchUps).toEqual(['expired']);
    expect(cost).toEqual({ lists: 3, checked: 6 });
    expect(checkpoints.written()).toEqual({ resourceVersion: '700', seenAt: T0 });
    // The watch goes on; the same Pods seen again (a replay) are not counted twice.
    const again = pod('tenant', 'job-done', {}, 'u-job-done', SEEN + 5_000);
    api.event('ADDED', { ...again, metadata: { ...again.metadata, resourceVersion: '701' } });
    expect(counted).toHaveLength(3);
    unsubscribe();
  });

  it('a position the API server cannot parse (400 on the watch) is caught up from, not retried forever', async () => {
    const { api, source, counted, keys, clock, flush, catchUps } = await term(
      previousTerm({ resourceVersion: 'edited-by-hand', seenAt: SEEN }),
    );
    api.pods = cluster();
    api.rv = 750;
    const unsubscribe = source.subscribe((k) => keys.push(k));
    await flush();
    expect(api.starts).toEqual(['edited-by-hand']);
    api.end(Object.assign(new Error('Bad Request'), { statusCode: 400 }));
    await clock.advance(800);
    await flush();
    expect(api.starts).toEqual(['edited-by-hand', '750']);
    expect(catchUps).toEqual(['expired']);
    expect(counted).toHaveLength(3);
    unsubscribe();
  });

  it('without a position from a previous term that ran, catches up since that term began, then watches', async () => {
    const { api, source, counted, keys, clock, flush, checkpoints, warned, catchUps } = await term(
      previousTerm(undefined),
    );
    api.pods = cluster();
    api.rv = 800;
    let release: () => void = () => undefined;
    api.holdPods = new Promise<void>((resolve) => {
      release = resolve;
    });
    const unsubscribe = source.subscribe((k) => keys.push(k));
    await flush();
    expect(api.starts).toEqual([]);
    expect(api.listCalls).toBe(0);
    // While the catch-up runs, the Lease keeps where it starts (a leader killed now loses nothing).
    expect(checkpoints.written()).toEqual({ seenAt: T0 - 3_600_000 });
    api.holdPods = undefined;
    release();
    await clock.advance(0);
    await flush();
    expect(api.starts).toEqual(['800']);
    // Every Pod of the last hour (the previous term's), long-ago included.
    expect(warned().sort()).toEqual(['tenant/failed', 'tenant/job-done', 'tenant/long-ago', 'tenant/skewed']);
    expect(counted).toHaveLength(4);
    expect(catchUps).toEqual(['missing']);
    expect(checkpoints.written()).toEqual({ resourceVersion: '800', seenAt: T0 });
    unsubscribe();
  });

  it('a gap within the term is caught up the same way; a Pod the watch counted before the gap is not counted again', async () => {
    const { api, source, counted, keys, clock, flush, warned, catchUps } = await term(undefined);
    const unsubscribe = source.subscribe((k) => keys.push(k));
    await flush();
    expect(api.starts).toEqual(['100']);
    await clock.advance(10_000);
    const first = pod('tenant', 'first', {}, 'u-first', T0 + 9_000);
    api.event('ADDED', { ...first, metadata: { ...first.metadata, resourceVersion: '110' } });
    expect(counted).toEqual(['both']);
    await clock.advance(30_000);
    api.pods = [
      pod('tenant', 'before-term', {}, 'u-before', T0 - 2 * CLOCK_SKEW_MARGIN_MS),
      { ...first, status: { phase: 'Succeeded' } } as WatchedPod,
      pod('tenant', 'in-gap', {}, 'u-in-gap', T0 + 25_000, 'Succeeded'),
    ];
    api.rv = 900;
    api.end(Object.assign(new Error('Gone'), { statusCode: 410 }));
    await clock.advance(800); // the first retry after a failure
    await flush();
    expect(api.starts).toEqual(['100', '900']);
    expect(warned()).toEqual(['tenant/first', 'tenant/in-gap']);
    expect(counted).toEqual(['both', 'both']);
    expect(catchUps).toEqual(['expired']);
    unsubscribe();
  });

  it('a failed catch-up LIST is retried from its first page with backoff; unsubscribing stops it', async () => {
    const { api, source, keys, clock, flush, counted } = await term(previousTerm(undefined));
    api.pods = cluster();
    api.failPods = [undefined, Object.assign(new Error('etcdserver: request timed out'), { statusCode: 500 })];
    const unsubscribe = source.subscribe((k) => keys.push(k));
    await flush();
    await clock.advance(0);
    // The first page came, the second failed; listed again from the start, no Pod is counted twice.
    expect(api.pageRequests.map((p) => p.continueToken)).toEqual([undefined, '2']);
    expect(api.starts).toEqual([]);
    await clock.advance(800);
    await flush();
    expect(api.pageRequests.map((p) => p.continueToken)).toEqual([undefined, '2', undefined, '2', '4']);
    expect(api.starts).toEqual(['100']);
    expect(counted).toHaveLength(4);
    unsubscribe();
    await clock.advance(60_000);
    expect(api.pageRequests).toHaveLength(5);
  });

  it('stops a catch-up when the term ends', async () => {
    const { api, source, keys, flush, counted } = await term(previousTerm(undefined));
    api.pods = cluster();
    let release: () => void = () => undefined;
    api.holdPods = new Promise<void>((resolve) => {
      release = resolve;
    });
    const unsubscribe = source.subscribe((k) => keys.push(k));
    await flush();
    unsubscribe();
    api.holdPods = undefined;
    release();
    await flush();
    await flush();
    expect(api.pageRequests).toHaveLength(1);
    expect(api.starts).toEqual([]);
    expect(counted).toEqual([]);
  });
});
