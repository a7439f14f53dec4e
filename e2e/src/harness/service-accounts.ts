import { CoreV1Api, type KubeConfig } from '@kubernetes/client-node';
import type { Cluster } from './cluster.js';
import { isApiStatus } from './node-api.js';

export interface ServiceAccountKubeconfigOptions {
  namespace: string;
  serviceAccount: string;
  /** Where to write the kubeconfig. */
  path: string;
  /** Create the ServiceAccount if it does not exist (default true). */
  create?: boolean;
  /** Token lifetime (default 3600s; the API server's minimum is 600s). */
  expirationSeconds?: number;
}

/**
 * A kubeconfig that authenticates as a ServiceAccount with a bound token from the TokenRequest API,
 * so a service under test has exactly the RBAC its chart grants, not the admin's.
 */
export async function writeServiceAccountKubeconfig(
  cluster: Cluster,
  opts: ServiceAccountKubeconfigOptions,
  kc: KubeConfig = cluster.kc,
): Promise<string> {
  const core = kc.makeApiClient(CoreV1Api);
  const { namespace, serviceAccount: name } = opts;
  if (opts.create ?? true) {
    try {
      await core.createNamespacedServiceAccount({ namespace, body: { metadata: { name } } });
    } catch (error) {
      if (!isApiStatus(error, 409)) throw error;
    }
  }
  const request = await core.createNamespacedServiceAccountToken({
    name,
    namespace,
    body: { spec: { audiences: [], expirationSeconds: opts.expirationSeconds ?? 3600 } },
  });
  const token = request.status?.token;
  if (!token) throw new Error(`TokenRequest for ${namespace}/${name} returned no token`);
  return cluster.writeKubeconfig(opts.path, `system:serviceaccount:${namespace}:${name}`, { token });
}
