import { describe, expect, it } from '@jest/globals';
import type { KubernetesObject } from '@kubernetes/client-node';
import { clientNodeListWatch } from '../../src/kube/informer-sources.js';
import { informersReady, keepMetadataOnly, ResourceInformer, stripManagedFields } from '../../src/runtime/informer.js';
import { ListWatchCache } from '../../src/runtime/list-watch-cache.js';
import { captureLogger, FakeClock, FakeInformerSource, flush, HttpError, obj } from './fakes.js';

function informer(source = new FakeInformerSource<KubernetesObject>(), clock = new FakeClock()) {
  return { source, clock, inf: new ResourceInformer(source, { name: 'things', clock, staleAfterMs: 60_000 }) };
}

describe('ResourceInformer', () => {
  it('is synced once the initial list has completed', async () => {
    const { inf } = informer();
    expect(inf.hasSynced()).toBe(false);
    const waiting = inf.waitForSync();
    inf.start();
    await expect(waiting).resolves.toBe(true);
    expect(inf.hasSynced()).toBe(true);
    expect(inf.isStale()).toBe(false);
  });

  it('restarts with exponential backoff when the initial list fails, and syncs when it succeeds', async () => {
    const { source, clock, inf } = informer();
    source.startPlan.push('list-error', 'reject', 'list-error');
    inf.start();
    await flush();
    expect(source.starts).toBe(1);
    expect(inf.hasSynced()).toBe(false);
    await clock.advance(799);
    expect(source.starts).toBe(1);
    await clock.advance(1); // 800ms
    expect(source.starts).toBe(2);
    await clock.advance(1600); // 1.6s
    expect(source.starts).toBe(3);
    await clock.advance(3200); // 3.2s
    expect(source.starts).toBe(4);
    expect(inf.hasSynced()).toBe(true);
  });

  it('restarts a watch that client-node gave up on, and reports stale only while down past the bound', async () => {
    const { source, clock, inf } = informer();
    for (let i = 0; i < 10; i++) source.startPlan.push('ok');
    inf.start();
    await flush();
    source.startPlan.length = 0;
    source.startPlan.push(...Array<'list-error'>(20).fill('list-error'));
    source.failWatch();
    await clock.advance(59_999);
    expect(inf.isStale()).toBe(false);
    expect(inf.hasSynced()).toBe(true); // synced stays true: the cache is still there
    await clock.advance(1);
    expect(inf.isStale()).toBe(true);
    expect(source.starts).toBeGreaterThan(3);
    source.startPlan.length = 0;
    await clock.advance(30_000); // capped backoff
    expect(inf.isStale()).toBe(false);
    const starts = source.starts;
    await clock.advance(300_000);
    expect(source.starts).toBe(starts); // healthy: no more restarts
  });

  it('caps the restart backoff at 30s', async () => {
    const { source, clock, inf } = informer();
    source.startPlan.push(...Array<'list-error'>(12).fill('list-error'));
    inf.start();
    await clock.advance(0.8e3 + 1.6e3 + 3.2e3 + 6.4e3 + 12.8e3 + 25.6e3); // 6 restarts
    expect(source.starts).toBe(7);
    await clock.advance(29_999);
    expect(source.starts).toBe(7);
    await clock.advance(1);
    expect(source.starts).toBe(8);
  });

  it('tells what is failing (status, count, since) until the next successful list+watch', async () => {
    const { source, clock, inf } = informer();
    expect(inf.lastFailure()).toBeUndefined();
    source.startPlan.push('forbidden', 'forbidden', 'list-error');
    const startedAt = clock.now();
    inf.start();
    await flush();
    expect(inf.lastFailure()).toEqual({
      status: 403,
      error: expect.stringMatching(/forbidden/),
      failures: 1,
      since: startedAt,
    });
    await clock.advance(800);
    expect(inf.lastFailure()).toMatchObject({ status: 403, failures: 2, since: startedAt });
    await clock.advance(1_600);
    expect(inf.lastFailure()).toMatchObject({ status: 503, failures: 3, since: startedAt });
    await clock.advance(3_200);
    expect(inf.hasSynced()).toBe(true);
    expect(inf.lastFailure()).toBeUndefined();
    // A broken watch later: failing again, from then on.
    source.startPlan.push('reject');
    const brokeAt = clock.now();
    source.failWatch(new HttpError(500, 'connection reset'));
    expect(inf.lastFailure()).toMatchObject({ status: 500, failures: 1, since: brokeAt });
  });

  it('logs failures at the level its option picks and tells its listener of failures and the recovery', async () => {
    const source = new FakeInformerSource<KubernetesObject>();
    const clock = new FakeClock();
    const { logger, lines } = captureLogger('debug');
    const heard: string[] = [];
    const inf = new ResourceInformer(source, {
      name: 'things',
      clock,
      logger,
      failureLogLevel: (err) => ((err as HttpError).code === 403 ? 'debug' : 'warn'),
      listener: {
        failed: (name, err) => heard.push(`failed ${name} ${(err as HttpError).code}`),
        recovered: (name) => {
          heard.push(`recovered ${name}`);
          throw new Error('a throwing listener breaks nothing');
        },
      },
    });
    source.startPlan.push('forbidden', 'list-error');
    inf.start();
    await clock.advance(800 + 1_600);
    expect(inf.hasSynced()).toBe(true);
    expect(heard).toEqual(['failed things 403', 'failed things 503', 'recovered things']);
    const failures = lines().filter((l) => l.msg === 'informer list/watch failed; restarting');
    expect(failures.map((l) => [l.level, l.failures])).toEqual([
      ['debug', 1],
      ['warn', 2],
    ]);
    expect(lines().find((l) => l.msg === 'informer listener failed')).toMatchObject({ level: 'error' });
  });

  it('ignores the error client-node reports for its own aborted watch after stop', async () => {
    const { source, clock, inf } = informer();
    inf.start();
    await flush();
    await inf.stop();
    expect(source.stops).toBe(1);
    await clock.advance(120_000);
    expect(source.starts).toBe(1);
    expect(inf.isStale()).toBe(false);
  });

  it('resolves pending waitForSync with false when stopped or aborted', async () => {
    const { source, inf } = informer();
    source.startPlan.push('list-error');
    inf.start();
    const controller = new AbortController();
    const aborted = inf.waitForSync(controller.signal);
    const stopped = inf.waitForSync();
    controller.abort();
    await expect(aborted).resolves.toBe(false);
    await inf.stop();
    await expect(stopped).resolves.toBe(false);
  });

  it('delivers add/update/delete to handlers and serves get/list from the cache', async () => {
    const { source, inf } = informer();
    inf.start();
    await flush();
    const events: string[] = [];
    inf.addEventHandler({
      add: (o) => events.push(`add ${o.metadata?.name}`),
      update: (o) => events.push(`update ${o.metadata?.name}`),
      delete: (o) => events.push(`delete ${o.metadata?.name}`),
    });
    source.upsert(obj('a', 'ns1'));
    source.upsert(obj('a', 'ns1', '2'));
    source.upsert(obj('b', 'ns2'));
    source.remove(obj('a', 'ns1'));
    expect(events).toEqual(['add a', 'update a', 'add b', 'delete a']);
    expect(inf.get('b', 'ns2')?.metadata?.name).toBe('b');
    expect(inf.get('a', 'ns1')).toBeUndefined();
    expect(inf.list().map((o) => o.metadata?.name)).toEqual(['b']);
    expect(inf.list('ns1')).toEqual([]);
  });

  it('replays cached objects as adds to a handler registered late, unless told not to', async () => {
    const { source, inf } = informer();
    source.upsert(obj('a', 'ns'));
    source.upsert(obj('b', 'ns'));
    const replayed: string[] = [];
    const quiet: string[] = [];
    inf.addEventHandler({ add: (o) => replayed.push(o.metadata?.name ?? '') });
    inf.addEventHandler({ add: (o) => quiet.push(o.metadata?.name ?? '') }, { replay: false });
    expect(replayed).toEqual(['a', 'b']);
    expect(quiet).toEqual([]);
  });

  it('stops delivering after unregistering, and a throwing handler does not starve the others', async () => {
    const { source, inf } = informer();
    const got: string[] = [];
    inf.addEventHandler({
      add: () => {
        throw new Error('handler bug');
      },
    });
    const off = inf.addEventHandler({ add: (o) => got.push(o.metadata?.name ?? '') });
    source.upsert(obj('a', 'ns'));
    off();
    source.upsert(obj('b', 'ns'));
    expect(got).toEqual(['a']);
  });
});

describe('informersReady', () => {
  it('is ok only when all are synced and none is stale, naming the ones that are not', () => {
    const mk = (name: string, synced: boolean, stale: boolean) => ({
      name,
      hasSynced: () => synced,
      isStale: () => stale,
      start: () => undefined,
      stop: async () => undefined,
      waitForSync: async () => synced,
    });
    expect(informersReady([mk('namespaces', true, false)])).toEqual({ ok: true, message: 'informers synced' });
    expect(informersReady([mk('namespaces', false, false), mk('crds', true, true), mk('rc', true, false)])).toEqual({
      ok: false,
      message: 'not synced: namespaces; stale: crds',
    });
  });
});

describe('ResourceInformer over the shared list/watch loop and client-node’s Watch', () => {
  it('recovers from a failed list and a broken watch, which the loop alone does not', async () => {
    const clock = new FakeClock();
    let lists = 0;
    const listFn = async () => {
      lists++;
      if (lists === 1) throw new HttpError(503, 'apiserver starting');
      return { metadata: { resourceVersion: String(lists * 10) }, items: [obj(`item-${lists}`, 'ns')] };
    };
    const dones: Array<(err: unknown) => void> = [];
    const watchParams: Array<Record<string, unknown>> = [];
    const fakeWatch = {
      watch: async (
        _path: string,
        params: Record<string, unknown>,
        _cb: (phase: string, o: KubernetesObject) => void,
        done: (err: unknown) => void,
      ) => {
        watchParams.push(params);
        dones.push(done);
        return new AbortController();
      },
    };
    const listWatch = new ListWatchCache(clientNodeListWatch(fakeWatch, '/apis/cloudark.io/v1/agents', listFn), {
      clock,
    });
    const inf = new ResourceInformer(listWatch, { name: 'agents', clock });
    inf.start();
    await flush();
    expect(inf.hasSynced()).toBe(false);
    await clock.advance(800);
    expect(inf.hasSynced()).toBe(true);
    expect(inf.list().map((o) => o.metadata?.name)).toEqual(['item-2']);
    expect(watchParams).toEqual([{ resourceVersion: '20' }]);
    // The watch dies with an error: the loop emits `error` and would stay stopped.
    dones[0]?.(new HttpError(500, 'connection reset'));
    await flush();
    await clock.advance(800);
    expect(watchParams).toHaveLength(2); // restarted, resuming from the last resourceVersion
    expect(watchParams[1]).toEqual({ resourceVersion: '20' });
    expect(inf.isStale()).toBe(false);
    await inf.stop();
  });
});

describe('informer transform', () => {
  const withManagedFields = (name: string, rv: string): KubernetesObject =>
    ({
      apiVersion: 'cloudark.io/v1',
      kind: 'Agent',
      metadata: {
        name,
        namespace: 'ns',
        resourceVersion: rv,
        annotations: { a: 'b' },
        managedFields: [{ manager: 'kubectl', operation: 'Apply', fieldsType: 'FieldsV1', fieldsV1: { 'f:spec': {} } }],
      },
      spec: { big: 'x'.repeat(1000) },
      status: { phase: 'Ready' },
    }) as KubernetesObject;

  it('drops managedFields from what enters the ListWatchCache (list and watch), before any handler sees it', async () => {
    let watchCb: ((phase: string, o: KubernetesObject) => void) | undefined;
    const fakeWatch = {
      watch: async (
        _path: string,
        _params: Record<string, unknown>,
        cb: (phase: string, o: KubernetesObject) => void,
      ): Promise<AbortController> => {
        watchCb = cb;
        return new AbortController();
      },
    };
    const listFn = async () => ({ metadata: { resourceVersion: '1' }, items: [withManagedFields('listed', '1')] });
    const clock = new FakeClock();
    const listWatch = new ListWatchCache(clientNodeListWatch(fakeWatch, '/apis/cloudark.io/v1/agents', listFn), {
      clock,
    });
    const inf = new ResourceInformer(listWatch, { name: 'agents', clock });
    const seen: Array<unknown> = [];
    inf.addEventHandler({
      add: (o) => seen.push(o.metadata?.managedFields),
      update: (o) => seen.push(o.metadata?.managedFields),
    });
    inf.start();
    await flush();
    watchCb?.('ADDED', withManagedFields('watched', '2'));
    watchCb?.('MODIFIED', withManagedFields('listed', '3'));
    expect(inf.list().map((o) => [o.metadata?.name, o.metadata?.managedFields])).toEqual([
      ['listed', undefined],
      ['watched', undefined],
    ]);
    expect(seen).toEqual([undefined, undefined, undefined]);
    expect(inf.get('listed', 'ns')?.metadata?.annotations).toEqual({ a: 'b' });
    expect((inf.get('listed', 'ns') as unknown as { spec: unknown }).spec).toBeDefined(); // the default keeps the body
    await inf.stop();
  });

  it('keepMetadataOnly keeps apiVersion, kind and metadata only; a throwing transform is logged and the object kept', async () => {
    const source = new FakeInformerSource<KubernetesObject>();
    const inf = new ResourceInformer(source, { name: 'agents', clock: new FakeClock(), transform: keepMetadataOnly });
    inf.start();
    source.upsert(withManagedFields('a', '1'));
    expect(inf.get('a', 'ns')).toEqual({
      apiVersion: 'cloudark.io/v1',
      kind: 'Agent',
      metadata: { name: 'a', namespace: 'ns', resourceVersion: '1', annotations: { a: 'b' } },
    });
    const { logger, lines } = captureLogger();
    const broken = new ResourceInformer(new FakeInformerSource<KubernetesObject>(), {
      name: 'broken',
      clock: new FakeClock(),
      logger,
      transform: () => {
        throw new Error('boom');
      },
    });
    const got: string[] = [];
    broken.addEventHandler({ add: (o) => got.push(o.metadata?.name ?? '') });
    (broken as unknown as { source: FakeInformerSource<KubernetesObject> }).source.upsert(obj('b', 'ns'));
    expect(got).toEqual(['b']);
    expect(lines().some((l) => l.msg === 'informer transform failed')).toBe(true);
  });

  it('stripManagedFields leaves an object without them alone', () => {
    const o = obj('c', 'ns');
    stripManagedFields(o);
    expect(o.metadata).toEqual(obj('c', 'ns').metadata);
  });
});
