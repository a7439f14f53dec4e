/**
 * Prometheus metrics, in a registry of their own. Every label takes values from a fixed set
 * (see admission/metric-labels.ts): nothing is labeled by namespace, Pod or error text.
 */
import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from 'prom-client';
import {
  ADMISSION_RESULTS,
  type AdmissionResult,
  BAD_REQUEST_REASONS,
  type BadRequestReason,
  FAIL_OPEN_REASONS,
  type FailOpenReason,
  HOLD_OUTCOMES,
  type HoldOutcome,
  LIVE_LOOKUP_RESULTS,
  type LiveLookupResult,
} from './admission/metric-labels.js';
import type { InformerStatus } from './cache/informer.js';
import { ENTRY_STATES, type EntryState } from './cache/namespace-cache.js';
import { LANES, type Lane } from './http/body-budget.js';

const PREFIX = 'kubeplus_webhook_';

/** From 100 µs (a cache hit) to 1 s (a live GET at its timeout). */
export const DURATION_BUCKETS = [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1];

export interface MetricSources {
  cacheCounts?: () => Record<EntryState, number>;
  informerStatus?: () => InformerStatus;
  /** The body budget's estimated memory held per lane, and large reviews waiting (http/body-budget.ts). */
  reviewBuffer?: () => { inUse: Readonly<Record<Lane, number>>; queued: number };
  /** Requests the hold is holding right now (hold/holder.ts). */
  heldRequests?: () => number;
}

/** A held request waits up to --hold-timeout (at most 29 s). */
export const HOLD_DURATION_BUCKETS = [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 15, 20, 25, 30];

/** The per-admission series of one result: recording an admission is an addition and an observation. */
interface AdmissionSeries {
  /** Admissions not yet added to the prom-client counter (added when it is read). */
  pending: number;
  /** The duration histogram's series of this result (prom-client's `labels(...)`). */
  duration: { observe(value: number): void };
}

export interface WebhookMetrics {
  registry: Registry;
  liveLookups: Counter<'result'>;
  badRequests: Counter<'reason'>;
  overloaded: Counter<'lane'>;
  informerErrors: Counter;
  tlsReloads: Counter<'result'>;
  tlsCertificateExpiry: Gauge;
  byResult: Record<AdmissionResult, AdmissionSeries>;
  byFailOpenReason: Record<FailOpenReason, { inc(value?: number): void }>;
  holdOutcomes: Counter<'outcome'>;
  holdDuration: Histogram<'outcome'>;
}

export interface MetricsOptions {
  /** Process metrics (CPU, memory, event loop lag, GC); off only in tests that create many registries. */
  defaultMetrics?: boolean;
  sources?: MetricSources;
}

function zero<L extends string>(c: Counter<L>, label: L, values: readonly string[]): void {
  for (const v of values) c.inc({ [label]: v } as Partial<Record<L, string>>, 0);
}

function byKey<K extends string, V>(keys: readonly K[], value: (key: K) => V): Record<K, V> {
  const out = {} as Record<K, V>;
  for (const key of keys) out[key] = value(key);
  return out;
}

export function createMetrics(opts: MetricsOptions = {}): WebhookMetrics {
  const registry = new Registry();
  const sources = opts.sources ?? {};
  if (opts.defaultMetrics ?? true) collectDefaultMetrics({ register: registry });

  // Admissions are counted in their series' `pending` (a plain addition per admission) and
  // added to the counter whenever it is read (scrape, get()).
  let byResult: Record<AdmissionResult, AdmissionSeries> | undefined;
  const admissions = new Counter({
    name: `${PREFIX}admissions_total`,
    help: 'Admission requests to /mutate/pods and /hold, by result: patched, unchanged (already compliant), failopen (allowed without isolation, or answered with a 4xx so the API server admits the Pod unpatched), error (internal error, allowed without isolation), skipped (not a Pod CREATE), refused (by the hold: the namespace is not yet settled; retryable).',
    labelNames: ['result'] as const,
    registers: [registry],
    collect() {
      for (const result of ADMISSION_RESULTS) {
        const series = byResult?.[result];
        if (series === undefined || series.pending === 0) continue;
        this.inc({ result }, series.pending);
        series.pending = 0;
      }
    },
  });
  zero(admissions, 'result', ADMISSION_RESULTS);

  const failOpen = new Counter({
    name: `${PREFIX}failopen_total`,
    help: 'Pod CREATEs admitted without the isolation their namespace should mandate, by reason (internal_error included).',
    labelNames: ['reason'] as const,
    registers: [registry],
  });
  zero(failOpen, 'reason', FAIL_OPEN_REASONS);

  const admissionDuration = new Histogram({
    name: `${PREFIX}admission_duration_seconds`,
    help: 'Time from receiving a /mutate/pods request to sending its AdmissionReview response, by result.',
    labelNames: ['result'] as const,
    buckets: DURATION_BUCKETS,
    registers: [registry],
  });
  // Every result's series is scraped from the start, zeroed.
  for (const result of ADMISSION_RESULTS) admissionDuration.zero({ result });

  const liveLookups = new Counter({
    name: `${PREFIX}live_lookups_total`,
    help: 'Live GETs of a namespace missing from the informer cache, by result.',
    labelNames: ['result'] as const,
    registers: [registry],
  });
  zero(liveLookups, 'result', LIVE_LOOKUP_RESULTS);

  const badRequests = new Counter({
    name: `${PREFIX}bad_requests_total`,
    help: 'Requests to /mutate/pods rejected with a 4xx before admission, by reason.',
    labelNames: ['reason'] as const,
    registers: [registry],
  });
  zero(badRequests, 'reason', BAD_REQUEST_REASONS);

  const overloaded = new Counter({
    name: `${PREFIX}overloaded_total`,
    help: 'Requests to /mutate/pods answered 503 because the memory budget of reviews was full, by lane (small or large reviews); each is a fail-open.',
    labelNames: ['lane'] as const,
    registers: [registry],
  });
  zero(overloaded, 'lane', LANES);

  new Gauge({
    name: `${PREFIX}review_memory_bytes`,
    help: 'Estimated memory AdmissionReviews take now (being read, parsed or answered), by lane: small or large reviews.',
    labelNames: ['lane'] as const,
    registers: [registry],
    collect() {
      const inUse = sources.reviewBuffer?.().inUse;
      for (const lane of LANES) this.set({ lane }, inUse?.[lane] ?? 0);
    },
  });

  new Gauge({
    name: `${PREFIX}review_queue_length`,
    help: 'Large AdmissionReviews waiting for their turn in the body budget.',
    registers: [registry],
    collect() {
      this.set(sources.reviewBuffer?.().queued ?? 0);
    },
  });

  new Gauge({
    name: `${PREFIX}namespace_cache_entries`,
    help: 'Isolated namespaces in the cache, by state: valid, annotation_missing, annotation_invalid.',
    labelNames: ['state'] as const,
    registers: [registry],
    collect() {
      const counts = sources.cacheCounts?.();
      for (const state of ENTRY_STATES) this.set({ state }, counts?.[state] ?? 0);
    },
  });

  new Gauge({
    name: `${PREFIX}informer_synced`,
    help: '1 once the namespace informer has listed and started watching, else 0.',
    registers: [registry],
    collect() {
      this.set(sources.informerStatus?.().synced ? 1 : 0);
    },
  });

  new Gauge({
    name: `${PREFIX}informer_watch_connected`,
    help: '1 while a namespace watch request is connected, else 0.',
    registers: [registry],
    collect() {
      this.set(sources.informerStatus?.().connected ? 1 : 0);
    },
  });

  const informerErrors = new Counter({
    name: `${PREFIX}informer_errors_total`,
    help: 'Namespace list/watch failures after which the informer was restarted with backoff.',
    registers: [registry],
  });

  const tlsReloads = new Counter({
    name: `${PREFIX}tls_reloads_total`,
    help: 'Serving certificate reloads after the files changed, by result (failure keeps the previous certificate).',
    labelNames: ['result'] as const,
    registers: [registry],
  });
  zero(tlsReloads, 'result', ['success', 'failure']);

  const tlsCertificateExpiry = new Gauge({
    name: `${PREFIX}tls_certificate_expiry_timestamp_seconds`,
    help: 'Expiry (notAfter, Unix seconds) of the serving certificate in use.',
    registers: [registry],
  });

  const holdOutcomes = new Counter({
    name: `${PREFIX}hold_outcomes_total`,
    help: 'Requests the hold entry sent (Pod and Agent Sandbox CREATEs in unsettled KubePlus namespaces), by outcome: answered at once (dry_run, settled, not_release, too_old), held then answered as usual (released, released_not_held, namespace_gone), or refused and retryable (timeout, over_capacity, shutdown).',
    labelNames: ['outcome'] as const,
    registers: [registry],
  });
  zero(holdOutcomes, 'outcome', HOLD_OUTCOMES);

  const holdDuration = new Histogram({
    name: `${PREFIX}hold_duration_seconds`,
    help: 'How long a held request waited for its namespace to be settled, by outcome (released, released_not_held, namespace_gone, timeout, shutdown).',
    labelNames: ['outcome'] as const,
    buckets: HOLD_DURATION_BUCKETS,
    registers: [registry],
  });

  new Gauge({
    name: `${PREFIX}held_requests`,
    help: 'Requests the hold is holding right now, waiting for their namespace to be settled (at most --max-held-requests).',
    registers: [registry],
    collect() {
      this.set(sources.heldRequests?.() ?? 0);
    },
  });

  byResult = byKey(ADMISSION_RESULTS, (result) => ({ pending: 0, duration: admissionDuration.labels({ result }) }));
  const byFailOpenReason = byKey(FAIL_OPEN_REASONS, (reason) => failOpen.labels({ reason }));

  return {
    registry,
    byResult,
    byFailOpenReason,
    liveLookups,
    badRequests,
    overloaded,
    informerErrors,
    tlsReloads,
    tlsCertificateExpiry,
    holdOutcomes,
    holdDuration,
  };
}

export function recordHoldOutcome(m: WebhookMetrics, outcome: HoldOutcome, heldSeconds: number | undefined): void {
  m.holdOutcomes.inc({ outcome });
  if (heldSeconds !== undefined) m.holdDuration.observe({ outcome }, heldSeconds);
}

export function recordAdmission(m: WebhookMetrics, result: AdmissionResult, seconds: number): void {
  const series = m.byResult[result];
  series.pending += 1;
  series.duration.observe(seconds);
}

export function recordFailOpen(m: WebhookMetrics, reason: FailOpenReason): void {
  m.byFailOpenReason[reason].inc();
}

export function recordLiveLookup(m: WebhookMetrics, result: LiveLookupResult): void {
  m.liveLookups.inc({ result });
}

export function recordBadRequest(m: WebhookMetrics, reason: BadRequestReason): void {
  m.badRequests.inc({ reason });
}
