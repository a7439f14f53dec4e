/**
 * Pods admitted without their mandate, seen as they are created (issue 21): a key source of the
 * audit fed by a cluster-wide watch of Pods, run only while this replica leads. The webhook fails
 * open (failurePolicy Ignore: no replica answers, or it answers a 4xx; or the policy engine's
 * evaluation fails), and a short-lived Pod — a Job's — may have finished before the next periodic
 * audit lists its namespace: the audit skips finished Pods, so it would never be reported. Here
 * each Pod CREATE is judged from the watch's ADDED event, by the audit's own rule (`missingDetails`):
 *
 * - lacking part of the mandate of its (isolated) namespace, it is counted in
 *   `kubeplus_operator_unisolated_pod_admissions_total{missing}` and named in a warn log line,
 *   whatever becomes of it, and its namespace is enqueued for an audit at once (the gauge, the
 *   Event on the instance and the compliance Report then show it while it exists);
 * - compliant, in a namespace that is not isolated, or with an invalid mandate (the webhook admits
 *   those unpatched by design, and the audit reports the namespace), it costs a map lookup.
 *
 * No Pod cache: the watch decodes one event at a time and keeps only its position (the last
 * resourceVersion seen, and when), resuming from it after a disconnect. The loop is the shared one
 * (`ListWatchLoop` in @kubeplus-isolation/service, restarted with backoff by `WatchRestarts`); what
 * is this watch's own is what its "list" does: the resourceVersion of "now", or a catch-up.
 *
 * Across leadership terms (issue 34) the position is kept on the leader's Lease (`checkpoints`,
 * watch-checkpoint.ts), so a Pod admitted unplaced while no leader watched, and finished before the
 * new leader's first audit, is still counted: the new term resumes the previous term's watch (the
 * API server replays the Pods created since). When it cannot resume (410 Gone: too old, at the
 * start of a term or within one), or the previous term left no position, it catches up: a paged
 * LIST of every Pod of the cluster, finished ones included, judging those created since the
 * position (less a clock-skew margin), then a watch from the LIST's resourceVersion. Within a term
 * a Pod is counted once (`CountedPods`, by UID). The very first term (no Lease before it, or no
 * leader election) starts from "now", as before: a LIST of at most one Pod; the term's first
 * audits cover what came before.
 */
import {
  describeError,
  httpStatusOf,
  ListWatchLoop,
  type Logger,
  WatchRestarts,
  type WatchStream,
} from '@kubeplus-isolation/service';
import { type MissingField, missingDetails, type PodLike } from '@kubeplus-isolation/spec';
import type { KubernetesObject } from '@kubernetes/client-node';
import type { Clock } from '../../runtime/clock.js';
import type { Lister } from '../../runtime/informer.js';
import type { KeySource } from '../../runtime/key-sources.js';
import type { AuditHooks } from './auditor.js';
import { CountedPods } from './counted-pods.js';
import { auditedNamespace, type MissingKind, missingKind } from './report.js';
import {
  type CatchUpReason,
  CLOCK_SKEW_MARGIN_MS,
  catchUpCutoff,
  createdAtOf,
  formatPosition,
  type PreviousTerm,
  planTermStart,
  type WatchPosition,
} from './watch-checkpoint.js';

/** One page of a LIST of every Pod of the cluster. */
export interface AllPodsPage {
  items: readonly WatchedPod[];
  /** Set when more Pods follow. */
  continueToken?: string | undefined;
  /** The list's resourceVersion (every page of one listing is of the first page's snapshot). */
  resourceVersion?: string | undefined;
}

/** Where the watch's position is kept between leadership terms (kube/pod-watch.ts: the leader's Lease). */
export interface WatchCheckpoints {
  /** The Lease as this replica took it at the start of this term; undefined: no term before it. */
  previousTerm(): PreviousTerm | undefined;
  /** This term's position, read whenever the leader writes its Lease (its renewals and release). */
  track(position: () => WatchPosition | undefined): void;
}

/** The watch's I/O (kube/pod-watch.ts); tests supply a fake. */
export interface PodWatchApi {
  /** The resourceVersion of "now" (a LIST of at most one Pod). */
  currentResourceVersion(): Promise<string>;
  /**
   * One page of a LIST of every Pod of the cluster, finished ones included (a catch-up): at most
   * `limit` Pods, fewer when they are large (page-budget.ts).
   */
  listPods(page: { limit: number; continueToken?: string | undefined }): Promise<AllPodsPage>;
  /**
   * Watches every Pod from `resourceVersion` (the shared loop's transport: kube/informer-sources.ts
   * `watchOnce`): `stream.connected` once the server answered, `stream.event` per event (ADDED,
   * MODIFIED, DELETED, BOOKMARK, ERROR), `stream.closed` once when it ends, also when `signal` aborts.
   */
  watch(resourceVersion: string, stream: WatchStream, signal: AbortSignal): void;
  /** Absent (no leader election): every term starts from "now". */
  checkpoints?: WatchCheckpoints | undefined;
}

/** A Pod as the watch delivers it: namespaced, with the two fields node isolation owns. */
export type WatchedPod = KubernetesObject & PodLike;

/** What a Pod admitted without its mandate lacks, or undefined (compliant, or nothing to judge it by). Pure. */
export function unisolatedAdmission(
  namespace: KubernetesObject | undefined,
  pod: WatchedPod,
): { missing: MissingField[]; kind: MissingKind } | undefined {
  if (namespace === undefined) return undefined;
  const audited = auditedNamespace(namespace.metadata ?? {});
  if (audited.state !== 'isolated') return undefined;
  const { missing } = missingDetails(audited.spec, pod.spec);
  return missing.length === 0 ? undefined : { missing, kind: missingKind(missing) };
}

export interface PodAdmissionOptions {
  /** The isolated-namespace informer's cache. */
  namespaces: Lister<KubernetesObject>;
  /** A Pod admitted without its mandate: counted by what it lacks. */
  counted(kind: MissingKind): void;
  /** A catch-up became needed (each is one paged LIST of every Pod, retried until done), and why. */
  caughtUp?(reason: CatchUpReason): void;
  /** The catch-up's API cost (the audit's Pod LIST counters). */
  hooks?: AuditHooks;
  logger: Logger;
  clock: Clock;
  /** First retry delay after a failure (doubles per failure in a row, up to 30 s). Default 800 ms. */
  initialBackoffMs?: number;
  /** How far before its position a catch-up reaches. Default CLOCK_SKEW_MARGIN_MS. */
  marginMs?: number;
}

const MAX_BACKOFF_MS = 30_000;
/** Pods asked for per page of a catch-up LIST (fewer when they are large: kube/pod-lister.ts). */
const CATCH_UP_PAGE = 500;

/**
 * Whether a watch failure means "catch up": 410, too old to resume from; 400, a resourceVersion the
 * API server cannot parse (a position on the Lease edited by hand), where resuming would fail forever.
 */
function cannotResume(err: unknown): boolean {
  const status = httpStatusOf(err);
  return status === 410 || status === 400;
}

/**
 * The key source: while subscribed (this replica leads) it watches new Pods and enqueues the
 * namespace of each one admitted without its mandate, from where the previous term's watch got to.
 */
export function unisolatedPodAdmissions(api: PodWatchApi, options: PodAdmissionOptions): KeySource {
  const { logger, clock } = options;
  const initialBackoffMs = options.initialBackoffMs ?? 800;
  const marginMs = options.marginMs ?? CLOCK_SKEW_MARGIN_MS;
  return {
    subscribe(enqueue) {
      /** Where this term's watch got to: what the Lease carries for the next term. */
      let position: WatchPosition | undefined;
      /** Set: the next list is a catch-up of every Pod created since `since`. */
      let catchUp: { since: number; reason: CatchUpReason } | undefined;
      const counted = new CountedPods();

      api.checkpoints?.track(() => position);

      const judge = (pod: WatchedPod, via: 'watch' | 'catch-up'): boolean => {
        const ns = pod.metadata?.namespace;
        if (!ns) return false;
        const found = unisolatedAdmission(options.namespaces.get(ns), pod);
        if (found === undefined) return false;
        if (position !== undefined) counted.forgetBefore(catchUpCutoff(position, marginMs));
        if (!counted.first(pod.metadata?.uid, createdAtOf(pod) ?? clock.now())) return false;
        options.counted(found.kind);
        logger.warn('Pod admitted without the node placement its namespace mandates', {
          namespace: ns,
          pod: pod.metadata?.name,
          uid: pod.metadata?.uid,
          missing: found.missing,
          via,
        });
        enqueue(ns);
        return true;
      };

      /**
       * Every Pod of the cluster created since `since`, finished ones included, judged; returns the
       * LIST's resourceVersion, where the watch goes on.
       */
      const listSince = async (since: number, reason: CatchUpReason, signal: AbortSignal): Promise<string> => {
        const startedAt = clock.now();
        let continueToken: string | undefined;
        let listRv: string | undefined;
        let pages = 0;
        let listed = 0;
        let judged = 0;
        let found = 0;
        do {
          const page = await api.listPods({ limit: CATCH_UP_PAGE, continueToken });
          // The term ended: abandon the catch-up.
          if (signal.aborted) throw signal.reason;
          pages++;
          options.hooks?.podListRequest();
          options.hooks?.podsChecked(page.items.length);
          listRv ??= page.resourceVersion;
          listed += page.items.length;
          for (const pod of page.items) {
            const created = createdAtOf(pod);
            if (created !== undefined && created < since) continue;
            judged++;
            if (judge(pod, 'catch-up')) found++;
          }
          continueToken = page.continueToken || undefined;
        } while (continueToken !== undefined);
        if (!listRv) throw new Error('a LIST of Pods came back without a resourceVersion');
        logger.info('Pod watch caught up: every Pod created since its position judged, finished ones included', {
          reason,
          since: new Date(since).toISOString(),
          listRequests: pages,
          pods: listed,
          createdSince: judged,
          unisolated: found,
          resourceVersion: listRv,
          durationMs: clock.now() - startedAt,
        });
        position = { resourceVersion: listRv, seenAt: startedAt };
        return listRv;
      };

      /**
       * The loop's list: where the watch (re)starts. With a position, the loop lists only when it
       * cannot resume from it (410 Gone, or 400): catch up from it. Without one, "now".
       */
      const list = async (signal: AbortSignal): Promise<string> => {
        if (catchUp === undefined && position !== undefined) {
          catchUp = { since: catchUpCutoff(position, marginMs), reason: 'expired' };
          options.caughtUp?.('expired');
        }
        if (catchUp !== undefined) {
          const rv = await listSince(catchUp.since, catchUp.reason, signal);
          catchUp = undefined;
          return rv;
        }
        const at = clock.now();
        const rv = await api.currentResourceVersion();
        position = { resourceVersion: rv, seenAt: at };
        return rv;
      };

      const loop = new ListWatchLoop(
        { list, watch: (rv, stream, signal) => api.watch(rv, stream, signal) },
        {
          event(type, object) {
            restarts.up();
            const obj = object as KubernetesObject;
            if (type === 'ADDED') judge(obj as WatchedPod, 'watch');
            const rv = obj.metadata?.resourceVersion;
            if (rv) position = { resourceVersion: rv, seenAt: clock.now() };
          },
          isGone: cannotResume,
          // A watch the server ended is reopened at once (a catch-up after a 410 too).
          quietCloseDelayMs: 0,
          clock,
        },
      );

      const run = (): void => {
        loop.start().catch((err: unknown) => {
          const delay = restarts.failed(err);
          if (delay === undefined) return;
          logger.warn('Pod watch failed; retrying', {
            error: describeError(err),
            retryInMs: delay,
            failures: restarts.failures,
          });
        });
      };
      const restarts = new WatchRestarts(run, {
        initialMs: initialBackoffMs,
        maxMs: MAX_BACKOFF_MS,
        jitter: false,
        clock,
      });

      /** Where this term starts: the previous term's position on the Lease (issue 34). */
      const plan = planTermStart(api.checkpoints?.previousTerm());
      if (plan.from === 'checkpoint') {
        position = plan.position;
        loop.resourceVersion = plan.position.resourceVersion;
        logger.info('Pod watch resumes where the previous term left it', {
          position: formatPosition(plan.position),
        });
      } else if (plan.from === 'catch-up') {
        position = plan.position;
        catchUp = { since: catchUpCutoff(plan.position, marginMs), reason: plan.reason };
        options.caughtUp?.(plan.reason);
        logger.info('Pod watch catches up: the previous term left no position to resume from', {
          since: new Date(catchUp.since).toISOString(),
        });
      }
      run();
      return () => {
        restarts.stop();
        void loop.stop();
      };
    },
  };
}
