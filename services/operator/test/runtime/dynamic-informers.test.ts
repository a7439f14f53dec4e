import { describe, expect, it } from '@jest/globals';
import type { KubernetesObject, V1CustomResourceDefinition } from '@kubernetes/client-node';
import { bindCrdInformer, DynamicInformers } from '../../src/runtime/dynamic-informers.js';
import { checkGvr, crdGvr, type GroupVersionResource } from '../../src/runtime/gvr.js';
import { ResourceInformer } from '../../src/runtime/informer.js';
import { FakeClock, FakeInformerSource, flush, HttpError, obj } from './fakes.js';

const gvr = (resource: string, version = 'v1'): GroupVersionResource => ({ group: 'cloudark.io', version, resource });

describe('DynamicInformers', () => {
  function dynamic() {
    const clock = new FakeClock();
    const sources = new Map<string, FakeInformerSource<KubernetesObject>>();
    const set = new DynamicInformers<KubernetesObject>(
      (g) => {
        const source = new FakeInformerSource<KubernetesObject>();
        sources.set(`${g.group}/${g.version}/${g.resource}`, source);
        return source;
      },
      { clock },
    );
    return { set, sources, clock };
  }

  it('starts an informer for a kind added at runtime and stops it when the kind is removed', async () => {
    const { set, sources } = dynamic();
    set.start();
    set.ensure(gvr('agents'));
    await flush();
    const source = sources.get('cloudark.io/v1/agents');
    expect(source?.starts).toBe(1);
    expect(set.get(gvr('agents'))?.hasSynced()).toBe(true);
    expect(set.ensure(gvr('agents'))).toBe(set.get(gvr('agents'))); // idempotent
    await set.remove(gvr('agents'));
    expect(source?.stops).toBe(1);
    expect(set.kinds()).toEqual([]);
  });

  it('defers starting kinds added before start', async () => {
    const { set, sources } = dynamic();
    set.ensure(gvr('agents'));
    await flush();
    expect(sources.get('cloudark.io/v1/agents')?.starts).toBe(0);
    set.start();
    await flush();
    expect(sources.get('cloudark.io/v1/agents')?.starts).toBe(1);
  });

  it('gives handlers events of current and later kinds, tagged with the kind', async () => {
    const { set, sources } = dynamic();
    set.start();
    set.ensure(gvr('agents'));
    sources.get('cloudark.io/v1/agents')?.upsert(obj('existing', 'team-a'));
    const got: string[] = [];
    const off = set.addEventHandler({
      add: (g, o) => got.push(`${g.resource}:${o.metadata?.name}`),
      delete: (g, o) => got.push(`-${g.resource}:${o.metadata?.name}`),
    });
    set.ensure(gvr('databases'));
    sources.get('cloudark.io/v1/databases')?.upsert(obj('db', 'team-b'));
    sources.get('cloudark.io/v1/agents')?.remove(obj('existing', 'team-a'));
    expect(got).toEqual(['agents:existing', 'databases:db', '-agents:existing']);
    off();
    sources.get('cloudark.io/v1/databases')?.upsert(obj('db2', 'team-b'));
    expect(got).toHaveLength(3);
  });

  it('tells handlers when a kind is removed (its objects leave the caches without delete events), once, and only handlers still bound', async () => {
    const { set, sources } = dynamic();
    set.start();
    set.ensure(gvr('agents'));
    set.ensure(gvr('databases'));
    sources.get('cloudark.io/v1/agents')?.upsert(obj('a', 'team-a'));
    const got: string[] = [];
    set.addEventHandler({
      delete: (g, o) => got.push(`-${g.resource}:${o.metadata?.name}`),
      removed: (g) => got.push(`removed ${g.resource}`),
    });
    const unbound: string[] = [];
    set.addEventHandler({ removed: (g) => unbound.push(g.resource) })();
    await set.remove(gvr('agents'));
    await set.remove(gvr('agents')); // not watched any more: nothing to tell
    expect(got).toEqual(['removed agents']);
    expect(unbound).toEqual([]);
    expect(set.kinds()).toEqual([gvr('databases')]);
  });

  it('is synced only when every current kind is, and stale when any is', async () => {
    const { set, sources, clock } = dynamic();
    expect(set.hasSynced()).toBe(true); // no kinds yet
    set.start();
    set.ensure(gvr('agents'));
    await flush();
    set.ensure(gvr('databases'));
    const db = sources.get('cloudark.io/v1/databases');
    expect(db).toBeDefined();
    await flush();
    expect(set.hasSynced()).toBe(true);
    db?.startPlan.push(...Array<'list-error'>(10).fill('list-error'));
    db?.failWatch(new HttpError(500));
    await clock.advance(60_000);
    expect(set.isStale()).toBe(true);
    await set.remove(gvr('databases'));
    expect(set.isStale()).toBe(false);
    await expect(set.waitForSync()).resolves.toBe(true);
  });

  it('rejects group/version/resource values that are not DNS names (they end up in URL paths)', () => {
    const { set } = dynamic();
    expect(() => set.ensure({ group: 'cloudark.io', version: 'v1', resource: '../secrets' })).toThrow(/invalid/);
    expect(() => checkGvr({ group: 'Bad_Group', version: 'v1', resource: 'agents' })).toThrow(/invalid/);
    expect(checkGvr(gvr('agents'))).toEqual(gvr('agents'));
  });
});

function crd(name: string, plural: string, versions: Array<{ name: string; served: boolean; storage: boolean }>) {
  return {
    apiVersion: 'apiextensions.k8s.io/v1',
    kind: 'CustomResourceDefinition',
    metadata: { name, resourceVersion: String(Math.random()) },
    spec: { group: 'cloudark.io', names: { plural, kind: 'X' }, scope: 'Namespaced', versions },
  } as unknown as V1CustomResourceDefinition;
}

describe('crdGvr', () => {
  it('picks the served storage version, else the first served one', () => {
    expect(
      crdGvr(
        crd('agents.cloudark.io', 'agents', [
          { name: 'v1alpha1', served: true, storage: false },
          { name: 'v1', served: true, storage: true },
        ]),
      ),
    ).toEqual(gvr('agents', 'v1'));
    expect(
      crdGvr(
        crd('agents.cloudark.io', 'agents', [
          { name: 'v2', served: true, storage: false },
          { name: 'v1', served: false, storage: true },
        ]),
      ),
    ).toEqual(gvr('agents', 'v2'));
  });

  it('returns undefined for a CRD it cannot use instead of throwing', () => {
    expect(crdGvr(crd('x.cloudark.io', 'x', [{ name: 'v1', served: false, storage: true }]))).toBeUndefined();
    expect(crdGvr({ metadata: { name: 'broken' } } as unknown as V1CustomResourceDefinition)).toBeUndefined();
    expect(crdGvr(crd('x.cloudark.io', 'Not/Valid', [{ name: 'v1', served: true, storage: true }]))).toBeUndefined();
  });
});

describe('bindCrdInformer', () => {
  it('starts an informer when a selected CRD appears, swaps it on a version change, stops it on delete', async () => {
    const clock = new FakeClock();
    const crdSource = new FakeInformerSource<V1CustomResourceDefinition>();
    const crds = new ResourceInformer(crdSource, { name: 'crds', clock });
    const started: string[] = [];
    const dyn = new DynamicInformers<KubernetesObject>(
      (g) => {
        started.push(`${g.resource}/${g.version}`);
        return new FakeInformerSource<KubernetesObject>();
      },
      { clock },
    );
    dyn.start();
    crdSource.upsert(crd('agents.cloudark.io', 'agents', [{ name: 'v1', served: true, storage: true }]));
    bindCrdInformer(crds, dyn, (c) => (c.metadata?.name?.endsWith('.cloudark.io') ? crdGvr(c) : undefined));
    expect(dyn.kinds()).toEqual([gvr('agents')]); // replayed from the cache
    crdSource.upsert(crd('other.example.com', 'others', [{ name: 'v1', served: true, storage: true }]));
    expect(dyn.kinds()).toHaveLength(1); // not selected
    crdSource.upsert(
      crd('agents.cloudark.io', 'agents', [
        { name: 'v1', served: true, storage: false },
        { name: 'v2', served: true, storage: true },
      ]),
    );
    await flush();
    expect(dyn.kinds()).toEqual([gvr('agents', 'v2')]);
    crdSource.remove(crd('agents.cloudark.io', 'agents', []));
    await flush();
    expect(dyn.kinds()).toEqual([]);
    expect(started).toEqual(['agents/v1', 'agents/v2']);
  });

  it('survives a throwing selector', () => {
    const clock = new FakeClock();
    const crdSource = new FakeInformerSource<V1CustomResourceDefinition>();
    const crds = new ResourceInformer(crdSource, { name: 'crds', clock });
    const dyn = new DynamicInformers<KubernetesObject>(() => new FakeInformerSource<KubernetesObject>(), { clock });
    bindCrdInformer(crds, dyn, () => {
      throw new Error('selector bug');
    });
    expect(() =>
      crdSource.upsert(crd('a.cloudark.io', 'a', [{ name: 'v1', served: true, storage: true }])),
    ).not.toThrow();
    expect(dyn.kinds()).toEqual([]);
  });
});
