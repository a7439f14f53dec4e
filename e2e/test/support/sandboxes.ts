/**
 * Agent Sandbox objects as the real-node suites write and read them (the upstream controller,
 * sigs.k8s.io/agent-sandbox, the pinned release, runs on the node): manifests, reads, readiness,
 * the Pod a Sandbox runs.
 */
import { waitFor } from '@kubeplus-isolation/e2e';
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

/** Waits until Sandbox `namespace/name` is Ready and returns it; a timeout shows its last conditions. */
export const waitForSandboxReady = (
  custom: CustomObjectsApi,
  namespace: string,
  name: string,
  timeoutMs: number,
): Promise<SandboxStatus> =>
  waitFor(
    `Sandbox ${namespace}/${name} Ready`,
    async (observe) => {
      const sb = await readSandbox(custom, namespace, name);
      observe(sb?.status?.conditions);
      return isReady(sb) ? sb : undefined;
    },
    { timeoutMs },
  );

/**
 * The Pod a Sandbox runs, found as the controller finds it (v0.5.6 and later): the Pod whose
 * CONTROLLER ownerReference carries the Sandbox's UID, whatever its name or the reference's kind.
 * (v1.0 no longer writes the deprecated `agents.x-k8s.io/pod-name` annotation, so a lookup by it
 * finds nothing there.)
 */
export async function podOfSandbox(
  core: CoreV1Api,
  custom: CustomObjectsApi,
  namespace: string,
  sandboxName: string,
): Promise<V1Pod | undefined> {
  const uid = (await readSandbox(custom, namespace, sandboxName))?.metadata.uid;
  if (!uid) return undefined;
  const pods = await core.listNamespacedPod({ namespace });
  return pods.items.find((p) => p.metadata?.ownerReferences?.some((o) => o.controller === true && o.uid === uid));
}
