import { isDeepStrictEqual } from 'node:util';
import { describe, expect, it } from '@jest/globals';
import {
  mandatedTaintPatterns,
  type NodeIsolationSpec,
  nodeInPool,
  type Toleration,
  targetsPool,
  toleratesPattern,
} from '@kubeplus-isolation/spec';
import fc from 'fast-check';
import {
  EXCLUSIVE_POOLS_MAX_BYTES,
  EXCLUSIVE_POOLS_MAX_NODES,
  type ExclusivePoolsSpec,
  exclusivePoolsSpec,
  type Mandate,
  normalToleration,
  type PoolNode,
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
/** The policy's spec.nodeName judgement, as its CEL makes it: one lookup of the node. */
function indexedNodeJudge(p: ExclusivePoolsSpec, ns: string, nodeName: string): boolean {
  const owners = p.nodes[nodeName];
  return owners !== undefined && !owners.includes(ns);
}

/** The same, asked of every mandate: the node is in some pool, and in none the namespace owns. */
function bruteNodeJudge(mandates: readonly Mandate[], nodes: readonly PoolNode[], ns: string, nodeName: string) {
  const labels = nodes.find((n) => n.name === nodeName)?.labels;
  const pools = mandates.filter((m) => nodeInPool(labels, m.spec));
  return pools.length > 0 && !pools.some((m) => m.namespace === ns);
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

  it('holds each pool node (labels carrying a pool’s whole selector) with the namespaces owning a pool it is in', () => {
    const spec = exclusivePoolsSpec(
      [
        { namespace: 'team-a', spec: dedicated('a') },
        { namespace: 'team-a2', spec: dedicated('a') },
        { namespace: 'team-b', spec: dedicated('b') },
        { namespace: 'linux', spec: { nodeSelector: { 'kubernetes.io/os': 'linux' }, tolerations: [] } },
        { namespace: 'no-pool', spec: { nodeSelector: {}, tolerations: [] } },
      ],
      [
        { name: 'a-1', labels: { pool: 'a', 'kubernetes.io/os': 'linux', zone: 'z1' } },
        // Half the selector: in the linux pool only.
        { name: 'half', labels: { pool: 'b', 'kubernetes.io/os': 'windows' } },
        { name: 'b-1', labels: { pool: 'b', 'kubernetes.io/os': 'linux' } },
        { name: 'plain', labels: { zone: 'z1' } },
        { name: 'unlabelled', labels: undefined },
      ],
    );
    expect(spec.nodes).toEqual({
      'a-1': ['linux', 'team-a', 'team-a2'],
      'b-1': ['linux', 'team-b'],
    });
    // Judged: another namespace's Pod on a-1; the owners' admitted; no pool node: admitted.
    expect(indexedNodeJudge(spec, 'team-b', 'a-1')).toBe(true);
    expect(indexedNodeJudge(spec, 'outsider', 'b-1')).toBe(true);
    expect(indexedNodeJudge(spec, 'team-a2', 'a-1')).toBe(false);
    expect(indexedNodeJudge(spec, 'outsider', 'half')).toBe(false);
    expect(exclusivePoolsSpec([{ namespace: 'team-a', spec: dedicated('a') }]).nodes).toEqual({});
  });

  it('judged through its node lookup, spec.nodeName says what asking every mandate of the node’s labels says', () => {
    const values = ['a', 'b', 'c'];
    const labels = fc.dictionary(fc.constantFrom('pool', 'zone', 'os'), fc.constantFrom(...values), { maxKeys: 3 });
    const mandate = fc.record({
      namespace: fc.constantFrom('ns1', 'ns2', 'ns3', 'ns4'),
      spec: fc.record({ nodeSelector: labels, tolerations: fc.constant<Toleration[]>([]) }),
    });
    const mandates = fc.uniqueArray(mandate, { selector: (m) => m.namespace, maxLength: 4 });
    const nodes = fc.uniqueArray(
      fc.record({ name: fc.constantFrom('n1', 'n2', 'n3', 'n4'), labels: fc.option(labels, { nil: undefined }) }),
      { selector: (n) => n.name, maxLength: 4 },
    );
    fc.assert(
      fc.property(
        mandates,
        nodes,
        fc.constantFrom('ns1', 'ns2', 'ns5'),
        fc.constantFrom('n1', 'n2', 'n5'),
        (ms, ns, namespace, node) => {
          expect(indexedNodeJudge(exclusivePoolsSpec(ms, ns), namespace, node)).toBe(
            bruteNodeJudge(ms, ns, namespace, node),
          );
        },
      ),
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
        nodes: spec.nodes,
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

  it('1,000 typical mandates and the most pool nodes the CRD admits fit the bytes written at most', () => {
    const pool = (i: number) => `tenant-${String(i).padStart(4, '0')}`;
    const ms: Mandate[] = Array.from({ length: 1000 }, (_, i) => ({
      namespace: pool(i),
      spec: dedicated(`${pool(i)}-pool`),
    }));
    // Cloud-style node names (ip-10-0-12-34.eu-west-1.compute.internal), five per pool.
    const nodes: PoolNode[] = Array.from({ length: EXCLUSIVE_POOLS_MAX_NODES }, (_, i) => ({
      name: `ip-10-${i % 256}-${Math.floor(i / 256)}-${i % 97}.eu-west-1.compute.internal`,
      labels: { pool: `${pool(i % 1000)}-pool`, 'kubernetes.io/os': 'linux', 'topology.kubernetes.io/zone': 'z1' },
    }));
    const spec = exclusivePoolsSpec(ms, nodes);
    expect(Object.keys(spec.nodes)).toHaveLength(EXCLUSIVE_POOLS_MAX_NODES);
    expect(specBytes(spec)).toBeLessThan(EXCLUSIVE_POOLS_MAX_BYTES);
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
