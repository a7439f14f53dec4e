import { describe, expect, it } from '@jest/globals';
import type { NamespaceMeta } from '../../src/desired/node-isolation.js';
import type { ManagedObject } from '../../src/desired/objects.js';
import { describeAction, planUninstall, type UninstallInventory } from '../../src/uninstall/plan.js';

const FINALIZER = 'isolation.kubeplus.io/cleanup';
const key = (name: string) => ({
  group: 'cloudark.io',
  version: 'v1',
  kind: 'Agent',
  plural: 'agents',
  namespace: 'kubeplus',
  name,
});

const managed = (kind: ManagedObject['kind'], name: string, namespace?: string): ManagedObject => ({
  apiVersion: kind === 'RuntimeClass' ? 'node.k8s.io/v1' : 'admissionregistration.k8s.io/v1',
  kind,
  metadata: {
    name,
    ...(namespace === undefined ? {} : { namespace }),
    uid: `uid-${name}`,
    labels: { 'app.kubernetes.io/managed-by': 'kubeplus-isolation', 'kubeplus.io/owner-uid': 'u1' },
  },
});

/** A namespace the operator created for instance team-a. */
const created: NamespaceMeta = {
  name: 'team-a',
  resourceVersion: '7',
  labels: {
    'app.kubernetes.io/managed-by': 'kubeplus-isolation',
    'kubeplus.io/node-isolation-enabled': 'true',
    'kubeplus.io/owner-name': 'team-a',
    'kubeplus.io/owner-namespace': 'kubeplus',
    'kubeplus.io/owner-uid': 'u1',
    team: 'a',
  },
  annotations: {
    'kubeplus.io/node-isolation-resolved': '{"nodeSelector":{"pool":"a"}}',
    'kubeplus.io/owner': 'cloudark.io/Agent/kubeplus/team-a',
    'kubeplus.io/created-for': 'cloudark.io/Agent/kubeplus/team-a',
    note: 'kept',
  },
};
/** A namespace someone else (Helm) manages, isolated by an instance. */
const isolated: NamespaceMeta = {
  name: 'team-b',
  resourceVersion: '9',
  labels: {
    'app.kubernetes.io/managed-by': 'Helm',
    'kubeplus.io/node-isolation-enabled': 'true',
    'kubeplus.io/owner-uid': 'u2',
  },
  annotations: { 'kubeplus.io/node-isolation-resolved': '{}', 'kubeplus.io/owner': 'cloudark.io/Agent/team-b/b' },
};
const plain: NamespaceMeta = {
  name: 'default',
  resourceVersion: '1',
  labels: { 'kubernetes.io/metadata.name': 'default' },
};

const inventory: UninstallInventory = {
  instances: [
    { key: key('team-a'), finalizers: ['other.io/keep', FINALIZER], resourceVersion: '11' },
    { key: key('untouched'), finalizers: ['other.io/keep'], resourceVersion: '12' },
  ],
  objects: [
    managed('RuntimeClass', 'kubeplus-sandbox-team-a'),
    managed('ValidatingAdmissionPolicy', 'kubeplus-sandbox-team-a-enforce'),
    { apiVersion: 'node.k8s.io/v1', kind: 'RuntimeClass', metadata: { name: 'runc', uid: 'uid-runc' } },
  ],
  namespaces: [created, isolated, plain],
};

describe('planUninstall', () => {
  it('all: strips our keys from namespaces, deletes the generated objects, then removes our finalizer only', () => {
    const actions = planUninstall(inventory, 'all');
    // Namespaces before objects: a labelled namespace never lacks its NodeIsolation parameter (issue 38).
    expect(actions.map((a) => a.type)).toEqual([
      'patchNamespace',
      'patchNamespace',
      'deleteObject',
      'deleteObject',
      'removeFinalizer',
    ]);
    expect(actions[2]).toEqual({
      type: 'deleteObject',
      ref: { apiVersion: 'node.k8s.io/v1', kind: 'RuntimeClass', name: 'kubeplus-sandbox-team-a' },
      uid: 'uid-kubeplus-sandbox-team-a',
    });
    expect(actions[0]).toEqual({
      type: 'patchNamespace',
      name: 'team-a',
      resourceVersion: '7',
      patch: {
        metadata: {
          // managed-by stays: a record of where the namespace came from (see uninstallPatch).
          labels: {
            'kubeplus.io/node-isolation-enabled': null,
            'kubeplus.io/owner-name': null,
            'kubeplus.io/owner-namespace': null,
            'kubeplus.io/owner-uid': null,
          },
          annotations: {
            'kubeplus.io/node-isolation-resolved': null,
            'kubeplus.io/owner': null,
            'kubeplus.io/created-for': null,
          },
        },
      },
    });
    // Nobody's managed-by is touched (Helm's here).
    expect(actions[1]).toMatchObject({ type: 'patchNamespace', name: 'team-b' });
    expect((actions[1] as { patch: { metadata: { labels: object } } }).patch.metadata.labels).not.toHaveProperty(
      'app.kubernetes.io/managed-by',
    );
    expect(actions[4]).toEqual({
      type: 'removeFinalizer',
      key: key('team-a'),
      finalizers: ['other.io/keep'],
      resourceVersion: '11',
    });
  });

  it("all: deletes the compliance Reports it wrote (by their label), not other tools' Reports", () => {
    const ours: ManagedObject = {
      apiVersion: 'openreports.io/v1alpha1',
      kind: 'Report',
      metadata: {
        name: 'kubeplus-isolation',
        namespace: 'team-a',
        uid: 'r1',
        labels: { 'app.kubernetes.io/managed-by': 'kubeplus-isolation' },
      },
    };
    const kyverno: ManagedObject = {
      apiVersion: 'openreports.io/v1alpha1',
      kind: 'Report',
      metadata: {
        name: 'kyverno',
        namespace: 'team-a',
        uid: 'r2',
        labels: { 'app.kubernetes.io/managed-by': 'kyverno' },
      },
    };
    const actions = planUninstall({ instances: [], objects: [ours, kyverno], namespaces: [] }, 'all');
    expect(actions).toEqual([
      {
        type: 'deleteObject',
        ref: { apiVersion: 'openreports.io/v1alpha1', kind: 'Report', namespace: 'team-a', name: 'kubeplus-isolation' },
        uid: 'r1',
      },
    ]);
    expect(planUninstall({ instances: [], objects: [ours], namespaces: [] }, 'finalizers')).toEqual([]);
  });

  it('all: finds policies under both naming schemes (the instance name alone, and namespace.name-hash since issue 21) by their label', () => {
    const legacy = managed('ValidatingAdmissionPolicyBinding', 'kubeplus-sandbox-agent-enforce');
    const current = managed('ValidatingAdmissionPolicyBinding', 'kubeplus-sandbox-team-a.agent-0123456789-enforce');
    const actions = planUninstall({ instances: [], objects: [legacy, current], namespaces: [] }, 'all');
    expect(actions.map(describeAction)).toEqual([
      'delete ValidatingAdmissionPolicyBinding kubeplus-sandbox-agent-enforce',
      'delete ValidatingAdmissionPolicyBinding kubeplus-sandbox-team-a.agent-0123456789-enforce',
    ]);
  });

  it('finalizers: keeps every generated object and namespace key on purpose', () => {
    expect(planUninstall(inventory, 'finalizers')).toEqual([
      { type: 'removeFinalizer', key: key('team-a'), finalizers: ['other.io/keep'], resourceVersion: '11' },
    ]);
  });

  it('is done once nothing of ours is left', () => {
    const clean: UninstallInventory = {
      instances: [{ key: key('x'), finalizers: [], resourceVersion: '1' }],
      objects: [{ apiVersion: 'node.k8s.io/v1', kind: 'RuntimeClass', metadata: { name: 'runc' } }],
      namespaces: [plain],
    };
    expect(planUninstall(clean, 'all')).toEqual([]);
  });

  it('describes each action in one line', () => {
    expect(planUninstall(inventory, 'all').map(describeAction)).toEqual([
      "remove kubeplus-isolation's keys from Namespace team-a",
      "remove kubeplus-isolation's keys from Namespace team-b",
      'delete RuntimeClass kubeplus-sandbox-team-a',
      'delete ValidatingAdmissionPolicy kubeplus-sandbox-team-a-enforce',
      'remove finalizer isolation.kubeplus.io/cleanup from Agent kubeplus/team-a',
    ]);
  });
});

describe('the shared sandbox policy layout', () => {
  it('all: deletes the shared policies (owned by no instance) and every SandboxIsolation parameter', () => {
    const sharedPolicy = (kind: 'ValidatingAdmissionPolicy' | 'MutatingAdmissionPolicy', name: string) => ({
      apiVersion: 'admissionregistration.k8s.io/v1',
      kind,
      metadata: {
        name,
        uid: `uid-${name}`,
        labels: {
          'app.kubernetes.io/managed-by': 'kubeplus-isolation',
          'app.kubernetes.io/component': 'sandbox-isolation-shared-policy',
        },
      },
    });
    const params: ManagedObject = {
      ...managed('SandboxIsolation', 'kubeplus-sandbox-kubeplus.team-a-0123456789-params'),
      apiVersion: 'isolation.kubeplus.io/v1alpha1',
    };
    const inventory: UninstallInventory = {
      instances: [],
      namespaces: [],
      objects: [
        sharedPolicy('ValidatingAdmissionPolicy', 'kubeplus-isolation-sandbox'),
        sharedPolicy('MutatingAdmissionPolicy', 'kubeplus-isolation-sandbox-default'),
        params,
        managed('ValidatingAdmissionPolicyBinding', 'kubeplus-sandbox-kubeplus.team-a-0123456789-enforce'),
      ],
    };
    const deleted = planUninstall(inventory, 'all').map((a) =>
      a.type === 'deleteObject' ? `${a.ref.kind}/${a.ref.name}` : a.type,
    );
    expect(deleted.sort()).toEqual([
      'MutatingAdmissionPolicy/kubeplus-isolation-sandbox-default',
      'SandboxIsolation/kubeplus-sandbox-kubeplus.team-a-0123456789-params',
      'ValidatingAdmissionPolicy/kubeplus-isolation-sandbox',
      'ValidatingAdmissionPolicyBinding/kubeplus-sandbox-kubeplus.team-a-0123456789-enforce',
    ]);
    expect(planUninstall(inventory, 'finalizers')).toEqual([]);
  });
});
