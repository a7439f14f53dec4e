/**
 * The audit's one API call on @kubernetes/client-node: a paginated LIST of one namespace's Pods.
 * Finished Pods are filtered out by the API server (`status.phase` is a supported Pod field
 * selector), so they are neither sent nor decoded. Needs `list` on `pods`, nothing else.
 */
import type { CoreV1Api, V1Pod } from '@kubernetes/client-node';
import type { PodLister } from '../controllers/audit/auditor.js';

export const UNFINISHED_PODS_FIELD_SELECTOR = 'status.phase!=Succeeded,status.phase!=Failed';

/**
 * One page of `namespace`'s unfinished Pods (`labelSelector`: only those it selects), as the API
 * sends them.
 */
export async function listUnfinishedPods(
  api: CoreV1Api,
  namespace: string,
  { limit, continueToken }: { limit: number; continueToken?: string | undefined },
  labelSelector?: string,
): Promise<{ items: V1Pod[]; continueToken: string | undefined }> {
  const list = await api.listNamespacedPod({
    namespace,
    limit,
    _continue: continueToken,
    ...(labelSelector === undefined ? {} : { labelSelector }),
    fieldSelector: UNFINISHED_PODS_FIELD_SELECTOR,
  });
  return { items: list.items, continueToken: list.metadata?._continue };
}

export function kubePodLister(api: CoreV1Api): PodLister {
  return { listPods: (namespace, page) => listUnfinishedPods(api, namespace, page) };
}
