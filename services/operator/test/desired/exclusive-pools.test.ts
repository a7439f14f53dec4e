import { describe, expect, it } from '@jest/globals';
import {
  mandatedTaintPatterns,
  type NodeIsolationSpec,
  type Toleration,
  targetsPool,
  toleratesPattern,
} from '@kubeplus-isolation/spec';
import fc from 'fast-check';
import {
  type ExclusivePoolsSpec,
  exclusivePoolsSpec,
  type Mandate,
  type ReachByEffect,
  specBytes,
  specUpToDate,
} from '../../src/desired/exclusive-pools.js';

const dedicated = (pool: string): NodeIsolationSpec => ({
  nodeSelector: { pool, 'kubernetes.io/os': 'linux' },
  tolerations: [{ key: 'dedicated', operator: 'Equal', value: pool, effect: 'NoSchedule' }],
});

/** The exclusive-pools policy's judgement, lookup for lookup as its CEL makes it (files/exclusive-pools.yaml). */
function indexedJudge(
  p: ExclusivePoolsSpec,
  ns: string,
  pod: { nodeSelector?: Record<string, string>; tolerations?: Toleration[] },
): boolean {
  const foreign = (r: ReachByEffect, effect: string): boolean => {
    const e = r[effect as keyof ReachByEffect];
    return e !== undefined && !e.owners.includes(ns);
  };
  const sel = pod.nodeSelector ?? {};
  const bySelector = Object.entries(sel).some(([k, v]) =>
    (p.selectors[`${k}=${v}`] ?? []).some(
      (c) => !c.owners.includes(ns) && Object.entries(c.selector).every(([sk, sv]) => sel[sk] === sv),
    ),
  );
  const byToleration = (pod.tolerations ?? []).some((t) => {
    const key = t.key ?? '';
    const exists = t.operator === 'Exists';
    const effect = t.effect ? t.effect : 'All';
    if (key === '') return exists && foreign(p.anyKey, effect);
    const k = p.taints[key];
    if (k === undefined) return false;
    if (exists) return foreign(k.exists, effect);
    const v = k.values[t.value ?? ''];
    return foreign(k.open, effect) || (v !== undefined && foreign(v, effect));
  });
  return bySelector || byToleration;
}

/** The same question asked of every mandate, one by one (packages/spec pools.ts). */
function bruteJudge(
  mandates: readonly Mandate[],
  ns: string,
  pod: { nodeSelector?: Record<string, string>; tolerations?: Toleration[] },
): boolean {
  return mandates.some((m) => {
    const own = mandates.filter((o) => o.namespace === ns).map((o) => o.spec);
    if (targetsPool(pod, m.spec.nodeSelector) && !own.some((o) => sameSelector(o.nodeSelector, m.spec.nodeSelector)))
      return true;
    return mandatedTaintPatterns(m.spec.tolerations).some(
      (pattern) =>
        (pod.tolerations ?? []).some((t) => toleratesPattern(t, pattern)) &&
        !own.some((o) =>
          mandatedTaintPatterns(o.tolerations).some((q) => JSON.stringify(q) === JSON.stringify(pattern)),
        ),
    );
  });
}
const sameSelector = (a: Record<string, string>, b: Record<string, string>): boolean =>
  JSON.stringify(Object.entries(a).sort()) === JSON.stringify(Object.entries(b).sort());

describe('exclusivePoolsSpec', () => {
  it('indexes each pool under the pair the fewest pools share, with its whole selector and owners', () => {
    const spec = exclusivePoolsSpec([
      { namespace: 'team-a', spec: dedicated('a') },
      { namespace: 'team-b', spec: dedicated('b') },
      { namespace: 'team-b2', spec: dedicated('b') },
    ]);
    expect(spec.namespaces).toBe(3);
    expect(spec.selectors).toEqual({
      'pool=a': [{ selector: { 'kubernetes.io/os': 'linux', pool: 'a' }, owners: ['team-a'] }],
      'pool=b': [{ selector: { 'kubernetes.io/os': 'linux', pool: 'b' }, owners: ['team-b', 'team-b2'] }],
    });
    expect(spec.taints.dedicated?.values.a).toEqual({
      All: { owners: ['team-a'] },
      NoSchedule: { owners: ['team-a'] },
    });
    expect(spec.taints.dedicated?.values.b?.NoSchedule).toEqual({ owners: ['team-b', 'team-b2'] });
    // Exists on the key, or on every key, reaches both pools: nobody owns both.
    expect(spec.taints.dedicated?.exists).toEqual({ All: { owners: [] }, NoSchedule: { owners: [] } });
    expect(spec.anyKey).toEqual({ All: { owners: [] }, NoSchedule: { owners: [] } });
    expect(spec.taints.dedicated?.open).toEqual({});
  });

  it('a mandate tolerating any value of a key (Exists) is reached by every Equal of that key; no effect: every effect', () => {
    const spec = exclusivePoolsSpec([
      { namespace: 'gpu', spec: { nodeSelector: {}, tolerations: [{ key: 'nvidia.com/gpu', operator: 'Exists' }] } },
    ]);
    expect(spec.selectors).toEqual({});
    const all = { owners: ['gpu'] };
    expect(spec.taints['nvidia.com/gpu']?.open).toEqual({
      All: all,
      NoSchedule: all,
      PreferNoSchedule: all,
      NoExecute: all,
    });
  });

  it('judged through its lookups, it says what judging every mandate one by one says', () => {
    const keys = ['dedicated', 'team', 'gpu'];
    const values = ['a', 'b', 'c'];
    const effects = [undefined, 'NoSchedule', 'NoExecute', 'PreferNoSchedule'] as const;
    const toleration = fc
      .record(
        {
          key: fc.constantFrom('', ...keys),
          operator: fc.constantFrom('Exists', 'Equal'),
          value: fc.constantFrom(...values),
          effect: fc.constantFrom(...effects),
        },
        { requiredKeys: ['key', 'operator'] },
      )
      .map((t) => {
        const out: Toleration = { ...t, effect: t.effect } as Toleration;
        if (out.effect === undefined) delete out.effect;
        if (out.operator === 'Exists') delete out.value;
        if (out.key === '') out.operator = 'Exists';
        return out;
      });
    const selector = fc.dictionary(fc.constantFrom('pool', 'zone', 'os'), fc.constantFrom(...values), { maxKeys: 2 });
    const mandate = fc.record({
      namespace: fc.constantFrom('ns1', 'ns2', 'ns3', 'ns4'),
      spec: fc.record({
        nodeSelector: selector,
        tolerations: fc.array(
          toleration.filter((t) => t.key !== ''),
          { maxLength: 2 },
        ),
      }),
    });
    const mandates = fc.uniqueArray(mandate, { selector: (m) => m.namespace, maxLength: 4 });
    const pod = fc.record({ nodeSelector: selector, tolerations: fc.array(toleration, { maxLength: 3 }) });
    fc.assert(
      fc.property(mandates, pod, fc.constantFrom('ns1', 'ns2', 'ns5'), (ms, p, ns) => {
        expect(indexedJudge(exclusivePoolsSpec(ms), ns, p)).toBe(bruteJudge(ms, ns, p));
      }),
      { numRuns: 3000 },
    );
  });

  it('is deterministic whatever the order, and compared by content', () => {
    const ms: Mandate[] = ['a', 'b', 'c'].map((p) => ({ namespace: `team-${p}`, spec: dedicated(p) }));
    const spec = exclusivePoolsSpec(ms);
    expect(JSON.stringify(exclusivePoolsSpec([...ms].reverse()))).toBe(JSON.stringify(spec));
    const reordered = JSON.parse(
      JSON.stringify({ anyKey: spec.anyKey, taints: spec.taints, selectors: spec.selectors, namespaces: 3 }),
    );
    expect(specUpToDate(reordered, spec)).toBe(true);
    expect(specUpToDate({ ...reordered, namespaces: 2 }, spec)).toBe(false);
    expect(specUpToDate(undefined, spec)).toBe(false);
  });

  it('1,000 typical mandates stay far below etcd’s 1.5 MiB, with one lookup list per pool', () => {
    const ms: Mandate[] = Array.from({ length: 1000 }, (_, i) => ({
      namespace: `tenant-${String(i).padStart(4, '0')}`,
      spec: dedicated(`tenant-${String(i).padStart(4, '0')}-pool`),
    }));
    const spec = exclusivePoolsSpec(ms);
    expect(Object.values(spec.selectors).every((entries) => entries.length === 1)).toBe(true);
    expect(specBytes(spec)).toBeLessThan(400_000);
  });
});
