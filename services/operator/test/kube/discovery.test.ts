import { describe, expect, it } from '@jest/globals';
import { policyApisFrom, policyResources, sharedLayoutProblem } from '../../src/kube/discovery.js';

const V1 = 'admissionregistration.k8s.io/v1';
const V1BETA1 = 'admissionregistration.k8s.io/v1beta1';
const VAP = ['validatingadmissionpolicies', 'validatingadmissionpolicybindings', 'validatingadmissionpolicies/status'];
const MAP = ['mutatingadmissionpolicies', 'mutatingadmissionpolicybindings'];

describe('policyApisFrom', () => {
  it('prefers MutatingAdmissionPolicy v1 over v1beta1', () => {
    expect(policyApisFrom({ [V1]: new Set([...VAP, ...MAP]), [V1BETA1]: new Set(MAP) })).toEqual({
      validating: true,
      mutatingVersion: V1,
    });
  });

  it('falls back to v1beta1, or to none', () => {
    expect(policyApisFrom({ [V1]: new Set(VAP), [V1BETA1]: new Set(MAP) })).toEqual({
      validating: true,
      mutatingVersion: V1BETA1,
    });
    expect(policyApisFrom({ [V1]: new Set(VAP), [V1BETA1]: undefined })).toEqual({
      validating: true,
      mutatingVersion: undefined,
    });
  });

  it('needs both the policy and its binding', () => {
    expect(
      policyApisFrom({
        [V1]: new Set(['validatingadmissionpolicies', 'mutatingadmissionpolicies']),
        [V1BETA1]: undefined,
      }),
    ).toEqual({ validating: false, mutatingVersion: undefined });
  });
});

describe('policyResources', () => {
  it('lists the informers to run for the served APIs', () => {
    expect(policyResources({ validating: true, mutatingVersion: V1BETA1 })).toEqual([
      { apiVersion: V1, kind: 'ValidatingAdmissionPolicy', resource: 'validatingadmissionpolicies' },
      { apiVersion: V1, kind: 'ValidatingAdmissionPolicyBinding', resource: 'validatingadmissionpolicybindings' },
      { apiVersion: V1BETA1, kind: 'MutatingAdmissionPolicy', resource: 'mutatingadmissionpolicies' },
      { apiVersion: V1BETA1, kind: 'MutatingAdmissionPolicyBinding', resource: 'mutatingadmissionpolicybindings' },
    ]);
    expect(policyResources({ validating: false, mutatingVersion: undefined })).toEqual([]);
  });
});

describe('sharedLayoutProblem', () => {
  it('none when the SandboxIsolation resource is served', () => {
    expect(sharedLayoutProblem(new Set(['sandboxisolations', 'nodeisolations']))).toBeUndefined();
  });

  it('says what is missing and both ways out when the group is not served or lacks the resource', () => {
    for (const served of [undefined, new Set(['nodeisolations'])]) {
      expect(sharedLayoutProblem(served)).toBe(
        '--sandbox-policy-layout shared needs the SandboxIsolation CRD (sandboxisolations.isolation.kubeplus.io), which this cluster does not serve: install it (the chart does with operator.sandboxPolicyLayout=shared; deploy/kubeplus-isolation/charts/operator/files/sandbox-isolation-crd.yaml) or use --sandbox-policy-layout per-instance',
      );
    }
  });
});
