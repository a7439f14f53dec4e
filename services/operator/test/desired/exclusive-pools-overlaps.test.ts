import { describe, expect, it } from '@jest/globals';
import { mandatedTaintPatterns, type NodeIsolationSpec, targetsPool, toleratesPattern } from '@kubeplus-isolation/spec';
import fc from 'fast-check';
import { exclusivePoolsSpec, type Mandate } from '../../src/desired/exclusive-pools.js';
import { overlapMessage, poolOverlaps } from '../../src/desired/exclusive-pools-overlaps.js';

const dedicated = (pool: string): NodeIsolationSpec => ({
  nodeSelector: { pool },
  tolerations: [{ key: 'dedicated', operator: 'Equal', value: pool, effect: 'NoSchedule' }],
});
const overlaps = (ms: Mandate[]) => Object.fromEntries(poolOverlaps(ms, exclusivePoolsSpec(ms)));

/** Every pair of mandates compared one by one (packages/spec pools.ts). */
function bruteOverlaps(ms: readonly Mandate[]): Record<string, string[]> {
  const same = (a: object, b: object) => JSON.stringify(a) === JSON.stringify(b);
  const out: Record<string, string[]> = {};
  for (const m of ms) {
    const reached = ms.filter((o) => {
      if (o.namespace === m.namespace) return false;
      const selectorShared = same(
        Object.entries(o.spec.nodeSelector).sort(),
        Object.entries(m.spec.nodeSelector).sort(),
      );
      if (targetsPool(m.spec, o.spec.nodeSelector) && !selectorShared) return true;
      const mine = mandatedTaintPatterns(m.spec.tolerations);
      return mandatedTaintPatterns(o.spec.tolerations).some(
        (q) => !mine.some((p) => same(p, q)) && m.spec.tolerations.some((t) => toleratesPattern(t, q)),
      );
    });
    if (reached.length > 0) out[m.namespace] = reached.map((o) => o.namespace).sort();
  }
  return out;
}

describe('poolOverlaps', () => {
  it('distinct pools overlap nothing; a pool given to two namespaces is shared, not an overlap', () => {
    expect(
      overlaps([
        { namespace: 'team-a', spec: dedicated('a') },
        { namespace: 'team-b', spec: dedicated('b') },
        { namespace: 'team-b2', spec: dedicated('b') },
      ]),
    ).toEqual({});
  });

  it('both pools tainted `dedicated`, one mandate tolerating the key with Exists: each reaches the other', () => {
    const ms: Mandate[] = [
      { namespace: 'team-a', spec: dedicated('a') },
      {
        namespace: 'team-d',
        spec: { nodeSelector: { pool: 'd' }, tolerations: [{ key: 'dedicated', operator: 'Exists' }] },
      },
    ];
    // team-d tolerates team-a's taint; team-a's Equal tolerates a `dedicated` taint of team-d's pool.
    expect(overlaps(ms)).toEqual({ 'team-a': ['team-d'], 'team-d': ['team-a'] });
  });

  it('a mandated selector carrying every pair of another pool’s selector reaches that pool', () => {
    expect(
      overlaps([
        { namespace: 'wide', spec: { nodeSelector: { pool: 'x' }, tolerations: [] } },
        { namespace: 'narrow', spec: { nodeSelector: { pool: 'x', gpu: 'yes' }, tolerations: [] } },
      ]),
    ).toEqual({ narrow: ['wide'] });
  });

  it('says what comparing every pair of mandates says', () => {
    const values = ['a', 'b'];
    const toleration = fc
      .record({
        key: fc.constantFrom('dedicated', 'team'),
        operator: fc.constantFrom('Exists' as const, 'Equal' as const),
        value: fc.constantFrom(...values),
        effect: fc.constantFrom(undefined, 'NoSchedule' as const, 'NoExecute' as const),
      })
      .map((t) => {
        const out = { ...t } as NodeIsolationSpec['tolerations'][number];
        if (out.effect === undefined) delete out.effect;
        if (out.operator === 'Exists') delete out.value;
        return out;
      });
    const mandate = fc.record({
      namespace: fc.constantFrom('ns1', 'ns2', 'ns3', 'ns4'),
      spec: fc.record({
        nodeSelector: fc.dictionary(fc.constantFrom('pool', 'zone'), fc.constantFrom(...values), { maxKeys: 2 }),
        tolerations: fc.array(toleration, { maxLength: 2 }),
      }),
    });
    fc.assert(
      fc.property(fc.uniqueArray(mandate, { selector: (m) => m.namespace, maxLength: 4 }), (ms) => {
        expect(overlaps(ms)).toEqual(bruteOverlaps(ms));
      }),
      { numRuns: 2000 },
    );
  });

  it('1,000 distinct pools plan without comparing every pair (well under a second)', () => {
    const ms: Mandate[] = Array.from({ length: 1000 }, (_, i) => ({ namespace: `t-${i}`, spec: dedicated(`p-${i}`) }));
    const spec = exclusivePoolsSpec(ms);
    const started = performance.now();
    expect(poolOverlaps(ms, spec).size).toBe(0);
    expect(performance.now() - started).toBeLessThan(1000);
  });

  it('names at most five of the namespaces reached, then how many more', () => {
    const m = overlapMessage('team-d', ['a', 'b', 'c', 'd', 'e', 'f', 'g']);
    expect(m).toContain('namespace team-d reaches');
    expect(m).toContain('a, b, c, d, e and 2 more');
  });
});
