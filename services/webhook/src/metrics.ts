/**
 * Prometheus metrics, in a registry of their own. Every label takes values from a fixed set
 * (see admission/reasons.ts): nothing is labeled by namespace, Pod or error text.
 */
import { Counter, collectDefaultMetrics, Gauge, type Metric, Registry } from 'prom-client';
import {
  ADMISSION_RESULTS,
  type AdmissionResult,
  BAD_REQUEST_REASONS,
  type BadRequestReason,
  FAIL_OPEN_REASONS,
  type FailOpenReason,
  LIVE_LOOKUP_RESULTS,
  type LiveLookupResult,
} from './admission/reasons.js';
import type { InformerStatus } from './cache/informer.js';
import { ENTRY_STATES, type EntryState } from './cache/namespace-cache.js';

const PREFIX = 'kubeplus_webhook_';

/** From 100 µs (a cache hit) to 1 s (a live GET at its timeout). */
export const DURATION_BUCKETS = [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1];

export type TlsReloadResult = 'success' | 'failure';

export interface MetricSources {
  cacheCounts?: () => Record<EntryState, number>;
  informerStatus?: () => InformerStatus;
}

/** The per-admission series of one result: recording an admission is two additions and a bucket search. */
interface AdmissionSeries {
  /** Admissions not yet added to the prom-client counter (added when it is read). */
  pending: number;
  duration: HistogramSeries;
}

/** One series of a `FixedLabelHistogram`: per-bucket (not cumulative) counts, sum and count. */
export interface HistogramSeries {
  observe(value: number): void;
}

interface SeriesState extends HistogramSeries {
  readonly label: string;
  readonly counts: Float64Array;
  sum: number;
  count: number;
}

interface HistogramValue {
  labels: Record<string, string | number>;
  value: number;
  metricName: string;
}

/**
 * A Prometheus histogram with one label whose values are all known up front, one series per
 * value. prom-client's Histogram does per observation what this does once: validate and hash
 * the labels, and key the bucket by its bound turned into a string (~1.5 µs per observation
 * vs ~30 ns). It reads out exactly like a prom-client Histogram with the same name, help,
 * label and buckets with every series zeroed (`get()` and the registry's text: its test
 * compares the two), and registers in a prom-client Registry like one.
 */
export class FixedLabelHistogram<L extends string> {
  readonly type = 'histogram';
  readonly aggregator = 'sum';
  readonly name: string;
  readonly help: string;
  readonly labelNames: readonly string[];
  readonly #label: string;
  readonly #bounds: readonly number[];
  readonly #series: Map<L, SeriesState>;

  constructor(opts: {
    name: string;
    help: string;
    labelName: string;
    labelValues: readonly L[];
    buckets: readonly number[];
    registers?: Registry[];
  }) {
    this.name = opts.name;
    this.help = opts.help;
    this.labelNames = [opts.labelName];
    this.#label = opts.labelName;
    this.#bounds = [...opts.buckets].sort((a, b) => a - b);
    this.#series = new Map(opts.labelValues.map((v) => [v, this.#newSeries(v)]));
    for (const r of opts.registers ?? []) r.registerMetric(this as unknown as Metric);
  }

  #newSeries(label: string): SeriesState {
    const bounds = this.#bounds;
    const state: SeriesState = {
      label,
      counts: new Float64Array(bounds.length + 1),
      sum: 0,
      count: 0,
      observe(value: number): void {
        if (!Number.isFinite(value)) throw new TypeError(`Value is not a valid number: ${value}`);
        let i = 0;
        while (i < bounds.length && value > (bounds[i] as number)) i++;
        state.counts[i] = (state.counts[i] as number) + 1;
        state.sum += value;
        state.count += 1;
      },
    };
    return state;
  }

  /** The series of one label value. */
  series(labelValue: L): HistogramSeries {
    const s = this.#series.get(labelValue);
    if (s === undefined) throw new Error(`${this.name}: no series ${this.#label}="${labelValue}"`);
    return s;
  }

  /** Zeroes every series (prom-client's Histogram drops them instead; the registry's resetMetrics() calls this). */
  reset(): void {
    for (const s of this.#series.values()) {
      s.counts.fill(0);
      s.sum = 0;
      s.count = 0;
    }
  }

  async get(): Promise<{
    name: string;
    help: string;
    type: 'histogram';
    aggregator: 'sum';
    values: HistogramValue[];
  }> {
    const values: HistogramValue[] = [];
    const bucket = `${this.name}_bucket`;
    for (const s of this.#series.values()) {
      let cumulative = 0;
      for (const [i, le] of this.#bounds.entries()) {
        cumulative += s.counts[i] as number;
        values.push({ labels: { le, [this.#label]: s.label }, value: cumulative, metricName: bucket });
      }
      values.push({ labels: { le: '+Inf', [this.#label]: s.label }, value: s.count, metricName: bucket });
      values.push({ labels: { [this.#label]: s.label }, value: s.sum, metricName: `${this.name}_sum` });
      values.push({ labels: { [this.#label]: s.label }, value: s.count, metricName: `${this.name}_count` });
    }
    return { name: this.name, help: this.help, type: this.type, aggregator: this.aggregator, values };
  }
}

export interface WebhookMetrics {
  registry: Registry;
  liveLookups: Counter<'result'>;
  badRequests: Counter<'reason'>;
  informerErrors: Counter;
  tlsReloads: Counter<'result'>;
  tlsCertificateExpiry: Gauge;
  byResult: Record<AdmissionResult, AdmissionSeries>;
  byFailOpenReason: Record<FailOpenReason, { inc(value?: number): void }>;
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
    help: 'Admission requests answered, by result: patched, unchanged (already compliant), failopen (allowed without isolation), error (internal error, allowed without isolation), skipped (not a Pod CREATE).',
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

  const admissionDuration = new FixedLabelHistogram<AdmissionResult>({
    name: `${PREFIX}admission_duration_seconds`,
    help: 'Time from receiving a /mutate/pods request to sending its AdmissionReview response, by result.',
    labelName: 'result',
    labelValues: ADMISSION_RESULTS,
    buckets: DURATION_BUCKETS,
    registers: [registry],
  });

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

  byResult = byKey(ADMISSION_RESULTS, (result) => ({ pending: 0, duration: admissionDuration.series(result) }));
  const byFailOpenReason = byKey(FAIL_OPEN_REASONS, (reason) => failOpen.labels({ reason }));

  return {
    registry,
    byResult,
    byFailOpenReason,
    liveLookups,
    badRequests,
    informerErrors,
    tlsReloads,
    tlsCertificateExpiry,
  };
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
