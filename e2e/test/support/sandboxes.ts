/**
 * Agent Sandbox objects as the real-node suites write and read them (the upstream controller,
 * sigs.k8s.io/agent-sandbox v0.5.0, runs on the node): manifests, reads, readiness, the Pod a
 * Sandbox runs.
 */
import type { CoreV1Api, CustomObjectsApi, V1Pod } from '@kubernetes/client-node';

/** The static pause image the real node imports (built by the harness). */
export const SANDBOX_IMAGE = 'kubeplus-isolation.local/pause:1';

export interface SandboxStatus {
  metadata: { name: string; uid: string; annotations?: Record<string, string> };
  status?: { conditions?: { type: string; status: string; reason?: string; message?: string }[]; nodeName?: string };
}

/** A Sandbox running the pause image with `runtimeClassName`. */
export const sandboxYaml = (name: string, namespace: string, runtimeClassName: string, version = 'v1beta1'): string => `
apiVersion: agents.x-k8s.io/${version}
kind: Sandbox
metadata: {name: ${name}, namespace: ${namespace}}
spec:
  podTemplate:
    spec:
      runtimeClassName: ${runtimeClassName}
      containers:
      - {name: agent, image: ${SANDBOX_IMAGE}, imagePullPolicy: Never}
`;

export const readSandbox = async (
  custom: CustomObjectsApi,
  namespace: string,
  name: string,
): Promise<SandboxStatus | undefined> =>
  (await custom
    .getNamespacedCustomObject({ group: 'agents.x-k8s.io', version: 'v1beta1', plural: 'sandboxes', namespace, name })
    .catch(() => undefined)) as SandboxStatus | undefined;

export const isReady = (sb: SandboxStatus | undefined): boolean =>
  sb?.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True') === true;

/** The Pod the Sandbox's `agents.x-k8s.io/pod-name` annotation names (set by the controller once it has one). */
export async function podOfSandbox(
  core: CoreV1Api,
  custom: CustomObjectsApi,
  namespace: string,
  sandboxName: string,
): Promise<V1Pod | undefined> {
  const name = (await readSandbox(custom, namespace, sandboxName))?.metadata.annotations?.['agents.x-k8s.io/pod-name'];
  return name ? core.readNamespacedPod({ namespace, name }).catch(() => undefined) : undefined;
}
