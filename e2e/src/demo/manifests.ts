/**
 * The demo's manifests, written as a user would write them (the design documents' examples,
 * adapted only where DEMO.md says why). They are saved as files and applied with kubectl.
 */
import { instancePolicyName, type PolicyRole } from '../harness/policy-names.js';

export const POOL = 'team-a-pool';
export const PLATFORM_NAMESPACE = 'kubeplus';
/** team-a follows KubePlus's one-namespace-per-instance model: the instance lives in the platform namespace. */
export const TEAM_A_INSTANCE = 'team-a';
export const TEAM_A_NAMESPACE = 'team-a';
/** team-b's instance is created inside an existing tenant namespace (the operator never deletes that). */
export const TEAM_B_INSTANCE = 'team-b-agent-instance';
export const TEAM_B_NAMESPACE = 'team-b';
export const UNRELATED_NAMESPACE = 'unrelated';
/**
 * The tenant's container image: the pause image the real node's containerd holds (imported, never
 * pulled: nothing here can reach a registry). On fake nodes it is only a name.
 */
export const IMAGE = 'kubeplus-isolation.local/pause:1';

export const NODE_ISOLATION = {
  nodeSelector: { pool: POOL },
  tolerations: [{ key: 'dedicated', operator: 'Equal', value: POOL, effect: 'NoSchedule' }],
};

export const runtimeClassOf = (instance: string): string => `kubeplus-sandbox-${instance}`;
/** An Agent's admission policy (and binding) name (packages/spec `policyName`). */
export const policyOf = (namespace: string, instance: string, role: PolicyRole): string =>
  instancePolicyName({ group: 'cloudark.io', kind: 'Agent', namespace, name: instance }, role);

export const AGENT_CRD = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: agents.cloudark.io
  labels:
    registered-by: kubeplus   # KubePlus registered this Kind: the operator watches its instances
spec:
  group: cloudark.io
  scope: Namespaced
  names: {kind: Agent, plural: agents, singular: agent, listKind: AgentList}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec: {type: object, x-kubernetes-preserve-unknown-fields: true}
`;

/** The cluster's plain runtime, as most clusters have one: what an unsandboxed Sandbox would use. */
export const RUNC_RUNTIME_CLASS = `apiVersion: node.k8s.io/v1
kind: RuntimeClass
metadata:
  name: runc
handler: runc
`;

export const TEAM_A_AGENT = `apiVersion: cloudark.io/v1
kind: Agent
metadata:
  name: ${TEAM_A_INSTANCE}
  namespace: ${PLATFORM_NAMESPACE}
  annotations:
    kubeplus.io/node-isolation: |
      {"nodeSelector": {"pool": "${POOL}"},
       "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "${POOL}", "effect": "NoSchedule"}]}
    kubeplus.io/sandbox-isolation: |
      {"minRuntimeClass": "kata", "enforce": true}
spec:
  mcpServer:
    name: shared-k8sgpt-mcp
    namespace: platform-mcp
  modelConfigRef: default-model-config
`;

export const teamBAgent = (sandboxIsolation: string): string => `apiVersion: cloudark.io/v1
kind: Agent
metadata:
  name: ${TEAM_B_INSTANCE}
  namespace: ${TEAM_B_NAMESPACE}
  annotations:
    kubeplus.io/sandbox-isolation: |
      ${sandboxIsolation}
spec:
  mcpServer:
    name: shared-k8sgpt-mcp
    namespace: platform-mcp
  modelConfigRef: default-model-config
`;

/** What the Agent Kind's chart deploys: a plain Deployment, no nodeSelector, no tolerations. */
export const AGENT_DEPLOYMENT = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: agent-runtime
  namespace: ${TEAM_A_NAMESPACE}
spec:
  replicas: 3
  selector:
    matchLabels: {app: agent-runtime}
  template:
    metadata:
      labels: {app: agent-runtime}
    spec:
      containers:
      - name: agent
        image: ${IMAGE}
`;

/** An Agent Sandbox (agents.x-k8s.io/v1beta1, the served storage version) with or without a runtime class. */
export function sandbox(name: string, namespace: string, runtimeClassName?: string): string {
  const rc = runtimeClassName === undefined ? '' : `\n      runtimeClassName: ${runtimeClassName}`;
  return `apiVersion: agents.x-k8s.io/v1beta1
kind: Sandbox
metadata:
  name: ${name}
  namespace: ${namespace}
spec:
  podTemplate:
    spec:${rc}
      containers:
      - name: code-interpreter
        image: ${IMAGE}
`;
}
