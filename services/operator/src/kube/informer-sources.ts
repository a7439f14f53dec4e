/**
 * List+watch sources on a real cluster, for the runtime's informers: the shared list/watch loop
 * (runtime/list-watch-cache.ts) over @kubernetes/client-node's list calls and its Watch.
 */

import {
  AdmissionregistrationV1Api,
  ApiextensionsV1Api,
  CoreV1Api,
  CustomObjectsApi,
  type KubeConfig,
  type KubernetesListObject,
  type KubernetesObject,
  NodeV1Api,
  type V1CustomResourceDefinition,
  type V1MutatingWebhookConfiguration,
  type V1Namespace,
  type V1RuntimeClass,
  Watch,
} from '@kubernetes/client-node';
import type { InformerSources } from '../operator.js';
import { checkGvr, type GroupVersionResource } from '../runtime/gvr.js';
import type { InformerSource } from '../runtime/informer.js';
import { ListWatchCache, type ObjectListWatch } from '../runtime/list-watch-cache.js';
import type { PolicyResource } from './discovery.js';
import { type WatchClient, watchOnce } from './watch.js';

/** The list call and Watch of the resource at `path` (its watch takes `labelSelector` like its list). */
export function clientNodeListWatch<T extends KubernetesObject>(
  watch: WatchClient,
  path: string,
  listFn: () => Promise<KubernetesListObject<T>>,
  labelSelector?: string,
): ObjectListWatch<T> {
  return {
    async list() {
      const list = await listFn();
      return { items: list.items ?? [], resourceVersion: list.metadata?.resourceVersion ?? '' };
    },
    watch(resourceVersion, stream, signal) {
      const params: Record<string, string> = { resourceVersion };
      if (labelSelector !== undefined) params.labelSelector = labelSelector;
      watchOnce(watch, path, params, stream, signal);
    },
  };
}

function makeInformer<T extends KubernetesObject>(
  kc: KubeConfig,
  path: string,
  listFn: () => Promise<KubernetesListObject<T>>,
  labelSelector?: string,
): InformerSource<T> {
  return new ListWatchCache(clientNodeListWatch(new Watch(kc), path, listFn, labelSelector));
}

/** Namespaces, optionally filtered by a label selector. */
export function namespaceSource(kc: KubeConfig, labelSelector?: string): InformerSource<V1Namespace> {
  const api = kc.makeApiClient(CoreV1Api);
  return makeInformer(kc, '/api/v1/namespaces', () => api.listNamespace({ labelSelector }), labelSelector);
}

export function runtimeClassSource(kc: KubeConfig, labelSelector?: string): InformerSource<V1RuntimeClass> {
  const api = kc.makeApiClient(NodeV1Api);
  return makeInformer(
    kc,
    '/apis/node.k8s.io/v1/runtimeclasses',
    () => api.listRuntimeClass({ labelSelector }),
    labelSelector,
  );
}

export function crdSource(kc: KubeConfig, labelSelector?: string): InformerSource<V1CustomResourceDefinition> {
  const api = kc.makeApiClient(ApiextensionsV1Api);
  return makeInformer(
    kc,
    '/apis/apiextensions.k8s.io/v1/customresourcedefinitions',
    () => api.listCustomResourceDefinition({ labelSelector }),
    labelSelector,
  );
}

/** Every Node (the audit keeps their labels and taints only: controllers/audit/nodes.ts). */
export function nodeSource(kc: KubeConfig): InformerSource<KubernetesObject> {
  const api = kc.makeApiClient(CoreV1Api);
  return makeInformer(kc, '/api/v1/nodes', () => api.listNode() as Promise<KubernetesListObject<KubernetesObject>>);
}

/**
 * MutatingWebhookConfigurations matching `labelSelector` (the ones the operator issues certificates
 * for), or all of them without one (to find KubePlus's registration: kube/platform-namespace.ts).
 */
export function webhookConfigurationSource(
  kc: KubeConfig,
  labelSelector?: string,
): InformerSource<V1MutatingWebhookConfiguration> {
  const api = kc.makeApiClient(AdmissionregistrationV1Api);
  return makeInformer(
    kc,
    '/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations',
    () => api.listMutatingWebhookConfiguration(labelSelector === undefined ? {} : { labelSelector }),
    labelSelector,
  );
}

/** Every object of a custom resource kind, across namespaces. */
export function customResourceSource(kc: KubeConfig, gvr: GroupVersionResource): InformerSource<KubernetesObject> {
  const { group, version, resource } = checkGvr(gvr);
  const api = kc.makeApiClient(CustomObjectsApi);
  return makeInformer(
    kc,
    `/apis/${group}/${version}/${resource}`,
    async () =>
      (await api.listClusterCustomObject({
        group,
        version,
        plural: resource,
      })) as KubernetesListObject<KubernetesObject>,
  );
}

/** Every object of a kind (cluster-scoped, or namespaced across all namespaces) matching `labelSelector`. */
function clusterObjectSource(
  kc: KubeConfig,
  type: PolicyResource,
  labelSelector: string,
): InformerSource<KubernetesObject> {
  const slash = type.apiVersion.lastIndexOf('/');
  const group = type.apiVersion.slice(0, slash);
  const version = type.apiVersion.slice(slash + 1);
  const api = kc.makeApiClient(CustomObjectsApi);
  return makeInformer(
    kc,
    `/apis/${type.apiVersion}/${type.resource}`,
    async () =>
      (await api.listClusterCustomObject({
        group,
        version,
        plural: type.resource,
        labelSelector,
      })) as KubernetesListObject<KubernetesObject>,
    labelSelector,
  );
}

export function kubeInformerSources(kc: KubeConfig): InformerSources {
  return {
    crds: (labelSelector) => crdSource(kc, labelSelector),
    namespaces: (labelSelector) => namespaceSource(kc, labelSelector),
    runtimeClasses: () => runtimeClassSource(kc),
    nodes: () => nodeSource(kc),
    policies: (type, labelSelector) => clusterObjectSource(kc, type, labelSelector),
    instances: (gvr) => customResourceSource(kc, gvr),
  };
}
