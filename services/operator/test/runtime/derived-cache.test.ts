import { describe, expect, it } from '@jest/globals';
import type { KubernetesObject } from '@kubernetes/client-node';
import { derivedFromCache } from '../../src/runtime/derived-cache.js';
import { ResourceInformer } from '../../src/runtime/informer.js';
import { FakeClock, FakeInformerSource, flush, obj } from './fakes.js';

describe('derivedFromCache', () => {
  it('computes once for any number of reads, and again only after an add, update or delete', async () => {
    const source = new FakeInformerSource<KubernetesObject>();
    const informer = new ResourceInformer(source, { clock: new FakeClock(), name: 'runtimeclasses' });
    source.upsert(obj('runc'));
    informer.start();
    await flush();
    let computed = 0;
    const names = derivedFromCache(informer, () => {
      computed++;
      return informer.list().map((o) => o.metadata?.name);
    });
    for (let i = 0; i < 1000; i++) expect(names.read()).toEqual(['runc']);
    expect(computed).toBe(1);

    source.upsert(obj('gvisor'));
    await flush();
    expect(names.read()).toEqual(['runc', 'gvisor']);
    source.upsert(obj('gvisor', undefined, '2'));
    await flush();
    names.read();
    source.remove(obj('runc'));
    await flush();
    expect(names.read()).toEqual(['gvisor']);
    expect(computed).toBe(4);

    names.stop(); // no longer told of changes: keeps what it has
    source.upsert(obj('kata'));
    await flush();
    expect(names.read()).toEqual(['gvisor']);
    expect(computed).toBe(4);
    await informer.stop();
  });
});
