import { describe, expect, it } from '@jest/globals';
import { DEFAULT_HANDLER_LEVELS, parseHandlerLevels } from '@kubeplus-isolation/spec';
import fc from 'fast-check';
import type { ManagedObject } from '../../src/desired/objects.js';
import {
  allowedRuntimeClasses,
  desiredSandboxPolicy,
  type RuntimeClassInfo,
  type SandboxPolicyInput,
} from '../../src/desired/sandbox-policy.js';
import { makeInstance } from './helpers.js';

const instance = makeInstance();
const OWN = 'kubeplus-sandbox-team-a-agent-instance';
const CLASSES: RuntimeClassInfo[] = [
  { name: 'runc', handler: 'runc' },
  { name: 'gvisor', handler: 'runsc' },
  { name: 'kata-qemu', handler: 'kata-qemu' },
  { name: 'kata', handler: 'kata' },
  { name: 'mystery', handler: 'youki' },
];

function policyInput(over: Partial<SandboxPolicyInput> = {}): SandboxPolicyInput {
  return {
    instance,
    tenantNamespace: 'team-a',
    spec: { minRuntimeClass: 'kata', enforce: true },
    runtimeClasses: CLASSES,
    mutatingPolicyApiVersion: 'admissionregistration.k8s.io/v1',
    ...over,
  };
}

function kinds(objects: readonly ManagedObject[]): string[] {
  return objects.map((o) => `${o.apiVersion} ${o.kind} ${o.metadata.name}`);
}

function spec(obj: ManagedObject | undefined): Record<string, unknown> {
  return (obj?.spec ?? {}) as Record<string, unknown>;
}

describe('allowedRuntimeClasses', () => {
  it('keeps every class whose handler meets the minimum, plus the instance’s own, sorted', () => {
    expect(allowedRuntimeClasses(CLASSES, 'kata', OWN, false)).toEqual(['kata', 'kata-qemu', OWN]);
    expect(allowedRuntimeClasses(CLASSES, 'runsc', OWN, false)).toEqual(['gvisor', 'kata', 'kata-qemu', OWN]);
  });

  it('allows every name, known handler or not, for minimum runc', () => {
    expect(allowedRuntimeClasses(CLASSES, 'runc', OWN, false)).toEqual([
      'gvisor',
      'kata',
      'kata-qemu',
      OWN,
      'mystery',
      'runc',
    ]);
  });

  it('never allows an unknown handler above runc', () => {
    expect(allowedRuntimeClasses([{ name: 'x', handler: 'youki' }], 'runsc', OWN, false)).toEqual([OWN]);
  });

  it('honours configured handler levels (exact and prefix)', () => {
    const levels = parseHandlerLevels('youki=runsc,fc-*=kata');
    if (!levels.ok) throw new Error(levels.errors.join());
    const classes = [
      { name: 'y', handler: 'youki' },
      { name: 'f', handler: 'fc-v2' },
    ];
    expect(allowedRuntimeClasses(classes, 'runsc', OWN, false, levels.value)).toEqual(['f', OWN, 'y']);
    expect(allowedRuntimeClasses(classes, 'kata', OWN, false, levels.value)).toEqual(['f', OWN]);
    expect(allowedRuntimeClasses(classes, 'kata', OWN, false, DEFAULT_HANDLER_LEVELS)).toEqual([OWN]);
  });

  it('always allows its own class even before the cache has seen it, and ignores its stale handler', () => {
    expect(allowedRuntimeClasses([], 'kata', OWN, false)).toEqual([OWN]);
    expect(allowedRuntimeClasses([{ name: OWN, handler: 'runc' }], 'kata', OWN, false)).toEqual([OWN]);
  });

  it('judges its own name like any other class when another instance holds it', () => {
    expect(allowedRuntimeClasses([{ name: OWN, handler: 'runc' }], 'kata', OWN, true)).toEqual([]);
    expect(allowedRuntimeClasses([{ name: OWN, handler: 'kata' }], 'kata', OWN, true)).toEqual([OWN]);
  });

  it('de-duplicates and does not depend on the order classes are listed in', () => {
    fc.assert(
      fc.property(fc.shuffledSubarray(CLASSES), fc.constantFrom('runc', 'runsc', 'kata' as const), (cls, min) => {
        const a = allowedRuntimeClasses([...cls, ...cls], min, OWN, false);
        const b = allowedRuntimeClasses([...cls].reverse(), min, OWN, false);
        expect(a).toEqual(b);
        expect(new Set(a).size).toBe(a.length);
        expect([...a].sort()).toEqual(a);
      }),
    );
  });
});

describe('desiredSandboxPolicy: enforce', () => {
  const policy = desiredSandboxPolicy(policyInput());

  it('is one RuntimeClass and the enforce policy + binding', () => {
    expect(kinds(policy.objects)).toEqual([
      `node.k8s.io/v1 RuntimeClass ${OWN}`,
      `admissionregistration.k8s.io/v1 ValidatingAdmissionPolicy ${OWN}-enforce`,
      `admissionregistration.k8s.io/v1 ValidatingAdmissionPolicyBinding ${OWN}-enforce`,
    ]);
  });

  it('gives the RuntimeClass only a handler (no scheduling, no overhead)', () => {
    const rc = policy.objects[0];
    expect(rc).toEqual({
      apiVersion: 'node.k8s.io/v1',
      kind: 'RuntimeClass',
      metadata: {
        name: OWN,
        labels: {
          'app.kubernetes.io/managed-by': 'kubeplus-isolation',
          'kubeplus.io/owner-name': 'team-a-agent-instance',
          'kubeplus.io/owner-namespace': 'team-a',
          'kubeplus.io/owner-uid': instance.uid,
        },
        annotations: { 'kubeplus.io/owner': 'cloudark.io/Agent/team-a/team-a-agent-instance' },
      },
      handler: 'kata',
    });
  });

  it.each([
    ['runc', 'runc'],
    ['runsc', 'runsc'],
    ['kata', 'kata'],
  ] as const)('maps minimum %s to handler %s', (min, handler) => {
    const p = desiredSandboxPolicy(policyInput({ spec: { minRuntimeClass: min, enforce: true } }));
    expect(p.handler).toBe(handler);
    expect(p.objects[0]?.handler).toBe(handler);
  });

  it('uses a configured level→handler map', () => {
    const p = desiredSandboxPolicy(
      policyInput({ levelHandlers: { runc: 'crun', runsc: 'gvisor', kata: 'kata-qemu' } }),
    );
    expect(p.objects[0]?.handler).toBe('kata-qemu');
  });

  it('labels and annotates every object as owned by the instance', () => {
    for (const obj of desiredSandboxPolicy(policyInput({ spec: { minRuntimeClass: 'kata', enforce: false } }))
      .objects) {
      expect(obj.metadata.labels).toMatchObject({
        'app.kubernetes.io/managed-by': 'kubeplus-isolation',
        'kubeplus.io/owner-uid': instance.uid,
      });
      expect(obj.metadata.annotations).toEqual({
        'kubeplus.io/owner': 'cloudark.io/Agent/team-a/team-a-agent-instance',
      });
    }
  });

  it('matches Sandbox and SandboxTemplate at both served versions, CREATE and UPDATE, exactly', () => {
    const vap = spec(policy.objects[1]);
    expect(vap.failurePolicy).toBe('Fail');
    expect(vap.matchConstraints).toEqual({
      resourceRules: [
        {
          apiGroups: ['agents.x-k8s.io'],
          apiVersions: ['v1alpha1', 'v1beta1'],
          resources: ['sandboxes'],
          operations: ['CREATE', 'UPDATE'],
          scope: 'Namespaced',
        },
        {
          apiGroups: ['extensions.agents.x-k8s.io'],
          apiVersions: ['v1alpha1', 'v1beta1'],
          resources: ['sandboxtemplates'],
          operations: ['CREATE', 'UPDATE'],
          scope: 'Namespaced',
        },
      ],
      matchPolicy: 'Exact',
      namespaceSelector: {},
      objectSelector: {},
      excludeResourceRules: [],
    });
  });

  it('binds with Deny to the tenant namespace only', () => {
    expect(spec(policy.objects[2])).toEqual({
      policyName: `${OWN}-enforce`,
      validationActions: ['Deny'],
      matchResources: {
        namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'team-a' }, matchExpressions: [] },
        objectSelector: {},
        resourceRules: [],
        excludeResourceRules: [],
      },
    });
  });

  it('bakes the allowed list into a CEL variable and rejects with reason Forbidden', () => {
    const vap = spec(policy.objects[1]);
    expect(vap.variables).toContainEqual({
      name: 'allowedRuntimeClasses',
      expression: `["kata", "kata-qemu", "${OWN}"]`,
    });
    const validations = vap.validations as { reason: string; message: string }[];
    expect(validations).toHaveLength(2);
    for (const v of validations) {
      expect(v.reason).toBe('Forbidden');
      expect(v.message).not.toMatch(/[\r\n]/);
    }
  });

  it('has no allowed-list check for minimum runc: only an unset class is rejected', () => {
    const vap = spec(
      desiredSandboxPolicy(policyInput({ spec: { minRuntimeClass: 'runc', enforce: true } })).objects[1],
    );
    expect((vap.variables as { name: string }[]).map((v) => v.name)).toEqual(['runtimeClassName', 'unchanged']);
    expect(vap.validations).toHaveLength(1);
  });

  it('reports no conditions', () => {
    expect(policy.conditions).toEqual([]);
    expect(policy.recommendedRuntimeClass).toBe(OWN);
  });
});

describe('desiredSandboxPolicy: advisory', () => {
  it('binds the same validation with Warn and Audit, and defaults through a MutatingAdmissionPolicy', () => {
    const p = desiredSandboxPolicy(policyInput({ spec: { minRuntimeClass: 'kata', enforce: false } }));
    expect(kinds(p.objects)).toEqual([
      `node.k8s.io/v1 RuntimeClass ${OWN}`,
      `admissionregistration.k8s.io/v1 ValidatingAdmissionPolicy ${OWN}-advisory`,
      `admissionregistration.k8s.io/v1 ValidatingAdmissionPolicyBinding ${OWN}-advisory`,
      `admissionregistration.k8s.io/v1 MutatingAdmissionPolicy ${OWN}-default`,
      `admissionregistration.k8s.io/v1 MutatingAdmissionPolicyBinding ${OWN}-default`,
    ]);
    expect(spec(p.objects[2]).validationActions).toEqual(['Warn', 'Audit']);
    expect(JSON.stringify(p.objects)).not.toContain('Deny');
    const enforce = desiredSandboxPolicy(policyInput());
    expect(spec(p.objects[1]).validations).toEqual(spec(enforce.objects[1]).validations);
    expect(p.conditions).toEqual([]);
  });

  it('shapes the MutatingAdmissionPolicy: CREATE only, JSONPatch, IfNeeded, Ignore', () => {
    const p = desiredSandboxPolicy(policyInput({ spec: { minRuntimeClass: 'runsc', enforce: false } }));
    const map = spec(p.objects[3]);
    expect(map.failurePolicy).toBe('Ignore');
    expect(map.reinvocationPolicy).toBe('IfNeeded');
    const rules = (map.matchConstraints as { resourceRules: { operations: string[] }[] }).resourceRules;
    expect(rules.map((r) => r.operations)).toEqual([['CREATE'], ['CREATE']]);
    expect(map.mutations).toEqual([
      {
        patchType: 'JSONPatch',
        jsonPatch: {
          expression: `[JSONPatch{op: "add", path: "/spec/podTemplate/spec/runtimeClassName", value: "${OWN}"}]`,
        },
      },
    ]);
    expect(spec(p.objects[4])).toEqual({
      policyName: `${OWN}-default`,
      matchResources: {
        namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'team-a' }, matchExpressions: [] },
        objectSelector: {},
        resourceRules: [],
        excludeResourceRules: [],
      },
    });
  });

  it('writes the MutatingAdmissionPolicy at the served version', () => {
    const p = desiredSandboxPolicy(
      policyInput({
        spec: { minRuntimeClass: 'kata', enforce: false },
        mutatingPolicyApiVersion: 'admissionregistration.k8s.io/v1beta1',
      }),
    );
    expect(p.objects.slice(3).map((o) => o.apiVersion)).toEqual([
      'admissionregistration.k8s.io/v1beta1',
      'admissionregistration.k8s.io/v1beta1',
    ]);
  });

  it('without a MutatingAdmissionPolicy API: only the warning policy, and a condition saying so', () => {
    const p = desiredSandboxPolicy(
      policyInput({ spec: { minRuntimeClass: 'kata', enforce: false }, mutatingPolicyApiVersion: undefined }),
    );
    expect(p.objects.map((o) => o.kind)).toEqual([
      'RuntimeClass',
      'ValidatingAdmissionPolicy',
      'ValidatingAdmissionPolicyBinding',
    ]);
    expect(p.conditions).toEqual(['mutatingAdmissionPolicyUnavailable']);
  });

  it('never generates a MutatingAdmissionPolicy under enforce', () => {
    const p = desiredSandboxPolicy(policyInput());
    expect(p.objects.some((o) => o.kind.startsWith('Mutating'))).toBe(false);
  });
});

describe('desiredSandboxPolicy: a RuntimeClass name held by another instance', () => {
  it('does not claim it, and recommends a class meeting the minimum instead', () => {
    const p = desiredSandboxPolicy(
      policyInput({
        runtimeClasses: [...CLASSES, { name: OWN, handler: 'runc' }],
        runtimeClassConflict: true,
        spec: { minRuntimeClass: 'kata', enforce: false },
      }),
    );
    expect(p.objects.some((o) => o.kind === 'RuntimeClass')).toBe(false);
    expect(p.allowedRuntimeClasses).toEqual(['kata', 'kata-qemu']);
    expect(p.recommendedRuntimeClass).toBe('kata');
    expect(JSON.stringify(spec(p.objects[2]).mutations)).toContain('value: \\"kata\\"');
  });

  it('reports that nothing can be defaulted when no class meets the minimum', () => {
    const p = desiredSandboxPolicy(
      policyInput({
        runtimeClasses: [{ name: OWN, handler: 'runc' }],
        runtimeClassConflict: true,
        spec: { minRuntimeClass: 'kata', enforce: false },
      }),
    );
    expect(p.recommendedRuntimeClass).toBeUndefined();
    expect(p.conditions).toEqual(['noDefaultRuntimeClass']);
    expect(p.objects.map((o) => o.kind)).toEqual(['ValidatingAdmissionPolicy', 'ValidatingAdmissionPolicyBinding']);
    const messages = (spec(p.objects[0]).validations as { message: string }[]).map((v) => v.message);
    expect(messages[0]).toContain('no RuntimeClass in the cluster meets it');
  });
});

describe('desiredSandboxPolicy: names and determinism', () => {
  it('bounds every name of an over-long instance to a valid object name', () => {
    const p = desiredSandboxPolicy(policyInput({ instance: makeInstance({ name: 'n'.repeat(250) }) }));
    for (const o of p.objects) {
      expect(o.metadata.name.length).toBeLessThanOrEqual(253);
      expect(o.metadata.name).toMatch(/^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/);
    }
    expect(new Set(p.objects.map((o) => `${o.kind}/${o.metadata.name}`)).size).toBe(p.objects.length);
  });

  it('gives deep-equal output for the same input, whatever the class order', () => {
    fc.assert(
      fc.property(fc.shuffledSubarray(CLASSES, { minLength: CLASSES.length }), fc.boolean(), (cls, enforce) => {
        const a = desiredSandboxPolicy(
          policyInput({ runtimeClasses: cls, spec: { minRuntimeClass: 'runsc', enforce } }),
        );
        const b = desiredSandboxPolicy(policyInput({ spec: { minRuntimeClass: 'runsc', enforce } }));
        expect(a).toEqual(b);
      }),
    );
  });
});
