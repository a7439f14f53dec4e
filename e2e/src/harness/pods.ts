import { CoreV1Api, type KubeConfig, type V1Pod, type V1PodCondition } from '@kubernetes/client-node';
import { waitFor } from './wait.js';

/** A minimal Pod that fake nodes can take (it never runs). */
export function testPod(name: string, spec: Partial<NonNullable<V1Pod['spec']>> = {}): V1Pod {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name },
    spec: { containers: [{ name: 'main', image: 'registry.k8s.io/pause:3.10' }], ...spec },
  };
}

export function podCondition(pod: V1Pod, type: string): V1PodCondition | undefined {
  return pod.status?.conditions?.find((c) => c.type === type);
}

/** Waits until `predicate` holds for the Pod; the timeout error shows its spec.nodeName and conditions. */
export function waitForPod(
  kc: KubeConfig,
  namespace: string,
  name: string,
  description: string,
  predicate: (pod: V1Pod) => boolean,
  timeoutMs = 60_000,
): Promise<V1Pod> {
  const core = kc.makeApiClient(CoreV1Api);
  return waitFor(
    `pod ${namespace}/${name} ${description}`,
    async (observe) => {
      const pod = await core.readNamespacedPod({ name, namespace });
      observe({ nodeName: pod.spec?.nodeName, phase: pod.status?.phase, conditions: pod.status?.conditions });
      return predicate(pod) ? pod : undefined;
    },
    { timeoutMs, intervalMs: 250 },
  );
}

/** Waits for the scheduler to bind the Pod; returns it (spec.nodeName set). */
export function waitForPodBound(kc: KubeConfig, namespace: string, name: string, timeoutMs = 60_000): Promise<V1Pod> {
  return waitForPod(kc, namespace, name, 'to be bound to a node', (pod) => Boolean(pod.spec?.nodeName), timeoutMs);
}

/** Waits for the scheduler to report the Pod unschedulable (PodScheduled=False, reason Unschedulable). */
export function waitForPodUnschedulable(
  kc: KubeConfig,
  namespace: string,
  name: string,
  timeoutMs = 60_000,
): Promise<V1Pod> {
  return waitForPod(
    kc,
    namespace,
    name,
    'to be reported Unschedulable',
    (pod) => {
      const c = podCondition(pod, 'PodScheduled');
      return c?.status === 'False' && c.reason === 'Unschedulable';
    },
    timeoutMs,
  );
}
