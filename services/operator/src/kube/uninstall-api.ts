/**
 * The Kubernetes API calls of `--uninstall` (uninstall/run.ts) that the ClusterPort does not
 * make: stopping the operator's Deployment, and the fresh paged LISTs of CRDs, instances and
 * Namespaces its inventory is read from. Like every client-node API class in the operator, they
 * live under kube/ (docs/architecture.md).
 */
import { httpStatusOf, type Logger } from '@kubeplus-isolation/service';
import {
  ApiextensionsV1Api,
  AppsV1Api,
  CoreV1Api,
  CustomObjectsApi,
  type KubeConfig,
  type KubernetesObject,
  PatchStrategy,
  setHeaderOptions,
  type V1CustomResourceDefinition,
  type V1Namespace,
} from '@kubernetes/client-node';

const PAGE = 500;
const mergePatch = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);

export interface ClusterScopedResource {
  group: string;
  version: string;
  plural: string;
}

async function paged<T>(
  list: (token: string | undefined) => Promise<{ items: T[]; metadata?: { _continue?: string } }>,
): Promise<T[]> {
  const out: T[] = [];
  let token: string | undefined;
  do {
    const page = await list(token);
    out.push(...page.items);
    token = page.metadata?._continue || undefined;
  } while (token !== undefined);
  return out;
}

export class UninstallApi {
  private readonly apps: AppsV1Api;
  private readonly core: CoreV1Api;
  private readonly extensions: ApiextensionsV1Api;
  private readonly custom: CustomObjectsApi;

  constructor(kc: KubeConfig) {
    this.apps = kc.makeApiClient(AppsV1Api);
    this.core = kc.makeApiClient(CoreV1Api);
    this.extensions = kc.makeApiClient(ApiextensionsV1Api);
    this.custom = kc.makeApiClient(CustomObjectsApi);
  }

  /**
   * Scales the Deployment `namespace/name` to zero and waits until none of its Pods is left, so
   * no leader puts back what the uninstall removes. A missing Deployment is nothing to stop.
   */
  async stopDeployment(namespace: string, name: string, timeoutMs: number, log: Logger): Promise<void> {
    let deployment: Awaited<ReturnType<AppsV1Api['readNamespacedDeployment']>>;
    try {
      deployment = await this.apps.readNamespacedDeployment({ name, namespace });
    } catch (err) {
      if (httpStatusOf(err) === 404) {
        log.info('operator Deployment not found; nothing to stop', { namespace, deployment: name });
        return;
      }
      throw err;
    }
    if (deployment.spec?.replicas !== 0) {
      await this.apps.patchNamespacedDeploymentScale({ name, namespace, body: { spec: { replicas: 0 } } }, mergePatch);
      log.info('scaled the operator Deployment to 0', { namespace, deployment: name });
    }
    const selector = Object.entries(deployment.spec?.selector?.matchLabels ?? {})
      .map(([k, v]) => `${k}=${v}`)
      .join(',');
    if (selector === '') throw new Error(`Deployment ${namespace}/${name} has no matchLabels selector`);
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const pods = await this.core.listNamespacedPod({ namespace, labelSelector: selector });
      if (pods.items.length === 0) break;
      if (Date.now() > deadline) {
        throw new Error(
          `the operator's Pods did not stop within ${timeoutMs / 1000} s: ${pods.items.map((p) => p.metadata?.name).join(', ')}`,
        );
      }
      await new Promise((r) => setTimeout(r, 1000));
    }
    log.info('the operator is stopped', { namespace, deployment: name });
  }

  listCrds(): Promise<V1CustomResourceDefinition[]> {
    return paged((token) => this.extensions.listCustomResourceDefinition({ limit: PAGE, _continue: token }));
  }

  /** Every object of a custom resource, across namespaces. */
  listCustomObjects({ group, version, plural }: ClusterScopedResource): Promise<KubernetesObject[]> {
    return paged(
      async (token) =>
        (await this.custom.listClusterCustomObject({ group, version, plural, limit: PAGE, _continue: token })) as {
          items: KubernetesObject[];
          metadata?: { _continue?: string };
        },
    );
  }

  listNamespaces(): Promise<V1Namespace[]> {
    return paged((token) => this.core.listNamespace({ limit: PAGE, _continue: token }));
  }
}
