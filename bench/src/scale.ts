/**
 * Benchmark 5: scale.
 *   webhook   many namespaces on the real API server, half of them isolated (labeled + annotated,
 *             each with its own mandate), all delivered to the webhook by its real informer; its
 *             RSS before/after, and lookup latency: AdmissionReviews all for one namespace vs.
 *             spread round-robin over every isolated namespace, interleaved in the same run.
 *   operator  many annotated instances (node-isolation + sandbox-isolation) created in the
 *             platform namespace at once; time until every tenant namespace is labeled +
 *             annotated and every RuntimeClass exists; reconcile p99 from its metrics; RSS.
 */
import { readFileSync } from 'node:fs';
import {
  type Cluster,
  installCrds,
  installSandboxCrds,
  instanceKindCrd,
  type MetricSample,
  type RunningService,
  sandboxIsolationParamsCrd,
  scrapeMetrics,
  startOperator,
  waitFor,
} from '@kubeplus-isolation/e2e';
import type { SandboxPolicyLayout } from '@kubeplus-isolation/operator/dist/desired/sandbox-policy.js';
import {
  canonicalNodeIsolation,
  MANAGED_BY_LABEL,
  MANAGED_BY_VALUE,
  NODE_ISOLATION_ANNOTATION,
  NODE_ISOLATION_ENABLED_LABEL,
  NODE_ISOLATION_RESOLVED_ANNOTATION,
  SANDBOX_ISOLATION_ANNOTATION,
} from '@kubeplus-isolation/spec';
import { CoreV1Api, type KubernetesObject } from '@kubernetes/client-node';
import { forEachConcurrent, type RawApi } from './kube.js';
import { type LoadResult, runLoad } from './load.js';
import { admissionReview, makePod, poolMandate } from './pods.js';
import { cpuSeconds, peakRssBytes, rssBytes } from './proc.js';
import { type Buckets, histogramQuantile, type Summary, summarize } from './stats.js';

const MiB = 1024 * 1024;

export interface WebhookScaleOptions {
  namespaces: number;
  isolated: number;
  createConcurrency: number;
  rounds: number;
  loadSeconds: number;
  connections: number;
  webhookPid: number;
  webhookUrl: string;
  webhookMetricsUrl: string;
  /** Pin/unpin the webhook around load runs. */
  pin: () => void;
  unpin: () => void;
}

async function countNamespaces(api: RawApi): Promise<number> {
  const res = await api.request('GET', '/api/v1/namespaces?limit=1');
  const remaining = (JSON.parse(res.body) as { metadata?: { remainingItemCount?: number } }).metadata
    ?.remainingItemCount;
  return remaining === undefined ? Number.NaN : remaining + 1;
}

export interface LoadSummary {
  rps: Summary;
  perCpuSecond: Summary;
  p50: Summary;
  p99: Summary;
  p999: Summary;
}

export interface WebhookScaleResult {
  namespacesCreated: number;
  isolatedCreated: number;
  createSeconds: number;
  /** Seconds from the first create until the webhook's cache held every isolated namespace. */
  cacheFilledSeconds: number;
  cacheEntriesBefore: Record<string, number>;
  cacheEntriesAfter: Record<string, number>;
  rssBeforeMiB: number;
  /** Right after the cache held every isolated namespace, before the lookup load. */
  rssCacheFilledMiB: number;
  rssAfterMiB: number;
  peakRssMiB: number;
  single: LoadSummary;
  spread: LoadSummary;
  /** ServiceAccounts (about one per namespace once the controller-manager is done) and namespaces when the lookups began. */
  serviceAccountsInCluster: number;
  namespacesInCluster: number;
  /** spread / single per round, summarized. */
  ratioP50: Summary;
  ratioP99: Summary;
  ratioRps: Summary;
  ratioPerCpuSecond: Summary;
  errors: number;
}

function cacheEntries(samples: readonly MetricSample[]): Record<string, number> {
  const out: Record<string, number> = {};
  for (const s of samples) {
    if (s.name === 'kubeplus_webhook_namespace_cache_entries') out[s.labels.state ?? ''] = s.value;
  }
  return out;
}

function summarizeLoads(results: LoadResult[]): LoadSummary {
  return {
    rps: summarize(results.map((r) => r.rps)),
    perCpuSecond: summarize(results.map((r) => r.perCpuSecond ?? Number.NaN)),
    p50: summarize(results.map((r) => r.latencyMs.p50)),
    p99: summarize(results.map((r) => r.latencyMs.p99)),
    p999: summarize(results.map((r) => r.latencyMs.p999)),
  };
}

export async function runWebhookScale(
  api: RawApi,
  opts: WebhookScaleOptions,
  log: (line: string) => void,
): Promise<WebhookScaleResult> {
  const before = cacheEntries(await scrapeMetrics(opts.webhookMetricsUrl));
  const rssBefore = rssBytes(opts.webhookPid);
  const every = Math.max(1, Math.floor(opts.namespaces / Math.max(1, opts.isolated)));
  const isolatedNames: string[] = [];
  const run = Date.now().toString(36);
  const t0 = process.hrtime.bigint();
  let done = 0;
  await forEachConcurrent(opts.namespaces, opts.createConcurrency, async (i) => {
    const name = `scale-${run}-${i}`;
    const isolated = i % every === 0 && isolatedNames.length < opts.isolated;
    if (isolated) isolatedNames.push(name);
    const mandate = poolMandate(`pool-${i % 250}`);
    await api.create('/api/v1/namespaces', {
      apiVersion: 'v1',
      kind: 'Namespace',
      metadata: {
        name,
        labels: { 'bench.kubeplus.io/scale': run, ...(isolated && { [NODE_ISOLATION_ENABLED_LABEL]: 'true' }) },
        ...(isolated && { annotations: { [NODE_ISOLATION_RESOLVED_ANNOTATION]: canonicalNodeIsolation(mandate) } }),
      },
    });
    if (++done % 2000 === 0) log(`  webhook scale: ${done}/${opts.namespaces} namespaces created`);
  });
  const createSeconds = Number(process.hrtime.bigint() - t0) / 1e9;
  const wanted = (before.valid ?? 0) + isolatedNames.length;
  let after: Record<string, number> = {};
  await waitFor(
    `the webhook's cache to hold ${wanted} valid namespaces`,
    async (observe) => {
      after = cacheEntries(await scrapeMetrics(opts.webhookMetricsUrl));
      observe(after);
      return (after.valid ?? 0) >= wanted;
    },
    { timeoutMs: 300_000, intervalMs: 250 },
  );
  const cacheFilledSeconds = Number(process.hrtime.bigint() - t0) / 1e9;
  const rssCacheFilled = rssBytes(opts.webhookPid);
  log(`  webhook scale: ${opts.namespaces} namespaces in ${createSeconds.toFixed(1)} s; cache filled`);
  // The controller-manager creates a ServiceAccount and a ConfigMap in every new namespace at its
  // default client rate (--kube-api-qps 20), so that backlog outlasts this step by many minutes; it
  // is a steady background load that the interleaved lookup runs share alike. Record how far it got.
  const serviceAccounts = await api.request(
    'GET',
    '/api/v1/serviceaccounts?fieldSelector=metadata.name%3Ddefault&limit=1',
  );
  const remaining = (JSON.parse(serviceAccounts.body) as { metadata?: { remainingItemCount?: number } }).metadata
    ?.remainingItemCount;
  const serviceAccountsInCluster = remaining === undefined ? Number.NaN : remaining + 1;

  const bodyFor = (ns: string): string =>
    JSON.stringify(admissionReview(makePod({ containers: 1, tolerations: 0 }), ns));
  const single = [bodyFor(isolatedNames[0] as string)];
  const spread = isolatedNames.map(bodyFor);
  const singles: LoadResult[] = [];
  const spreads: LoadResult[] = [];
  let errors = 0;
  opts.pin();
  try {
    // Warm-up of both paths, discarded.
    await runLoad({ url: opts.webhookUrl, bodies: spread, connections: opts.connections, durationSeconds: 2 });
    for (let round = 0; round < opts.rounds; round++) {
      const order = round % 2 === 0 ? (['single', 'spread'] as const) : (['spread', 'single'] as const);
      for (const which of order) {
        const r = await runLoad({
          url: opts.webhookUrl,
          bodies: which === 'single' ? single : spread,
          perRequestSetup: true,
          connections: opts.connections,
          durationSeconds: opts.loadSeconds,
          serverPid: opts.webhookPid,
        });
        errors += r.errors + r.non2xx + r.timeouts;
        (which === 'single' ? singles : spreads).push(r);
      }
      log(`  webhook scale: lookup round ${round + 1}/${opts.rounds} done`);
    }
  } finally {
    opts.unpin();
  }
  const ratio = (f: (r: LoadResult) => number): Summary =>
    summarize(spreads.map((s, i) => f(s) / f(singles[i] as LoadResult)));
  return {
    namespacesCreated: opts.namespaces,
    isolatedCreated: isolatedNames.length,
    createSeconds,
    cacheFilledSeconds,
    cacheEntriesBefore: before,
    cacheEntriesAfter: after,
    rssBeforeMiB: rssBefore / MiB,
    rssCacheFilledMiB: rssCacheFilled / MiB,
    rssAfterMiB: rssBytes(opts.webhookPid) / MiB,
    peakRssMiB: peakRssBytes(opts.webhookPid) / MiB,
    single: summarizeLoads(singles),
    spread: summarizeLoads(spreads),
    ratioP50: ratio((r) => r.latencyMs.p50),
    ratioP99: ratio((r) => r.latencyMs.p99),
    ratioRps: ratio((r) => r.rps),
    ratioPerCpuSecond: ratio((r) => r.perCpuSecond ?? Number.NaN),
    serviceAccountsInCluster,
    namespacesInCluster: await countNamespaces(api),
    errors,
  };
}

export interface OperatorScaleOptions {
  instances: number;
  createConcurrency: number;
  platformNamespace: string;
  group: string;
  timeoutSeconds: number;
  /** false: node isolation only (no sandbox annotation, so no RuntimeClass, policy or binding per instance). */
  sandbox: boolean;
  /** The operator's --sandbox-policy-layout (per-instance: a policy per instance; shared: one for the cluster). */
  sandboxLayout: SandboxPolicyLayout;
  metricsPort: number;
  /** --concurrency; undefined: the operator's default. */
  concurrency: number | undefined;
  /** NODE_OPTIONS of the operator process (the image's, by default). */
  nodeOptions: string;
  /** The control plane's processes (this point's own), whose RSS and CPU are read too. */
  components?: ReadonlyArray<{ name: string; pid: number }>;
}

/** A control-plane process at the end of a point: RSS, and CPU since the first create. */
export interface ComponentUsage {
  rssMiB: number;
  cpuSeconds: number;
}

export interface OperatorScaleResult {
  instances: number;
  /** false: the instances carried node isolation only. Absent in older results: true. */
  sandbox?: boolean;
  /** The operator's sandbox policy layout. Absent in older results: per-instance. */
  sandboxLayout?: SandboxPolicyLayout;
  concurrency: string;
  /** NODE_OPTIONS the operator ran with. */
  nodeOptions?: string;
  createSeconds: number;
  /** From the first instance create until every tenant namespace is labeled + annotated. */
  namespacesIsolatedSeconds: number;
  /** … until every kubeplus-sandbox-<instance> RuntimeClass exists. */
  runtimeClassesSeconds: number;
  /** … until both: fully isolated. */
  fullyIsolatedSeconds: number;
  policyBindings: number;
  reconcileP50Ms: Record<string, number>;
  reconcileP99Ms: Record<string, number>;
  reconciles: Record<string, number>;
  /** Right after the operator was ready, before the first instance. */
  rssReadyMiB?: number;
  rssMiB: number;
  peakRssMiB: number;
  /** V8 heap used at the end (the operator's nodejs_heap_size_used_bytes). */
  heapUsedMiB?: number;
  cpuSeconds: number;
  /** kube-apiserver, kube-controller-manager, etcd of the point's own control plane. Absent in older results. */
  components?: Record<string, ComponentUsage>;
  timedOut: boolean;
  /** At the end (all, or as many as were done when the wait timed out). */
  namespacesIsolated: number;
  runtimeClasses: number;
  /** The operator's API requests by `method code` (kubeplus_operator_api_requests_total). Absent in older results. */
  apiRequests?: Record<string, number>;
  /** Its `slow API request` log lines (≥ 10 s): how many, the longest, the first few. Absent in older results. */
  slowApiRequests?: SlowApiRequests;
}

export interface SlowApiRequests {
  count: number;
  longestMs: number;
  /** `METHOD path status durationMs`, in log order, at most 5. */
  examples: string[];
}

/** The `slow API request` lines of an operator's JSON log. */
export function slowApiRequests(log: string): SlowApiRequests {
  const out: SlowApiRequests = { count: 0, longestMs: 0, examples: [] };
  for (const line of log.split('\n')) {
    if (!line.includes('"slow API request"')) continue;
    let r: Record<string, unknown>;
    try {
      r = JSON.parse(line) as Record<string, unknown>;
    } catch {
      continue;
    }
    if (r.msg !== 'slow API request') continue;
    const ms = Number(r.durationMs);
    out.count++;
    if (ms > out.longestMs) out.longestMs = ms;
    if (out.examples.length < 5) {
      out.examples.push(`${String(r.method)} ${String(r.path)} ${String(r.status ?? r.error ?? '')} ${ms} ms`.trim());
    }
  }
  return out;
}

/**
 * Names seen by a watch that satisfy `done`, with the time the set first covered `wanted`. Pure
 * bookkeeping of watch events (unit-tested): ADDED/MODIFIED files or unfiles a name by `done`,
 * DELETED unfiles it.
 */
/**
 * `attempt()`'s value from the first of `tries` attempts that succeeds, or undefined when all
 * fail (each failure reported to `failed` with its attempt number).
 */
export async function firstSuccess<T>(
  tries: number,
  attempt: () => Promise<T>,
  failed: (error: unknown, attempt: number) => void = () => undefined,
): Promise<T | undefined> {
  for (let n = 1; n <= tries; n++) {
    try {
      return await attempt();
    } catch (e) {
      failed(e, n);
    }
  }
  return undefined;
}

export class CompletionTracker {
  private readonly seen = new Set<string>();
  completedAt: number | undefined;

  constructor(
    private readonly wanted: ReadonlySet<string>,
    private readonly nameOf: (obj: KubernetesObject) => string | undefined,
    private readonly done: (obj: KubernetesObject) => boolean,
  ) {}

  event(type: string, obj: KubernetesObject, at: number): void {
    const name = this.nameOf(obj);
    if (name === undefined || !this.wanted.has(name)) return;
    if (type !== 'DELETED' && this.done(obj)) this.seen.add(name);
    else this.seen.delete(name);
    if (this.completedAt === undefined && this.seen.size >= this.wanted.size) this.completedAt = at;
  }

  get count(): number {
    return this.seen.size;
  }
}

export async function runOperatorScale(
  cluster: Cluster,
  api: RawApi,
  opts: OperatorScaleOptions,
  log: (line: string) => void,
): Promise<OperatorScaleResult> {
  const kc = cluster.kc;
  // An instance Kind as KubePlus registers it (label registered-by=kubeplus).
  await installCrds(kc, [instanceKindCrd({ group: opts.group, kind: 'BenchApp', plural: 'benchapps' })], 30_000);
  await installSandboxCrds(kc);
  // The shared layout's parameter CRD, as the chart installs it with that layout.
  if (opts.sandboxLayout === 'shared') await installCrds(kc, [sandboxIsolationParamsCrd()], 30_000);
  const core = kc.makeApiClient(CoreV1Api);
  await core.createNamespace({ body: { metadata: { name: opts.platformNamespace } } });
  await waitFor(
    `ServiceAccount default in ${opts.platformNamespace}`,
    () => core.readNamespacedServiceAccount({ name: 'default', namespace: opts.platformNamespace }),
    { timeoutMs: 30_000 },
  );
  const metricsBase = `http://127.0.0.1:${opts.metricsPort}`;
  const operator: RunningService = await startOperator(cluster, {
    name: 'operator-bench',
    leaderElection: false,
    args: [
      `--platform-namespace=${opts.platformNamespace}`,
      `--sandbox-policy-layout=${opts.sandboxLayout}`,
      `--metrics-port=${opts.metricsPort}`,
      ...(opts.concurrency === undefined ? [] : [`--concurrency=${opts.concurrency}`]),
    ],
    // Always set, so an empty value means none (not this process's own NODE_OPTIONS).
    env: { NODE_OPTIONS: opts.nodeOptions },
    readiness: { url: `${metricsBase}/readyz`, timeoutMs: 60_000 },
  });
  const stops: Array<() => void> = [];
  try {
    const pid = operator.process.pid;
    const cpu0 = cpuSeconds(pid);
    const rssReady = rssBytes(pid);
    const components = opts.components ?? [];
    const componentCpu0 = new Map(components.map((c) => [c.name, cpuSeconds(c.pid)]));
    const names = Array.from({ length: opts.instances }, (_, i) => `tenant-${String(i).padStart(5, '0')}`);
    const wanted = new Set(names);
    const t0 = process.hrtime.bigint();
    const since = (): number => Number(process.hrtime.bigint() - t0) / 1e9;
    // Watches, not polls: a LIST of every namespace twice a second would load the API server
    // in proportion to the instances, i.e. measure the poll.
    const namespaces = new CompletionTracker(
      wanted,
      (ns) => ns.metadata?.name,
      (ns) => ns.metadata?.annotations?.[NODE_ISOLATION_RESOLVED_ANNOTATION] !== undefined,
    );
    const classes = new CompletionTracker(
      wanted,
      (rc) => rc.metadata?.name?.replace(/^kubeplus-sandbox-/, ''),
      () => true,
    );
    let watchError: Error | undefined;
    const failed = (error?: Error): void => {
      watchError ??= error ?? new Error('a watch ended early');
    };
    const selector = (s: string): string => `labelSelector=${encodeURIComponent(s)}`;
    stops.push(
      api.watch(
        `/api/v1/namespaces?${selector(`${NODE_ISOLATION_ENABLED_LABEL}=true`)}`,
        (type, obj) => namespaces.event(type, obj, since()),
        failed,
      ),
      api.watch(
        `/apis/node.k8s.io/v1/runtimeclasses?${selector(`${MANAGED_BY_LABEL}=${MANAGED_BY_VALUE}`)}`,
        (type, obj) => classes.event(type, obj, since()),
        failed,
      ),
    );
    await forEachConcurrent(names.length, opts.createConcurrency, async (i) => {
      const name = names[i] as string;
      await api.create(`/apis/${opts.group}/v1/namespaces/${opts.platformNamespace}/benchapps`, {
        apiVersion: `${opts.group}/v1`,
        kind: 'BenchApp',
        metadata: {
          name,
          annotations: {
            [NODE_ISOLATION_ANNOTATION]: JSON.stringify(poolMandate(`pool-${name}`)),
            ...(opts.sandbox && {
              [SANDBOX_ISOLATION_ANNOTATION]: JSON.stringify({ minRuntimeClass: 'kata', enforce: true }),
            }),
          },
        },
        spec: {},
      });
    });
    const createSeconds = since();
    log(`  operator scale: ${names.length} instances created in ${createSeconds.toFixed(1)} s`);
    let timedOut = false;
    const deadline = Date.now() + opts.timeoutSeconds * 1000;
    let lastLog = Date.now();
    // Node isolation only: no RuntimeClass is generated, so the namespaces alone say "done".
    const classesDone = (): boolean => !opts.sandbox || classes.completedAt !== undefined;
    while (namespaces.completedAt === undefined || !classesDone()) {
      if (watchError !== undefined) throw watchError;
      if (Date.now() > deadline) {
        timedOut = true;
        break;
      }
      if (Date.now() - lastLog > 15_000) {
        lastLog = Date.now();
        log(
          `  operator scale: ${namespaces.count}/${wanted.size} namespaces isolated, ${classes.count} RuntimeClasses after ${since().toFixed(0)} s (operator RSS ${(rssBytes(pid) / MiB).toFixed(0)} MiB)`,
        );
      }
      await new Promise((r) => setTimeout(r, 250));
    }
    const namespacesAt = namespaces.completedAt ?? Number.NaN;
    const classesAt = opts.sandbox ? (classes.completedAt ?? Number.NaN) : 0;
    const bindings = await api.request(
      'GET',
      `/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicybindings?${selector(`${MANAGED_BY_LABEL}=${MANAGED_BY_VALUE}`)}`,
    );
    const policyBindings = (JSON.parse(bindings.body) as { items?: unknown[] }).items?.length ?? 0;
    // The point's timings are measured by now: an operator too busy to answer its /metrics (a
    // relist of thousands of policies stalls its event loop for seconds) costs the metric columns
    // of this point, not the whole section.
    const samples =
      (await firstSuccess(
        3,
        () => scrapeMetrics(`${metricsBase}/metrics`),
        (e, n) => log(`  operator scale: /metrics try ${n} of 3 failed: ${e instanceof Error ? e.message : String(e)}`),
      )) ?? [];
    const byController = new Map<string, Buckets>();
    const reconciles: Record<string, number> = {};
    const apiRequests: Record<string, number> = {};
    let heapUsed = Number.NaN;
    for (const s of samples) {
      if (s.name === 'kubeplus_operator_reconcile_duration_seconds_bucket') {
        const c = s.labels.controller ?? '';
        const b = byController.get(c) ?? new Map();
        const le = s.labels.le === '+Inf' ? Number.POSITIVE_INFINITY : Number(s.labels.le);
        b.set(le, (b.get(le) ?? 0) + s.value);
        byController.set(c, b);
      }
      if (s.name === 'kubeplus_operator_reconcile_total') {
        const k = `${s.labels.controller ?? ''}/${s.labels.result ?? ''}`;
        reconciles[k] = (reconciles[k] ?? 0) + s.value;
      }
      if (s.name === 'nodejs_heap_size_used_bytes') heapUsed = s.value;
      if (s.name === 'kubeplus_operator_api_requests_total') {
        const k = `${s.labels.method ?? ''} ${s.labels.code ?? ''}`;
        apiRequests[k] = (apiRequests[k] ?? 0) + s.value;
      }
    }
    const reconcileP50Ms: Record<string, number> = {};
    const reconcileP99Ms: Record<string, number> = {};
    for (const [c, b] of byController) {
      reconcileP50Ms[c] = histogramQuantile(b, 0.5) * 1000;
      reconcileP99Ms[c] = histogramQuantile(b, 0.99) * 1000;
    }
    return {
      instances: names.length,
      sandbox: opts.sandbox,
      sandboxLayout: opts.sandboxLayout,
      concurrency:
        opts.concurrency === undefined ? 'its default (--concurrency 8)' : `--concurrency=${opts.concurrency}`,
      nodeOptions: opts.nodeOptions,
      createSeconds,
      namespacesIsolatedSeconds: namespacesAt,
      runtimeClassesSeconds: classesAt,
      fullyIsolatedSeconds: Math.max(namespacesAt, classesAt),
      policyBindings,
      reconcileP50Ms,
      reconcileP99Ms,
      reconciles,
      rssReadyMiB: rssReady / MiB,
      rssMiB: rssBytes(pid) / MiB,
      peakRssMiB: peakRssBytes(pid) / MiB,
      heapUsedMiB: heapUsed / MiB,
      cpuSeconds: cpuSeconds(pid) - cpu0,
      components: Object.fromEntries(
        components.map((c) => [
          c.name,
          { rssMiB: rssBytes(c.pid) / MiB, cpuSeconds: cpuSeconds(c.pid) - (componentCpu0.get(c.name) ?? 0) },
        ]),
      ),
      timedOut,
      namespacesIsolated: namespaces.count,
      runtimeClasses: classes.count,
      apiRequests,
      slowApiRequests: slowApiRequests(readFileSync(operator.logPath, 'utf8')),
    };
  } finally {
    for (const stop of stops) stop();
    await operator.stop();
  }
}
