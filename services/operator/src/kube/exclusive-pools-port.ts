/**
 * The exclusive-pools controller's API calls on @kubernetes/client-node: create the one
 * ExclusivePools object, or replace it conditionally on the resourceVersion the cache holds (409
 * when it changed meanwhile: the controller retries from the fresh cache). RBAC: create, and
 * update on the one named object (the chart's operator ClusterRole); it is read from the
 * list/watch cache, never with a GET.
 */
import { CustomObjectsApi, type KubeConfig, type KubernetesObject } from '@kubernetes/client-node';
import type { ExclusivePoolsPort } from '../controllers/exclusive-pools/reconciler.js';
import { EXCLUSIVE_POOLS_API_VERSION, EXCLUSIVE_POOLS_RESOURCE } from '../desired/exclusive-pools.js';
import { FIELD_MANAGER } from './webhook-certificates-port.js';

export function kubeExclusivePoolsPort(kc: KubeConfig): ExclusivePoolsPort {
  const api = kc.makeApiClient(CustomObjectsApi);
  const [group = '', version = ''] = EXCLUSIVE_POOLS_API_VERSION.split('/');
  const target = { group, version, plural: EXCLUSIVE_POOLS_RESOURCE };
  return {
    async write(object: KubernetesObject, resourceVersion: string | undefined) {
      if (resourceVersion === undefined) {
        await api.createClusterCustomObject({ ...target, body: object, fieldManager: FIELD_MANAGER });
        return;
      }
      const body = { ...object, metadata: { ...object.metadata, resourceVersion } };
      await api.replaceClusterCustomObject({
        ...target,
        name: object.metadata?.name ?? '',
        body,
        fieldManager: FIELD_MANAGER,
      });
    },
  };
}
