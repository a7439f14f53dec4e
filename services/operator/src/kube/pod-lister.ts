/**
 * The audit's one API call on @kubernetes/client-node: a paginated LIST of one namespace's Pods.
 * Finished Pods are filtered out by the API server (`status.phase` is a supported Pod field
 * selector), so they are neither sent nor decoded. Needs `list` on `pods`, nothing else.
 */
import type { CoreV1Api } from '@kubernetes/client-node';
import type { PodLister } from '../controllers/audit/auditor.js';

export const UNFINISHED_PODS_FIELD_SELECTOR = 'status.phase!=Succeeded,status.phase!=Failed';

export function kubePodLister(api: CoreV1Api): PodLister {
  return {
    async listPods(namespace, { limit, continueToken }) {
      const list = await api.listNamespacedPod({
        namespace,
        limit,
        _continue: continueToken,
        fieldSelector: UNFINISHED_PODS_FIELD_SELECTOR,
      });
      return { items: list.items, continueToken: list.metadata?._continue };
    },
  };
}
