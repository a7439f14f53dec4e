/**
 * The operator's Prometheus metrics, on a dedicated prom-client Registry.
 *
 * Names follow controller-runtime's (`…_reconcile_total`, `…_reconcile_duration_seconds`) and
 * client-go's workqueue metrics (depth, adds, retries, work duration, longest running
 * processor), under the `kubeplus_operator_` prefix. Label values for `controller` and
 * `resource` are declared up front by code: an undeclared value is a programming error and
 * throws, so user data (instance names, CRD plurals, namespaces) can never become a label and
 * cardinality stays bounded. Every declared series is initialised to 0 so `rate()` works from
 * the first scrape.
 */
import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from 'prom-client';
import type { WorkQueueMetrics } from './work-queue.js';

export const RECONCILE_RESULTS = ['success', 'error', 'requeue'] as const;
export type ReconcileResult = (typeof RECONCILE_RESULTS)[number];

export interface OperatorMetricsOptions {
  /** Every controller name that will report (fixed, chosen by code). */
  controllers: readonly string[];
  /** Every informer resource label (fixed, chosen by code, e.g. `namespaces`, `instances`). */
  resources: readonly string[];
  /** Every annotation key whose parse failures are counted. */
  annotations: readonly string[];
  /** Also export prom-client's default process/nodejs metrics (default true). */
  defaultMetrics?: boolean;
}

export interface OperatorMetrics {
  readonly registry: Registry;
  observeReconcile(controller: string, result: ReconcileResult, durationSeconds: number): void;
  invalidAnnotation(annotation: string): void;
  setLeader(leading: boolean): void;
  /** Reports `resource` as synced (1) while `informer` has synced and is not stale; read at scrape time. */
  trackInformer(resource: string, informer: { hasSynced(): boolean; isStale(): boolean }): void;
  /** Hooks a controller's work queue reports through. */
  workQueue(controller: string): WorkQueueMetrics;
  /**
   * Declares further label values (fixed by code) after creation: the controllers and caches that
   * the controllers' setups made (operator.ts). Each series starts at 0, as at creation.
   */
  declare(values: { controllers?: readonly string[]; resources?: readonly string[] }): void;
}

const LABEL_VALUE = /^[a-z0-9]([a-z0-9._/-]{0,61}[a-z0-9])?$/;

function declare(kind: string, values: readonly string[]): ReadonlySet<string> {
  for (const value of values) {
    if (!LABEL_VALUE.test(value)) throw new Error(`metrics: invalid ${kind} label value ${JSON.stringify(value)}`);
  }
  return new Set(values);
}

export function createOperatorMetrics(options: OperatorMetricsOptions): OperatorMetrics {
  const controllers = new Set(declare('controller', options.controllers));
  const resources = new Set(declare('resource', options.resources));
  const annotations = new Set(options.annotations);
  const registry = new Registry();
  if (options.defaultMetrics ?? true) collectDefaultMetrics({ register: registry });
  const registers = [registry];

  const reconcileTotal = new Counter({
    name: 'kubeplus_operator_reconcile_total',
    help: 'Reconciliations by controller and result (success, error, requeue).',
    labelNames: ['controller', 'result'] as const,
    registers,
  });
  const reconcileDuration = new Histogram({
    name: 'kubeplus_operator_reconcile_duration_seconds',
    help: 'Time spent in one reconciliation.',
    labelNames: ['controller'] as const,
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60],
    registers,
  });
  const depth = new Gauge({
    name: 'kubeplus_operator_workqueue_depth',
    help: 'Keys waiting in the work queue.',
    labelNames: ['controller'] as const,
    registers,
  });
  const adds = new Counter({
    name: 'kubeplus_operator_workqueue_adds_total',
    help: 'Keys added to the work queue (after de-duplication).',
    labelNames: ['controller'] as const,
    registers,
  });
  const retries = new Counter({
    name: 'kubeplus_operator_workqueue_retries_total',
    help: 'Keys re-queued with backoff after a failed reconciliation.',
    labelNames: ['controller'] as const,
    registers,
  });
  const workDuration = new Histogram({
    name: 'kubeplus_operator_workqueue_work_duration_seconds',
    help: 'Time from taking a key off the queue to marking it done.',
    labelNames: ['controller'] as const,
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60],
    registers,
  });
  const longestRunningSources = new Map<string, () => number>();
  const longestRunning = new Gauge({
    name: 'kubeplus_operator_workqueue_longest_running_processor_seconds',
    help: 'How long the longest-running reconciliation in flight has been running.',
    labelNames: ['controller'] as const,
    registers,
    collect() {
      for (const [controller, read] of longestRunningSources) this.set({ controller }, read());
    },
  });
  const invalidAnnotations = new Counter({
    name: 'kubeplus_operator_invalid_annotations_total',
    help: 'Instance annotations rejected as invalid, by annotation key.',
    labelNames: ['annotation'] as const,
    registers,
  });
  const leader = new Gauge({
    name: 'kubeplus_operator_leader',
    help: '1 while this replica holds the leader lease, else 0.',
    registers,
  });
  const informerSources = new Map<string, { hasSynced(): boolean; isStale(): boolean }>();
  const informerSynced = new Gauge({
    name: 'kubeplus_operator_informer_synced',
    help: '1 once the informer cache for a resource has completed its initial list and is not stale.',
    labelNames: ['resource'] as const,
    registers,
    collect() {
      for (const [resource, informer] of informerSources) {
        this.set({ resource }, informer.hasSynced() && !informer.isStale() ? 1 : 0);
      }
    },
  });

  const zeroController = (controller: string): void => {
    for (const result of RECONCILE_RESULTS) reconcileTotal.inc({ controller, result }, 0);
    reconcileDuration.zero({ controller });
    depth.set({ controller }, 0);
    adds.inc({ controller }, 0);
    retries.inc({ controller }, 0);
    workDuration.zero({ controller });
    longestRunning.set({ controller }, 0);
  };
  for (const controller of controllers) zeroController(controller);
  for (const annotation of annotations) invalidAnnotations.inc({ annotation }, 0);
  for (const resource of resources) informerSynced.set({ resource }, 0);
  leader.set(0);

  const checkController = (controller: string): void => {
    if (!controllers.has(controller)) throw new Error(`metrics: undeclared controller ${JSON.stringify(controller)}`);
  };

  return {
    registry,
    observeReconcile(controller, result, durationSeconds) {
      checkController(controller);
      reconcileTotal.inc({ controller, result });
      reconcileDuration.observe({ controller }, durationSeconds);
    },
    invalidAnnotation(annotation) {
      if (!annotations.has(annotation)) throw new Error(`metrics: undeclared annotation ${JSON.stringify(annotation)}`);
      invalidAnnotations.inc({ annotation });
    },
    setLeader(leading) {
      leader.set(leading ? 1 : 0);
    },
    trackInformer(resource, informer) {
      if (!resources.has(resource)) throw new Error(`metrics: undeclared resource ${JSON.stringify(resource)}`);
      informerSources.set(resource, informer);
    },
    declare(values) {
      for (const controller of declare('controller', values.controllers ?? [])) {
        if (controllers.has(controller)) continue;
        controllers.add(controller);
        zeroController(controller);
      }
      for (const resource of declare('resource', values.resources ?? [])) {
        if (resources.has(resource)) continue;
        resources.add(resource);
        informerSynced.set({ resource }, 0);
      }
    },
    workQueue(controller) {
      checkController(controller);
      return {
        depth: (n) => depth.set({ controller }, n),
        add: () => adds.inc({ controller }),
        retry: () => retries.inc({ controller }),
        workDuration: (seconds) => workDuration.observe({ controller }, seconds),
        longestRunning: (read) => {
          longestRunningSources.set(controller, read);
        },
      };
    },
  };
}
