/**
 * The audit's wiring of where Pods really run (issue 38): the Node cache read per Pod, the other
 * isolated namespaces' mandates, the foreign-Pod search per pool node, Events, the metric's totals
 * and what is handed to the Report. The judging itself is packages/spec placement.ts (its tests).
 */
import { describe, expect, it } from '@jest/globals';
import type { NodeIsolationSpec, PlacedPodLike } from '@kubeplus-isolation/spec';
import type { KubernetesObject } from '@kubernetes/client-node';
import type { EventTarget, InstanceEvent } from '../../../src/cluster/port.js';
import { NodeIsolationAuditor, type PodLister } from '../../../src/controllers/audit/auditor.js';
import { nodeFingerprint, nodePoolChanges, poolOwnersOf, trimNode } from '../../../src/controllers/audit/nodes.js';
import { misplacedMessage } from '../../../src/controllers/audit/placement.js';
import type { PodFindings } from '../../../src/controllers/compliance/openreport.js';
import type { EventHandlers, Lister } from '../../../src/runtime/informer.js';

const ENABLED = 'kubeplus.io/node-isolation-enabled';
const RESOLVED = 'kubeplus.io/node-isolation-resolved';
const OWNER = 'kubeplus.io/owner';
const mandate = (pool: string): NodeIsolationSpec => ({
  nodeSelector: { pool },
  tolerations: [{ key: 'dedicated', operator: 'Equal', value: pool, effect: 'NoSchedule' }],
});
const A = mandate('pool-a');
const AGENT_TARGET: EventTarget = {
  apiVersion: 'cloudark.io/v1',
  kind: 'Agent',
  namespace: 'team-a',
  name: 'x',
  uid: 'u',
};

const ns = (name: string, spec: unknown, owner?: string): KubernetesObject => ({
  apiVersion: 'v1',
  kind: 'Namespace',
  metadata: {
    name,
    labels: { [ENABLED]: 'true' },
    annotations: { [RESOLVED]: JSON.stringify(spec), ...(owner === undefined ? {} : { [OWNER]: owner }) },
  },
});
const node = (name: string, pool: string): KubernetesObject => ({
  apiVersion: 'v1',
  kind: 'Node',
  metadata: { name, labels: { pool } },
});
const pod = (namespace: string, name: string, nodeName: string, tolerations: unknown[] = A.tolerations) => ({
  metadata: { namespace, name, uid: `uid-${name}` },
  spec: { nodeSelector: { pool: 'pool-a' }, tolerations, nodeName },
  status: { phase: 'Running' },
});

class Harness {
  readonly namespaces = new Map<string, KubernetesObject>([
    ['team-a', ns('team-a', A, 'cloudark.io/Agent/team-a/x')],
    ['team-b', ns('team-b', mandate('pool-b'))],
  ]);
  readonly nodes = new Map<string, KubernetesObject>([
    ['n1', node('n1', 'pool-a')],
    ['n2', node('n2', 'pool-b')],
  ]);
  readonly pods = new Map<string, PlacedPodLike[]>();
  readonly onNode = new Map<string, PlacedPodLike[]>();
  readonly nodeLists: string[] = [];
  readonly events: Array<{ target: EventTarget; event: InstanceEvent }> = [];
  readonly synced: Array<PodFindings | undefined> = [];
  requests = 0;

  readonly namespaceLister: Lister<KubernetesObject> = {
    get: (name) => this.namespaces.get(name),
    list: () => [...this.namespaces.values()],
  };
  readonly nodeLister: Lister<KubernetesObject> = {
    get: (name) => this.nodes.get(name),
    list: () => [...this.nodes.values()],
  };
  readonly lister: PodLister = {
    listPods: async (namespace) => ({ items: (this.pods.get(namespace) ?? []) as never }),
    listPodsOnNode: async (nodeName) => {
      this.nodeLists.push(nodeName);
      return { items: (this.onNode.get(nodeName) ?? []) as never };
    },
  };

  auditor(exempt: string[] = ['kube-system']): NodeIsolationAuditor {
    return new NodeIsolationAuditor({
      pods: this.lister,
      namespaces: this.namespaceLister,
      resolveOwner: () => AGENT_TARGET,
      recordEvent: async (target, event) => {
        this.events.push({ target, event });
      },
      hooks: { podListRequest: () => this.requests++, podsChecked: () => {} },
      reports: {
        sync: async (_namespace, findings) => {
          this.synced.push(findings);
        },
      },
      reportPods: 100,
      placement: { nodes: this.nodeLister, exempt: new Set(exempt) },
    });
  }
}

const live = (): AbortSignal => new AbortController().signal;

describe('the audit judges where Pods really run', () => {
  it('a Pod on a re-pooled node is off-pool, a toleration reaching team-b is beyond: Report, Event on the instance, totals', async () => {
    const h = new Harness();
    h.nodes.set('n1', node('n1', 'pool-b'));
    h.pods.set('team-a', [
      pod('team-a', 'web', 'n1', [...A.tolerations, { operator: 'Exists' }]),
      pod('team-a', 'ok', 'n9'),
    ]);
    const auditor = h.auditor();

    await auditor.reconcile('team-a', live());

    expect(auditor.placementTotals()).toEqual({ off_pool: 1, tolerates_beyond_mandate: 1, foreign_on_pool: 0 });
    expect(h.synced[0]).toMatchObject({
      checked: 2,
      unisolated: 0,
      failingPods: 1,
      placement: {
        offPool: 1,
        beyondMandate: 1,
        pods: [
          {
            name: 'web',
            offPool: { node: 'n1', missingNodeLabels: { pool: 'pool-a' } },
            beyondMandate: { tolerations: [{ operator: 'Exists' }], namespaces: ['team-b'] },
          },
        ],
        foreign: [],
      },
    });
    expect(h.events).toEqual([
      {
        target: AGENT_TARGET,
        event: expect.objectContaining({ type: 'Warning', reason: 'PodsMisplaced' }),
      },
    ]);
    expect(h.events[0]?.event.message).toContain('web (runs on node n1, whose labels lack pool=pool-a');
    // team-a's pool has no node any more: no foreign-Pod LIST at all.
    expect(h.nodeLists).toEqual([]);
  });

  it("lists the Pods of each node of the pool: a foreign Pod is counted for the owner's Report and warned on itself", async () => {
    const h = new Harness();
    h.nodes.set('n3', node('n3', 'pool-a'));
    h.pods.set('team-a', [pod('team-a', 'web', 'n1')]);
    h.onNode.set('n1', [
      pod('team-a', 'web', 'n1'),
      pod('kube-system', 'kube-proxy', 'n1'),
      pod('unpooled', 'squatter', 'n1', [{ operator: 'Exists' }]),
    ]);
    h.onNode.set('n3', [pod('team-b', 'intruder', 'n3')]);
    const auditor = h.auditor();

    await auditor.reconcile('team-a', live());

    expect(h.nodeLists).toEqual(['n1', 'n3']);
    expect(h.requests).toBe(3);
    expect(auditor.placementTotals()).toEqual({ off_pool: 0, tolerates_beyond_mandate: 0, foreign_on_pool: 2 });
    expect(h.synced[0]?.placement?.foreign).toEqual([
      { node: 'n1', count: 1 },
      { node: 'n3', count: 1 },
    ]);
    expect(h.events.map((e) => [e.target.namespace, e.target.name, e.event.reason])).toEqual([
      ['unpooled', 'squatter', 'ForeignPodOnPool'],
      ['team-b', 'intruder', 'ForeignPodOnPool'],
    ]);
    expect(h.events[0]?.event.message).toMatch(
      /^Pod unpooled\/squatter runs on node n1, which belongs to the dedicated node pool of namespace team-a\./,
    );
    expect(h.events[0]?.target).toMatchObject({ kind: 'Pod', apiVersion: 'v1', uid: 'uid-squatter' });
  });

  it('a namespace no longer isolated forgets its placement findings', async () => {
    const h = new Harness();
    h.onNode.set('n1', [pod('unpooled', 'squatter', 'n1')]);
    const auditor = h.auditor();
    await auditor.reconcile('team-a', live());
    expect(auditor.placementTotals().foreign_on_pool).toBe(1);
    h.namespaces.delete('team-a');
    await auditor.reconcile('team-a', live());
    expect(auditor.placementTotals().foreign_on_pool).toBe(0);
  });
});

describe('the Node cache and what a Node change brings forward', () => {
  it('trimNode keeps the name, labels and taints only', () => {
    const n = {
      apiVersion: 'v1',
      kind: 'Node',
      metadata: { name: 'n1', labels: { pool: 'a' }, annotations: { big: 'x' }, managedFields: [{}] },
      spec: { taints: [{ key: 'dedicated', value: 'a', effect: 'NoSchedule' }], podCIDR: '10.0.0.0/24' },
      status: { images: [{ names: ['x'] }] },
    } as KubernetesObject;
    trimNode(n);
    expect(n).toEqual({
      apiVersion: 'v1',
      kind: 'Node',
      metadata: { name: 'n1', labels: { pool: 'a' } },
      spec: { taints: [{ key: 'dedicated', value: 'a', effect: 'NoSchedule' }] },
    });
  });

  it('poolOwnersOf: the namespaces whose pool holds a node with any of the label sets', () => {
    const mandates = new Map([
      ['team-a', A],
      ['team-b', mandate('pool-b')],
    ]);
    expect(poolOwnersOf(mandates, [{ pool: 'pool-a' }, { pool: 'pool-b' }])).toEqual(['team-a', 'team-b']);
    expect(poolOwnersOf(mandates, [undefined, { pool: 'none' }])).toEqual([]);
  });

  it('a re-pooling enqueues the pool it left and the pool it joined; a heartbeat enqueues nothing', () => {
    const h = new Harness();
    let handlers: EventHandlers<KubernetesObject> = {};
    const source = nodePoolChanges(
      {
        addEventHandler: (x) => {
          handlers = x;
          return () => {};
        },
      },
      h.namespaceLister,
    );
    const keys: string[] = [];
    source.subscribe((k) => keys.push(k));
    handlers.add?.(node('n1', 'pool-a'));
    expect(keys).toEqual(['team-a']);
    handlers.update?.({ ...node('n1', 'pool-a'), status: { conditions: [] } } as KubernetesObject);
    expect(keys).toEqual(['team-a']);
    handlers.update?.(node('n1', 'pool-b'));
    expect(keys).toEqual(['team-a', 'team-a', 'team-b']);
    handlers.update?.({
      ...node('n1', 'pool-b'),
      spec: { taints: [{ key: 'dedicated', value: 'pool-b', effect: 'NoExecute' }] },
    } as KubernetesObject);
    expect(keys.slice(3)).toEqual(['team-b']);
    handlers.delete?.(node('n1', 'pool-b'));
    expect(keys.slice(4)).toEqual(['team-b']);
    expect(nodeFingerprint(node('n1', 'pool-a'))).not.toBe(nodeFingerprint(node('n1', 'pool-b')));
  });

  it('the Event message stays within the Event API limit', () => {
    const pods = Array.from({ length: 50 }, (_, i) => ({
      name: `pod-with-a-rather-long-name-${i}`,
      offPool: { node: 'node-with-a-long-name', missingNodeLabels: { pool: 'pool-a' } },
    }));
    const text = misplacedMessage(
      'team-a',
      { counts: { off_pool: 50, tolerates_beyond_mandate: 0, foreign_on_pool: 0 }, pods, foreign: [] },
      50,
    );
    expect(text.length).toBeLessThanOrEqual(1024);
    expect(text).toMatch(/^50 placement findings for Pods of namespace team-a: pod-with-a-rather-long-name-0 /);
  });
});
