/**
 * The owned-objects controller's key sources beyond add/update: the objects of an instance deleted
 * (or marked for deletion), found by owner and confirmed by the owner annotation, and the periodic
 * pass over every cached owned object.
 */
import { describe, expect, it } from '@jest/globals';
import type { KubernetesObject } from '@kubernetes/client-node';
import {
  deletedOwnerSource,
  type InstanceEvents,
  periodicOwnedSweep,
} from '../../../src/controllers/owned-objects/key-sources.js';
import { OWNER_INDEX_LABELS, ownedKeysOf, ownerIndexTerms } from '../../../src/controllers/owned-objects/keys.js';
import type { DynamicEventHandlers } from '../../../src/runtime/dynamic-informers.js';
import type { GroupVersionResource } from '../../../src/runtime/gvr.js';
import { LabelIndex } from '../../../src/runtime/label-index.js';
import { FakeClock } from '../../runtime/fakes.js';

const AGENTS: GroupVersionResource = { group: 'cloudark.io', version: 'v1', resource: 'agents' };
const RC = { apiVersion: 'node.k8s.io/v1', kind: 'RuntimeClass' } as const;
const NS = { apiVersion: 'v1', kind: 'Namespace' } as const;
const kindOf = (gvr: GroupVersionResource): string | undefined => (gvr.resource === 'agents' ? 'Agent' : undefined);

function owned(name: string, owner: string, extra: Record<string, string> = {}): KubernetesObject {
  const [, , namespace, instance] = owner.split('/');
  return {
    metadata: {
      name,
      labels: {
        'app.kubernetes.io/managed-by': 'kubeplus-isolation',
        'kubeplus.io/owner-name': instance ?? '',
        'kubeplus.io/owner-namespace': namespace ?? '',
        'kubeplus.io/owner-uid': 'u',
        ...extra,
      },
      annotations: { 'kubeplus.io/owner': owner },
    },
  };
}

function agent(name: string, namespace: string, deleting = false): KubernetesObject {
  return {
    apiVersion: 'cloudark.io/v1',
    kind: 'Agent',
    metadata: { name, namespace, ...(deleting ? { deletionTimestamp: new Date('2026-12-07T00:00:00Z') } : {}) },
  };
}

class FakeInstances implements InstanceEvents {
  handlers: DynamicEventHandlers<KubernetesObject>[] = [];
  addEventHandler(h: DynamicEventHandlers<KubernetesObject>): () => void {
    this.handlers.push(h);
    return () => {
      this.handlers = this.handlers.filter((x) => x !== h);
    };
  }
  emit(event: 'add' | 'update' | 'delete', obj: KubernetesObject): void {
    for (const h of this.handlers) h[event]?.(AGENTS, obj);
  }
}

describe('ownedKeysOf', () => {
  it('keeps only what the owner annotation names exactly (label values may collide)', () => {
    const owner = { group: 'cloudark.io', kind: 'Agent', namespace: 'team-a', name: 'inst' };
    expect(ownerIndexTerms(owner)).toEqual([
      ['kubeplus.io/owner-name', 'inst'],
      ['kubeplus.io/owner-namespace', 'team-a'],
    ]);
    const candidates = [
      owned('mine', 'cloudark.io/Agent/team-a/inst'),
      owned('other-kind', 'cloudark.io/Robot/team-a/inst'),
      { metadata: { name: 'unmarked', labels: {} } },
    ];
    expect(ownedKeysOf(owner, RC, candidates)).toEqual(['node.k8s.io/v1/RuntimeClass/mine']);
  });
});

describe('deletedOwnerSource', () => {
  const setUp = () => {
    const instances = new FakeInstances();
    const rcIndex = new LabelIndex(OWNER_INDEX_LABELS);
    const nsIndex = new LabelIndex(OWNER_INDEX_LABELS);
    rcIndex.upsert(owned('kubeplus-sandbox-inst', 'cloudark.io/Agent/team-a/inst'));
    rcIndex.upsert(owned('kubeplus-sandbox-other', 'cloudark.io/Agent/team-a/other'));
    nsIndex.upsert(owned('team-a', 'cloudark.io/Agent/team-a/inst'));
    const keys: string[] = [];
    const unsubscribe = deletedOwnerSource(instances, kindOf, [
      { type: RC, index: rcIndex },
      { type: NS, index: nsIndex },
    ]).subscribe((k) => keys.push(k));
    return { instances, keys, unsubscribe };
  };

  it('a deleted instance → every cached object it owns, its namespace included', () => {
    const { instances, keys } = setUp();
    instances.emit('delete', agent('inst', 'team-a'));
    expect(keys).toEqual(['node.k8s.io/v1/RuntimeClass/kubeplus-sandbox-inst', 'v1/Namespace/team-a']);
  });

  it('an update marking it for deletion counts too; adds and other updates do not', () => {
    const { instances, keys } = setUp();
    instances.emit('add', agent('inst', 'team-a'));
    instances.emit('update', agent('inst', 'team-a'));
    expect(keys).toEqual([]);
    instances.emit('update', agent('inst', 'team-a', true));
    expect(keys).toHaveLength(2);
  });

  it('an instance owning nothing, or of a Kind not watched, gives nothing; unsubscribed, nothing more', () => {
    const { instances, keys, unsubscribe } = setUp();
    instances.emit('delete', agent('nobody', 'team-a'));
    expect(keys).toEqual([]);
    unsubscribe();
    instances.emit('delete', agent('inst', 'team-a'));
    expect(keys).toEqual([]);
  });
});

describe('periodicOwnedSweep', () => {
  it('every cached owned object once per period (jitter at most 10%), only while subscribed', async () => {
    const clock = new FakeClock();
    const objects = [
      owned('kubeplus-sandbox-inst', 'cloudark.io/Agent/team-a/inst'),
      { metadata: { name: 'platform' } },
    ];
    const keys: string[] = [];
    const unsubscribe = periodicOwnedSweep([{ type: RC, informer: { list: () => objects } }], {
      intervalMs: 60_000,
      clock,
      random: () => 1,
    }).subscribe((k) => keys.push(k));
    await clock.advance(65_999);
    expect(keys).toEqual([]);
    await clock.advance(1);
    expect(keys).toEqual(['node.k8s.io/v1/RuntimeClass/kubeplus-sandbox-inst']);
    await clock.advance(66_000);
    expect(keys).toHaveLength(2);
    unsubscribe();
    await clock.advance(10 * 66_000);
    expect(keys).toHaveLength(2);
  });
});
