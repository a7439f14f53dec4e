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
 * No Pod cache and no full list: the watch starts at the resourceVersion of a LIST of at most one
 * Pod (the term's first audits cover what came before), decodes one event at a time and keeps
 * only the last resourceVersion (bookmarks keep it fresh), resuming from it after a disconnect.
 * When it cannot resume (410 Gone), events were lost: it starts again from "now" and audits every
 * isolated namespace (`gap`), which finds the lost Pods that have not finished.
 */
import { describeError, httpStatusOf, type Logger } from '@kubeplus-isolation/service';
import { type MissingField, missingDetails, type PodLike } from '@kubeplus-isolation/spec';
import type { KubernetesObject } from '@kubernetes/client-node';
import type { Clock } from '../../runtime/clock.js';
import type { Lister } from '../../runtime/informer.js';
import type { KeySource } from '../../runtime/key-sources.js';
import { auditedNamespace, type MissingKind, missingKind } from './report.js';

/** The watch's I/O (kube/pod-watch.ts); tests supply a fake. */
export interface PodWatchApi {
  /** The resourceVersion of "now" (a LIST of at most one Pod). */
  currentResourceVersion(): Promise<string>;
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
  logger: Logger;
  clock: Clock;
  /** First retry delay after a failure (doubles per failure in a row, up to 30 s). Default 800 ms. */
  initialBackoffMs?: number;
}

const MAX_BACKOFF_MS = 30_000;

/** A watch that ended without an error, or by client-node's idle timeout: resume at once. */
function isQuietEnd(err: unknown): boolean {
  return err === undefined || err === null || (err instanceof Error && err.name === 'TimeoutError');
}

/**
 * The key source: while subscribed (this replica leads) it watches new Pods and enqueues the
 * namespace of each one admitted without its mandate; after a gap in the watch, every isolated
 * namespace.
 */
export function unisolatedPodAdmissions(api: PodWatchApi, options: PodAdmissionOptions): KeySource {
  const { logger, clock } = options;
  const initialBackoffMs = options.initialBackoffMs ?? 800;
  return {
    subscribe(enqueue) {
      let stopped = false;
      /** Where the watch resumes; undefined: start again from "now". */
      let resourceVersion: string | undefined;
      /** Whether a watch has run this term (so a fresh start means lost events). */
      let watched = false;
      let failures = 0;
      let stopWatch: (() => void) | undefined;
      let cancelRetry: (() => void) | undefined;

      const admitted = (pod: WatchedPod): void => {
        const ns = pod.metadata?.namespace;
        if (!ns) return;
        const found = unisolatedAdmission(options.namespaces.get(ns), pod);
        if (found === undefined) return;
        options.counted(found.kind);
        logger.warn('Pod admitted without the node placement its namespace mandates', {
          namespace: ns,
          pod: pod.metadata?.name,
          uid: pod.metadata?.uid,
          missing: found.missing,
        });
        enqueue(ns);
      };

      const onEvent = (type: string, obj: KubernetesObject): void => {
        if (stopped) return;
        if (type === 'ERROR') {
          // A Status: 410 Gone means the resourceVersion is too old to resume from.
          if (httpStatusOf(obj) === 410) resourceVersion = undefined;
          return;
        }
        failures = 0;
        const rv = obj.metadata?.resourceVersion;
        if (rv) resourceVersion = rv;
        if (type === 'ADDED') admitted(obj as WatchedPod);
      };

      const retry = (delayMs: number): void => {
        if (stopped) return;
        cancelRetry = clock.schedule(delayMs, () => {
          cancelRetry = undefined;
          void connect();
        });
      };

      const failed = (err: unknown): void => {
        if (httpStatusOf(err) === 410) resourceVersion = undefined;
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

      const connect = async (): Promise<void> => {
        if (stopped) return;
        try {
          if (resourceVersion === undefined) {
            resourceVersion = await api.currentResourceVersion();
            // Events between the lost watch and now were not seen: audit every isolated namespace.
            if (watched) for (const ns of options.namespaces.list()) if (ns.metadata?.name) enqueue(ns.metadata.name);
          }
          if (stopped) return;
          const stop = await api.watch(resourceVersion, onEvent, onDone);
          watched = true;
          if (stopped) stop();
          else stopWatch = stop;
        } catch (err) {
          failed(err);
        }
      };

      void connect();
      return () => {
        stopped = true;
        cancelRetry?.();
        stopWatch?.();
        stopWatch = undefined;
      };
    },
  };
}
