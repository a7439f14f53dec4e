import { describe, expect, it } from '@jest/globals';
import type { KubernetesObject } from '@kubernetes/client-node';
import {
  bindSandboxInstanceIndex,
  type IndexedSandboxInstance,
  SandboxInstanceIndex,
} from '../../../src/controllers/instances/sandbox-instance-index.js';
import type { SandboxInstanceMeta } from '../../../src/desired/sandbox-peers.js';
import { DynamicInformers } from '../../../src/runtime/dynamic-informers.js';
import type { GroupVersionResource } from '../../../src/runtime/gvr.js';
import { instance } from '../../fixtures.js';
import { FakeClock, FakeInformerSource, flush } from '../../runtime/fakes.js';

const KATA = '{"minRuntimeClass":"kata","enforce":true}';
const RUNSC = '{"minRuntimeClass":"runsc"}';
const SANDBOX = (annotation: string) => ({ 'kubeplus.io/sandbox-isolation': annotation });

const meta = (namespace: string, name: string, annotation = KATA, kind = 'Agent'): SandboxInstanceMeta => ({
  group: 'cloudark.io',
  kind,
  namespace,
  name,
  annotation,
});
const keyOf = (namespace: string, name: string, plural = 'agents', kind = 'Agent'): string =>
  `cloudark.io/v1/${kind}/${plural}/${namespace}/${name}`;
const keys = (entries: Iterable<IndexedSandboxInstance>): string[] => [...entries].map((e) => e.key).sort();

describe('SandboxInstanceIndex', () => {
  it('files an instance under the tenant namespace it binds: its own namespace, or, in the platform namespace, the namespace named after it', () => {
    const index = new SandboxInstanceIndex();
    index.set(keyOf('team-a', 'a'), 'agents', meta('team-a', 'a'));
    index.set(keyOf('kubeplus', 'team-a'), 'agents', meta('kubeplus', 'team-a'));
    index.set(keyOf('team-b', 'b'), 'agents', meta('team-b', 'b', RUNSC));
    expect(keys(index.inTenant('team-a'))).toEqual([keyOf('kubeplus', 'team-a'), keyOf('team-a', 'a')]);
    expect(index.inTenant('team-b')).toEqual([
      { key: keyOf('team-b', 'b'), meta: meta('team-b', 'b', RUNSC), tenant: 'team-b' },
    ]);
    expect(index.inTenant('kubeplus')).toEqual([]);
    expect(index.size).toBe(3);
    // Another platform namespace: the instance in `kubeplus` binds `kubeplus` itself.
    const other = new SandboxInstanceIndex('platform');
    other.set(keyOf('kubeplus', 'team-a'), 'agents', meta('kubeplus', 'team-a'));
    expect(keys(other.inTenant('kubeplus'))).toEqual([keyOf('kubeplus', 'team-a')]);
    expect(other.inTenant('team-a')).toEqual([]);
  });

  it('keeps an invalid annotation (the reconciler reports it) and an instance binding no valid tenant namespace, out of every tenant', () => {
    const index = new SandboxInstanceIndex();
    index.set(keyOf('team-d', 'd'), 'agents', meta('team-d', 'd', 'not json'));
    index.set(keyOf('kubeplus', 'Not_A_Label'), 'agents', meta('kubeplus', 'Not_A_Label'));
    expect(keys(index.inTenant('team-d'))).toEqual([keyOf('team-d', 'd')]);
    expect(keys(index.all())).toEqual([keyOf('kubeplus', 'Not_A_Label'), keyOf('team-d', 'd')]);
    expect([...index.all()].find((e) => e.meta.name === 'Not_A_Label')?.tenant).toBeUndefined();
  });

  it('finds the instances whose own class has a name, in any namespace', () => {
    const index = new SandboxInstanceIndex();
    index.set(keyOf('team-a', 'agent-x'), 'agents', meta('team-a', 'agent-x'));
    index.set(keyOf('team-z', 'agent-x'), 'agents', meta('team-z', 'agent-x'));
    index.set(keyOf('team-a', 'agent-y'), 'agents', meta('team-a', 'agent-y'));
    expect(keys(index.withOwnClass('kubeplus-sandbox-agent-x'))).toEqual([
      keyOf('team-a', 'agent-x'),
      keyOf('team-z', 'agent-x'),
    ]);
    expect(index.withOwnClass('kubeplus-sandbox-agent-q')).toEqual([]);
  });

  it('follows updates: a changed annotation replaces the entry, a removed one takes it out of every lookup', () => {
    const index = new SandboxInstanceIndex();
    index.set(keyOf('team-a', 'a'), 'agents', meta('team-a', 'a'));
    index.set(keyOf('team-a', 'a'), 'agents', meta('team-a', 'a', RUNSC));
    expect(index.inTenant('team-a').map((e) => e.meta.annotation)).toEqual([RUNSC]);
    expect(index.size).toBe(1);
    index.set(keyOf('team-a', 'a'), 'agents', undefined);
    expect(index.inTenant('team-a')).toEqual([]);
    expect(index.withOwnClass('kubeplus-sandbox-a')).toEqual([]);
    expect([...index.all()]).toEqual([]);
    expect(index.size).toBe(0);
  });

  it('re-files an entry whose tenant namespace changed: never under two tenants', () => {
    const index = new SandboxInstanceIndex();
    index.set('opaque-key', 'agents', meta('team-a', 'a'));
    index.set('opaque-key', 'agents', meta('team-b', 'b'));
    expect(index.inTenant('team-a')).toEqual([]);
    expect(keys(index.inTenant('team-b'))).toEqual(['opaque-key']);
    expect(index.withOwnClass('kubeplus-sandbox-a')).toEqual([]);
    expect(keys(index.withOwnClass('kubeplus-sandbox-b'))).toEqual(['opaque-key']);
  });

  it('forgets every instance of a source (a Kind no longer watched), and only those', () => {
    const index = new SandboxInstanceIndex();
    index.set(keyOf('team-a', 'a'), 'agents', meta('team-a', 'a'));
    index.set(keyOf('team-a', 'db', 'databases', 'Database'), 'databases', meta('team-a', 'db', KATA, 'Database'));
    index.removeSource('agents');
    expect(keys(index.inTenant('team-a'))).toEqual([keyOf('team-a', 'db', 'databases', 'Database')]);
    index.removeSource('agents'); // nothing left of it
    expect(index.size).toBe(1);
  });
});

describe('bindSandboxInstanceIndex', () => {
  const gvr = (resource: string): GroupVersionResource => ({ group: 'cloudark.io', version: 'v1', resource });
  const kindOf = (g: GroupVersionResource): string | undefined =>
    ({ agents: 'Agent', databases: 'Database' })[g.resource];

  it('keeps the index in step with the instance informers: replayed cache, add, update, delete and a removed Kind', async () => {
    const sources = new Map<string, FakeInformerSource<KubernetesObject>>();
    const informers = new DynamicInformers<KubernetesObject>(
      (g) => {
        const source = new FakeInformerSource<KubernetesObject>();
        sources.set(g.resource, source);
        return source;
      },
      { clock: new FakeClock() },
    );
    informers.start();
    informers.ensure(gvr('agents'));
    await flush();
    const agents = sources.get('agents');
    agents?.upsert(instance('cached', 'team-a', SANDBOX(KATA)));
    const index = new SandboxInstanceIndex();
    const unbind = bindSandboxInstanceIndex(index, informers, kindOf);
    expect(keys(index.inTenant('team-a'))).toEqual([keyOf('team-a', 'cached')]); // replayed

    agents?.upsert(instance('b', 'team-a', SANDBOX(RUNSC)));
    agents?.upsert(instance('plain', 'team-a', { 'kubeplus.io/node-isolation': '{}' }));
    informers.ensure(gvr('databases'));
    await flush();
    sources.get('databases')?.upsert(instance('db', 'team-a', SANDBOX(KATA)));
    expect(keys(index.inTenant('team-a'))).toEqual([
      keyOf('team-a', 'b'),
      keyOf('team-a', 'cached'),
      keyOf('team-a', 'db', 'databases', 'Database'),
    ]);

    agents?.upsert(instance('b', 'team-a')); // annotation removed
    agents?.remove(instance('cached', 'team-a', SANDBOX(KATA)));
    expect(keys(index.inTenant('team-a'))).toEqual([keyOf('team-a', 'db', 'databases', 'Database')]);

    agents?.upsert(instance('c', 'team-a', SANDBOX(KATA)));
    await informers.remove(gvr('agents')); // its objects leave the caches without delete events
    expect(keys(index.all())).toEqual([keyOf('team-a', 'db', 'databases', 'Database')]);

    unbind();
    sources.get('databases')?.upsert(instance('db2', 'team-a', SANDBOX(KATA)));
    expect(index.size).toBe(1);
  });
});
