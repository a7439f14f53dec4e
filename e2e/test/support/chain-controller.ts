import { installCrds, isApiStatus } from '@kubeplus-isolation/e2e';
import {
  ApiextensionsV1Api,
  AppsV1Api,
  CustomObjectsApi,
  type KubeConfig,
  type KubernetesListObject,
  type KubernetesObject,
  makeInformer,
  type V1CustomResourceDefinition,
  type V1Deployment,
  type V1OwnerReference,
} from '@kubernetes/client-node';

/**
 * A two-level custom-resource chain of the kind that made the old webhook's ownership traversal
 * expensive: an AppStack (level 1) makes an AppTier (level 2), which makes a Deployment; the
 * kube-controller-manager then makes the ReplicaSet and the Pods. So each Pod's owner chain is
 * Pod → ReplicaSet → Deployment → AppTier → AppStack. The controller runs in the test process on
 * client-node informers, like a chart's operator would.
 */

export interface ChainObject extends KubernetesObject {
  spec?: { replicas?: number; image?: string };
}

export const VERSION = 'v1';

function crd(group: string, kind: string, plural: string): V1CustomResourceDefinition {
  return {
    apiVersion: 'apiextensions.k8s.io/v1',
    kind: 'CustomResourceDefinition',
    metadata: { name: `${plural}.${group}` },
    spec: {
      group,
      scope: 'Namespaced',
      names: { kind, plural, singular: kind.toLowerCase(), listKind: `${kind}List` },
      versions: [
        {
          name: VERSION,
          served: true,
          storage: true,
          schema: {
            openAPIV3Schema: {
              type: 'object',
              properties: {
                spec: {
                  type: 'object',
                  properties: { replicas: { type: 'integer', minimum: 1 }, image: { type: 'string' } },
                },
              },
            },
          },
        },
      ],
    },
  };
}

/** Installs the AppStack and AppTier CRDs in `group` (unique per run) and waits until Established. */
export async function installChainCrds(kc: KubeConfig, group: string): Promise<string[]> {
  return installCrds(kc, [crd(group, 'AppStack', 'appstacks'), crd(group, 'AppTier', 'apptiers')]);
}

export async function deleteChainCrds(kc: KubeConfig, group: string): Promise<void> {
  const api = kc.makeApiClient(ApiextensionsV1Api);
  for (const name of [`appstacks.${group}`, `apptiers.${group}`]) {
    try {
      await api.deleteCustomResourceDefinition({ name });
    } catch (error) {
      if (!isApiStatus(error, 404)) throw error;
    }
  }
}

function ownerRef(apiVersion: string, kind: string, owner: KubernetesObject): V1OwnerReference {
  return {
    apiVersion,
    kind,
    name: owner.metadata?.name ?? '',
    uid: owner.metadata?.uid ?? '',
    controller: true,
    blockOwnerDeletion: true,
  };
}

export interface ChainController {
  /** Errors the controller hit (a test asserts there are none). */
  readonly errors: string[];
  /** The chain as the API server has it (names per level) plus the controller's errors, for failure messages. */
  describe(): Promise<string>;
  stop(): Promise<void>;
}

/** Runs the AppStack → AppTier → Deployment controller for `namespace`. */
export async function startChainController(kc: KubeConfig, group: string, namespace: string): Promise<ChainController> {
  const custom = kc.makeApiClient(CustomObjectsApi);
  const apps = kc.makeApiClient(AppsV1Api);
  const errors: string[] = [];
  const apiVersion = `${group}/${VERSION}`;
  const list = (plural: string) => (): Promise<KubernetesListObject<ChainObject>> =>
    custom.listNamespacedCustomObject({ group, version: VERSION, namespace, plural }) as Promise<
      KubernetesListObject<ChainObject>
    >;
  const createIgnoringConflict = async (what: string, create: () => Promise<unknown>): Promise<void> => {
    try {
      await create();
    } catch (error) {
      if (!isApiStatus(error, 409)) errors.push(`${what}: ${(error as Error).message}`);
    }
  };

  const stacks = makeInformer<ChainObject>(
    kc,
    `/apis/${group}/${VERSION}/namespaces/${namespace}/appstacks`,
    list('appstacks'),
  );
  stacks.on('add', (stack) => {
    const name = `${stack.metadata?.name}-tier`;
    void createIgnoringConflict(`create AppTier ${name}`, () =>
      custom.createNamespacedCustomObject({
        group,
        version: VERSION,
        namespace,
        plural: 'apptiers',
        body: {
          apiVersion,
          kind: 'AppTier',
          metadata: { name, ownerReferences: [ownerRef(apiVersion, 'AppStack', stack)] },
          spec: { ...stack.spec },
        },
      }),
    );
  });

  const tiers = makeInformer<ChainObject>(
    kc,
    `/apis/${group}/${VERSION}/namespaces/${namespace}/apptiers`,
    list('apptiers'),
  );
  tiers.on('add', (tier) => {
    const name = `${tier.metadata?.name}-app`;
    const labels = { app: name };
    // A third-party chart's Deployment: no nodeSelector, no tolerations.
    const deployment: V1Deployment = {
      metadata: { name, labels, ownerReferences: [ownerRef(apiVersion, 'AppTier', tier)] },
      spec: {
        replicas: tier.spec?.replicas ?? 1,
        selector: { matchLabels: labels },
        template: {
          metadata: { labels },
          spec: { containers: [{ name: 'main', image: tier.spec?.image ?? 'registry.k8s.io/pause:3.10' }] },
        },
      },
    };
    void createIgnoringConflict(`create Deployment ${name}`, () =>
      apps.createNamespacedDeployment({ namespace, body: deployment }),
    );
  });

  // Like any controller: a failed list/watch is retried (a just-Established CRD answers 429
  // "storage is (re)initializing" until its watch cache is ready). Only lasting failures are errors.
  let stopped = false;
  const failures: string[] = [];
  for (const informer of [stacks, tiers]) {
    informer.on('error', (error: unknown) => {
      if (stopped) return;
      failures.push(`list/watch failed, retrying: ${(error as Error).message.split('\n')[0]}`);
      if (failures.length > 20) errors.push(...failures.splice(0));
      setTimeout(() => {
        if (!stopped) informer.start().catch(() => {});
      }, 1_000).unref();
    });
  }
  await Promise.all([stacks.start(), tiers.start()]);
  return {
    errors,
    async describe() {
      const names = async (plural: string): Promise<string[]> =>
        (
          (await custom.listNamespacedCustomObject({
            group,
            version: VERSION,
            namespace,
            plural,
          })) as KubernetesListObject<ChainObject>
        ).items.map((o) => o.metadata?.name ?? '?');
      const deployments = (await apps.listNamespacedDeployment({ namespace })).items.map((d) => d.metadata?.name);
      const replicaSets = (await apps.listNamespacedReplicaSet({ namespace })).items.map((r) => r.metadata?.name);
      return JSON.stringify({
        appstacks: await names('appstacks'),
        apptiers: await names('apptiers'),
        informerCache: { appstacks: stacks.list().length, apptiers: tiers.list().length },
        deployments,
        replicaSets,
        errors,
        retriedListWatchFailures: failures,
      });
    },
    async stop() {
      stopped = true;
      await Promise.all([stacks.stop(), tiers.stop()]);
    },
  };
}
