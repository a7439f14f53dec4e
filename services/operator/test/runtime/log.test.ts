import { describe, expect, it } from '@jest/globals';
import { keyFields } from '../../src/runtime/log.js';

describe('keyFields', () => {
  it('splits namespaced keys and keeps cluster-scoped ones whole', () => {
    expect(keyFields('ns/name')).toEqual({ key: 'ns/name', namespace: 'ns', name: 'name' });
    expect(keyFields('runtimeclass-x')).toEqual({ key: 'runtimeclass-x', name: 'runtimeclass-x' });
  });

  it('logs keys of any other shape whole instead of inventing a namespace', () => {
    const instanceKey = 'cloudark.io/v1/Agent/agents/team-a/agent-x';
    expect(keyFields(instanceKey)).toEqual({ key: instanceKey });
    expect(keyFields('/name')).toEqual({ key: '/name' });
  });
});
