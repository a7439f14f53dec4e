import { describe, expect, it } from '@jest/globals';
import fc from 'fast-check';
import {
  isNamespaceCreatedFor,
  type NamespaceMergePatch,
  type NamespaceMeta,
  type NodeIsolationInput,
  namespaceToCreate,
  planNamespaceCleanup,
  planNodeIsolation,
} from '../../src/desired/node-isolation.js';
import { makeInstance, TEAM_A_NODE_ISOLATION } from './helpers.js';

const RESOLVED =
  '{"nodeSelector":{"pool":"team-a-pool"},"tolerations":[{"key":"dedicated","operator":"Equal","value":"team-a-pool","effect":"NoSchedule"}]}';
const IDENTITY = 'cloudark.io/Agent/team-a/team-a-agent-instance';
const UID = '3f0c9a52-7d1e-4b7a-9c55-0a1b2c3d4e5f';

const isolated = makeInstance({ annotations: { 'kubeplus.io/node-isolation': TEAM_A_NODE_ISOLATION } });
const plain = makeInstance();
const foreignTenant = { name: 'team-a', createdByOperator: false };

function input(over: Partial<NodeIsolationInput>): NodeIsolationInput {
  return { instance: isolated, tenant: foreignTenant, namespace: { name: 'team-a' }, namespaceWanted: false, ...over };
}

/** RFC 7386 applied to namespace metadata. */
function applyPatch(ns: NamespaceMeta, patch: NamespaceMergePatch): NamespaceMeta {
  const merge = (cur: Readonly<Record<string, string>> | undefined, p: Record<string, string | null> | undefined) => {
    const out: Record<string, string> = { ...cur };
    for (const [k, v] of Object.entries(p ?? {})) {
      if (v === null) delete out[k];
      else out[k] = v;
    }
    return out;
  };
  return {
    ...ns,
    labels: merge(ns.labels, patch.metadata.labels),
    annotations: merge(ns.annotations, patch.metadata.annotations),
  };
}

describe('planNodeIsolation on a namespace the operator did not create', () => {
  it('labels and annotates it, records the owner, and does not claim managed-by', () => {
    const plan = planNodeIsolation(input({}));
    expect(plan).toEqual({
      action: 'patch',
      change: 'apply',
      patch: {
        metadata: {
          labels: {
            'kubeplus.io/node-isolation-enabled': 'true',
            'kubeplus.io/owner-name': 'team-a-agent-instance',
            'kubeplus.io/owner-namespace': 'team-a',
            'kubeplus.io/owner-uid': UID,
          },
          annotations: { 'kubeplus.io/node-isolation-resolved': RESOLVED, 'kubeplus.io/owner': IDENTITY },
        },
      },
    });
  });

  it('issues no write once the namespace is up to date', () => {
    const first = planNodeIsolation(input({}));
    if (first.action !== 'patch') throw new Error('expected a patch');
    const after = applyPatch({ name: 'team-a' }, first.patch);
    expect(planNodeIsolation(input({ namespace: after }))).toEqual({ action: 'unchanged' });
  });

  it('writes the canonical form: key order and whitespace of the annotation do not matter', () => {
    const reordered = makeInstance({
      annotations: {
        'kubeplus.io/node-isolation': `{ "tolerations": [{"effect":"NoSchedule","value":"team-a-pool","operator":"Equal","key":"dedicated"}],
          "nodeSelector": {"pool": "team-a-pool"} }`,
      },
    });
    const first = planNodeIsolation(input({}));
    if (first.action !== 'patch') throw new Error('expected a patch');
    const after = applyPatch({ name: 'team-a' }, first.patch);
    expect(planNodeIsolation(input({ instance: reordered, namespace: after }))).toEqual({ action: 'unchanged' });
  });

  it('changes only the resolved annotation when the spec changes', () => {
    const first = planNodeIsolation(input({}));
    if (first.action !== 'patch') throw new Error('expected a patch');
    const after = applyPatch({ name: 'team-a' }, first.patch);
    const changed = makeInstance({ annotations: { 'kubeplus.io/node-isolation': '{"nodeSelector":{"pool":"b"}}' } });
    expect(planNodeIsolation(input({ instance: changed, namespace: after }))).toEqual({
      action: 'patch',
      change: 'apply',
      patch: {
        metadata: {
          annotations: { 'kubeplus.io/node-isolation-resolved': '{"nodeSelector":{"pool":"b"},"tolerations":[]}' },
        },
      },
    });
  });

  it('keeps labels and annotations others wrote', () => {
    const ns = { name: 'team-a', labels: { team: 'a' }, annotations: { note: 'x' } };
    const plan = planNodeIsolation(input({ namespace: ns }));
    if (plan.action !== 'patch') throw new Error('expected a patch');
    expect(plan.patch.metadata.labels).not.toHaveProperty('team');
    expect(applyPatch(ns, plan.patch).labels).toMatchObject({ team: 'a' });
  });

  it('removes label, annotation and ownership when the annotation is removed and they are ours', () => {
    const first = planNodeIsolation(input({}));
    if (first.action !== 'patch') throw new Error('expected a patch');
    const after = applyPatch({ name: 'team-a', labels: { team: 'a' } }, first.patch);
    const plan = planNodeIsolation(input({ instance: plain, namespace: after }));
    expect(plan).toEqual({
      action: 'patch',
      change: 'remove',
      patch: {
        metadata: {
          labels: {
            'kubeplus.io/node-isolation-enabled': null,
            'kubeplus.io/owner-name': null,
            'kubeplus.io/owner-namespace': null,
            'kubeplus.io/owner-uid': null,
          },
          annotations: { 'kubeplus.io/node-isolation-resolved': null, 'kubeplus.io/owner': null },
        },
      },
    });
    if (plan.action !== 'patch') return;
    expect(applyPatch(after, plan.patch)).toEqual({ name: 'team-a', labels: { team: 'a' }, annotations: {} });
  });

  it('leaves isolation it did not write alone when the annotation is absent', () => {
    const ns = {
      name: 'team-a',
      labels: { 'kubeplus.io/node-isolation-enabled': 'true' },
      annotations: { 'kubeplus.io/node-isolation-resolved': RESOLVED },
    };
    expect(planNodeIsolation(input({ instance: plain, namespace: ns }))).toEqual({ action: 'unchanged' });
  });

  it('reports a conflict instead of taking over another instance’s isolation', () => {
    const ns = {
      name: 'team-a',
      labels: { 'kubeplus.io/node-isolation-enabled': 'true' },
      annotations: {
        'kubeplus.io/owner': 'cloudark.io/Agent/team-a/other',
        'kubeplus.io/node-isolation-resolved': '{}',
      },
    };
    expect(planNodeIsolation(input({ namespace: ns }))).toEqual({
      action: 'conflict',
      owner: 'cloudark.io/Agent/team-a/other',
    });
    expect(planNodeIsolation(input({ instance: plain, namespace: ns }))).toEqual({ action: 'unchanged' });
  });

  it('returns the validation errors and no patch for an invalid annotation', () => {
    const bad = makeInstance({ annotations: { 'kubeplus.io/node-isolation': '{"nodeSelector": {"pool": 7}}' } });
    const plan = planNodeIsolation(input({ instance: bad }));
    expect(plan.action).toBe('invalid');
    if (plan.action === 'invalid') expect(plan.errors.join()).toContain('nodeSelector');
    expect(
      planNodeIsolation(
        input({ instance: makeInstance({ annotations: { 'kubeplus.io/node-isolation': 'not json' } }) }),
      ),
    ).toMatchObject({
      action: 'invalid',
    });
  });

  it('does nothing for a namespace that does not exist and is not the operator’s to create', () => {
    expect(planNodeIsolation(input({ namespace: undefined }))).toEqual({ action: 'absent' });
  });

  it('is idempotent from any starting labels and annotations it does not conflict with', () => {
    const key = fc.constantFrom(
      'kubeplus.io/node-isolation-enabled',
      'kubeplus.io/node-isolation-resolved',
      'kubeplus.io/owner-uid',
      'kubeplus.io/owner-name',
      'team',
    );
    const map = fc.dictionary(key, fc.constantFrom('true', 'x', RESOLVED, UID));
    fc.assert(
      fc.property(map, map, fc.boolean(), (labels, annotations, withIsolation) => {
        const instance = withIsolation ? isolated : plain;
        const ns = { name: 'team-a', labels, annotations: { ...annotations, 'kubeplus.io/owner': IDENTITY } };
        const plan = planNodeIsolation(input({ instance, namespace: ns }));
        const next = plan.action === 'patch' ? applyPatch(ns, plan.patch) : ns;
        expect(planNodeIsolation(input({ instance, namespace: next }))).toEqual({ action: 'unchanged' });
      }),
    );
  });
});

describe('planNodeIsolation with a namespace the operator creates', () => {
  const platformInstance = makeInstance({
    namespace: 'kubeplus',
    name: 'team-b',
    annotations: { 'kubeplus.io/node-isolation': TEAM_A_NODE_ISOLATION },
  });
  const tenant = { name: 'team-b', createdByOperator: true };
  const owned = namespaceToCreate(platformInstance, 'team-b', RESOLVED).metadata;

  it('creates it already isolated, created-for and owned by the instance', () => {
    const plan = planNodeIsolation({
      instance: platformInstance,
      tenant,
      namespace: undefined,
      namespaceWanted: false,
    });
    expect(plan).toEqual({
      action: 'create',
      namespace: {
        apiVersion: 'v1',
        kind: 'Namespace',
        metadata: {
          name: 'team-b',
          labels: {
            'app.kubernetes.io/managed-by': 'kubeplus-isolation',
            'kubeplus.io/owner-name': 'team-b',
            'kubeplus.io/owner-namespace': 'kubeplus',
            'kubeplus.io/owner-uid': UID,
            'kubeplus.io/node-isolation-enabled': 'true',
          },
          annotations: {
            'kubeplus.io/created-for': 'cloudark.io/Agent/kubeplus/team-b',
            'kubeplus.io/owner': 'cloudark.io/Agent/kubeplus/team-b',
            'kubeplus.io/node-isolation-resolved': RESOLVED,
          },
        },
      },
    });
  });

  it('creates it without isolation when only sandbox isolation wants it', () => {
    const instance = makeInstance({ namespace: 'kubeplus', name: 'team-b' });
    const plan = planNodeIsolation({ instance, tenant, namespace: undefined, namespaceWanted: true });
    expect(plan.action).toBe('create');
    if (plan.action !== 'create') return;
    expect(plan.namespace.metadata.labels).not.toHaveProperty(['kubeplus.io/node-isolation-enabled']);
    expect(plan.namespace.metadata.annotations).not.toHaveProperty(['kubeplus.io/node-isolation-resolved']);
    expect(planNodeIsolation({ instance, tenant, namespace: undefined, namespaceWanted: false })).toEqual({
      action: 'absent',
    });
  });

  it('does not create it when the node-isolation annotation is invalid (no Pod admitted unisolated)', () => {
    const bad = makeInstance({
      namespace: 'kubeplus',
      name: 'team-b',
      annotations: { 'kubeplus.io/node-isolation': '[' },
    });
    expect(planNodeIsolation({ instance: bad, tenant, namespace: undefined, namespaceWanted: true }).action).toBe(
      'invalid',
    );
  });

  it('is up to date right after creation', () => {
    expect(planNodeIsolation({ instance: platformInstance, tenant, namespace: owned, namespaceWanted: false })).toEqual(
      {
        action: 'unchanged',
      },
    );
    expect(isNamespaceCreatedFor(owned, platformInstance)).toBe(true);
  });

  it('removes only the isolation keys when the annotation goes, keeping ownership', () => {
    const instance = makeInstance({ namespace: 'kubeplus', name: 'team-b' });
    expect(planNodeIsolation({ instance, tenant, namespace: owned, namespaceWanted: false })).toEqual({
      action: 'patch',
      change: 'remove',
      patch: {
        metadata: {
          labels: { 'kubeplus.io/node-isolation-enabled': null },
          annotations: { 'kubeplus.io/node-isolation-resolved': null },
        },
      },
    });
  });

  it('relabels the uid when a re-created instance adopts its namespace', () => {
    const recreated = { ...platformInstance, uid: 'new-uid' };
    expect(planNodeIsolation({ instance: recreated, tenant, namespace: owned, namespaceWanted: false })).toEqual({
      action: 'patch',
      change: 'ownership',
      patch: { metadata: { labels: { 'kubeplus.io/owner-uid': 'new-uid' } } },
    });
  });
});

describe('planNamespaceCleanup', () => {
  const platformInstance = makeInstance({ namespace: 'kubeplus', name: 'team-b' });

  it('deletes a namespace created for the instance, guarded by its uid', () => {
    const ns = { ...namespaceToCreate(platformInstance, 'team-b', undefined).metadata, uid: 'ns-uid' };
    expect(planNamespaceCleanup(platformInstance, ns)).toEqual({ action: 'delete', uid: 'ns-uid' });
  });

  it('only removes its own keys from a namespace it did not create', () => {
    const first = planNodeIsolation(input({}));
    if (first.action !== 'patch') throw new Error('expected a patch');
    const ns = applyPatch({ name: 'team-a', labels: { keep: 'me' } }, first.patch);
    const plan = planNamespaceCleanup(isolated, ns);
    expect(plan.action).toBe('patch');
    if (plan.action === 'patch')
      expect(applyPatch(ns, plan.patch)).toEqual({ name: 'team-a', labels: { keep: 'me' }, annotations: {} });
  });

  it('leaves a namespace alone that another instance or a human isolates', () => {
    const ns = {
      name: 'team-a',
      labels: { 'kubeplus.io/node-isolation-enabled': 'true' },
      annotations: { 'kubeplus.io/owner': 'cloudark.io/Agent/team-a/other' },
    };
    expect(planNamespaceCleanup(isolated, ns)).toEqual({ action: 'none' });
    expect(planNamespaceCleanup(isolated, { name: 'team-a' })).toEqual({ action: 'none' });
    expect(planNamespaceCleanup(isolated, undefined)).toEqual({ action: 'none' });
  });

  it('never deletes a namespace created for a different instance of the same name elsewhere', () => {
    const other = makeInstance({ namespace: 'kubeplus', name: 'team-b', kind: 'OtherKind' });
    const ns = namespaceToCreate(other, 'team-b', undefined).metadata;
    expect(planNamespaceCleanup(platformInstance, ns)).toEqual({ action: 'none' });
  });
});
