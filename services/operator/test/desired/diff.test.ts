import { describe, expect, it } from '@jest/globals';
import fc from 'fast-check';
import { isEmptyValue, satisfies, updatedObject, updateKind } from '../../src/desired/diff.js';
import type { ManagedObject } from '../../src/desired/objects.js';
import { desiredSandboxPolicy } from '../../src/desired/sandbox-policy.js';
import { makeInstance } from './helpers.js';

const objects = desiredSandboxPolicy({
  instance: makeInstance(),
  tenantNamespace: 'team-a',
  spec: { minRuntimeClass: 'kata', enforce: false },
  runtimeClasses: [],
  mutatingPolicyApiVersion: 'admissionregistration.k8s.io/v1',
}).objects;

function byKind(kind: string): ManagedObject {
  const o = objects.find((x) => x.kind === kind);
  if (o === undefined) throw new Error(kind);
  return o;
}

/** What kube-apiserver returns after storing `obj`: server-set metadata and defaulted fields. */
function asStored(obj: ManagedObject): ManagedObject {
  const stored = structuredClone(obj);
  stored.metadata = { ...stored.metadata, uid: 'u', resourceVersion: '5', managedFields: [{ manager: 'x' }] };
  const spec = stored.spec as Record<string, unknown> | undefined;
  const mc = (spec?.matchConstraints ?? spec?.matchResources) as Record<string, unknown> | undefined;
  if (mc !== undefined) {
    mc.matchPolicy ??= 'Equivalent';
    mc.objectSelector = {};
    delete mc.excludeResourceRules; // empty lists are omitted
    delete mc.resourceRules;
    if ((spec?.matchConstraints as object | undefined) !== undefined) {
      mc.resourceRules = (
        obj.spec as { matchConstraints: { resourceRules: unknown[] } }
      ).matchConstraints.resourceRules;
    }
  }
  if (spec !== undefined && Array.isArray(spec.matchConditions) && spec.matchConditions.length === 0) {
    delete spec.matchConditions;
  }
  stored.status = { observedGeneration: 1 };
  return stored;
}

describe('satisfies', () => {
  it('compares primitives exactly', () => {
    expect(satisfies('a', 'a')).toBe(true);
    expect(satisfies('a', 'b')).toBe(false);
    expect(satisfies(1, '1')).toBe(false);
    expect(satisfies(false, undefined)).toBe(false);
  });

  it('ignores fields the desired state does not set', () => {
    expect(satisfies({ a: 1 }, { a: 1, b: 2 })).toBe(true);
    expect(satisfies({ a: undefined, b: 1 }, { a: 3, b: 1 })).toBe(true);
  });

  it('reads undefined fields as JSON does: absent (so { a: undefined } is the empty object)', () => {
    expect(satisfies({ a: undefined }, {})).toBe(true);
    expect(satisfies({ a: undefined }, { a: 3 })).toBe(false);
  });

  it('treats an empty desired array or object as an assertion of emptiness', () => {
    expect(satisfies([], undefined)).toBe(true);
    expect(satisfies([], [])).toBe(true);
    expect(satisfies([], [{ name: 'x', expression: 'false' }])).toBe(false);
    expect(satisfies({}, {})).toBe(true);
    expect(satisfies({}, { matchLabels: {} })).toBe(true);
    expect(satisfies({}, { matchLabels: { bypass: 'true' } })).toBe(false);
  });

  it('compares arrays element by element, length included', () => {
    expect(satisfies(['Deny'], ['Deny'])).toBe(true);
    expect(satisfies(['Deny'], ['Deny', 'Warn'])).toBe(false);
    expect(satisfies([{ a: 1 }], [{ a: 1, scope: '*' }])).toBe(true);
    expect(satisfies(['a'], 'a')).toBe(false);
  });

  it('holds for any JSON value against itself', () => {
    fc.assert(fc.property(fc.jsonValue(), (v) => expect(satisfies(v, structuredClone(v))).toBe(true)));
  });

  it('knows what is empty', () => {
    expect([undefined, null, [], {}, { a: [] }, { a: { b: null } }].every(isEmptyValue)).toBe(true);
    expect([0, '', false, ['x'], { a: 1 }].some(isEmptyValue)).toBe(false);
  });
});

describe('updateKind', () => {
  it('finds nothing to do on what the API server stored, defaults and all (no write loop)', () => {
    for (const obj of objects) expect(updateKind(obj, asStored(obj))).toBe('none');
  });

  it('needs an update when a field the operator sets was edited', () => {
    const vapb = asStored(byKind('ValidatingAdmissionPolicyBinding'));
    (vapb.spec as { validationActions: string[] }).validationActions = ['Audit'];
    expect(updateKind(byKind('ValidatingAdmissionPolicyBinding'), vapb)).toBe('update');
  });

  it('needs an update when someone narrows a policy with a match condition or selector', () => {
    const vap = asStored(byKind('ValidatingAdmissionPolicy'));
    (vap.spec as Record<string, unknown>).matchConditions = [{ name: 'never', expression: 'false' }];
    expect(updateKind(byKind('ValidatingAdmissionPolicy'), vap)).toBe('update');
    const binding = asStored(byKind('ValidatingAdmissionPolicyBinding'));
    (binding.spec as { matchResources: Record<string, unknown> }).matchResources.objectSelector = {
      matchLabels: { skip: 'me' },
    };
    expect(updateKind(byKind('ValidatingAdmissionPolicyBinding'), binding)).toBe('update');
  });

  it('needs an update when an owner label or annotation was changed, not when foreign ones were added', () => {
    const rc = asStored(byKind('RuntimeClass'));
    rc.metadata.labels = { ...rc.metadata.labels, extra: 'x' };
    rc.metadata.annotations = { ...rc.metadata.annotations, note: 'y' };
    expect(updateKind(byKind('RuntimeClass'), rc)).toBe('none');
    rc.metadata.labels = { ...rc.metadata.labels, 'kubeplus.io/owner-uid': 'old' };
    expect(updateKind(byKind('RuntimeClass'), rc)).toBe('update');
  });

  it('needs an update when a top-level field was added (scheduling on an owned RuntimeClass)', () => {
    const rc = asStored(byKind('RuntimeClass'));
    rc.scheduling = { nodeSelector: { pool: 'elsewhere' } };
    expect(updateKind(byKind('RuntimeClass'), rc)).toBe('update');
    rc.scheduling = undefined;
    expect(updateKind(byKind('RuntimeClass'), rc)).toBe('none');
  });

  it('needs delete-and-create when the immutable RuntimeClass handler differs', () => {
    const rc = asStored(byKind('RuntimeClass'));
    rc.handler = 'runsc';
    expect(updateKind(byKind('RuntimeClass'), rc)).toBe('recreate');
  });
});

describe('updatedObject', () => {
  it('replaces the body, merges labels and annotations, and keeps identity and concurrency fields', () => {
    const desired = byKind('ValidatingAdmissionPolicyBinding');
    const current = asStored(desired);
    current.metadata.labels = { ...current.metadata.labels, foreign: 'keep', 'kubeplus.io/owner-uid': 'stale' };
    current.metadata.finalizers = ['someone/else'];
    (current.spec as Record<string, unknown>).paramRef = { name: 'injected' };
    const out = updatedObject(desired, current);
    expect(out.spec).toEqual(desired.spec);
    expect(out.metadata).toEqual({
      name: desired.metadata.name,
      uid: 'u',
      resourceVersion: '5',
      finalizers: ['someone/else'],
      labels: { ...desired.metadata.labels, foreign: 'keep' },
      annotations: desired.metadata.annotations,
    });
    expect(out.metadata).not.toHaveProperty('managedFields');
    expect(out).not.toHaveProperty('status');
  });
});
