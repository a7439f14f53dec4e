import { describe, expect, it } from '@jest/globals';
import type { KubernetesObject } from '@kubernetes/client-node';
import {
  deletedOwnedObjectOwnerKey,
  instanceEventKey,
  type RuntimeClassSnapshot,
  runtimeClassChangeKeys,
  runtimeClassSnapshot,
  SandboxTenantIndex,
} from '../../../src/controllers/instances/keys.js';
import {
  bindSandboxInstanceIndex,
  SandboxInstanceIndex,
} from '../../../src/controllers/instances/sandbox-instance-index.js';
import {
  decodeOwnedRef,
  encodeOwnedRef,
  isOwnedObject,
  type OwnedType,
  ownedObjectKey,
} from '../../../src/controllers/owned-objects/keys.js';
import { decodeInstanceKey, type KindRef } from '../../../src/desired/instance.js';
import type { GroupVersionResource } from '../../../src/runtime/gvr.js';
import { instance, ownedMeta } from '../../fixtures.js';

const AGENTS: GroupVersionResource = { group: 'cloudark.io', version: 'v1', resource: 'agents' };
const kindOf = (gvr: GroupVersionResource): string | undefined => (gvr.resource === 'agents' ? 'Agent' : undefined);
const AGENT: KindRef = { group: 'cloudark.io', version: 'v1', kind: 'Agent', plural: 'agents' };
const lookup = (group: string, kind: string): KindRef | undefined =>
  group === 'cloudark.io' && kind === 'Agent' ? AGENT : undefined;

const NAMESPACE: OwnedType = { apiVersion: 'v1', kind: 'Namespace' };
const RUNTIME_CLASS: OwnedType = { apiVersion: 'node.k8s.io/v1', kind: 'RuntimeClass' };
const NODE_ISOLATION: OwnedType = { apiVersion: 'isolation.kubeplus.io/v1alpha1', kind: 'NodeIsolation' };
const MAP: OwnedType = { apiVersion: 'admissionregistration.k8s.io/v1beta1', kind: 'MutatingAdmissionPolicy' };
const OWNER = 'cloudark.io/Agent/team-a/agent-x';
const OWNER_KEY = 'cloudark.io/v1/Agent/agents/team-a/agent-x';

function object(metadata: KubernetesObject['metadata']): KubernetesObject {
  return { metadata };
}

/** The index as the operator fills it: every cached instance replayed as an add. */
function indexOf(
  cached: ReadonlyArray<{ gvr: GroupVersionResource; obj: KubernetesObject }>,
  platformNamespace?: string,
): SandboxInstanceIndex {
  const index = new SandboxInstanceIndex(platformNamespace);
  bindSandboxInstanceIndex(
    index,
    {
      addEventHandler: (handlers) => {
        for (const { gvr, obj } of cached) handlers.add?.(gvr, obj);
        return () => {};
      },
    },
    kindOf,
  );
  return index;
}

describe('instanceEventKey', () => {
  it('keys an instance by group, watched version, Kind, plural, namespace and name', () => {
    const key = instanceEventKey(AGENTS, instance('agent-x', 'team-a'), kindOf);
    expect(key).toBe(OWNER_KEY);
    expect(key === undefined ? undefined : decodeInstanceKey(key)).toEqual({
      ...AGENT,
      namespace: 'team-a',
      name: 'agent-x',
    });
  });

  it("falls back to the object's kind, and skips objects without name, namespace or kind", () => {
    const robots: GroupVersionResource = { group: 'cloudark.io', version: 'v1', resource: 'robots' };
    expect(instanceEventKey(robots, instance('r', 'ns', {}, { kind: 'Robot' }), kindOf)).toBe(
      'cloudark.io/v1/Robot/robots/ns/r',
    );
    expect(instanceEventKey(robots, instance('r', 'ns'), kindOf)).toBeUndefined();
    expect(instanceEventKey(AGENTS, object({ name: 'cluster-scoped' }), kindOf)).toBeUndefined();
    expect(instanceEventKey(AGENTS, object({ namespace: 'ns' }), kindOf)).toBeUndefined();
  });
});

describe('owned objects', () => {
  it('recognizes managed objects by managed-by, and Namespaces by the owner-uid label', () => {
    expect(isOwnedObject(RUNTIME_CLASS, object(ownedMeta('kubeplus-sandbox-agent-x', OWNER)))).toBe(true);
    expect(isOwnedObject(RUNTIME_CLASS, object(ownedMeta('kata', OWNER, false)))).toBe(false);
    expect(isOwnedObject(RUNTIME_CLASS, object({ name: 'kata' }))).toBe(false);
    // A Namespace the operator only labelled has no managed-by (Helm may own that label).
    expect(isOwnedObject(NAMESPACE, object(ownedMeta('team-a', OWNER, false)))).toBe(true);
    expect(
      isOwnedObject(
        NAMESPACE,
        object({ name: 'team-b', labels: { 'app.kubernetes.io/managed-by': 'kubeplus-isolation' } }),
      ),
    ).toBe(false);
  });

  it('keys add/update events of owned objects by apiVersion, Kind and name, and round-trips them', () => {
    expect(ownedObjectKey(RUNTIME_CLASS, object(ownedMeta('kubeplus-sandbox-agent-x', OWNER)))).toBe(
      'node.k8s.io/v1/RuntimeClass/kubeplus-sandbox-agent-x',
    );
    expect(ownedObjectKey(NAMESPACE, object(ownedMeta('team-a', OWNER, false)))).toBe('v1/Namespace/team-a');
    expect(ownedObjectKey(MAP, object(ownedMeta('kubeplus-sandbox-agent-x-default', OWNER)))).toBe(
      'admissionregistration.k8s.io/v1beta1/MutatingAdmissionPolicy/kubeplus-sandbox-agent-x-default',
    );
    expect(ownedObjectKey(RUNTIME_CLASS, object({ name: 'gvisor' }))).toBeUndefined();

    for (const ref of [
      { apiVersion: 'v1', kind: 'Namespace', name: 'team-a' },
      { apiVersion: 'node.k8s.io/v1', kind: 'RuntimeClass', name: 'kubeplus-sandbox-a' },
      { apiVersion: 'admissionregistration.k8s.io/v1', kind: 'ValidatingAdmissionPolicyBinding', name: 'p' },
    ] as const) {
      expect(decodeOwnedRef(encodeOwnedRef(ref))).toEqual(ref);
    }
  });

  it('keys the namespaced NodeIsolation parameter by its namespace too, and round-trips it', () => {
    const param = { ...ownedMeta('node-isolation', OWNER), namespace: 'team-a' };
    expect(ownedObjectKey(NODE_ISOLATION, object(param))).toBe(
      'isolation.kubeplus.io/v1alpha1/NodeIsolation/team-a/node-isolation',
    );
    // Without a namespace it cannot be named: no key rather than a wrong one.
    expect(ownedObjectKey(NODE_ISOLATION, object(ownedMeta('node-isolation', OWNER)))).toBeUndefined();
    const ref = {
      apiVersion: 'isolation.kubeplus.io/v1alpha1',
      kind: 'NodeIsolation',
      namespace: 'team-a',
      name: 'node-isolation',
    } as const;
    expect(decodeOwnedRef(encodeOwnedRef(ref))).toEqual(ref);
    // A namespaced kind needs its namespace; a cluster-scoped one takes none.
    expect(decodeOwnedRef('isolation.kubeplus.io/v1alpha1/NodeIsolation/node-isolation')).toBeUndefined();
    expect(decodeOwnedRef('node.k8s.io/v1/RuntimeClass/team-a/x')).toBeUndefined();
    expect(decodeOwnedRef('isolation.kubeplus.io/v1alpha1/NodeIsolation//node-isolation')).toBeUndefined();
  });

  it('keys the cluster-scoped SandboxIsolation parameter (shared layout) by name, and round-trips it', () => {
    const type: OwnedType = { apiVersion: 'isolation.kubeplus.io/v1alpha1', kind: 'SandboxIsolation' };
    const key = ownedObjectKey(type, object(ownedMeta('kubeplus-sandbox-team-a.x-0123456789-params', OWNER)));
    expect(key).toBe('isolation.kubeplus.io/v1alpha1/SandboxIsolation/kubeplus-sandbox-team-a.x-0123456789-params');
    expect(decodeOwnedRef(key ?? '')).toEqual({
      apiVersion: 'isolation.kubeplus.io/v1alpha1',
      kind: 'SandboxIsolation',
      name: 'kubeplus-sandbox-team-a.x-0123456789-params',
    });
  });

  it('rejects malformed owned-object keys', () => {
    for (const key of [
      '',
      'RuntimeClass/x',
      'node.k8s.io/v1/Pod/x',
      'node.k8s.io/v1/RuntimeClass/',
      'apps/v1/Namespace/x',
      '/Namespace/x',
    ]) {
      expect(decodeOwnedRef(key)).toBeUndefined();
    }
  });

  it("maps the deletion of an owned object to its owner's instance key (drift restore)", () => {
    expect(
      deletedOwnedObjectOwnerKey(RUNTIME_CLASS, object(ownedMeta('kubeplus-sandbox-agent-x', OWNER)), lookup),
    ).toBe(OWNER_KEY);
    expect(deletedOwnedObjectOwnerKey(NAMESPACE, object(ownedMeta('team-a', OWNER, false)), lookup)).toBe(OWNER_KEY);
  });

  it('maps no deletion to an owner when the object is not ours, names no owner, or its Kind is not watched', () => {
    expect(deletedOwnedObjectOwnerKey(RUNTIME_CLASS, object(ownedMeta('x', OWNER, false)), lookup)).toBeUndefined();
    const noOwner = ownedMeta('x', OWNER);
    expect(deletedOwnedObjectOwnerKey(RUNTIME_CLASS, object({ ...noOwner, annotations: {} }), lookup)).toBeUndefined();
    expect(
      deletedOwnedObjectOwnerKey(
        RUNTIME_CLASS,
        object({ ...noOwner, annotations: { 'kubeplus.io/owner': 'garbage' } }),
        lookup,
      ),
    ).toBeUndefined();
    expect(
      deletedOwnedObjectOwnerKey(RUNTIME_CLASS, object(ownedMeta('x', 'other.io/Thing/ns/t')), lookup),
    ).toBeUndefined();
  });
});

describe('runtimeClassChangeKeys', () => {
  const SANDBOX = { 'kubeplus.io/sandbox-isolation': '{"minRuntimeClass":"kata"}' };
  const cached = [
    { gvr: AGENTS, obj: instance('agent-x', 'team-a', SANDBOX) },
    { gvr: AGENTS, obj: instance('agent-y', 'team-b', SANDBOX) },
    // Same name as agent-x in another namespace: its own class name is held by agent-x's.
    { gvr: AGENTS, obj: instance('agent-x', 'team-z', SANDBOX) },
    { gvr: AGENTS, obj: instance('plain', 'team-c') },
  ];
  const ALL_SANDBOX = [
    OWNER_KEY,
    'cloudark.io/v1/Agent/agents/team-b/agent-y',
    'cloudark.io/v1/Agent/agents/team-z/agent-x',
  ];
  const snapshot = (metadata: KubernetesObject['metadata']): RuntimeClassSnapshot => {
    const s = runtimeClassSnapshot(object(metadata));
    if (s === undefined) throw new Error('no snapshot');
    return s;
  };
  const platformKata = snapshot({ name: 'kata' });
  const generatedX = snapshot(ownedMeta('kubeplus-sandbox-agent-x', OWNER));
  const keys = (before: RuntimeClassSnapshot | undefined, after: RuntimeClassSnapshot | undefined): string[] =>
    runtimeClassChangeKeys({ before, after }, indexOf(cached), lookup).sort();

  it('reads the markers and the owner of a class', () => {
    expect(platformKata).toEqual({ name: 'kata', generated: false, owner: undefined });
    expect(generatedX).toEqual({
      name: 'kubeplus-sandbox-agent-x',
      generated: true,
      owner: { group: 'cloudark.io', kind: 'Agent', namespace: 'team-a', name: 'agent-x' },
    });
    expect(runtimeClassSnapshot(object({}))).toBeUndefined();
  });

  it('a platform class change re-queues every sandbox instance', () => {
    expect(keys(undefined, platformKata)).toEqual(ALL_SANDBOX);
    expect(keys(platformKata, platformKata)).toEqual(ALL_SANDBOX);
    expect(keys(platformKata, undefined)).toEqual(ALL_SANDBOX);
  });

  it('a generated class change re-queues only its owner', () => {
    expect(keys(undefined, generatedX)).toEqual([OWNER_KEY]);
    expect(keys(generatedX, generatedX)).toEqual([OWNER_KEY]);
    const otherTenant = snapshot(ownedMeta('kubeplus-sandbox-agent-y', 'cloudark.io/Agent/team-b/agent-y'));
    expect(keys(undefined, otherTenant)).toEqual(['cloudark.io/v1/Agent/agents/team-b/agent-y']);
  });

  it('a deleted generated class also re-queues the instances waiting for its name', () => {
    expect(keys(generatedX, undefined)).toEqual([OWNER_KEY, 'cloudark.io/v1/Agent/agents/team-z/agent-x']);
  });

  it('a class gaining or losing the markers re-queues every sandbox instance (it joins or leaves their lists)', () => {
    const labelled = snapshot({ name: 'kata', labels: { 'app.kubernetes.io/managed-by': 'kubeplus-isolation' } });
    expect(labelled.generated).toBe(true);
    expect(keys(platformKata, labelled)).toEqual(ALL_SANDBOX);
    expect(keys(labelled, platformKata)).toEqual(ALL_SANDBOX);
  });

  it('a generated class handed to another owner re-queues both owners', () => {
    const toY = snapshot(ownedMeta('kubeplus-sandbox-agent-x', 'cloudark.io/Agent/team-b/agent-y'));
    expect(keys(generatedX, toY)).toEqual([OWNER_KEY, 'cloudark.io/v1/Agent/agents/team-b/agent-y']);
  });

  it('re-queues no owner it cannot name: no or a malformed owner annotation, or a Kind not watched', () => {
    const managedOnly = snapshot({
      name: 'kubeplus-sandbox-q',
      labels: { 'app.kubernetes.io/managed-by': 'kubeplus-isolation' },
    });
    expect(keys(undefined, managedOnly)).toEqual([]);
    const garbage = snapshot({ name: 'kubeplus-sandbox-q', annotations: { 'kubeplus.io/owner': 'garbage' } });
    expect(garbage.generated).toBe(true);
    expect(keys(undefined, garbage)).toEqual([]);
    expect(keys(undefined, snapshot(ownedMeta('kubeplus-sandbox-t', 'other.io/Thing/ns/t')))).toEqual([]);
    expect(keys(undefined, undefined)).toEqual([]);
  });
});

describe('instances sharing a tenant namespace', () => {
  const SANDBOX = { 'kubeplus.io/sandbox-isolation': '{"minRuntimeClass":"kata"}' };
  const key = (namespace: string, name: string): string => `cloudark.io/v1/Agent/agents/${namespace}/${name}`;

  it('a generated class change re-queues its owner and every sandbox instance bound to the owner’s tenant namespace', () => {
    const cached = [
      { gvr: AGENTS, obj: instance('agent-x', 'team-a', SANDBOX) },
      { gvr: AGENTS, obj: instance('agent-w', 'team-a', SANDBOX) },
      // In the platform namespace: its tenant namespace is named after it, team-a.
      { gvr: AGENTS, obj: instance('team-a', 'kubeplus', SANDBOX) },
      { gvr: AGENTS, obj: instance('agent-v', 'team-a') }, // no sandbox isolation
      { gvr: AGENTS, obj: instance('agent-y', 'team-b', SANDBOX) },
    ];
    const generatedX = runtimeClassSnapshot(object(ownedMeta('kubeplus-sandbox-agent-x', OWNER)));
    const keys = runtimeClassChangeKeys({ before: undefined, after: generatedX }, indexOf(cached), lookup).sort();
    expect(keys).toEqual([key('kubeplus', 'team-a'), key('team-a', 'agent-w'), OWNER_KEY]);
    // With another platform namespace, the instance in `kubeplus` binds its own namespace `kubeplus`.
    expect(
      runtimeClassChangeKeys(
        { before: undefined, after: generatedX },
        indexOf(cached, 'platform'),
        lookup,
        'platform',
      ).sort(),
    ).toEqual([key('team-a', 'agent-w'), OWNER_KEY]);
  });

  it('SandboxTenantIndex: an instance event reaches the other sandbox instances of the namespace it binds now or bound before', () => {
    const index = new SandboxTenantIndex();
    expect(index.update(key('team-a', 'a'), instance('a', 'team-a', SANDBOX))).toEqual([]);
    expect(index.update(key('team-a', 'b'), instance('b', 'team-a', SANDBOX))).toEqual([key('team-a', 'a')]);
    expect(index.update(key('kubeplus', 'team-a'), instance('team-a', 'kubeplus', SANDBOX)).sort()).toEqual([
      key('team-a', 'a'),
      key('team-a', 'b'),
    ]);
    expect(index.update(key('team-b', 'c'), instance('c', 'team-b', SANDBOX))).toEqual([]);
    // An instance without the annotation binds nothing, and is reached by nothing.
    expect(index.update(key('team-a', 'plain'), instance('plain', 'team-a'))).toEqual([]);
    // Removing the annotation still concerns the namespace it bound; from then on it is out.
    expect(index.update(key('team-a', 'b'), instance('b', 'team-a')).sort()).toEqual([
      key('kubeplus', 'team-a'),
      key('team-a', 'a'),
    ]);
    expect(index.update(key('team-a', 'a'), instance('a', 'team-a', SANDBOX))).toEqual([key('kubeplus', 'team-a')]);
    // A deletion likewise.
    expect(index.update(key('kubeplus', 'team-a'), undefined)).toEqual([key('team-a', 'a')]);
    expect(index.update(key('team-a', 'a'), undefined)).toEqual([]);
  });
});
