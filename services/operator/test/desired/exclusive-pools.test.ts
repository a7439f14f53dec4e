import { isDeepStrictEqual } from 'node:util';
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
  normalToleration,
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
  const own = p.mandated[ns];
  const ownSelector: Record<string, string> = own?.selector ?? {};
  const ownTolerations = (own?.tolerations ?? []).map((n) => JSON.stringify(n));
  const bySelector = Object.entries(sel).some(([k, v]) =>
    (p.selectors[`${k}=${v}`] ?? []).some(
      (c) =>
        !c.owners.includes(ns) &&
        !Object.entries(c.selector).every(([sk, sv]) => ownSelector[sk] === sv) &&
        Object.entries(c.selector).every(([sk, sv]) => sel[sk] === sv),
    ),
  );
  const judged = (pod.tolerations ?? []).filter((t) => !ownTolerations.includes(JSON.stringify(normalToleration(t))));
  const byToleration = judged.some((t) => {
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
  const own = mandates.filter((o) => o.namespace === ns).map((o) => o.spec);
  // What the namespace's own mandate prescribes is never judged (the webhook puts it into every Pod).
  const prescribed = (t: Toleration): boolean =>
    own.some((o) => o.tolerations.some((m) => isDeepStrictEqual(normalToleration(m), normalToleration(t))));
  const judged = (pod.tolerations ?? []).filter((t) => !prescribed(t));
  const withinOwnSelector = (selector: Record<string, string>): boolean =>
    own.some((o) => Object.entries(selector).every(([k, v]) => o.nodeSelector[k] === v));
  return mandates.some((m) => {
    if (
      targetsPool(pod, m.spec.nodeSelector) &&
      !own.some((o) => sameSelector(o.nodeSelector, m.spec.nodeSelector)) &&
      !withinOwnSelector(m.spec.nodeSelector)
    )
      return true;
    return mandatedTaintPatterns(m.spec.tolerations).some(
      (pattern) =>
        judged.some((t) => toleratesPattern(t, pattern)) &&
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
      JSON.stringify({
        mandated: spec.mandated,
        anyKey: spec.anyKey,
        taints: spec.taints,
        selectors: spec.selectors,
        namespaces: 3,
      }),
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

  it('holds what each namespace’s own mandate prescribes, normalized as the policy normalizes a Pod’s tolerations', () => {
    const spec = exclusivePoolsSpec([
      {
        namespace: 'team-d',
        spec: {
          nodeSelector: { pool: 'd' },
          tolerations: [
            { key: 'dedicated', operator: 'Exists' },
            { key: 'dedicated', operator: 'Exists' },
            { key: 'gpu', value: 'yes', effect: 'NoExecute', tolerationSeconds: 60 },
          ],
        },
      },
    ]);
    expect(spec.mandated).toEqual({
      'team-d': {
        selector: { pool: 'd' },
        tolerations: [
          ['dedicated', 'Exists', '', 'All'],
          ['gpu', 'Equal', 'yes', 'NoExecute'],
        ],
      },
    });
  });

  it('a namespace’s own mandated tolerations and selector are never judged against the pools they overlap', () => {
    // Both pools tainted `dedicated`; team-d's mandate tolerates the key with Exists.
    const ms: Mandate[] = [
      { namespace: 'team-a', spec: dedicated('a') },
      {
        namespace: 'team-d',
        spec: { nodeSelector: { pool: 'd' }, tolerations: [{ key: 'dedicated', operator: 'Exists' }] },
      },
    ];
    const spec = exclusivePoolsSpec(ms);
    // team-d's Pods carry what its mandate prescribes: not refused; team-a's own Equal reaches
    // team-d's open pattern: not refused either.
    expect(indexedJudge(spec, 'team-d', { nodeSelector: { pool: 'd' }, tolerations: ms[1]?.spec.tolerations })).toBe(
      false,
    );
    expect(indexedJudge(spec, 'team-a', { ...dedicated('a') })).toBe(false);
    // Anything beyond the mandate is judged as before; and for any other namespace the same
    // toleration is foreign.
    expect(indexedJudge(spec, 'team-d', { tolerations: [{ operator: 'Exists' }] })).toBe(true);
    expect(indexedJudge(spec, 'team-d', { nodeSelector: dedicated('a').nodeSelector })).toBe(true);
    expect(indexedJudge(spec, 'outsider', { tolerations: [{ key: 'dedicated', operator: 'Exists' }] })).toBe(true);
  });
});
