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

/** team-a's instance's generated RuntimeClass (`makeInstance()`). */
export const OWN_CLASS = 'kubeplus-sandbox-team-a-agent-instance';
/** Another tenant's generated class: its handler is kata today. */
export const OTHER_TENANT_CLASS = 'kubeplus-sandbox-team-b-agent-instance';
/** The cluster's RuntimeClasses the policy tests judge against: three platform classes and another tenant's. */
export const TEST_CLASSES = [
  { name: 'runc', handler: 'runc', generated: false },
  { name: 'gvisor', handler: 'runsc', generated: false },
  { name: 'kata-qemu', handler: 'kata-qemu', generated: false },
  { name: OTHER_TENANT_CLASS, handler: 'kata', generated: true },
];
