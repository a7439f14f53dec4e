import { describe, expect, it } from '@jest/globals';
import { operatorPod } from '../../src/kube/self.js';

describe('operatorPod', () => {
  it('is the Pod the downward API names, with its uid when set', () => {
    expect(operatorPod({ POD_NAME: 'op-1', POD_NAMESPACE: 'kpi', POD_UID: 'u-1' })).toEqual({
      apiVersion: 'v1',
      kind: 'Pod',
      namespace: 'kpi',
      name: 'op-1',
      uid: 'u-1',
    });
    expect(operatorPod({ POD_NAME: 'op-1', POD_NAMESPACE: 'kpi' })).toEqual({
      apiVersion: 'v1',
      kind: 'Pod',
      namespace: 'kpi',
      name: 'op-1',
    });
  });

  it('is undefined outside a Pod (no name or namespace)', () => {
    expect(operatorPod({})).toBeUndefined();
    expect(operatorPod({ POD_NAME: 'op-1' })).toBeUndefined();
    expect(operatorPod({ POD_NAME: ' ', POD_NAMESPACE: 'kpi' })).toBeUndefined();
  });
});
