/**
 * Writes each audited namespace's compliance Report (openreport.ts builds it), as a step of the
 * audit's reconcile: the audit hands over its Pod findings (no Pod is listed again), this lists
 * the namespace's Sandboxes when sandbox isolation is bound there, adds the instances bound there
 * whose isolation annotation is invalid (from an index, no request), reads the Report, and writes
 * only what changed — an unchanged namespace costs one read and no write.
 *
 * When the Report API is not served (the OpenReports CRD is not installed) it says so once: a
 * Warning Event `ReportsApiUnavailable` on the operator's own Pod, a log line and
 * `kubeplus_operator_reports_api_available 0`; each later audit reads again (the read's 404 is
 * how it notices the API appearing, without a restart), and the first success logs it, records a
 * Normal `ReportsApiAvailable` Event and sets the gauge to 1. Nothing else depends on the API.
 *
 * A failed read or write is logged and counted, never thrown: the audit's own findings (metric,
 * Events) stand, and the next audit writes the Report again.
 */
import { createSilentLogger, describeError, type Logger } from '@kubeplus-isolation/service';
import type { NamespaceSandboxPolicy } from '@kubeplus-isolation/spec';
import {
  controllerUidOf,
  DEFAULT_HANDLER_LEVELS,
  findWeakSandboxes,
  type HandlerLevels,
  indexSandboxPods,
  type SandboxPodLike as PodLike,
  type SandboxLike,
  type SandboxPods,
} from '@kubeplus-isolation/spec';
import type { RuntimeClassInfo } from '../../desired/sandbox-policy.js';
import type { InvolvedObject } from '../../runtime/event-recorder.js';
import {
  buildReport,
  DEFAULT_MAX_RESULTS,
  type ExistingReport,
  type InvalidAnnotation,
  isOwnReport,
  type PodFindings,
  type Report,
  type ReportChange,
  reportable,
  reportChange,
  type SandboxFindings,
} from './openreport.js';

/** The Report in one namespace, or that the Report API is not served. */
export type ReportRead = { served: false } | { served: true; report: ExistingReport | undefined };

/** Report I/O (kube/report-store.ts); errors carry the HTTP status. */
export interface ReportStore {
  read(namespace: string): Promise<ReportRead>;
  create(report: Report): Promise<void>;
  /** PUT at `report.metadata.resourceVersion`. */
  replace(report: Report): Promise<void>;
  delete(namespace: string): Promise<void>;
  /** The namespaces holding a Report of the operator's (label-selected, across the cluster); [] when the API is not served. */
  listOwnNamespaces(): Promise<string[]>;
}

export interface SandboxPage {
  items: readonly SandboxLike[];
  continueToken?: string | undefined;
  /** The apiVersion listed. */
  apiVersion: string;
}

export interface SandboxPodPage {
  items: readonly PodLike[];
  continueToken?: string | undefined;
}

/** A paginated LIST of one namespace's Sandboxes; undefined when no Sandbox API is served. */
export interface SandboxLister {
  listSandboxes(
    namespace: string,
    page: { limit: number; continueToken?: string | undefined },
  ): Promise<SandboxPage | undefined>;
  /**
   * A paginated LIST of one namespace's unfinished Pods, whatever their labels: a Sandbox's Pod is
   * the one its controller owner reference names by the Sandbox's UID, whatever kind it says
   * (issue 36: a Pod owned by a Sandbox's UID under another kind need not carry the controller's
   * `agents.x-k8s.io/sandbox-name-hash` label), so what runs is judged, not only the spec.
   */
  listSandboxPods(
    namespace: string,
    page: { limit: number; continueToken?: string | undefined },
  ): Promise<SandboxPodPage>;
}

export const REPORT_WRITE_RESULTS = ['created', 'updated', 'deleted', 'error'] as const;
export type ReportWriteResult = (typeof REPORT_WRITE_RESULTS)[number];

export interface ReportHooks {
  /** A write was made (or a read or write failed: `error`). */
  write(result: ReportWriteResult): void;
  /** The Report was already up to date: no write. */
  unchanged(): void;
  apiAvailable(available: boolean): void;
  /** One LIST request for Sandboxes. */
  sandboxListRequest(): void;
  /** One LIST request for Sandboxes' Pods. */
  sandboxPodListRequest(): void;
}

export const REPORTS_API_UNAVAILABLE_REASON = 'ReportsApiUnavailable';
export const REPORTS_API_AVAILABLE_REASON = 'ReportsApiAvailable';

export interface ReporterOptions {
  store: ReportStore;
  sandboxes: SandboxLister;
  /** The sandbox isolation in force in a namespace (from the instance caches). */
  sandboxPolicy(namespace: string): NamespaceSandboxPolicy | undefined;
  /** The instances bound to a namespace whose isolation annotation is invalid (invalid-annotations.ts). */
  invalidAnnotations?(namespace: string): readonly InvalidAnnotation[];
  /** Every RuntimeClass by name (the RuntimeClass cache's index). */
  runtimeClasses(): ReadonlyMap<string, RuntimeClassInfo>;
  handlerLevels?: HandlerLevels;
  maxResults?: number;
  /** The operator's own Pod, for the API-availability Events; none: logged only. */
  self?: InvolvedObject | undefined;
  /** Never rejects (the runtime's EventRecorder). */
  recordEvent(target: InvolvedObject, type: 'Normal' | 'Warning', reason: string, message: string): Promise<void>;
  hooks?: ReportHooks;
  logger?: Logger;
  /** Sandboxes per LIST page. Default 500. */
  pageSize?: number;
}

export class NamespaceReporter {
  private apiState: 'unknown' | 'available' | 'unavailable' = 'unknown';
  /**
   * Namespaces known to hold the operator's Report: audited every period (compliance/setup.ts), so a
   * namespace that stops being isolated has its Report deleted even when nothing else audits it.
   */
  private readonly known = new Set<string>();
  private readonly logger: Logger;
  private readonly maxResults: number;
  private readonly pageSize: number;

  constructor(private readonly options: ReporterOptions) {
    this.logger = (options.logger ?? createSilentLogger()).child({ component: 'reports' });
    this.maxResults = options.maxResults ?? DEFAULT_MAX_RESULTS;
    this.pageSize = options.pageSize ?? 500;
  }

  /** Namespaces holding (as far as known) the operator's Report. */
  knownNamespaces(): string[] {
    return [...this.known];
  }

  /**
   * Learns which namespaces hold the operator's Reports (one label-selected LIST across the
   * cluster), e.g. when a leadership term starts: Reports a previous leader wrote are then kept
   * current, or deleted, like its own. A failure is logged and counted; the next term retries.
   */
  async discover(): Promise<void> {
    try {
      for (const namespace of await this.options.store.listOwnNamespaces()) this.known.add(namespace);
    } catch (err) {
      this.options.hooks?.write('error');
      this.logger.warn('could not list the compliance Reports; namespaces no longer isolated may keep theirs', {
        error: describeError(err),
      });
    }
  }

  /** Brings the namespace's Report up to date with `pods` (the audit's findings; undefined: not node-isolated). */
  async sync(namespace: string, pods: PodFindings | undefined, signal: AbortSignal): Promise<void> {
    let sandboxes: SandboxFindings | undefined;
    let read: ReportRead;
    try {
      sandboxes = await this.sandboxFindings(namespace, signal);
      read = await this.options.store.read(namespace);
    } catch (err) {
      if (signal.aborted) throw signal.reason;
      this.failed(namespace, 'read', err);
      return;
    }
    if (!read.served) {
      await this.unavailable();
      return;
    }
    await this.available();
    if (signal.aborted) throw signal.reason;
    const invalidAnnotations = this.options.invalidAnnotations?.(namespace) ?? [];
    const input = { namespace, pods, sandboxes, invalidAnnotations, maxResults: this.maxResults };
    try {
      if (!reportable(input)) {
        if (read.report !== undefined && isOwnReport(read.report)) {
          await this.options.store.delete(namespace);
          this.options.hooks?.write('deleted');
          this.logger.info('compliance report deleted: nothing in the namespace is isolated any more', { namespace });
        }
        this.known.delete(namespace);
        return;
      }
      await this.apply(namespace, reportChange(read.report, buildReport(input)));
      this.known.add(namespace);
    } catch (err) {
      this.failed(namespace, 'write', err);
    }
  }

  private async apply(namespace: string, change: ReportChange): Promise<void> {
    if (change.action === 'none') {
      this.options.hooks?.unchanged();
      return;
    }
    if (change.action === 'create') await this.options.store.create(change.report);
    else await this.options.store.replace(change.report);
    this.options.hooks?.write(change.action === 'create' ? 'created' : 'updated');
    this.logger.debug('compliance report written', {
      namespace,
      action: change.action,
      summary: change.report.summary,
    });
  }

  private async sandboxFindings(namespace: string, signal: AbortSignal): Promise<SandboxFindings | undefined> {
    const policy = this.options.sandboxPolicy(namespace);
    if (policy === undefined) return undefined;
    const classes = this.options.runtimeClasses();
    const levels = this.options.handlerLevels ?? DEFAULT_HANDLER_LEVELS;
    let findings: SandboxFindings | undefined;
    let continueToken: string | undefined;
    let pods: SandboxPods | undefined;
    do {
      if (signal.aborted) throw signal.reason;
      const page = await this.options.sandboxes.listSandboxes(namespace, { limit: this.pageSize, continueToken });
      this.options.hooks?.sandboxListRequest();
      if (page === undefined) return undefined;
      // Listed once, and only when there are Sandboxes to judge.
      if (pods === undefined && page.items.length > 0) pods = await this.sandboxPods(namespace, signal);
      const weak = findWeakSandboxes(policy.minimum, page.items, classes, levels, pods);
      const before = findings ?? {
        minimum: policy.minimum,
        apiVersion: page.apiVersion,
        checked: 0,
        weakCount: 0,
        weak: [],
      };
      findings = {
        ...before,
        checked: before.checked + page.items.length,
        weakCount: before.weakCount + weak.length,
        weak: [...before.weak, ...weak.slice(0, Math.max(0, this.maxResults - before.weak.length))],
      };
      continueToken = page.continueToken || undefined;
    } while (continueToken !== undefined);
    return findings;
  }

  /** The namespace's Pods that have a controller, reduced to what the judge reads, by controller UID. */
  private async sandboxPods(namespace: string, signal: AbortSignal): Promise<SandboxPods> {
    const pods: PodLike[] = [];
    let continueToken: string | undefined;
    do {
      if (signal.aborted) throw signal.reason;
      const page = await this.options.sandboxes.listSandboxPods(namespace, { limit: this.pageSize, continueToken });
      this.options.hooks?.sandboxPodListRequest();
      for (const pod of page.items) {
        const uid = controllerUidOf(pod);
        if (uid === undefined) continue; // no Sandbox's: the controller takes an unowned Pod only by a judged UPDATE
        const runtimeClassName = pod.spec?.runtimeClassName;
        pods.push({
          metadata: { name: pod.metadata?.name, ownerReferences: [{ uid, controller: true }] },
          spec: typeof runtimeClassName === 'string' ? { runtimeClassName } : {},
        });
      }
      continueToken = page.continueToken || undefined;
    } while (continueToken !== undefined);
    return indexSandboxPods(pods);
  }

  private failed(namespace: string, step: 'read' | 'write', err: unknown): void {
    this.options.hooks?.write('error');
    this.logger.warn(`compliance report ${step} failed; the next audit retries`, {
      namespace,
      error: describeError(err),
    });
  }

  private async unavailable(): Promise<void> {
    if (this.apiState === 'unavailable') return;
    this.apiState = 'unavailable';
    this.options.hooks?.apiAvailable(false);
    const message =
      'The OpenReports API (openreports.io/v1alpha1 reports) is not served: no compliance Report is written. ' +
      'Install the OpenReports CRDs to get them (picked up without a restart), or turn reports off (--reports=false).';
    this.logger.warn(message, { event: this.self() });
    if (this.options.self !== undefined)
      await this.options.recordEvent(this.options.self, 'Warning', REPORTS_API_UNAVAILABLE_REASON, message);
  }

  private async available(): Promise<void> {
    if (this.apiState === 'available') return;
    const was = this.apiState;
    this.apiState = 'available';
    this.options.hooks?.apiAvailable(true);
    if (was !== 'unavailable') return;
    const message =
      'The OpenReports API (openreports.io/v1alpha1 reports) is served now: compliance Reports are written.';
    this.logger.info(message, { event: this.self() });
    if (this.options.self !== undefined)
      await this.options.recordEvent(this.options.self, 'Normal', REPORTS_API_AVAILABLE_REASON, message);
  }

  private self(): string {
    const s = this.options.self;
    return s === undefined ? 'none (POD_NAME/POD_NAMESPACE unset)' : `${s.kind} ${s.namespace}/${s.name}`;
  }
}
