import { type PolicyRole, policyName } from '@kubeplus-isolation/spec';
import type { Instance } from '../../src/desired/instance.js';

/** An instance as parseInstance would return it; `overrides` replace fields. */
export function makeInstance(overrides: Partial<Instance> = {}): Instance {
  return {
    apiVersion: 'cloudark.io/v1',
    group: 'cloudark.io',
    version: 'v1',
    kind: 'Agent',
    plural: 'agents',
    namespace: 'team-a',
    name: 'team-a-agent-instance',
    uid: '3f0c9a52-7d1e-4b7a-9c55-0a1b2c3d4e5f',
    resourceVersion: '100',
    annotations: {},
    finalizers: [],
    ...overrides,
  };
}

export const TEAM_A_NODE_ISOLATION = JSON.stringify({
  nodeSelector: { pool: 'team-a-pool' },
  tolerations: [{ key: 'dedicated', operator: 'Equal', value: 'team-a-pool', effect: 'NoSchedule' }],
});

/** The admission policy (and binding) name of the Agent `namespace/name` in `role`. */
export function agentPolicy(namespace: string, name: string, role: PolicyRole): string {
  return policyName({ group: 'cloudark.io', kind: 'Agent', namespace, name }, role);
}
