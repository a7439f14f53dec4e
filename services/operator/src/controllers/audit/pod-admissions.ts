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
 * resourceVersion seen, and when), resuming from it after a disconnect.
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
import { describeError, httpStatusOf, type Logger } from '@kubeplus-isolation/service';
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
   * Watches every Pod from `resourceVersion`: `onEvent` per event (ADDED, MODIFIED, DELETED,
   * BOOKMARK, ERROR), `onDone` once when the watch ends (an error, or undefined). Resolves, once
   * connected, to a function that ends it.
   */
  watch(
    resourceVersion: string,
    onEvent: (type: string, obj: KubernetesObject) => void,
    onDone: (err: unknown) => void,
  ): Promise<() => void>;
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

/** A catch-up abandoned because the term ended. */
class TermEnded extends Error {}

/** A watch that ended without an error, or by client-node's idle timeout: resume at once. */
function isQuietEnd(err: unknown): boolean {
  return err === undefined || err === null || (err instanceof Error && err.name === 'TimeoutError');
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
      let stopped = false;
      /** Where this term's watch got to: what the Lease carries for the next term. */
      let position: WatchPosition | undefined;
      /** Where the watch resumes; undefined: catch up (`catchUp`) or start from "now". */
      let resourceVersion: string | undefined;
      /** Set: the next connect first lists every Pod created since `since`. */
      let catchUp: { since: number; reason: CatchUpReason } | undefined;
      const counted = new CountedPods();
      let failures = 0;
      let stopWatch: (() => void) | undefined;
      let cancelRetry: (() => void) | undefined;

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

      /** The watch cannot resume (410 Gone): catch up from where it got to. */
      const gone = (): void => {
        resourceVersion = undefined;
        if (catchUp !== undefined) return;
        catchUp = {
          since: position === undefined ? clock.now() : catchUpCutoff(position, marginMs),
          reason: 'expired',
        };
        options.caughtUp?.('expired');
      };

      const onEvent = (type: string, obj: KubernetesObject): void => {
        if (stopped) return;
        if (type === 'ERROR') {
          // A Status: 410 Gone means the resourceVersion is too old to resume from.
          if (httpStatusOf(obj) === 410) gone();
          return;
        }
        failures = 0;
        const rv = obj.metadata?.resourceVersion;
        if (type === 'ADDED') judge(obj as WatchedPod, 'watch');
        if (rv) {
          resourceVersion = rv;
          position = { resourceVersion: rv, seenAt: clock.now() };
        }
      };

      const retry = (delayMs: number): void => {
        if (stopped) return;
        cancelRetry = clock.schedule(delayMs, () => {
          cancelRetry = undefined;
          void connect();
        });
      };

      const failed = (err: unknown): void => {
        // 410: too old to resume from. 400: a resourceVersion the API server cannot parse (a
        // position on the Lease edited by hand): resuming would fail forever; catch up instead.
        const status = httpStatusOf(err);
        if ((status === 410 || status === 400) && resourceVersion !== undefined) gone();
        failures += 1;
        const delay = Math.min(MAX_BACKOFF_MS, initialBackoffMs * 2 ** (failures - 1));
        logger.warn('Pod watch failed; retrying', { error: describeError(err), retryInMs: delay, failures });
        retry(delay);
      };

      const onDone = (err: unknown): void => {
        stopWatch = undefined;
        if (stopped) return;
        if (isQuietEnd(err)) retry(0);
        else failed(err);
      };

      /**
       * Every Pod of the cluster created since `since`, finished ones included, judged; returns the
       * LIST's resourceVersion, where the watch goes on.
       */
      const listSince = async (since: number, reason: CatchUpReason): Promise<string> => {
        const startedAt = clock.now();
        let continueToken: string | undefined;
        let listRv: string | undefined;
        let pages = 0;
        let listed = 0;
        let judged = 0;
        let found = 0;
        do {
          const page = await api.listPods({ limit: CATCH_UP_PAGE, continueToken });
          if (stopped) throw new TermEnded();
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

      const connect = async (): Promise<void> => {
        if (stopped) return;
        try {
          if (resourceVersion === undefined) {
            if (catchUp !== undefined) {
              resourceVersion = await listSince(catchUp.since, catchUp.reason);
              catchUp = undefined;
            } else {
              const at = clock.now();
              const rv = await api.currentResourceVersion();
              resourceVersion = rv;
              position = { resourceVersion: rv, seenAt: at };
            }
          }
          if (stopped) return;
          const stop = await api.watch(resourceVersion, onEvent, onDone);
          if (stopped) stop();
          else stopWatch = stop;
        } catch (err) {
          if (err instanceof TermEnded || stopped) return;
          failed(err);
        }
      };

      /** Where this term starts: the previous term's position on the Lease (issue 34). */
      const start = (): void => {
        const plan = planTermStart(api.checkpoints?.previousTerm());
        if (plan.from === 'checkpoint') {
          position = plan.position;
          resourceVersion = plan.position.resourceVersion;
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
        void connect();
      };

      start();
      return () => {
        stopped = true;
        cancelRetry?.();
        stopWatch?.();
        stopWatch = undefined;
      };
    },
  };
}
