/** The informers' cache over the shared loop (ListWatchCache), and the client-node transport (watchOnce). */
import { describe, expect, it } from '@jest/globals';
import { WatchIdleError, type WatchStream } from '@kubeplus-isolation/service';
import type { KubernetesObject } from '@kubernetes/client-node';
import { clientNodeListWatch } from '../../src/kube/informer-sources.js';
import { watchOnce } from '../../src/kube/watch.js';
import { ListWatchCache, type ObjectListWatch } from '../../src/runtime/list-watch-cache.js';
import { FakeClock, flush, HttpError, obj } from './fakes.js';

class FakeIo implements ObjectListWatch<KubernetesObject> {
  items: KubernetesObject[] = [];
  rv = '10';
  listError: unknown;
  stream: WatchStream | undefined;
  watches: string[] = [];

  async list() {
    if (this.listError !== undefined) throw this.listError;
    return { items: [...this.items], resourceVersion: this.rv };
  }

  watch(resourceVersion: string, stream: WatchStream, signal: AbortSignal): void {
    this.watches.push(resourceVersion);
    this.stream = stream;
    signal.addEventListener('abort', () => stream.closed(signal.reason), { once: true });
    stream.connected();
  }
}

function setup() {
  const io = new FakeIo();
  const clock = new FakeClock();
  const cache = new ListWatchCache(io, { clock });
  const events: string[] = [];
  for (const verb of ['add', 'update', 'delete'] as const) {
    cache.on(verb, (o: KubernetesObject) =>
      events.push(`${verb} ${o.metadata?.namespace ?? ''}/${o.metadata?.name} ${o.metadata?.resourceVersion}`),
    );
  }
  const errors: unknown[] = [];
  cache.on('error', (e) => errors.push(e));
  return { io, cache, events, errors, clock };
}

describe('ListWatchCache', () => {
  it('start() resolves once listed and watching; the list fills the cache, by namespace and name', async () => {
    const { io, cache, events } = setup();
    io.items = [obj('a', 'ns1'), obj('b', 'ns2'), obj('c')];
    await cache.start();
    expect(io.watches).toEqual(['10']);
    expect(events).toEqual(['add ns1/a 1', 'add ns2/b 1', 'add /c 1']);
    expect(cache.get('a', 'ns1')).toBe(io.items[0]); // the very object, not a copy
    expect(cache.get('c')?.metadata?.name).toBe('c');
    expect(cache.list('ns2').map((o) => o.metadata?.name)).toEqual(['b']);
    expect(cache.list().map((o) => o.metadata?.name)).toEqual(['a', 'b', 'c']);
    expect(cache.list('none')).toEqual([]);
    await cache.stop();
  });

  it('applies watch events: an update only when the resourceVersion changed; deletes; bookmarks move the position only', async () => {
    const { io, cache, events } = setup();
    await cache.start();
    io.stream?.event('ADDED', obj('a', 'ns', '11'));
    io.stream?.event('MODIFIED', obj('a', 'ns', '11')); // same version: nothing
    io.stream?.event('MODIFIED', obj('a', 'ns', '12'));
    io.stream?.event('DELETED', obj('a', 'ns', '13'));
    io.stream?.event('DELETED', obj('never-seen', 'ns', '14'));
    io.stream?.event('BOOKMARK', { metadata: { resourceVersion: '20' } });
    expect(events).toEqual(['add ns/a 11', 'update ns/a 12', 'delete ns/a 13']);
    expect(cache.list()).toEqual([]);
    expect(cache.latestResourceVersion()).toBe('20');
    await cache.stop();
  });

  it('after 410 Gone relists: deletes what is gone (the cached object), updates what changed, adds what is new', async () => {
    const { io, cache, events, clock } = setup();
    io.items = [obj('keep', 'ns'), obj('change', 'ns'), obj('gone', 'ns'), obj('gone-ns', 'other')];
    await cache.start();
    events.length = 0;
    io.items = [obj('keep', 'ns'), obj('change', 'ns', '5'), obj('new', 'ns', '6')];
    io.rv = '30';
    io.stream?.event('ERROR', { kind: 'Status', code: 410 });
    io.stream?.closed(undefined);
    await flush();
    expect(events).toEqual([]); // the watch delivered nothing: it waits a moment first (the loop's quiet delay)
    await clock.advance(1_000);
    expect(events.sort()).toEqual(['add ns/new 6', 'delete ns/gone 1', 'delete other/gone-ns 1', 'update ns/change 5']);
    expect(io.watches).toEqual(['10', '30']);
    expect(cache.list().map((o) => o.metadata?.name)).toEqual(['keep', 'change', 'new']);
    await cache.stop();
  });

  it('reports a failure through `error` and ends the run; start() resolves then too, and again resumes', async () => {
    const { io, cache, errors } = setup();
    io.listError = new HttpError(403, 'forbidden');
    await cache.start();
    expect(errors).toHaveLength(1);
    expect(io.watches).toEqual([]);
    io.listError = undefined;
    await cache.start();
    io.stream?.event('ADDED', obj('a', 'ns', '11'));
    io.stream?.closed(new HttpError(500, 'connection reset'));
    await flush();
    expect(errors).toHaveLength(2);
    await cache.start();
    expect(io.watches).toEqual(['10', '11']); // resumed, not relisted
    await cache.stop();
    expect(errors).toHaveLength(2); // stopping is not a failure
  });

  it('`change` registers (and off unregisters) add, update and delete at once; `connect` hears each connect', async () => {
    const { io, cache } = setup();
    const changes: string[] = [];
    let connects = 0;
    const onChange = (o: KubernetesObject) => changes.push(o.metadata?.name ?? '');
    cache.on('change', onChange);
    cache.on('connect', () => connects++);
    await cache.start();
    io.stream?.event('ADDED', obj('a', 'ns', '2'));
    io.stream?.event('MODIFIED', obj('a', 'ns', '3'));
    io.stream?.event('DELETED', obj('a', 'ns', '4'));
    cache.off('change', onChange);
    io.stream?.event('ADDED', obj('b', 'ns', '5'));
    expect(changes).toEqual(['a', 'a', 'a']);
    expect(connects).toBe(1);
    await cache.stop();
  });
});

describe('watchOnce (client-node’s Watch as the loop’s transport)', () => {
  function fakeWatch() {
    const calls: Array<{
      params: Record<string, unknown>;
      cb: (type: string, o: unknown) => void;
      done: (err: unknown) => void;
      controller: AbortController;
    }> = [];
    return {
      calls,
      watch: async (
        _path: string,
        params: Record<string, unknown>,
        cb: (type: string, o: unknown) => void,
        done: (err: unknown) => void,
      ) => {
        const controller = new AbortController();
        calls.push({ params, cb, done, controller });
        return controller;
      },
    };
  }

  function stream() {
    const seen: string[] = [];
    const closed: unknown[] = [];
    const s: WatchStream = {
      connected: () => seen.push('connected'),
      event: (type) => seen.push(type),
      closed: (err) => closed.push(err),
    };
    return { s, seen, closed };
  }

  it('connects, hands on events, and closes once: cleanly, with the error, or idle on client-node’s timeout', async () => {
    const w = fakeWatch();
    const a = stream();
    watchOnce(w, '/api/v1/namespaces', { resourceVersion: '5' }, a.s, new AbortController().signal);
    await flush();
    w.calls[0]?.cb('ADDED', {});
    w.calls[0]?.done(null);
    w.calls[0]?.done(new Error('late'));
    w.calls[0]?.cb('MODIFIED', {}); // after the end: dropped
    expect(a.seen).toEqual(['connected', 'ADDED']);
    expect(a.closed).toEqual([undefined]);

    const b = stream();
    watchOnce(w, '/api/v1/namespaces', { resourceVersion: '5' }, b.s, new AbortController().signal);
    await flush();
    w.calls[1]?.done(Object.assign(new Error('timed out'), { name: 'TimeoutError' }));
    expect(b.closed[0]).toBeInstanceOf(WatchIdleError);

    const c = stream();
    watchOnce(w, '/api/v1/namespaces', { resourceVersion: '5' }, c.s, new AbortController().signal);
    await flush();
    const refused = new HttpError(403, 'forbidden');
    w.calls[2]?.done(refused);
    expect(c.closed).toEqual([refused]);
  });

  it('ends the watch when the loop aborts it, with the abort’s reason', async () => {
    const w = fakeWatch();
    const a = stream();
    const abort = new AbortController();
    watchOnce(w, '/x', {}, a.s, abort.signal);
    await flush();
    const reason = new Error('stopped');
    abort.abort(reason);
    expect(a.closed).toEqual([reason]);
    expect(w.calls[0]?.controller.signal.aborted).toBe(true);
  });

  it('passes the label selector of its list to its watch', async () => {
    const w = fakeWatch();
    const io = clientNodeListWatch(w, '/api/v1/namespaces', async () => ({ items: [] }), 'a=b');
    io.watch('7', stream().s, new AbortController().signal);
    await flush();
    expect(w.calls[0]?.params).toEqual({ resourceVersion: '7', labelSelector: 'a=b' });
  });
});
