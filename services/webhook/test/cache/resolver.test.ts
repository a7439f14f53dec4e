import { describe, expect, it } from '@jest/globals';
import type { LiveLookupResult } from '../../src/admission/metric-labels.js';
import { NamespaceCache, type NamespaceLike } from '../../src/cache/namespace-cache.js';
import { IsolationResolver, type NamespaceReader } from '../../src/cache/resolver.js';
import { namespace, TEAM_A, TEAM_A_ANNOTATION } from '../helpers/fixtures.js';

/** A reader answering from a table, counting calls; `hang` never answers (until aborted). */
class FakeReader implements NamespaceReader {
  calls: string[] = [];
  aborted = 0;
  constructor(private readonly answer: (name: string) => Promise<NamespaceLike | undefined> | 'hang') {}

  read(name: string, signal: AbortSignal): Promise<NamespaceLike | undefined> {
    this.calls.push(name);
    const a = this.answer(name);
    if (a !== 'hang') return a;
    return new Promise((_resolve, reject) => {
      signal.addEventListener('abort', () => {
        this.aborted += 1;
        reject(signal.reason);
      });
    });
  }
}

function setup(reader: NamespaceReader, timeoutMs = 1_000, maxConcurrentLookups?: number) {
  const cache = new NamespaceCache();
  const lookups: LiveLookupResult[] = [];
  const resolver = new IsolationResolver(cache, reader, {
    liveLookupTimeoutMs: timeoutMs,
    onLiveLookup: (r) => lookups.push(r),
    ...(maxConcurrentLookups !== undefined && { maxConcurrentLookups }),
  });
  return { cache, resolver, lookups };
}

describe('IsolationResolver', () => {
  it('answers a cached namespace from the cache, at once (no Promise) and without a live GET', () => {
    const reader = new FakeReader(async () => undefined);
    const { cache, resolver, lookups } = setup(reader);
    cache.upsert(namespace('team-a', { annotation: TEAM_A_ANNOTATION }));
    expect(resolver.resolve('team-a')).toEqual({ ok: true, spec: TEAM_A });
    expect(reader.calls).toEqual([]);
    expect(lookups).toEqual([]);
  });

  it.each([
    ['annotation_missing', namespace('team-a')],
    ['annotation_invalid', namespace('team-a', { annotation: '{"nodeSelector": 3}' })],
  ])('fails open with %s for a cached namespace without a usable annotation', async (reason, ns) => {
    const { cache, resolver } = setup(new FakeReader(async () => undefined));
    cache.upsert(ns);
    expect(await resolver.resolve('team-a')).toMatchObject({ ok: false, reason });
  });

  it('on a miss, GETs the namespace once, uses it and caches it', async () => {
    const reader = new FakeReader(async (name) => namespace(name, { annotation: TEAM_A_ANNOTATION }));
    const { cache, resolver, lookups } = setup(reader);
    expect(resolver.resolve('other')).toBeInstanceOf(Promise);
    await resolver.resolve('other');
    reader.calls.length = 0;
    lookups.length = 0;
    expect(await resolver.resolve('team-a')).toEqual({ ok: true, spec: TEAM_A });
    expect(await resolver.resolve('team-a')).toEqual({ ok: true, spec: TEAM_A });
    expect(reader.calls).toEqual(['team-a']);
    expect(lookups).toEqual(['found']);
    expect(cache.get('team-a')).toMatchObject({ state: 'valid' });
  });

  it('shares one GET between concurrent misses of the same namespace', async () => {
    let release: (ns: NamespaceLike) => void = () => undefined;
    const reader = new FakeReader(() => new Promise((resolve) => (release = resolve)));
    const { resolver } = setup(reader);
    const pending = [resolver.resolve('team-a'), resolver.resolve('team-a'), resolver.resolve('team-a')];
    release(namespace('team-a', { annotation: TEAM_A_ANNOTATION }));
    for (const r of await Promise.all(pending)) expect(r).toEqual({ ok: true, spec: TEAM_A });
    expect(reader.calls).toEqual(['team-a']);
  });

  // Issue 34: reviews no API server sent, each naming another namespace, each cost a live GET.
  it('looks up at most maxConcurrentLookups namespaces at once; a miss of another fails open at once (lookup_throttled)', async () => {
    const releases: Array<() => void> = [];
    const reader = new FakeReader(
      (name) =>
        new Promise((resolve) => releases.push(() => resolve(namespace(name, { annotation: TEAM_A_ANNOTATION })))),
    );
    const { resolver, lookups } = setup(reader, 1_000, 2);
    const first = resolver.resolve('ns-1');
    const second = resolver.resolve('ns-2');
    // A third name: no GET, an answer at once.
    expect(resolver.resolve('ns-3')).toEqual({
      ok: false,
      reason: 'lookup_throttled',
      detail: '2 live GETs of other namespaces are in flight already',
    });
    // A name already in flight still shares its GET.
    const again = resolver.resolve('ns-1');
    expect(reader.calls).toEqual(['ns-1', 'ns-2']);
    expect(lookups).toEqual(['throttled']);
    for (const release of releases) release();
    for (const r of await Promise.all([first, second, again])) expect(r).toEqual({ ok: true, spec: TEAM_A });
    // The GETs are done: a new name is looked up again.
    await resolver.resolve('ns-4');
    expect(reader.calls).toEqual(['ns-1', 'ns-2', 'ns-4']);
  });

  it('fails open with namespace_not_found when the GET finds nothing, and caches nothing', async () => {
    const reader = new FakeReader(async () => undefined);
    const { cache, resolver, lookups } = setup(reader);
    expect(await resolver.resolve('gone')).toMatchObject({ ok: false, reason: 'namespace_not_found' });
    expect(lookups).toEqual(['not_found']);
    expect(cache.size).toBe(0);
  });

  it('ignores a namespace the GET finds without the label (namespace_not_labeled), caching nothing', async () => {
    const reader = new FakeReader(async (name) => namespace(name, { labeled: false, annotation: TEAM_A_ANNOTATION }));
    const { cache, resolver, lookups } = setup(reader);
    expect(await resolver.resolve('plain')).toMatchObject({ ok: false, reason: 'namespace_not_labeled' });
    expect(lookups).toEqual(['not_labeled']);
    expect(cache.size).toBe(0);
  });

  it('fails open with lookup_timeout when the GET does not answer in time, and aborts it', async () => {
    const reader = new FakeReader(() => 'hang');
    const { resolver, lookups } = setup(reader, 20);
    const r = await resolver.resolve('slow');
    expect(r).toMatchObject({ ok: false, reason: 'lookup_timeout' });
    expect(r.ok === false && r.detail).toContain('20 ms');
    expect(lookups).toEqual(['timeout']);
    expect(reader.aborted).toBe(1);
  });

  it('times out even when the reader ignores the abort signal', async () => {
    const reader: NamespaceReader = { read: () => new Promise(() => undefined) };
    const { resolver } = setup(reader, 20);
    expect(await resolver.resolve('slow')).toMatchObject({ ok: false, reason: 'lookup_timeout' });
  });

  it('fails open with lookup_failed on an API error, with its message', async () => {
    const reader = new FakeReader(async () => {
      throw new Error('HTTP-Code: 403 Forbidden');
    });
    const { resolver, lookups } = setup(reader);
    const r = await resolver.resolve('team-a');
    expect(r).toMatchObject({ ok: false, reason: 'lookup_failed' });
    expect(r.ok === false && r.detail).toContain('403');
    expect(lookups).toEqual(['error']);
  });

  it('retries the GET on the next request after a failure', async () => {
    let fail = true;
    const reader = new FakeReader(async (name) => {
      if (fail) throw new Error('connection refused');
      return namespace(name, { annotation: TEAM_A_ANNOTATION });
    });
    const { resolver } = setup(reader);
    expect((await resolver.resolve('team-a')).ok).toBe(false);
    fail = false;
    expect((await resolver.resolve('team-a')).ok).toBe(true);
    expect(reader.calls).toHaveLength(2);
  });

  it('prefers what the informer delivered while the GET was in flight', async () => {
    let release: (ns: NamespaceLike) => void = () => undefined;
    const reader = new FakeReader(() => new Promise((resolve) => (release = resolve)));
    const { cache, resolver } = setup(reader);
    const pending = resolver.resolve('team-a');
    const newer = JSON.stringify({ nodeSelector: { pool: 'newer' }, tolerations: [] });
    cache.upsert(namespace('team-a', { annotation: newer, resourceVersion: '9' }));
    release(namespace('team-a', { annotation: TEAM_A_ANNOTATION, resourceVersion: '8' }));
    expect(await pending).toMatchObject({ ok: true, spec: { nodeSelector: { pool: 'newer' } } });
  });
});
