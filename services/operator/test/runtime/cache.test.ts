import { describe, expect, it } from '@jest/globals';
import type { KubernetesObject } from '@kubernetes/client-node';
import { Caches } from '../../src/runtime/cache.js';
import { ResourceInformer } from '../../src/runtime/informer.js';
import { createOperatorMetrics } from '../../src/runtime/runtime-metrics.js';
import { FakeClock, FakeInformerSource, obj } from './fakes.js';

function request(name: string, resource: string, labelSelector?: string) {
  const sources: FakeInformerSource<KubernetesObject>[] = [];
  return {
    sources,
    request: {
      name,
      resource,
      labelSelector,
      source: () => {
        const source = new FakeInformerSource<KubernetesObject>();
        sources.push(source);
        return source;
      },
    },
  };
}

describe('Caches', () => {
  it('hands out one informer per resource and label selector, from one source', () => {
    const caches = new Caches({ clock: new FakeClock() });
    const owned = request('namespaces', 'v1/namespaces', 'kubeplus.io/owner-uid');
    const first = caches.informer(owned.request);
    expect(caches.informer(owned.request)).toBe(first);
    expect(owned.sources).toHaveLength(1);
    const isolated = request('isolated-namespaces', 'v1/namespaces', 'kubeplus.io/node-isolation-enabled=true');
    expect(caches.informer(isolated.request)).not.toBe(first);
    expect(caches.all().map((c) => c.name)).toEqual(['namespaces', 'isolated-namespaces']);
  });

  it('refuses one resource and selector under two names, and two caches of one name', () => {
    const caches = new Caches();
    caches.informer(request('namespaces', 'v1/namespaces', 'a=b').request);
    expect(() => caches.informer(request('other', 'v1/namespaces', 'a=b').request)).toThrow(
      'caches: v1/namespaces?a=b is cached as namespaces, asked for as other',
    );
    expect(() => caches.informer(request('namespaces', 'v1/namespaces', 'c=d').request)).toThrow(
      'caches: duplicate namespaces',
    );
  });

  it('waits only for the must-sync caches; one asked for as must-sync by any setup is waited for', async () => {
    const clock = new FakeClock();
    const caches = new Caches({ clock });
    const late = request('mutatingwebhookconfigurations', 'admissionregistration.k8s.io/v1/mwc');
    caches.informer({ ...late.request, mustSync: false });
    const shared = request('runtimeclasses', 'node.k8s.io/v1/runtimeclasses');
    caches.informer({ ...shared.request, mustSync: false });
    caches.informer(shared.request);
    expect(caches.mustSync().map((c) => c.name)).toEqual(['runtimeclasses']);
    expect(caches.readiness()).toEqual({ ok: false, message: 'not synced: runtimeclasses' });
    caches.start();
    await caches.waitForSync(new AbortController().signal);
    expect(caches.readiness()).toEqual({ ok: true, message: 'informers synced' });
    expect(late.sources[0]?.running).toBe(true);
    await caches.stop();
    expect(late.sources[0]?.running).toBe(false);
  });

  it('binds handlers when it starts, before any cache does, and unbinds them once all have stopped', async () => {
    const caches = new Caches({ clock: new FakeClock() });
    const source = new FakeInformerSource<KubernetesObject>();
    source.objects.set('/a', obj('a'));
    const informer = caches.add(new ResourceInformer(source, { name: 'things' }));
    const order: string[] = [];
    caches.bind(() => {
      order.push(`bind (running=${source.running})`);
      const unbind = informer.addEventHandler({ add: (o) => order.push(`add ${o.metadata?.name}`) });
      return () => {
        order.push(`unbind (running=${source.running})`);
        unbind();
      };
    });
    expect(order).toEqual([]);
    caches.start();
    await caches.waitForSync(new AbortController().signal);
    await caches.stop();
    expect(order).toEqual(['bind (running=false)', 'add a', 'unbind (running=false)']);
  });

  it('reports every cache as kubeplus_operator_informer_synced, or what it is told to report for one', async () => {
    const metrics = createOperatorMetrics({ controllers: [], resources: [], annotations: [], defaultMetrics: false });
    const caches = new Caches({ clock: new FakeClock(), metrics });
    caches.informer(request('namespaces', 'v1/namespaces').request);
    caches.add(new ResourceInformer(new FakeInformerSource(), { name: 'instances' }), {
      mustSync: false,
      synced: { hasSynced: () => true, isStale: () => false },
    });
    const text = await metrics.registry.metrics();
    expect(text).toContain('kubeplus_operator_informer_synced{resource="namespaces"} 0');
    expect(text).toContain('kubeplus_operator_informer_synced{resource="instances"} 1');
  });
});
