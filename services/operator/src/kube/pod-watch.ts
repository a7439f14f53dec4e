/**
 * The audit's watch of new Pods (controllers/audit/pod-admissions.ts) on @kubernetes/client-node:
 * the resourceVersion of "now" from a LIST of at most one Pod, then a cluster-wide watch from it;
 * after a gap, a paged LIST of every Pod (finished ones included, pages bounded in bytes:
 * pod-lister.ts). Nothing is cached. Needs `list` and `watch` on `pods`.
 *
 * With leader election, the watch's position is kept on the leader's Lease (issue 34): the
 * previous term is read from the Lease as this replica took it, and this term's position is
 * carried by its renewals (lease-lock.ts `carryAnnotation`) — no request of its own, so it is
 * written every `--retry-period` (2 s by default) and at the release: a killed leader's successor
 * replays at most the last retry period (plus the time to take over), and a leader that renews
 * needs no extra write.
 */
import { CoreV1Api, type KubeConfig, Watch } from '@kubernetes/client-node';
import { PodPageSizer } from '../controllers/audit/page-budget.js';
import type { PodWatchApi, WatchCheckpoints, WatchedPod } from '../controllers/audit/pod-admissions.js';
import {
  formatPosition,
  POD_WATCH_POSITION_ANNOTATION,
  type PreviousTerm,
} from '../controllers/audit/watch-checkpoint.js';
import type { KubeLeaseLock } from './lease-lock.js';
import { sizedPodPage } from './pod-lister.js';
import { watchOnce } from './watch.js';

/** The watch position on `lease` (the leader's own). */
export function leaseCheckpoints(lease: Pick<KubeLeaseLock, 'takenFrom' | 'carryAnnotation'>): WatchCheckpoints {
  return {
    previousTerm(): PreviousTerm | undefined {
      const taken = lease.takenFrom();
      if (taken === undefined || !taken.existed) return undefined;
      return {
        checkpoint: taken.annotations[POD_WATCH_POSITION_ANNOTATION],
        holderIdentity: taken.record.holderIdentity,
        acquiredAt: taken.record.acquireTime?.getTime(),
        leaseTransitions: taken.record.leaseTransitions,
        createdAt: taken.createdAt?.getTime(),
      };
    },
    track(position) {
      lease.carryAnnotation(POD_WATCH_POSITION_ANNOTATION, () => {
        const current = position();
        return current === undefined ? undefined : formatPosition(current);
      });
    },
  };
}

export function kubePodWatch(
  kc: KubeConfig,
  lease?: KubeLeaseLock,
  pages: PodPageSizer = new PodPageSizer(),
): PodWatchApi {
  const api = kc.makeApiClient(CoreV1Api);
  const watch = new Watch(kc);
  return {
    async currentResourceVersion() {
      const list = await api.listPodForAllNamespaces({ limit: 1 });
      const rv = list.metadata?.resourceVersion;
      if (!rv) throw new Error('a LIST of Pods came back without a resourceVersion');
      return rv;
    },
    async listPods({ limit, continueToken }) {
      const list = await sizedPodPage(pages, limit, (sized, options) =>
        api.listPodForAllNamespaces({ limit: sized, _continue: continueToken }, options),
      );
      return {
        items: list.items as WatchedPod[],
        continueToken: list.metadata?._continue || undefined,
        resourceVersion: list.metadata?.resourceVersion,
      };
    },
    watch(resourceVersion, stream, signal) {
      watchOnce(watch, '/api/v1/pods', { resourceVersion, allowWatchBookmarks: true }, stream, signal);
    },
    ...(lease === undefined ? {} : { checkpoints: leaseCheckpoints(lease) }),
  };
}
