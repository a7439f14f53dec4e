import { describe, expect, it } from '@jest/globals';
import {
  mandatedTaintPatterns,
  type NodeIsolationSpec,
  nodeInPool,
  poolReach,
  reachesPool,
  targetsPool,
  toleratesPattern,
  toleratesTaint,
} from '../src/index.js';

const teamA: NodeIsolationSpec = {
  nodeSelector: { pool: 'team-a-pool' },
  tolerations: [{ key: 'dedicated', operator: 'Equal', value: 'team-a', effect: 'NoSchedule' }],
};

describe('toleratesTaint (core/v1 ToleratesTaint semantics)', () => {
  const taint = { key: 'dedicated', value: 'team-a', effect: 'NoSchedule' as const };

  it('an empty key with Exists tolerates every taint, whatever its effect', () => {
    expect(toleratesTaint({ operator: 'Exists' }, taint)).toBe(true);
    expect(toleratesTaint({ operator: 'Exists' }, { key: 'other', effect: 'NoExecute' })).toBe(true);
  });

  it('an effect narrows: another effect does not tolerate, an empty one tolerates all', () => {
    expect(toleratesTaint({ key: 'dedicated', operator: 'Exists', effect: 'NoExecute' }, taint)).toBe(false);
    expect(toleratesTaint({ key: 'dedicated', operator: 'Exists', effect: '' }, taint)).toBe(true);
  });

  it('Equal (or no operator) compares the value; Exists does not', () => {
    expect(toleratesTaint({ key: 'dedicated', value: 'team-a' }, taint)).toBe(true);
    expect(toleratesTaint({ key: 'dedicated', operator: 'Equal', value: 'team-b' }, taint)).toBe(false);
    expect(toleratesTaint({ key: 'dedicated', operator: 'Exists' }, taint)).toBe(true);
    expect(toleratesTaint({ key: 'dedicated' }, { key: 'dedicated', effect: 'NoSchedule' })).toBe(true);
  });

  it('another key, an unknown operator or a non-object tolerates nothing', () => {
    expect(toleratesTaint({ key: 'other', operator: 'Exists' }, taint)).toBe(false);
    expect(toleratesTaint({ key: 'dedicated', operator: 'Gt', value: 'team-a' }, taint)).toBe(false);
    expect(toleratesTaint('Exists', taint)).toBe(false);
    expect(toleratesTaint(null, taint)).toBe(false);
  });
});

describe('mandatedTaintPatterns', () => {
  it('reads the taints a mandate names: Equal pins the value, Exists leaves it open, no effect is every effect', () => {
    expect(
      mandatedTaintPatterns([
        { key: 'dedicated', operator: 'Equal', value: 'team-a', effect: 'NoSchedule' },
        { key: 'gpu', operator: 'Exists' },
        { key: 'zone', value: '' },
      ]),
    ).toEqual([
      { key: 'dedicated', value: 'team-a', effect: 'NoSchedule' },
      { key: 'gpu' },
      { key: 'zone', value: '' },
    ]);
  });

  it('an empty-key toleration names no taint, and duplicates are dropped', () => {
    expect(
      mandatedTaintPatterns([
        { operator: 'Exists' },
        { key: 'a', value: 'x', effect: 'NoExecute' },
        { key: 'a', operator: 'Equal', value: 'x', effect: 'NoExecute', tolerationSeconds: 5 },
      ]),
    ).toEqual([{ key: 'a', value: 'x', effect: 'NoExecute' }]);
  });

  it('an open pattern is reached by a toleration of any value or effect of its key', () => {
    expect(toleratesPattern({ key: 'gpu', value: 'a100' }, { key: 'gpu' })).toBe(true);
    expect(toleratesPattern({ key: 'gpu', effect: 'NoExecute', operator: 'Exists' }, { key: 'gpu' })).toBe(true);
    expect(toleratesPattern({ key: 'cpu', operator: 'Exists' }, { key: 'gpu' })).toBe(false);
  });
});

describe('targetsPool', () => {
  it('a nodeSelector with every mandated pair targets the pool; extra keys do not matter', () => {
    expect(targetsPool({ nodeSelector: { pool: 'team-a-pool', zone: 'x' } }, teamA.nodeSelector)).toBe(true);
  });

  it('a nodeSelector missing a pair, or with another value, does not', () => {
    const two = { pool: 'team-a-pool', disk: 'ssd' };
    expect(targetsPool({ nodeSelector: { pool: 'team-a-pool' } }, two)).toBe(false);
    expect(targetsPool({ nodeSelector: { pool: 'team-b-pool' } }, teamA.nodeSelector)).toBe(false);
  });

  it('a required node-affinity term asking In for every pair targets the pool (one term of several is enough)', () => {
    const podSpec = {
      affinity: {
        nodeAffinity: {
          requiredDuringSchedulingIgnoredDuringExecution: {
            nodeSelectorTerms: [
              { matchExpressions: [{ key: 'zone', operator: 'In', values: ['x'] }] },
              { matchExpressions: [{ key: 'pool', operator: 'In', values: ['other', 'team-a-pool'] }] },
            ],
          },
        },
      },
    };
    expect(targetsPool(podSpec, teamA.nodeSelector)).toBe(true);
  });

  it('NotIn, a preferred term or an empty mandate selector do not target', () => {
    const notIn = {
      affinity: {
        nodeAffinity: {
          requiredDuringSchedulingIgnoredDuringExecution: {
            nodeSelectorTerms: [{ matchExpressions: [{ key: 'pool', operator: 'NotIn', values: ['team-a-pool'] }] }],
          },
          preferredDuringSchedulingIgnoredDuringExecution: [
            { weight: 1, preference: { matchExpressions: [{ key: 'pool', operator: 'In', values: ['team-a-pool'] }] } },
          ],
        },
      },
    };
    expect(targetsPool(notIn, teamA.nodeSelector)).toBe(false);
    expect(targetsPool({ nodeSelector: { pool: 'team-a-pool' } }, {})).toBe(false);
    expect(targetsPool('spec', teamA.nodeSelector)).toBe(false);
  });
});

describe('poolReach', () => {
  it('names the tolerations that reach the pool: the issue-38 Pod reaches it twice', () => {
    const reach = poolReach(
      {
        nodeSelector: { pool: 'team-a-pool' },
        tolerations: [{ operator: 'Exists' }, { key: 'x', operator: 'Exists' }],
      },
      teamA,
    );
    expect(reach).toEqual({ targets: true, tolerations: [{ operator: 'Exists' }] });
    expect(reachesPool(reach)).toBe(true);
  });

  it('a Pod with neither the labels nor a reaching toleration does not reach it', () => {
    const reach = poolReach({ tolerations: [{ key: 'node.kubernetes.io/not-ready', operator: 'Exists' }] }, teamA);
    expect(reachesPool(reach)).toBe(false);
  });

  it('a mandate with no taints is reached only by its labels', () => {
    const untainted: NodeIsolationSpec = { nodeSelector: { pool: 'p' }, tolerations: [] };
    expect(reachesPool(poolReach({ tolerations: [{ operator: 'Exists' }] }, untainted))).toBe(false);
  });
});

describe('nodeInPool', () => {
  it('a node carrying every mandated pair is in the pool; a re-pooled one is not', () => {
    expect(nodeInPool({ pool: 'team-a-pool', 'kubernetes.io/os': 'linux' }, teamA)).toBe(true);
    expect(nodeInPool({ pool: 'team-b-pool' }, teamA)).toBe(false);
    expect(nodeInPool(undefined, teamA)).toBe(false);
  });
});
