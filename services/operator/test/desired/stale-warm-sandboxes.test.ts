import { describe, expect, it } from '@jest/globals';
import {
  staleWarmSandboxes,
  staleWarmSandboxesMessage,
  WARM_POOL_SANDBOX_LABEL,
  type WarmSandboxLike,
} from '../../src/desired/stale-warm-sandboxes.js';

const SINCE = '2026-12-07T06:00:00Z';
const BEFORE = '2026-12-07T05:59:59Z';
const AFTER = '2026-12-07T06:00:01Z';
const POOL_REF = {
  apiVersion: 'extensions.agents.x-k8s.io/v1beta1',
  kind: 'SandboxWarmPool',
  name: 'pool',
  uid: 'pool-uid',
  controller: true,
};

function sandbox(
  name: string,
  runtimeClassName: string,
  creationTimestamp: unknown,
  extra: Record<string, unknown> = {},
): WarmSandboxLike {
  return {
    metadata: {
      name,
      uid: `uid-${name}`,
      resourceVersion: '7',
      creationTimestamp,
      ownerReferences: [POOL_REF],
      ...extra,
    },
    spec: { podTemplate: { spec: { runtimeClassName } } },
  };
}

describe('staleWarmSandboxes: warm-pool Sandboxes created before their class got its current handler', () => {
  const since = { own: SINCE, gvisor: '' };

  it('picks those a pool controls, created at or before the time of an allowed class', () => {
    const stale = staleWarmSandboxes(
      [
        sandbox('before', 'own', BEFORE),
        sandbox('same-second', 'own', new Date('2026-12-07T06:00:00.500Z')),
        sandbox('after', 'own', AFTER),
      ],
      since,
    );
    expect(stale).toEqual([
      {
        name: 'before',
        uid: 'uid-before',
        resourceVersion: '7',
        runtimeClassName: 'own',
        createdAt: BEFORE,
        since: SINCE,
      },
      {
        name: 'same-second',
        uid: 'uid-same-second',
        resourceVersion: '7',
        runtimeClassName: 'own',
        createdAt: SINCE,
        since: SINCE,
      },
    ]);
  });

  it('leaves alone a claimed one, one being deleted, one of a class without a time or not allowed, and bad shapes', () => {
    const claimed = sandbox('claimed', 'own', BEFORE, {
      ownerReferences: [{ ...POOL_REF, kind: 'SandboxClaim', name: 'c' }],
    });
    const notController = sandbox('ref', 'own', BEFORE, { ownerReferences: [{ ...POOL_REF, controller: false }] });
    const otherGroup = sandbox('other', 'own', BEFORE, {
      ownerReferences: [{ ...POOL_REF, apiVersion: 'example.com/v1' }],
    });
    const deleting = sandbox('deleting', 'own', BEFORE, { deletionTimestamp: AFTER });
    const unknownTime = sandbox('gv', 'gvisor', BEFORE);
    const notAllowed = sandbox('weak', 'runc', BEFORE);
    const nameless = { metadata: { uid: 'x', ownerReferences: [POOL_REF], creationTimestamp: BEFORE } };
    expect(
      staleWarmSandboxes(
        [
          claimed,
          notController,
          otherGroup,
          deleting,
          unknownTime,
          notAllowed,
          nameless,
          {},
          sandbox('t', 'own', 'bad'),
        ],
        since,
      ),
    ).toEqual([]);
  });

  it('says what it deleted, and why', () => {
    const [one] = staleWarmSandboxes([sandbox('w-1', 'own', BEFORE)], since);
    if (one === undefined) throw new Error('expected a stale Sandbox');
    expect(staleWarmSandboxesMessage('team-a', [one])).toBe(
      `deleted 1 warm-pool Sandbox in team-a created before their class got its current handler, so they may run the old one and are never handed out: w-1 (created ${BEFORE}, RuntimeClass "own" got its current handler ${SINCE}); their pools re-create them under the current handler`,
    );
    expect(WARM_POOL_SANDBOX_LABEL).toBe('agents.x-k8s.io/warm-pool-sandbox');
  });
});
