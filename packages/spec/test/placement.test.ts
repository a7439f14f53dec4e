import { describe, expect, it } from '@jest/globals';
import {
  coversPattern,
  ForeignPoolIndex,
  foreignPodsOnNode,
  judgePlacement,
  type NodeIsolationSpec,
  type OtherMandate,
  poolNodes,
  SYSTEM_NAMESPACES,
  toleratesPattern,
  tolerationsBeyondMandate,
} from '../src/index.js';

const mandate = (pool: string): NodeIsolationSpec => ({
  nodeSelector: { pool },
  tolerations: [{ key: 'dedicated', operator: 'Equal', value: pool, effect: 'NoSchedule' }],
});
const teamA = mandate('team-a-pool');
const teamB = mandate('team-b-pool');
const others = [{ namespace: 'team-b', spec: teamB }];

const node = (name: string, labels: Record<string, string>) => ({ metadata: { name, labels } });
const pod = (name: string, spec: Record<string, unknown>, extra: Record<string, unknown> = {}) => ({
  metadata: { name, namespace: 'team-a', uid: `uid-${name}` },
  spec,
  ...extra,
});

describe('coversPattern: does a toleration tolerate every taint a pattern stands for?', () => {
  it('Exists on the key or on every key covers any value; an equal value covers that value only', () => {
    const p = { key: 'dedicated', value: 'b', effect: 'NoSchedule' as const };
    expect(coversPattern({ operator: 'Exists' }, p)).toBe(true);
    expect(coversPattern({ key: 'dedicated', operator: 'Exists' }, p)).toBe(true);
    expect(coversPattern({ key: 'dedicated', value: 'b' }, p)).toBe(true);
    expect(coversPattern({ key: 'dedicated', value: 'a' }, p)).toBe(false);
    expect(coversPattern({ key: 'other', operator: 'Exists' }, p)).toBe(false);
  });

  it('an open value or effect in the pattern is covered only by a toleration open there too', () => {
    expect(coversPattern({ key: 'dedicated', value: 'b' }, { key: 'dedicated' })).toBe(false);
    expect(coversPattern({ key: 'dedicated', operator: 'Exists', effect: 'NoSchedule' }, { key: 'dedicated' })).toBe(
      false,
    );
    expect(coversPattern({ key: 'dedicated', operator: 'Exists' }, { key: 'dedicated' })).toBe(true);
    expect(coversPattern('nonsense', { key: 'dedicated' })).toBe(false);
  });
});

describe("tolerationsBeyondMandate: tolerations reaching another isolated namespace's pool", () => {
  it('{operator: Exists} reaches every other pool; the mandated toleration reaches none', () => {
    const tolerations = [...teamA.tolerations, { operator: 'Exists' }];
    expect(tolerationsBeyondMandate(tolerations, teamA, others)).toEqual({
      tolerations: [{ operator: 'Exists' }],
      namespaces: ['team-b'],
    });
    expect(tolerationsBeyondMandate(teamA.tolerations, teamA, others)).toEqual({ tolerations: [], namespaces: [] });
  });

  it("a toleration of another pool's taint by key and value reaches it; another key does not", () => {
    const theirs = { key: 'dedicated', operator: 'Equal', value: 'team-b-pool' };
    expect(tolerationsBeyondMandate([theirs, { key: 'gpu', operator: 'Exists' }], teamA, others).tolerations).toEqual([
      theirs,
    ]);
  });

  it('a pool shared with another namespace (the same mandate) is not beyond; no array reaches nothing', () => {
    expect(tolerationsBeyondMandate([{ operator: 'Exists' }], teamA, [{ namespace: 'twin', spec: teamA }])).toEqual({
      tolerations: [],
      namespaces: [],
    });
    expect(tolerationsBeyondMandate(undefined, teamA, others)).toEqual({ tolerations: [], namespaces: [] });
  });

  it('names every namespace reached, sorted, once', () => {
    const c = { namespace: 'team-c', spec: mandate('team-c-pool') };
    expect(tolerationsBeyondMandate([{ operator: 'Exists' }], teamA, [c, ...others, c]).namespaces).toEqual([
      'team-b',
      'team-c',
    ]);
  });
});

describe('judgePlacement: one running Pod against its mandate and its node', () => {
  const placed = { nodeSelector: { pool: 'team-a-pool' }, nodeName: 'n1', tolerations: teamA.tolerations };

  it('a Pod on a node of its pool, tolerating its own taint, is fine', () => {
    expect(judgePlacement(teamA, pod('web', placed), node('n1', { pool: 'team-a-pool' }), others)).toBeUndefined();
  });

  it('a Pod left on a re-pooled node is off-pool: the node and the mandated pairs its labels lack', () => {
    expect(judgePlacement(teamA, pod('web', placed), node('n1', { pool: 'team-b-pool' }), others)).toEqual({
      name: 'web',
      uid: 'uid-web',
      offPool: { node: 'n1', missingNodeLabels: { pool: 'team-a-pool' } },
    });
  });

  it('both findings at once: off-pool and a toleration that reaches another pool', () => {
    const spec = { ...placed, tolerations: [...teamA.tolerations, { operator: 'Exists' }] };
    expect(judgePlacement(teamA, pod('web', spec), node('n1', { pool: 'team-b-pool' }), others)).toEqual({
      name: 'web',
      uid: 'uid-web',
      offPool: { node: 'n1', missingNodeLabels: { pool: 'team-a-pool' } },
      beyondMandate: { tolerations: [{ operator: 'Exists' }], namespaces: ['team-b'] },
    });
  });

  it('no node (unscheduled, or the node is gone) or another node than the one bound: no off-pool finding', () => {
    expect(judgePlacement(teamA, pod('web', { ...placed, nodeName: undefined }), undefined, others)).toBeUndefined();
    expect(judgePlacement(teamA, pod('web', placed), node('n2', { pool: 'x' }), others)).toBeUndefined();
  });

  it('finished Pods, Pods without a name, and a mandate without a nodeSelector are not judged off-pool', () => {
    const off = node('n1', { pool: 'x' });
    expect(judgePlacement(teamA, pod('web', placed, { status: { phase: 'Succeeded' } }), off, others)).toBeUndefined();
    expect(judgePlacement(teamA, { spec: placed }, off, others)).toBeUndefined();
    expect(judgePlacement({ nodeSelector: {}, tolerations: teamA.tolerations }, pod('web', placed), off, others)).toBe(
      undefined,
    );
  });
});

describe('foreignPodsOnNode: Pods on a pool node that are not the pool owner’s', () => {
  const n1 = node('n1', { pool: 'team-a-pool' });
  const on = (namespace: string, name: string, extra: Record<string, unknown> = {}) => ({
    metadata: { namespace, name },
    spec: { nodeName: 'n1' },
    ...extra,
  });
  const mandates = new Map([
    ['team-a', teamA],
    ['team-b', teamB],
    ['twin', teamA],
  ]);
  const exempt = new Set([...SYSTEM_NAMESPACES, 'kubeplus-system']);

  it('names the Pods of other namespaces; the owner, a co-owner of the pool and exempt namespaces are not foreign', () => {
    const pods = [
      on('team-a', 'mine'),
      on('twin', 'shared'),
      on('kube-system', 'kube-proxy'),
      on('kubeplus-system', 'operator'),
      on('unpooled', 'squatter'),
      on('team-b', 'intruder'),
    ];
    expect(foreignPodsOnNode('team-a', teamA, n1, pods, mandates, exempt)).toEqual([
      { namespace: 'unpooled', name: 'squatter' },
      { namespace: 'team-b', name: 'intruder' },
    ]);
  });

  it('nothing on a node outside the pool; finished Pods and Pods bound elsewhere are skipped', () => {
    expect(foreignPodsOnNode('team-a', teamA, node('n1', { pool: 'b' }), [on('x', 'p')], mandates, exempt)).toEqual([]);
    const pods = [
      on('x', 'done', { status: { phase: 'Failed' } }),
      { metadata: { namespace: 'x', name: 'y' }, spec: { nodeName: 'n2' } },
    ];
    expect(foreignPodsOnNode('team-a', teamA, n1, pods, mandates, exempt)).toEqual([]);
  });
});

describe('poolNodes', () => {
  it('the nodes carrying every mandated pair; none for a mandate without a nodeSelector', () => {
    const nodes = [node('n1', { pool: 'team-a-pool' }), node('n2', { pool: 'team-b-pool' }), node('n3', {})];
    expect(poolNodes(teamA, nodes).map((n) => n.metadata.name)).toEqual(['n1']);
    expect(poolNodes({ nodeSelector: {}, tolerations: [] }, nodes)).toEqual([]);
  });
});

describe('ForeignPoolIndex: a toleration compared only with the patterns it can reach', () => {
  const gpu: OtherMandate = {
    namespace: 'open',
    spec: { nodeSelector: { pool: 'o' }, tolerations: [{ key: 'gpu', operator: 'Exists' }] },
  };
  const many = [...Array.from({ length: 50 }, (_, i) => ({ namespace: `t${i}`, spec: mandate(`p${i}`) })), gpu];
  const index = new ForeignPoolIndex(teamA, many);

  it('an Equal toleration reaches the pool of its value and open-valued patterns of its key, nothing else', () => {
    expect(index.reachedBy({ key: 'dedicated', operator: 'Equal', value: 'p7' })).toEqual(['t7']);
    expect(index.reachedBy({ key: 'dedicated', value: 'team-a-pool', effect: 'NoSchedule' })).toEqual([]);
    expect(index.reachedBy({ key: 'gpu', value: 'x' })).toEqual(['open']);
    expect(index.reachedBy({ key: 'node.kubernetes.io/not-ready', operator: 'Exists' })).toEqual([]);
  });

  it('Exists on a key reaches every pool of that key; on every key, every pool; an effect narrows', () => {
    expect(index.reachedBy({ key: 'dedicated', operator: 'Exists' })).toHaveLength(50);
    expect(index.reachedBy({ operator: 'Exists' })).toHaveLength(51);
    expect(index.reachedBy({ operator: 'Exists', effect: 'NoExecute' })).toEqual(['open']);
  });

  it('the indexed form agrees with toleratesPattern over every pattern', () => {
    const probes = [
      { key: 'dedicated', value: 'p3' },
      { key: 'dedicated', operator: 'Exists', effect: 'NoSchedule' },
      { key: 'gpu', operator: 'Exists', effect: 'PreferNoSchedule' },
      { operator: 'Equal', value: 'p9' },
      ...teamA.tolerations,
    ];
    for (const t of probes) {
      const slow = many
        .filter((o) =>
          o.spec.tolerations.some(
            (m) =>
              m.key !== undefined &&
              toleratesPattern(t, {
                key: m.key,
                ...(m.operator === 'Exists' ? {} : { value: m.value ?? '' }),
                ...(m.effect ? { effect: m.effect } : {}),
              }),
          ),
        )
        .map((o) => o.namespace);
      expect({ t, reached: index.reachedBy(t) }).toEqual({ t, reached: slow });
    }
  });
});
