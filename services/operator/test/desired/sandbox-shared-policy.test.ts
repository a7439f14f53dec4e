/**
 * The shared policy layout (`--sandbox-policy-layout shared`): its objects, and — evaluated with
 * the admission emulator — that the ONE shared policy, given an instance's SandboxIsolation
 * parameter, decides every request exactly as that instance's own per-instance policy does, with
 * the same messages and the same defaulting. The API server's side (paramRef, a missing
 * parameter denying) is proven in e2e/test/operator-sandbox-shared-policy.test.ts.
 */
import { describe, expect, it } from '@jest/globals';
import {
  policyName,
  type RuntimeLevel,
  SHARED_SANDBOX_DEFAULT_POLICY_NAME,
  SHARED_SANDBOX_POLICY_NAME,
  sandboxParamsName,
} from '@kubeplus-isolation/spec';
import type { ManagedObject, MutatingPolicyApiVersion } from '../../src/desired/objects.js';
import { desiredSandboxPolicy, type SandboxPolicyInput } from '../../src/desired/sandbox-policy.js';
import { isSharedPolicy, isSharedPolicyName } from '../../src/desired/sandbox-shared-policy.js';
import { type AdmissionRequest, matches, mutate, validate } from './admission-emulator.js';
import { makeInstance, OTHER_TENANT_CLASS, OWN_CLASS, TEST_CLASSES } from './helpers.js';

const OWN = OWN_CLASS;
const OTHER = OTHER_TENANT_CLASS;
const CLASSES = TEST_CLASSES;
const MAP_V1: MutatingPolicyApiVersion = 'admissionregistration.k8s.io/v1';
const instance = makeInstance();

function input(min: RuntimeLevel, enforce: boolean, extra: Partial<SandboxPolicyInput> = {}): SandboxPolicyInput {
  return {
    instance,
    tenantNamespace: 'team-a',
    spec: { minRuntimeClass: min, enforce },
    runtimeClasses: CLASSES,
    mutatingPolicyApiVersion: MAP_V1,
    ...extra,
  };
}

function one(objects: readonly ManagedObject[], kind: string): ManagedObject {
  const found = objects.filter((o) => o.kind === kind);
  if (found.length !== 1) throw new Error(`expected one ${kind}, found ${found.length}`);
  return found[0] as ManagedObject;
}

describe('the shared layout, as objects', () => {
  it('gives an enforcing instance its RuntimeClass, its parameter and one binding of the shared policy, and no policy of its own', () => {
    const p = desiredSandboxPolicy(input('kata', true, { layout: 'shared' }));
    expect(p.objects.map((o) => `${o.kind}/${o.metadata.name}`)).toEqual([
      `RuntimeClass/${OWN}`,
      `SandboxIsolation/${sandboxParamsName(instance)}`,
      `ValidatingAdmissionPolicyBinding/${policyName(instance, 'enforce')}`,
    ]);
    const binding = one(p.objects, 'ValidatingAdmissionPolicyBinding');
    expect(binding.spec).toEqual({
      policyName: SHARED_SANDBOX_POLICY_NAME,
      // Fail closed: without its parameter the binding denies.
      paramRef: { name: sandboxParamsName(instance), parameterNotFoundAction: 'Deny' },
      validationActions: ['Deny'],
      matchResources: {
        namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'team-a' }, matchExpressions: [] },
        objectSelector: {},
        resourceRules: [],
        excludeResourceRules: [],
      },
    });
    expect(one(p.objects, 'SandboxIsolation').spec).toEqual({
      tenantNamespace: 'team-a',
      minRuntimeClass: 'kata',
      enforce: true,
      allowedRuntimeClasses: ['kata-qemu', OWN],
      recommendedRuntimeClass: OWN,
      defaultRuntimeClass: '',
      // Every allowed class, '' while its time is not known (none of these classes carries one).
      allowedRuntimeClassesSince: { 'kata-qemu': '', [OWN]: '' },
    });
    // Every per-instance object carries the instance's ownership markers (pruned with it).
    for (const o of p.objects)
      expect(o.metadata.annotations?.['kubeplus.io/owner']).toBe('cloudark.io/Agent/team-a/team-a-agent-instance');
  });

  it('names the shared policies the cluster needs, owned by no instance and parameterised by SandboxIsolation', () => {
    const p = desiredSandboxPolicy(input('kata', true, { layout: 'shared' }));
    expect(p.shared.map((o) => `${o.apiVersion}/${o.kind}/${o.metadata.name}`)).toEqual([
      `admissionregistration.k8s.io/v1/ValidatingAdmissionPolicy/${SHARED_SANDBOX_POLICY_NAME}`,
      `admissionregistration.k8s.io/v1/MutatingAdmissionPolicy/${SHARED_SANDBOX_DEFAULT_POLICY_NAME}`,
    ]);
    for (const o of p.shared) {
      expect(isSharedPolicy(o.metadata.labels)).toBe(true);
      expect(isSharedPolicyName(o.metadata.name)).toBe(true);
      expect(o.metadata.annotations).toBeUndefined();
      expect((o.spec as { paramKind: unknown }).paramKind).toEqual({
        apiVersion: 'isolation.kubeplus.io/v1alpha1',
        kind: 'SandboxIsolation',
      });
    }
    // The shared policies do not depend on the instance: every instance asks for the same ones.
    const other = desiredSandboxPolicy({
      ...input('runsc', false, { layout: 'shared' }),
      instance: makeInstance({ name: 'other', namespace: 'team-b', uid: 'u2' }),
      tenantNamespace: 'team-b',
    });
    expect(other.shared).toEqual(p.shared);
  });

  it('gives an advisory instance the [Warn, Audit] binding, a default class in its parameter and a binding of the defaulting policy', () => {
    const p = desiredSandboxPolicy(input('runsc', false, { layout: 'shared' }));
    expect(p.objects.map((o) => o.kind)).toEqual([
      'RuntimeClass',
      'SandboxIsolation',
      'ValidatingAdmissionPolicyBinding',
      'MutatingAdmissionPolicyBinding',
    ]);
    expect(
      (one(p.objects, 'ValidatingAdmissionPolicyBinding').spec as { validationActions: string[] }).validationActions,
    ).toEqual(['Warn', 'Audit']);
    expect((one(p.objects, 'SandboxIsolation').spec as { defaultRuntimeClass: string }).defaultRuntimeClass).toBe(OWN);
    expect(one(p.objects, 'MutatingAdmissionPolicyBinding').spec).toMatchObject({
      policyName: SHARED_SANDBOX_DEFAULT_POLICY_NAME,
      // Defaulting never blocks: without the parameter nothing is filled in.
      paramRef: { name: sandboxParamsName(instance), parameterNotFoundAction: 'Allow' },
    });
  });

  it('without a MutatingAdmissionPolicy API: no defaulting policy or binding, no default class, the condition reported', () => {
    const p = desiredSandboxPolicy(input('runsc', false, { layout: 'shared', mutatingPolicyApiVersion: undefined }));
    expect(p.shared.map((o) => o.kind)).toEqual(['ValidatingAdmissionPolicy']);
    expect(p.objects.map((o) => o.kind)).not.toContain('MutatingAdmissionPolicyBinding');
    expect((one(p.objects, 'SandboxIsolation').spec as { defaultRuntimeClass: string }).defaultRuntimeClass).toBe('');
    expect(p.conditions).toEqual(['mutatingAdmissionPolicyUnavailable']);
  });

  it('per-instance (the default) is unchanged: a policy of its own, nothing shared', () => {
    const p = desiredSandboxPolicy(input('kata', true));
    expect(p.shared).toEqual([]);
    expect(p.objects.map((o) => o.kind)).toEqual([
      'RuntimeClass',
      'ValidatingAdmissionPolicy',
      'ValidatingAdmissionPolicyBinding',
    ]);
  });
});

function sandbox(runtimeClassName?: string, kind = 'Sandbox'): Record<string, unknown> {
  const podSpec: Record<string, unknown> = { containers: [{ name: 'c', image: 'i' }] };
  if (runtimeClassName !== undefined) podSpec.runtimeClassName = runtimeClassName;
  return {
    apiVersion: 'agents.x-k8s.io/v1beta1',
    kind,
    metadata: { name: 's' },
    spec: { podTemplate: { spec: podSpec } },
  };
}

function pod(runtimeClassName: string | undefined, sandboxOwned: boolean): Record<string, unknown> {
  const spec: Record<string, unknown> = { containers: [{ name: 'c', image: 'i' }] };
  if (runtimeClassName !== undefined) spec.runtimeClassName = runtimeClassName;
  const metadata: Record<string, unknown> = { name: 'p' };
  if (sandboxOwned)
    metadata.ownerReferences = [{ apiVersion: 'agents.x-k8s.io/v1alpha1', kind: 'Sandbox', name: 's', uid: 'u' }];
  return { apiVersion: 'v1', kind: 'Pod', metadata, spec };
}

function labelled(obj: Record<string, unknown>, labels: Record<string, string>): Record<string, unknown> {
  return { ...obj, metadata: { ...(obj.metadata as Record<string, unknown>), labels } };
}

const CLASS_CHOICES = [undefined, '', 'runc', 'gvisor', 'kata-qemu', OWN, OTHER, 'no-such-class'];
const REQUESTS: Array<[string, AdmissionRequest]> = [
  ...CLASS_CHOICES.map((rc): [string, AdmissionRequest] => [
    `create Sandbox ${rc}`,
    { operation: 'CREATE', object: sandbox(rc) },
  ]),
  ...CLASS_CHOICES.map((rc): [string, AdmissionRequest] => [
    `create Sandbox Pod ${rc}`,
    { operation: 'CREATE', object: pod(rc, true) },
  ]),
  [
    'update Sandbox, class unchanged (runc)',
    { operation: 'UPDATE', object: sandbox('runc'), oldObject: sandbox('runc') },
  ],
  ['update Sandbox, class changed to runc', { operation: 'UPDATE', object: sandbox('runc'), oldObject: sandbox(OWN) }],
  // Issue 36: the class freeze, a template's change, the Pod subresources that change labels.
  [
    'update Sandbox, class changed to an allowed one',
    { operation: 'UPDATE', object: sandbox(OWN), oldObject: sandbox('kata-qemu') },
  ],
  [
    'update SandboxTemplate, class changed to an allowed one',
    { operation: 'UPDATE', object: sandbox(OWN, 'SandboxTemplate'), oldObject: sandbox('runc', 'SandboxTemplate') },
  ],
  [
    'pods/status adding an adoption label to a runc Pod',
    {
      operation: 'UPDATE',
      subResource: 'status',
      object: labelled(pod('runc', false), { 'agents.x-k8s.io/sandbox-name-hash': 'a1b2c3d4' }),
      oldObject: pod('runc', false),
    },
  ],
  [
    'pods/binding carrying an adoption label',
    {
      operation: 'CREATE',
      subResource: 'binding',
      object: {
        apiVersion: 'v1',
        kind: 'Binding',
        metadata: { name: 'p', labels: { 'agents.x-k8s.io/adoptable': 'true' } },
        target: { kind: 'Node', name: 'n' },
      },
    },
  ],
];

/** Every setting whose messages or decisions differ: minimum, mode, and a namespace with no class to recommend. */
const SETTINGS: Array<[string, SandboxPolicyInput]> = [
  ...(['runc', 'runsc', 'kata'] as const).flatMap((min) =>
    [true, false].map((enforce): [string, SandboxPolicyInput] => [`${min} enforce=${enforce}`, input(min, enforce)]),
  ),
  [
    'kata, own class name held by another instance, no kata class left',
    input('kata', true, {
      runtimeClassConflict: true,
      runtimeClasses: CLASSES.filter((c) => c.handler !== 'kata-qemu'),
    }),
  ],
];

describe('the shared policy decides as the per-instance policy does, request by request', () => {
  describe.each(SETTINGS)('%s', (_name, settings) => {
    const perInstance = desiredSandboxPolicy({ ...settings, layout: 'per-instance' });
    const shared = desiredSandboxPolicy({ ...settings, layout: 'shared' });
    const params = one(shared.objects, 'SandboxIsolation');
    const ownVap = one(perInstance.objects, 'ValidatingAdmissionPolicy');
    const sharedVap = one(shared.shared, 'ValidatingAdmissionPolicy');

    it.each(REQUESTS)('%s: same failures, same messages', (_r, req) => {
      expect(validate(sharedVap, req, params)).toEqual(validate(ownVap, req));
    });

    it('matches the same requests for defaulting and fills in the same class', () => {
      const ownMap = perInstance.objects.find((o) => o.kind === 'MutatingAdmissionPolicy');
      const sharedMap = one(shared.shared, 'MutatingAdmissionPolicy');
      const defaults = shared.objects.some((o) => o.kind === 'MutatingAdmissionPolicyBinding');
      // The shared defaulting policy is bound exactly where a per-instance one exists.
      expect(defaults).toBe(ownMap !== undefined);
      if (ownMap === undefined) return;
      for (const rc of [undefined, '', 'gvisor']) {
        const req: AdmissionRequest = { operation: 'CREATE', object: sandbox(rc) };
        expect(matches(sharedMap, req)).toBe(matches(ownMap, req));
        if (matches(ownMap, req)) expect(mutate(sharedMap, req, params)).toEqual(mutate(ownMap, req));
      }
    });
  });

  it('the defaulting policy fills in nothing for a parameter without a default class', () => {
    const shared = desiredSandboxPolicy(input('kata', true, { layout: 'shared' }));
    const params = one(shared.objects, 'SandboxIsolation');
    const req: AdmissionRequest = { operation: 'CREATE', object: sandbox(undefined) };
    expect(mutate(one(shared.shared, 'MutatingAdmissionPolicy'), req, params)).toEqual(sandbox(undefined));
  });

  it('a plain Pod (no Sandbox owner, no adoption label) is left to the matchCondition, which skips it', () => {
    const shared = desiredSandboxPolicy(input('kata', true, { layout: 'shared' }));
    const condition = (one(shared.shared, 'ValidatingAdmissionPolicy').spec as { matchConditions: { name: string }[] })
      .matchConditions;
    expect(condition.map((c) => c.name)).toEqual(['sandbox-objects-and-sandbox-pods']);
    expect(
      matches(one(shared.shared, 'ValidatingAdmissionPolicy'), { operation: 'CREATE', object: pod('runc', false) }),
    ).toBe(false);
  });
});
