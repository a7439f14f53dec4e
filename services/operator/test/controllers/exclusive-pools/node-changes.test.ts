import { describe, expect, it } from '@jest/globals';
import type { KubernetesObject } from '@kubernetes/client-node';
import { labelsFingerprint, nodeLabelChanges } from '../../../src/controllers/exclusive-pools/node-changes.js';
import { poolNodesOf } from '../../../src/controllers/exclusive-pools/reconciler.js';
import type { EventHandlers } from '../../../src/runtime/informer.js';

const node = (name: string, labels?: Record<string, string>, extra: Record<string, unknown> = {}): KubernetesObject =>
  ({ apiVersion: 'v1', kind: 'Node', metadata: { name, ...(labels ? { labels } : {}) }, ...extra }) as KubernetesObject;

describe('nodeLabelChanges', () => {
  it('enqueues the one key when a Node is added, relabelled or deleted; a heartbeat or a taint enqueues nothing', () => {
    let handlers: EventHandlers<KubernetesObject> = {};
    const source = nodeLabelChanges(
      {
        addEventHandler: (x) => {
          handlers = x;
          return () => {};
        },
      },
      'exclusive-pools',
    );
    const keys: string[] = [];
    source.subscribe((k) => keys.push(k));
    handlers.add?.(node('n1', { pool: 'a', zone: 'z' }));
    expect(keys).toEqual(['exclusive-pools']);
    // Status heartbeat, a taint, the same labels in another order: nothing.
    handlers.update?.(node('n1', { zone: 'z', pool: 'a' }, { status: { conditions: [] } }));
    handlers.update?.(node('n1', { pool: 'a', zone: 'z' }, { spec: { taints: [{ key: 'x', effect: 'NoSchedule' }] } }));
    expect(keys).toHaveLength(1);
    handlers.update?.(node('n1', { pool: 'b', zone: 'z' }));
    expect(keys).toHaveLength(2);
    handlers.delete?.(node('n1', { pool: 'b', zone: 'z' }));
    expect(keys).toHaveLength(3);
    // Re-added under the same name after its deletion: a change again.
    handlers.add?.(node('n1', { pool: 'b', zone: 'z' }));
    expect(keys).toHaveLength(4);
    handlers.update?.({ apiVersion: 'v1', kind: 'Node', metadata: {} });
    expect(keys).toHaveLength(4);
  });

  it('fingerprints labels whatever their order, and no labels as none', () => {
    expect(labelsFingerprint(node('n', { a: '1', b: '2' }))).toBe(labelsFingerprint(node('n', { b: '2', a: '1' })));
    expect(labelsFingerprint(node('n'))).toBe(labelsFingerprint(node('n', {})));
    expect(labelsFingerprint(node('n', { a: '1' }))).not.toBe(labelsFingerprint(node('n', { a: '2' })));
  });
});

describe('poolNodesOf', () => {
  it('reads each named Node’s name and labels', () => {
    expect(
      poolNodesOf([node('n1', { pool: 'a' }), node('n2'), { apiVersion: 'v1', kind: 'Node', metadata: {} }]),
    ).toEqual([
      { name: 'n1', labels: { pool: 'a' } },
      { name: 'n2', labels: undefined },
    ]);
  });
});
