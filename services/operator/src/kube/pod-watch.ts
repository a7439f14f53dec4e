/**
 * The audit's watch of new Pods (controllers/audit/pod-admissions.ts) on @kubernetes/client-node:
 * the resourceVersion of "now" from a LIST of at most one Pod, then a cluster-wide watch from it.
 * Nothing is cached and no full list is ever made. Needs `list` and `watch` on `pods`.
 */
import { CoreV1Api, type KubeConfig, type KubernetesObject, Watch } from '@kubernetes/client-node';
import type { PodWatchApi } from '../controllers/audit/pod-admissions.js';

export function kubePodWatch(kc: KubeConfig): PodWatchApi {
  const api = kc.makeApiClient(CoreV1Api);
  const watch = new Watch(kc);
  return {
    async currentResourceVersion() {
      const list = await api.listPodForAllNamespaces({ limit: 1 });
      const rv = list.metadata?.resourceVersion;
      if (!rv) throw new Error('a LIST of Pods came back without a resourceVersion');
      return rv;
    },
    async watch(resourceVersion, onEvent, onDone) {
      const controller = await watch.watch(
        '/api/v1/pods',
        { resourceVersion, allowWatchBookmarks: true },
        (type: string, obj: KubernetesObject) => onEvent(type, obj),
        (err: unknown) => onDone(err ?? undefined),
      );
      return () => controller.abort();
    },
  };
}
