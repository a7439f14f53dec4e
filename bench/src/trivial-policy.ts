/**
 * The least MutatingAdmissionPolicy there is (setup f of section 3, and the floor of the
 * engine-trims section): no parameter, no variable, one constant JSON patch adding the mandated
 * nodeSelector and toleration, reinvocation Never. What any policy costs in the API server,
 * whatever its CEL.
 */
import { type KubeConfig, type KubernetesObject, KubernetesObjectApi } from '@kubernetes/client-node';

/** Creates the policy `name` and its binding, selecting namespaces labelled `label=true`. */
export async function installTrivialPolicy(
  kc: KubeConfig,
  opts: { name: string; label: string; pool: string },
): Promise<void> {
  const client = KubernetesObjectApi.makeApiClient(kc);
  const value = JSON.stringify({ pool: opts.pool });
  const toleration = JSON.stringify([{ key: 'dedicated', operator: 'Equal', value: opts.pool, effect: 'NoSchedule' }]);
  await client.create({
    apiVersion: 'admissionregistration.k8s.io/v1',
    kind: 'MutatingAdmissionPolicy',
    metadata: { name: opts.name },
    spec: {
      matchConstraints: {
        resourceRules: [{ apiGroups: [''], apiVersions: ['v1'], operations: ['CREATE'], resources: ['pods'] }],
      },
      failurePolicy: 'Ignore',
      reinvocationPolicy: 'Never',
      mutations: [
        {
          patchType: 'JSONPatch',
          jsonPatch: {
            expression: `[JSONPatch{op: "add", path: "/spec/nodeSelector", value: ${value}}, JSONPatch{op: "add", path: "/spec/tolerations", value: ${toleration}}]`,
          },
        },
      ],
    },
  } as KubernetesObject);
  await client.create({
    apiVersion: 'admissionregistration.k8s.io/v1',
    kind: 'MutatingAdmissionPolicyBinding',
    metadata: { name: opts.name },
    spec: {
      policyName: opts.name,
      matchResources: { namespaceSelector: { matchLabels: { [opts.label]: 'true' } } },
    },
  } as KubernetesObject);
}
