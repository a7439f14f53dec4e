import { describe, expect, it } from '@jest/globals';
import { policyApisFrom, policyResources } from '../../src/kube/discovery.js';

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
