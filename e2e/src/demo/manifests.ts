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

/** An Agent in the platform namespace with both annotations: the pool's mandate and `sandboxIsolation`. */
const pooledAgent = (instance: string, sandboxIsolation: string): string => `apiVersion: cloudark.io/v1
kind: Agent
metadata:
  name: ${instance}
  namespace: ${PLATFORM_NAMESPACE}
  annotations:
    kubeplus.io/node-isolation: |
      {"nodeSelector": {"pool": "${POOL}"},
       "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "${POOL}", "effect": "NoSchedule"}]}
    kubeplus.io/sandbox-isolation: |
      ${sandboxIsolation}
spec:
  mcpServer:
    name: shared-k8sgpt-mcp
    namespace: platform-mcp
  modelConfigRef: default-model-config
`;

export const TEAM_A_AGENT = pooledAgent(TEAM_A_INSTANCE, '{"minRuntimeClass": "kata", "enforce": true}');

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

/** A Sandbox (agents.x-k8s.io/v1beta1): its Pod spec is the runtime class, if any, then `podSpec` (indented 6). */
function sandboxManifest(
  name: string,
  namespace: string,
  runtimeClassName: string | undefined,
  podSpec: string,
): string {
  const rc = runtimeClassName === undefined ? '' : `\n      runtimeClassName: ${runtimeClassName}`;
  return `apiVersion: agents.x-k8s.io/v1beta1
kind: Sandbox
metadata:
  name: ${name}
  namespace: ${namespace}
spec:
  podTemplate:
    spec:${rc}
${podSpec}`;
}

/** An Agent Sandbox (agents.x-k8s.io/v1beta1, the served storage version) with or without a runtime class. */
export function sandbox(name: string, namespace: string, runtimeClassName?: string): string {
  return sandboxManifest(
    name,
    namespace,
    runtimeClassName,
    `      containers:
      - name: code-interpreter
        image: ${IMAGE}
`,
  );
}

/** team-g: a tenant at minimum runsc (gVisor), on the same sandbox pool as team-a. */
export const TEAM_G_INSTANCE = 'team-g';
export const TEAM_G_NAMESPACE = 'team-g';

export const TEAM_G_AGENT = pooledAgent(TEAM_G_INSTANCE, '{"minRuntimeClass": "runsc", "enforce": true}');

/** The port KERNEL_PROBE serves on. */
export const KERNEL_PROBE_PORT = 8080;

/**
 * A Node.js script that shows the kernel it runs on, from inside: its first line is
 * `kernel <uname release> | <the whole /proc/version>`, its second `uid <uid> root <ro|rw> write
 * <writable|errno>` (the root mount's mode, and what creating a file there gives);
 * then it serves its kernel release over HTTP on KERNEL_PROBE_PORT until stopped.
 */
export const KERNEL_PROBE = [
  "const fs=require('fs'),os=require('os'),http=require('http');",
  "let w='writable';try{fs.writeFileSync('/probe','')}catch(e){w=e.code}",
  "console.log('kernel '+os.release()+' | '+fs.readFileSync('/proc/version','utf8').trim());",
  "const m=fs.readFileSync('/proc/self/mounts','utf8').split('\\n').map(l=>l.split(' ')).filter(f=>f[1]==='/').pop();",
  "console.log('uid '+process.getuid()+' root '+(m?m[3].split(',')[0]:'?')+' write '+w);",
  `http.createServer((q,r)=>r.end(os.release())).listen(${KERNEL_PROBE_PORT});`,
].join('');

/** KERNEL_PROBE's kernel line in a log ('' when absent). */
export const kernelLine = (log: string): string => log.split('\n').find((l) => l.startsWith('kernel ')) ?? '';

/**
 * A Sandbox whose agent runs KERNEL_PROBE in `image` (one that carries node: the webhook's), under
 * restricted Pod Security (non-root, read-only root, no capabilities, RuntimeDefault seccomp).
 */
export const kernelProbeSandbox = (name: string, namespace: string, image: string, runtimeClassName?: string): string =>
  sandboxManifest(
    name,
    namespace,
    runtimeClassName,
    `      securityContext: {runAsNonRoot: true, runAsUser: 65532, seccompProfile: {type: RuntimeDefault}}
      containers:
      - name: agent
        image: ${image}
        imagePullPolicy: Never
        command: [node, -e, ${JSON.stringify(KERNEL_PROBE)}]
        ports: [{containerPort: ${KERNEL_PROBE_PORT}}]
        securityContext:
          allowPrivilegeEscalation: false
          readOnlyRootFilesystem: true
          capabilities: {drop: [ALL]}
`,
  );

/**
 * Steps 14–16, the KubePlus flow: KubePlus (a STAND-IN: e2e/src/kubeplus-standin/, not KubePlus)
 * in its own namespace `default`, as its README and CI install it, with a Kind it registered
 * (`platformapi.kubeplus/v1alpha1`); its chart (e2e/fixtures/kubeplus-tenant-chart) creates a
 * 3-replica Deployment, a Job, a bare Pod and a Sandbox without a runtime class.
 */
export const KUBEPLUS_NAMESPACE = 'default';
export const KUBEPLUS_KIND = { kind: 'AgentService', plural: 'agentservices' } as const;
/** KubePlus names the tenant namespace after the instance (and requires len(kind-instance) <= 30). */
export const KUBEPLUS_INSTANCE = 'team-kp';
export const KUBEPLUS_TENANT_NAMESPACE = KUBEPLUS_INSTANCE;
/** KubePlus's release for it: `<kind lowercased>-<instance>`. */
export const KUBEPLUS_RELEASE = `${KUBEPLUS_KIND.kind.toLowerCase()}-${KUBEPLUS_INSTANCE}`;
/** Advisory at runsc: the chart's Sandbox (no class) is defaulted to the instance's class, which runs in gVisor. */
export const KUBEPLUS_SANDBOX_ISOLATION = '{"minRuntimeClass": "runsc", "enforce": false}';

/** The instance, in KubePlus's namespace, on team-a's pool (as team-a used it), at runsc advisory. */
export const KUBEPLUS_INSTANCE_MANIFEST = `apiVersion: platformapi.kubeplus/v1alpha1
kind: ${KUBEPLUS_KIND.kind}
metadata:
  name: ${KUBEPLUS_INSTANCE}
  namespace: ${KUBEPLUS_NAMESPACE}
  annotations:
    kubeplus.io/node-isolation: |
      {"nodeSelector": {"pool": "${POOL}"},
       "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "${POOL}", "effect": "NoSchedule"}]}
    kubeplus.io/sandbox-isolation: |
      ${KUBEPLUS_SANDBOX_ISOLATION}
spec: {}
`;
