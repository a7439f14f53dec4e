import { describe, expect, it } from '@jest/globals';
import {
  DEFAULT_HANDLER_LEVELS,
  DEFAULT_LEVEL_HANDLERS,
  parseSandboxIsolation,
  type SandboxIsolationSpec,
} from '@kubeplus-isolation/spec';
import type { ManagedObject } from '../../src/desired/objects.js';
import { planSandboxIsolation, type SandboxPlanInput, sandboxAppliedMessage } from '../../src/desired/sandbox-plan.js';
import { judgePlatformClass, platformClassMessage } from '../../src/desired/sandbox-platform-class.js';
import {
  desiredSandboxPolicy,
  type RuntimeClassInfo,
  type SandboxPolicyInput,
} from '../../src/desired/sandbox-policy.js';
import { agentPolicy, makeInstance, OWN_CLASS } from './helpers.js';

const instance = makeInstance();
const platform = (name: string, handler: string): RuntimeClassInfo => ({ name, handler, generated: false });
const ownGenerated: RuntimeClassInfo = {
  name: OWN_CLASS,
  handler: 'runsc',
  generated: true,
  owner: { group: 'cloudark.io', kind: 'Agent', namespace: 'team-a', name: 'team-a-agent-instance' },
};
/** GKE Sandbox's class, a weak platform class, and a kata one. */
const CLASSES: RuntimeClassInfo[] = [
  platform('gvisor', 'runsc'),
  platform('runc-platform', 'runc'),
  platform('kata', 'kata'),
];
const GVISOR: SandboxIsolationSpec = { minRuntimeClass: 'runsc', enforce: true, runtimeClassName: 'gvisor' };

function policyInput(over: Partial<SandboxPolicyInput> = {}): SandboxPolicyInput {
  return {
    instance,
    tenantNamespace: 'team-a',
    spec: GVISOR,
    runtimeClasses: CLASSES,
    mutatingPolicyApiVersion: 'admissionregistration.k8s.io/v1',
    ...over,
  };
}

function spec(obj: ManagedObject | undefined): Record<string, unknown> {
  return (obj?.spec ?? {}) as Record<string, unknown>;
}

function byKind(objects: readonly ManagedObject[], kind: string): ManagedObject {
  const found = objects.find((o) => o.kind === kind);
  if (found === undefined) throw new Error(`no ${kind} among ${objects.map((o) => o.kind).join(', ')}`);
  return found;
}

/**
 * The messages of the policy's class checks (unset, not allowed): those that recommend a class.
 * The class freeze, the Binding check and the hand-out check (issue 36) recommend none.
 */
function messages(policy: ManagedObject): string[] {
  return (spec(policy).validations as { message: string }[])
    .map((v) => v.message)
    .filter((m) => m.startsWith('spec.podTemplate.spec.runtimeClassName '));
}

describe('judgePlatformClass', () => {
  const allowed = ['gvisor', 'kata'];
  it('uses a platform class whose handler meets the minimum', () => {
    expect(judgePlatformClass('gvisor', CLASSES, allowed, 'runsc')).toEqual({ name: 'gvisor', handler: 'runsc' });
    expect(judgePlatformClass('kata', CLASSES, allowed, 'kata')).toEqual({ name: 'kata', handler: 'kata' });
  });

  it('refuses a class that does not exist, one whose handler is weaker (or unknown), and a generated one', () => {
    expect(judgePlatformClass('nope', CLASSES, allowed, 'runsc')).toEqual({ name: 'nope', problem: 'missing' });
    expect(judgePlatformClass('runc-platform', CLASSES, allowed, 'runsc')).toEqual({
      name: 'runc-platform',
      handler: 'runc',
      problem: 'below-minimum',
    });
    // Meets the instance's own minimum, not the namespace's (a stricter peer's kata).
    expect(judgePlatformClass('gvisor', CLASSES, allowed, 'kata')).toMatchObject({ problem: 'below-minimum' });
    const unknown = [platform('youki', 'youki')];
    expect(judgePlatformClass('youki', unknown, ['youki'], 'runsc')).toMatchObject({ problem: 'below-minimum' });
    expect(judgePlatformClass(OWN_CLASS, [ownGenerated], [OWN_CLASS], 'runsc')).toEqual({
      name: OWN_CLASS,
      handler: 'runsc',
      problem: 'not-platform',
    });
  });

  it('honours configured handler levels', () => {
    const levels = { ...DEFAULT_HANDLER_LEVELS, exact: { ...DEFAULT_HANDLER_LEVELS.exact, youki: 'kata' as const } };
    expect(judgePlatformClass('youki', [platform('youki', 'youki')], ['youki'], 'kata', levels)).toEqual({
      name: 'youki',
      handler: 'youki',
    });
  });

  it('words each problem with what it means and the way out', () => {
    const weak = platformClassMessage(
      { name: 'runc-platform', handler: 'runc', problem: 'below-minimum' },
      { minRuntimeClass: 'runsc', enforce: false, runtimeClassName: 'runc-platform' },
      'runsc',
      'team-a',
    );
    expect(weak).toBe(
      'kubeplus.io/sandbox-isolation names runtimeClassName "runc-platform", a RuntimeClass that has handler "runc", weaker than runsc or of unknown strength (operator --runtime-handler-levels): no class is recommended, and none is defaulted to. Sandboxes in team-a must still use a class whose handler is runsc or stronger. Name a platform RuntimeClass whose handler meets it, or remove runtimeClassName to have the operator generate one',
    );
    expect(platformClassMessage({ name: 'gvisor', problem: 'missing' }, GVISOR, 'runsc', 'team-a')).toContain(
      'a RuntimeClass that does not exist as a platform class: no class is recommended. ',
    );
    expect(
      platformClassMessage({ name: 'gvisor', handler: 'runsc', problem: 'below-minimum' }, GVISOR, 'kata', 'team-a'),
    ).toContain('weaker than kata (the minimum a stricter instance sets for namespace team-a)');
    expect(
      platformClassMessage({ name: OWN_CLASS, handler: 'runsc', problem: 'not-platform' }, GVISOR, 'runsc', 'team-a'),
    ).toContain('was generated by kubeplus-isolation for an instance, not made by the platform');
  });
});

describe('desiredSandboxPolicy with a platform class named (per-instance layout)', () => {
  it('enforce: generates no RuntimeClass, allows every class meeting the minimum, and recommends the named one', () => {
    const p = desiredSandboxPolicy(policyInput());
    expect(p.objects.map((o) => `${o.kind}/${o.metadata.name}`)).toEqual([
      `ValidatingAdmissionPolicy/${agentPolicy('team-a', 'team-a-agent-instance', 'enforce')}`,
      `ValidatingAdmissionPolicyBinding/${agentPolicy('team-a', 'team-a-agent-instance', 'enforce')}`,
    ]);
    expect(p.allowedRuntimeClasses).toEqual(['gvisor', 'kata']);
    expect(p.recommendedRuntimeClass).toBe('gvisor');
    expect(p.platformRuntimeClass).toEqual({ name: 'gvisor', handler: 'runsc' });
    expect(p.conditions).toEqual([]);
    const policy = byKind(p.objects, 'ValidatingAdmissionPolicy');
    expect(spec(policy).variables).toContainEqual({ name: 'allowedRuntimeClasses', expression: '["gvisor", "kata"]' });
    for (const m of messages(policy)) expect(m).toContain('use runtimeClassName "gvisor"');
    expect(JSON.stringify(p.objects)).not.toContain(OWN_CLASS);
  });

  it('advisory: defaults to the named class', () => {
    const p = desiredSandboxPolicy(policyInput({ spec: { ...GVISOR, enforce: false } }));
    expect(p.objects.map((o) => o.kind)).toEqual([
      'ValidatingAdmissionPolicy',
      'ValidatingAdmissionPolicyBinding',
      'MutatingAdmissionPolicy',
      'MutatingAdmissionPolicyBinding',
    ]);
    expect(spec(byKind(p.objects, 'MutatingAdmissionPolicy')).mutations).toEqual([
      {
        patchType: 'JSONPatch',
        jsonPatch: {
          expression: '[JSONPatch{op: "add", path: "/spec/podTemplate/spec/runtimeClassName", value: "gvisor"}]',
        },
      },
    ]);
    expect(p.conditions).toEqual([]);
  });

  it('a class generated before (the annotation had no runtimeClassName) is neither kept nor allowed, so it is pruned', () => {
    const p = desiredSandboxPolicy(policyInput({ runtimeClasses: [...CLASSES, ownGenerated] }));
    expect(p.objects.some((o) => o.kind === 'RuntimeClass')).toBe(false);
    expect(p.allowedRuntimeClasses).toEqual(['gvisor', 'kata']);
  });

  it('a weaker named class: never recommended nor defaulted to, still refused by the policy, and no generated class instead', () => {
    const named: SandboxIsolationSpec = { minRuntimeClass: 'runsc', enforce: false, runtimeClassName: 'runc-platform' };
    const p = desiredSandboxPolicy(policyInput({ spec: named }));
    expect(p.platformRuntimeClass).toEqual({ name: 'runc-platform', handler: 'runc', problem: 'below-minimum' });
    expect(p.recommendedRuntimeClass).toBeUndefined();
    expect(p.allowedRuntimeClasses).toEqual(['gvisor', 'kata']);
    expect(p.objects.map((o) => o.kind)).toEqual(['ValidatingAdmissionPolicy', 'ValidatingAdmissionPolicyBinding']);
    // The unusable class has its own Warning (the plan's); no second one about defaulting.
    expect(p.conditions).toEqual([]);
    expect(messages(byKind(p.objects, 'ValidatingAdmissionPolicy'))[0]).toContain(
      'no RuntimeClass in the cluster meets it; ask the platform team for one whose handler is runsc',
    );
  });

  it('a missing named class: nothing recommended until it exists', () => {
    const p = desiredSandboxPolicy(policyInput({ runtimeClasses: [platform('kata', 'kata')] }));
    expect(p.platformRuntimeClass).toEqual({ name: 'gvisor', problem: 'missing' });
    expect(p.recommendedRuntimeClass).toBeUndefined();
    expect(p.allowedRuntimeClasses).toEqual(['kata']);
  });

  it('minimum runc: any class is allowed, and the named class is recommended whatever its handler', () => {
    const p = desiredSandboxPolicy(
      policyInput({ spec: { minRuntimeClass: 'runc', enforce: true, runtimeClassName: 'runc-platform' } }),
    );
    expect(p.recommendedRuntimeClass).toBe('runc-platform');
    expect(p.platformRuntimeClass?.problem).toBeUndefined();
  });

  it('a stricter peer in the namespace: the named class must meet its minimum too', () => {
    const peers = [
      {
        identity: { group: 'cloudark.io', kind: 'Agent', namespace: 'team-a', name: 'peer' },
        spec: { minRuntimeClass: 'kata' as const, enforce: true },
      },
    ];
    const p = desiredSandboxPolicy(policyInput({ peers }));
    expect(p.platformRuntimeClass?.problem).toBe('below-minimum');
    expect(p.recommendedRuntimeClass).toBeUndefined();
  });
});

describe('desiredSandboxPolicy with a platform class named (shared layout)', () => {
  it('writes no RuntimeClass, and the parameter recommends and defaults to the named class', () => {
    const p = desiredSandboxPolicy(policyInput({ spec: { ...GVISOR, enforce: false }, layout: 'shared' }));
    expect(p.objects.map((o) => o.kind)).toEqual([
      'SandboxIsolation',
      'ValidatingAdmissionPolicyBinding',
      'MutatingAdmissionPolicyBinding',
    ]);
    expect(spec(byKind(p.objects, 'SandboxIsolation'))).toMatchObject({
      allowedRuntimeClasses: ['gvisor', 'kata'],
      recommendedRuntimeClass: 'gvisor',
      defaultRuntimeClass: 'gvisor',
    });
  });

  it('an unusable named class: the parameter recommends and defaults to nothing', () => {
    const p = desiredSandboxPolicy(
      policyInput({
        spec: { minRuntimeClass: 'runsc', enforce: false, runtimeClassName: 'runc-platform' },
        layout: 'shared',
      }),
    );
    expect(p.objects.map((o) => o.kind)).toEqual(['SandboxIsolation', 'ValidatingAdmissionPolicyBinding']);
    expect(spec(byKind(p.objects, 'SandboxIsolation'))).toMatchObject({
      allowedRuntimeClasses: ['gvisor', 'kata'],
      recommendedRuntimeClass: '',
      defaultRuntimeClass: '',
    });
  });
});

describe('planSandboxIsolation with a platform class named', () => {
  function planInput(annotation: string, over: Partial<SandboxPlanInput> = {}): SandboxPlanInput {
    return {
      instance,
      tenantNamespace: 'team-a',
      parsed: parseSandboxIsolation(annotation),
      runtimeClasses: CLASSES,
      currentRuntimeClass: undefined,
      sandboxInstances: [],
      platformNamespace: 'kubeplus',
      handlerLevels: DEFAULT_HANDLER_LEVELS,
      levelHandlers: DEFAULT_LEVEL_HANDLERS,
      mutatingPolicyApiVersion: 'admissionregistration.k8s.io/v1',
      ...over,
    };
  }

  it('a usable class: no RuntimeClass to write, no Warning, nothing to count', () => {
    const plan = planSandboxIsolation(planInput('{"minRuntimeClass":"runsc","runtimeClassName":"gvisor"}'));
    if (plan.action !== 'apply') throw new Error(plan.action);
    expect(plan.runtimeClass).toBeUndefined();
    expect(plan.rest.map((o) => o.kind)).toEqual(['ValidatingAdmissionPolicy', 'ValidatingAdmissionPolicyBinding']);
    expect(plan.warnings).toEqual([]);
    expect(plan.platformRuntimeClassUnusable).toBeUndefined();
    expect(plan.runtimeClassConflict).toBe(false);
  });

  it('a weaker class: one PlatformRuntimeClassUnusable Warning and its reason for the metric', () => {
    const plan = planSandboxIsolation(
      planInput('{"minRuntimeClass":"runsc","enforce":false,"runtimeClassName":"runc-platform"}'),
    );
    if (plan.action !== 'apply') throw new Error(plan.action);
    expect(plan.platformRuntimeClassUnusable).toBe('below-minimum');
    expect(plan.warnings.map((w) => w.reason)).toEqual(['PlatformRuntimeClassUnusable']);
    expect(plan.warnings[0]?.message).toContain('has handler "runc", weaker than runsc');
    expect(plan.warnings[0]?.message).toContain('none is defaulted to');
  });

  it('a missing class: the Warning says so', () => {
    const plan = planSandboxIsolation(
      planInput('{"minRuntimeClass":"runsc","runtimeClassName":"gvisor"}', { runtimeClasses: [] }),
    );
    if (plan.action !== 'apply') throw new Error(plan.action);
    expect(plan.platformRuntimeClassUnusable).toBe('missing');
    expect(plan.warnings[0]?.message).toContain(
      'names runtimeClassName "gvisor", a RuntimeClass that does not exist as a platform class',
    );
  });

  it('the name kubeplus-sandbox-<instance> held by someone else is no conflict: the instance wants no class of that name', () => {
    const plan = planSandboxIsolation(
      planInput('{"minRuntimeClass":"runsc","runtimeClassName":"gvisor"}', {
        currentRuntimeClass: {
          metadata: { annotations: { 'kubeplus.io/owner': 'cloudark.io/Agent/team-b/team-a-agent-instance' } },
        },
      }),
    );
    if (plan.action !== 'apply') throw new Error(plan.action);
    expect(plan.runtimeClassConflict).toBe(false);
    expect(plan.warnings).toEqual([]);
  });

  it('the applied Event names the platform class', () => {
    expect(sandboxAppliedMessage(GVISOR, 2, ['created ValidatingAdmissionPolicy/x'])).toBe(
      'minimum runsc, enforced, platform RuntimeClass gvisor (2 objects): created ValidatingAdmissionPolicy/x',
    );
    expect(sandboxAppliedMessage({ minRuntimeClass: 'kata', enforce: true }, 3, ['a'])).toBe(
      'minimum kata, enforced (3 objects): a',
    );
  });
});
