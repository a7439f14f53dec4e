import { describe, expect, it } from '@jest/globals';
import type { KubernetesObject } from '@kubernetes/client-node';
import { bindRuntimeClassIndex, RuntimeClassIndex } from '../../../src/controllers/instances/runtime-class-index.js';
import type { InstanceIdentity } from '../../../src/desired/instance.js';
import { classesForTenant, type RuntimeClassInfo } from '../../../src/desired/sandbox-policy.js';
import { ResourceInformer } from '../../../src/runtime/informer.js';
import { FakeClock, FakeInformerSource, flush } from '../../runtime/fakes.js';

const agent = (namespace: string, name: string): InstanceIdentity => ({
  group: 'cloudark.io',
  kind: 'Agent',
  namespace,
  name,
});
const platform = (name: string, handler = name): RuntimeClassInfo => ({ name, handler, generated: false });
const generated = (name: string, owner: InstanceIdentity | undefined, handler = 'kata'): RuntimeClassInfo =>
  owner === undefined ? { name, handler, generated: true } : { name, handler, generated: true, owner };
const names = (classes: Iterable<RuntimeClassInfo>): string[] => [...classes].map((c) => c.name).sort();

describe('RuntimeClassIndex', () => {
  it("answers a tenant with the platform's classes and the classes generated for that tenant's instances", () => {
    const index = new RuntimeClassIndex();
    index.set('gvisor', platform('gvisor', 'runsc'));
    index.set('kata', platform('kata'));
    // team-a's instances: one in its own namespace, one in the platform namespace named after it.
    index.set('kubeplus-sandbox-a', generated('kubeplus-sandbox-a', agent('team-a', 'a')));
    index.set('kubeplus-sandbox-team-a', generated('kubeplus-sandbox-team-a', agent('kubeplus', 'team-a')));
    index.set('kubeplus-sandbox-b', generated('kubeplus-sandbox-b', agent('team-b', 'b')));
    // Markers without a readable owner: no tenant's, never allowed anywhere.
    index.set('kubeplus-sandbox-x', generated('kubeplus-sandbox-x', undefined));
    expect(names(index.forTenant('team-a'))).toEqual([
      'gvisor',
      'kata',
      'kubeplus-sandbox-a',
      'kubeplus-sandbox-team-a',
    ]);
    expect(names(index.forTenant('team-b'))).toEqual(['gvisor', 'kata', 'kubeplus-sandbox-b']);
    expect(names(index.forTenant('team-c'))).toEqual(['gvisor', 'kata']);
    expect(names(index.byName().values())).toEqual([
      'gvisor',
      'kata',
      'kubeplus-sandbox-a',
      'kubeplus-sandbox-b',
      'kubeplus-sandbox-team-a',
      'kubeplus-sandbox-x',
    ]);
    expect(index.size).toBe(6);
  });

  it("knows an instance's own class (its name), not another class it generated or one it merely carries the markers of", () => {
    const index = new RuntimeClassIndex();
    const a = agent('team-a', 'a');
    index.set('kubeplus-sandbox-a', generated('kubeplus-sandbox-a', a, 'runsc'));
    expect(index.ownClassOf(a)).toEqual(generated('kubeplus-sandbox-a', a, 'runsc'));
    expect(index.ownClassOf(agent('team-b', 'a'))).toBeUndefined(); // same name, other namespace
    index.set('renamed', generated('renamed', agent('team-a', 'z')));
    expect(index.ownClassOf(agent('team-a', 'z'))).toBeUndefined();
    index.set('kubeplus-sandbox-a', undefined);
    expect(index.ownClassOf(a)).toBeUndefined();
  });

  it('re-files a class whose owner changed, and forgets a deleted one everywhere', () => {
    const index = new RuntimeClassIndex();
    index.set('kubeplus-sandbox-a', generated('kubeplus-sandbox-a', agent('team-a', 'a')));
    // Taken over by team-b's instance of the same name (the markers rewritten): team-a loses it.
    index.set('kubeplus-sandbox-a', generated('kubeplus-sandbox-a', agent('team-b', 'a')));
    expect(names(index.forTenant('team-a'))).toEqual([]);
    expect(names(index.forTenant('team-b'))).toEqual(['kubeplus-sandbox-a']);
    expect(index.ownClassOf(agent('team-a', 'a'))).toBeUndefined();
    expect(index.ownClassOf(agent('team-b', 'a'))?.owner).toEqual(agent('team-b', 'a'));
    // The markers removed by an admin: now a platform class, every tenant's.
    index.set('kubeplus-sandbox-a', platform('kubeplus-sandbox-a', 'kata'));
    expect(names(index.forTenant('team-c'))).toEqual(['kubeplus-sandbox-a']);
    expect(index.ownClassOf(agent('team-b', 'a'))).toBeUndefined();
    index.set('kubeplus-sandbox-a', undefined);
    expect(index.forTenant('team-c')).toEqual([]);
    expect(index.byName().size).toBe(0);
    expect(index.size).toBe(0);
  });

  it('answers every tenant as classesForTenant over every class, through any sequence of changes', () => {
    // A seeded walk (the same every run): sets and deletes over a small pool of names, owners and handlers.
    let seed = 7;
    const next = (n: number): number => {
      seed = (seed * 1103515245 + 12345) % 2 ** 31;
      return seed % n;
    };
    const owners = [agent('team-a', 'a'), agent('kubeplus', 'team-a'), agent('team-b', 'b'), agent('kubeplus', 'c')];
    const tenants = ['team-a', 'team-b', 'c', 'kubeplus', 'team-z'];
    const pool = ['kata', 'gvisor', 'kubeplus-sandbox-a', 'kubeplus-sandbox-team-a', 'kubeplus-sandbox-b', 'x'];
    const platformNamespace = 'kubeplus';
    const index = new RuntimeClassIndex(platformNamespace);
    const truth = new Map<string, RuntimeClassInfo>();
    for (let step = 0; step < 2000; step++) {
      const name = pool[next(pool.length)] as string;
      const kind = next(4);
      const info =
        kind === 0
          ? undefined
          : kind === 1
            ? platform(name, ['runc', 'runsc', 'kata'][next(3)])
            : generated(name, kind === 2 ? owners[next(owners.length)] : undefined);
      index.set(name, info);
      if (info === undefined) truth.delete(name);
      else truth.set(name, info);
      for (const tenant of tenants) {
        expect(names(index.forTenant(tenant))).toEqual(
          names(classesForTenant([...truth.values()], tenant, platformNamespace)),
        );
      }
      expect(new Map(index.byName())).toEqual(truth);
    }
  });

  it('follows the RuntimeClass informer: its cached classes first, then every add, update and delete', async () => {
    const source = new FakeInformerSource<KubernetesObject>();
    const informer = new ResourceInformer(source, { clock: new FakeClock(), name: 'runtimeclasses' });
    const rc = (name: string, handler: string, owner?: string): KubernetesObject & { handler: string } => ({
      apiVersion: 'node.k8s.io/v1',
      kind: 'RuntimeClass',
      metadata: {
        name,
        ...(owner === undefined
          ? {}
          : {
              labels: { 'app.kubernetes.io/managed-by': 'kubeplus-isolation' },
              annotations: { 'kubeplus.io/owner': owner },
            }),
      },
      handler,
    });
    source.upsert(rc('kata', 'kata'));
    informer.start();
    await flush();
    const index = new RuntimeClassIndex();
    const unbind = bindRuntimeClassIndex(index, informer);
    expect(names(index.forTenant('team-a'))).toEqual(['kata']);

    source.upsert(rc('kubeplus-sandbox-a', 'runsc', 'cloudark.io/Agent/team-a/a'));
    await flush();
    expect(index.ownClassOf(agent('team-a', 'a'))?.handler).toBe('runsc');
    source.upsert(rc('kubeplus-sandbox-a', 'kata', 'cloudark.io/Agent/team-a/a'));
    await flush();
    expect(index.ownClassOf(agent('team-a', 'a'))?.handler).toBe('kata');
    source.remove(rc('kata', 'kata'));
    await flush();
    expect(names(index.forTenant('team-a'))).toEqual(['kubeplus-sandbox-a']);

    unbind();
    source.upsert(rc('gvisor', 'runsc'));
    await flush();
    expect(index.byName().has('gvisor')).toBe(false);
    await informer.stop();
  });
});
