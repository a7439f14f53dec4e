import { describe, expect, it } from '@jest/globals';
import { DEFAULT_HANDLER_LEVELS, DEFAULT_LEVEL_HANDLERS, parseSandboxIsolation } from '@kubeplus-isolation/spec';
import { planSandboxIsolation, type SandboxPlanInput } from '../../src/desired/sandbox-plan.js';
import { makeInstance } from './helpers.js';

const instance = makeInstance();
const OWN = 'kubeplus-sandbox-team-a-agent-instance';

function input(annotation: string, over: Partial<SandboxPlanInput> = {}): SandboxPlanInput {
  return {
    instance,
    tenantNamespace: 'team-a',
    parsed: parseSandboxIsolation(annotation),
    runtimeClasses: [{ name: 'kata', handler: 'kata', generated: false }],
    currentRuntimeClass: undefined,
    sandboxInstances: [],
    platformNamespace: 'kubeplus',
    handlerLevels: DEFAULT_HANDLER_LEVELS,
    levelHandlers: DEFAULT_LEVEL_HANDLERS,
    mutatingPolicyApiVersion: 'admissionregistration.k8s.io/v1',
    ...over,
  };
}

describe('planSandboxIsolation', () => {
  it('an invalid annotation: one InvalidSandboxIsolation Warning listing the errors, nothing to write', () => {
    const plan = planSandboxIsolation(input('{"minRuntimeClass":"strong"}'));
    expect(plan.action).toBe('invalid');
    expect(plan.warnings.map((w) => w.reason)).toEqual(['InvalidSandboxIsolation']);
    expect(plan.warnings[0]?.message).toMatch(
      /^kubeplus\.io\/sandbox-isolation is invalid, keeping the sandbox policy last applied: /,
    );
  });

  it('a fresh instance: the RuntimeClass first and alone, then the policy and binding; no Warning', () => {
    const plan = planSandboxIsolation(input('{"minRuntimeClass":"kata"}'));
    if (plan.action !== 'apply') throw new Error(plan.action);
    expect(plan.runtimeClass?.metadata.name).toBe(OWN);
    expect(plan.rest.map((o) => o.kind)).toEqual(['ValidatingAdmissionPolicy', 'ValidatingAdmissionPolicyBinding']);
    expect(plan.warnings).toEqual([]);
    expect(plan.runtimeClassConflict).toBe(false);
  });

  it('its class name held by another instance: a RuntimeClassConflict Warning naming the holder and what may be used, no RuntimeClass to write', () => {
    const plan = planSandboxIsolation(
      input('{"minRuntimeClass":"kata","enforce":false}', {
        currentRuntimeClass: {
          metadata: { annotations: { 'kubeplus.io/owner': 'cloudark.io/Agent/team-b/team-a-agent-instance' } },
        },
      }),
    );
    if (plan.action !== 'apply') throw new Error(plan.action);
    expect(plan.runtimeClassConflict).toBe(true);
    expect(plan.runtimeClass).toBeUndefined();
    expect(plan.warnings).toEqual([
      {
        reason: 'RuntimeClassConflict',
        message: `RuntimeClass ${OWN} belongs to cloudark.io/Agent/team-b/team-a-agent-instance; not taking it over. Sandboxes in team-a may use: kata`,
      },
    ]);
  });

  it('advisory without a MutatingAdmissionPolicy API, and a stricter instance in the namespace: both Warnings', () => {
    const plan = planSandboxIsolation(
      input('{"minRuntimeClass":"runsc","enforce":false}', {
        mutatingPolicyApiVersion: undefined,
        sandboxInstances: [
          {
            group: 'cloudark.io',
            kind: 'Agent',
            namespace: 'team-a',
            name: 'strict',
            annotation: '{"minRuntimeClass":"kata"}',
          },
        ],
      }),
    );
    if (plan.action !== 'apply') throw new Error(plan.action);
    expect(plan.mutatingPolicyUnavailable).toBe(true);
    expect(plan.warnings.map((w) => w.reason)).toEqual(['MutatingAdmissionPolicyUnavailable', 'StricterSandboxPolicy']);
    expect(plan.warnings[1]?.message).toContain('cloudark.io/Agent/team-a/strict (minimum kata, enforced)');
  });
});
