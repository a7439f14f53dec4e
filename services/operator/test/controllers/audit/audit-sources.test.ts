import { describe, expect, it } from '@jest/globals';
import type { KubernetesObject } from '@kubernetes/client-node';
import { AUDIT_JITTER, isolatedNamespaceEvents, periodicAudit } from '../../../src/controllers/audit/audit-sources.js';
import { ResourceInformer } from '../../../src/runtime/informer.js';
import { FakeClock, FakeInformerSource } from '../../runtime/fakes.js';

const ENABLED = 'kubeplus.io/node-isolation-enabled';
const RESOLVED = 'kubeplus.io/node-isolation-resolved';

function ns(name: string, rv: string, labels: Record<string, string> = {}, annotations: Record<string, string> = {}) {
  return {
    apiVersion: 'v1',
    kind: 'Namespace',
    metadata: {
      name,
      resourceVersion: rv,
      labels: { [ENABLED]: 'true', ...labels },
      annotations: { [RESOLVED]: '{}', ...annotations },
    },
  } as KubernetesObject;
}

async function informer(): Promise<{
  source: FakeInformerSource<KubernetesObject>;
  informer: ResourceInformer<KubernetesObject>;
}> {
  const source = new FakeInformerSource<KubernetesObject>();
  const inf = new ResourceInformer(source, { name: 'isolated-namespaces', clock: new FakeClock() });
  inf.start();
  await inf.waitForSync();
  return { source, informer: inf };
}

describe('isolatedNamespaceEvents', () => {
  it('audits a namespace when it appears (replayed on subscribe), when its mandate, label or owner changes, and when it goes', async () => {
    const { source, informer: inf } = await informer();
    source.upsert(ns('cached', '1'));
    const keys: string[] = [];
    const unsubscribe = isolatedNamespaceEvents(inf).subscribe((k) => keys.push(k));
    expect(keys).toEqual(['cached']);

    source.upsert(ns('new', '2'));
    source.upsert(ns('new', '3', { team: 'x' }, { note: 'unrelated' })); // nothing the audit reads
    source.upsert(ns('new', '4', { team: 'x' }, { [RESOLVED]: '{"nodeSelector":{"a":"b"}}' }));
    source.upsert(
      ns('new', '5', { team: 'x' }, { [RESOLVED]: '{"nodeSelector":{"a":"b"}}', 'kubeplus.io/owner': 'g/K/n/x' }),
    );
    source.remove(ns('new', '5'));
    source.upsert(ns('new', '6')); // back again
    expect(keys).toEqual(['cached', 'new', 'new', 'new', 'new', 'new']);

    unsubscribe();
    source.upsert(ns('after', '7'));
    expect(keys).toHaveLength(6);
  });
});

describe('periodicAudit', () => {
  it('enqueues every cached namespace once per interval (plus jitter) while subscribed', async () => {
    const { source, informer: inf } = await informer();
    source.upsert(ns('a', '1'));
    source.upsert(ns('b', '2'));
    const clock = new FakeClock();
    let terms = 0;
    const keys: string[] = [];
    const unsubscribe = periodicAudit(inf, {
      intervalMs: 60_000,
      clock,
      random: () => 0.5,
      onTerm: () => terms++,
    }).subscribe((k) => keys.push(k));
    expect(terms).toBe(1);
    const period = 60_000 * (1 + AUDIT_JITTER * 0.5);
    await clock.advance(period - 1);
    expect(keys).toEqual([]);
    await clock.advance(1);
    expect(keys).toEqual(['a', 'b']);
    source.remove(ns('b', '2'));
    await clock.advance(period);
    expect(keys).toEqual(['a', 'b', 'a']);

    unsubscribe();
    expect(terms).toBe(2);
    await clock.advance(10 * period);
    expect(keys).toEqual(['a', 'b', 'a']);
    expect(clock.pendingTimers()).toBe(0);
  });

  it('bounds the jitter to 0–10% of the interval whatever the random source says', async () => {
    const { source, informer: inf } = await informer();
    source.upsert(ns('a', '1'));
    const firstAt: number[] = [];
    for (const r of [-5, 0, 0.3, 1, 7]) {
      const clock = new FakeClock();
      const start = clock.now();
      const at: number[] = [];
      const unsubscribe = periodicAudit(inf, { intervalMs: 1_000, clock, random: () => r }).subscribe(() =>
        at.push(clock.now() - start),
      );
      await clock.advance(2_000);
      unsubscribe();
      firstAt.push(at[0] ?? Number.NaN);
    }
    expect(firstAt).toEqual([1_000, 1_000, 1_030, 1_100, 1_100]);
  });
});
