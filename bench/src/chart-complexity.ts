/**
 * Benchmark 4: chart-complexity independence. The same webhook admits the Pods of
 *   plain  a Deployment created directly (owner chain Pod → ReplicaSet → Deployment), and
 *   chain  a three-level custom-resource chain: AppStack (CR) → AppTier (CR) → Deployment, made by
 *          the e2e suite's in-process chain controller (e2e/test/support/chain-controller.ts,
 *          imported as is), so the owner chain is Pod → ReplicaSet → Deployment → AppTier → AppStack.
 * Rounds alternate plain/chain. Measured per Pod: the webhook's own time (its admission log line's
 * durationMs — exact — and its kubeplus_webhook_admission_duration_seconds histogram delta), and
 * the API server's view of each webhook call (apiserver_admission_webhook_admission_duration_seconds
 * _sum/_count delta: mean including the HTTPS hop).
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { type MetricSample, repoRoot, scrapeApiServerMetrics, scrapeMetrics, waitFor } from '@kubeplus-isolation/e2e';
import {
  AppsV1Api,
  CoreV1Api,
  CustomObjectsApi,
  type KubeConfig,
  type V1OwnerReference,
} from '@kubernetes/client-node';
import {
  type Buckets,
  bucketDelta,
  histogramCount,
  histogramQuantile,
  type Percentiles,
  percentiles,
  type Summary,
  summarize,
} from './stats.js';

export const WEBHOOK_ENTRY_NAME = 'node-isolation.kubeplus.io';

/** The part of e2e/test/support/chain-controller.ts this benchmark calls. */
interface ChainControllerModule {
  VERSION: string;
  installChainCrds(kc: KubeConfig, group: string): Promise<string[]>;
  startChainController(
    kc: KubeConfig,
    group: string,
    namespace: string,
  ): Promise<{ readonly errors: string[]; stop(): Promise<void> }>;
}

export function chainControllerPath(): string {
  return join(repoRoot(), 'e2e', 'test', 'support', 'chain-controller.ts');
}

/** Loads the e2e chain controller (TypeScript, run by Node's type stripping). */
export async function loadChainController(): Promise<ChainControllerModule> {
  return (await import(pathToFileURL(chainControllerPath()).href)) as ChainControllerModule;
}

export type ChartKind = 'plain' | 'chain';

export interface ChartKindStats {
  kind: ChartKind;
  pods: number;
  /** Exact, from the webhook's admission log lines (ms). */
  webhookLogMs: Percentiles;
  /** From the webhook's histogram delta (bucket-interpolated, ms). */
  webhookHistogramP50Ms: number;
  webhookHistogramP99Ms: number;
  webhookHistogramCount: number;
  /** Mean webhook call as the API server measured it (ms), including the HTTPS hop. */
  apiServerCallMeanMs: number;
  apiServerCalls: number;
  /** Seconds from creating the top object to all its Pods existing, per round. */
  podsReadySeconds: Summary;
}

export interface ChartComplexityResult {
  replicas: number;
  rounds: number;
  ownerChain: Record<ChartKind, string>;
  kinds: ChartKindStats[];
  /** chain / plain per round (same round, side by side), summarized over rounds. */
  roundRatioP50: Summary;
  roundRatioP99: Summary;
  roundRatioApiServerMean: Summary;
  /** chain / plain, all rounds pooled. */
  ratioP50: number;
  ratioP99: number;
  ratioApiServerMean: number;
  controllerErrors: string[];
}

export interface ChartComplexityOptions {
  rounds: number;
  replicas: number;
  group: string;
  namespaces: Record<ChartKind, string>;
  webhookMetricsUrl: string;
  webhookLogPath: string;
}

function histogram(samples: readonly MetricSample[], name: string, labels: Record<string, string>): Buckets {
  const out: Buckets = new Map();
  for (const s of samples) {
    if (s.name !== `${name}_bucket`) continue;
    if (!Object.entries(labels).every(([k, v]) => s.labels[k] === v)) continue;
    const le = s.labels.le === '+Inf' ? Number.POSITIVE_INFINITY : Number(s.labels.le);
    out.set(le, (out.get(le) ?? 0) + s.value);
  }
  return out;
}

function total(samples: readonly MetricSample[], name: string, labels: Record<string, string>): number {
  return samples
    .filter((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v))
    .reduce((sum, s) => sum + s.value, 0);
}

interface Snapshot {
  webhook: Buckets;
  apiSum: number;
  apiCount: number;
}

async function snapshot(kc: KubeConfig, metricsUrl: string): Promise<Snapshot> {
  const [mine, api] = await Promise.all([scrapeMetrics(metricsUrl), scrapeApiServerMetrics(kc)]);
  const apiLabels = { name: WEBHOOK_ENTRY_NAME };
  return {
    webhook: histogram(mine, 'kubeplus_webhook_admission_duration_seconds', { result: 'patched' }),
    apiSum: total(api, 'apiserver_admission_webhook_admission_duration_seconds_sum', apiLabels),
    apiCount: total(api, 'apiserver_admission_webhook_admission_duration_seconds_count', apiLabels),
  };
}

function addBuckets(into: Buckets, delta: Buckets): void {
  for (const [le, c] of delta) into.set(le, (into.get(le) ?? 0) + c);
}

/**
 * durationMs of each patched admission in `namespace`, from the webhook's JSON log lines, with the
 * round its Pod belongs to (Pods are named after their Deployment: `<kind>-r<round>-…`).
 */
export function webhookLogDurations(logPath: string, namespace: string): { round: number; ms: number }[] {
  const out: { round: number; ms: number }[] = [];
  for (const line of readFileSync(logPath, 'utf8').split('\n')) {
    if (!line.startsWith('{') || !line.includes(namespace)) continue;
    try {
      const rec = JSON.parse(line) as {
        namespace?: string;
        durationMs?: number;
        result?: string;
        generateName?: string;
      };
      if (rec.namespace !== namespace || rec.result !== 'patched' || typeof rec.durationMs !== 'number') continue;
      const round = /^(?:plain|chain)-r(\d+)-/.exec(rec.generateName ?? '')?.[1];
      out.push({ round: round === undefined ? -1 : Number(round), ms: rec.durationMs });
    } catch {
      // not a JSON log line
    }
  }
  return out;
}

export async function runChartComplexityBench(
  kc: KubeConfig,
  opts: ChartComplexityOptions,
  log: (line: string) => void,
): Promise<ChartComplexityResult> {
  const chain = await loadChainController();
  await chain.installChainCrds(kc, opts.group);
  const controller = await chain.startChainController(kc, opts.group, opts.namespaces.chain);
  const apps = kc.makeApiClient(AppsV1Api);
  const core = kc.makeApiClient(CoreV1Api);
  const custom = kc.makeApiClient(CustomObjectsApi);
  const histos: Record<ChartKind, Buckets> = { plain: new Map(), chain: new Map() };
  const api: Record<ChartKind, { sum: number; count: number }> = {
    plain: { sum: 0, count: 0 },
    chain: { sum: 0, count: 0 },
  };
  const ready: Record<ChartKind, number[]> = { plain: [], chain: [] };
  /** The API server's mean webhook call per round, ms. */
  const apiPerRound: Record<ChartKind, number[]> = { plain: [], chain: [] };
  const ownerChain: Record<ChartKind, string> = { plain: '', chain: '' };

  const createTop = async (kind: ChartKind, name: string): Promise<string> => {
    const namespace = opts.namespaces[kind];
    if (kind === 'plain') {
      const labels = { app: name };
      await apps.createNamespacedDeployment({
        namespace,
        body: {
          metadata: { name, labels },
          spec: {
            replicas: opts.replicas,
            selector: { matchLabels: labels },
            template: {
              metadata: { labels },
              spec: { containers: [{ name: 'main', image: 'registry.k8s.io/pause:3.10' }] },
            },
          },
        },
      });
      return name;
    }
    await custom.createNamespacedCustomObject({
      group: opts.group,
      version: chain.VERSION,
      namespace,
      plural: 'appstacks',
      body: {
        apiVersion: `${opts.group}/${chain.VERSION}`,
        kind: 'AppStack',
        metadata: { name },
        spec: { replicas: opts.replicas, image: 'registry.k8s.io/pause:3.10' },
      },
    });
    // The chain controller's naming: AppStack x → AppTier x-tier → Deployment x-tier-app (label app).
    return `${name}-tier-app`;
  };

  try {
    for (let round = 0; round < opts.rounds; round++) {
      const order: ChartKind[] = round % 2 === 0 ? ['plain', 'chain'] : ['chain', 'plain'];
      for (const kind of order) {
        const namespace = opts.namespaces[kind];
        const before = await snapshot(kc, opts.webhookMetricsUrl);
        const t0 = process.hrtime.bigint();
        const app = await createTop(kind, `${kind}-r${round}`);
        await waitFor(
          `${opts.replicas} Pods of ${kind} app ${app} in ${namespace}`,
          async (observe) => {
            const pods = await core.listNamespacedPod({ namespace, labelSelector: `app=${app}` });
            observe(`${pods.items.length} Pods; controller errors: ${controller.errors.join('; ')}`);
            return pods.items.length >= opts.replicas;
          },
          { timeoutMs: 120_000, intervalMs: 100 },
        );
        ready[kind].push(Number(process.hrtime.bigint() - t0) / 1e9);
        // The API server's metrics are updated as each call returns; the Pods exist by now.
        const after = await snapshot(kc, opts.webhookMetricsUrl);
        addBuckets(histos[kind], bucketDelta(before.webhook, after.webhook));
        api[kind].sum += after.apiSum - before.apiSum;
        api[kind].count += after.apiCount - before.apiCount;
        apiPerRound[kind].push(
          ((after.apiSum - before.apiSum) / (after.apiCount - before.apiCount || Number.NaN)) * 1000,
        );
        if (round === 0) ownerChain[kind] = await describeOwnerChain(kc, namespace, app, opts.group);
      }
      log(`  chart complexity: round ${round + 1}/${opts.rounds} done`);
    }
  } finally {
    await controller.stop();
  }

  const kinds: ChartKindStats[] = (['plain', 'chain'] as const).map((kind) => {
    const fromLog = webhookLogDurations(opts.webhookLogPath, opts.namespaces[kind]).map((x) => x.ms);
    return {
      kind,
      pods: fromLog.length,
      webhookLogMs: percentiles(fromLog),
      webhookHistogramP50Ms: histogramQuantile(histos[kind], 0.5) * 1000,
      webhookHistogramP99Ms: histogramQuantile(histos[kind], 0.99) * 1000,
      webhookHistogramCount: histogramCount(histos[kind]),
      apiServerCallMeanMs: api[kind].count > 0 ? (api[kind].sum / api[kind].count) * 1000 : Number.NaN,
      apiServerCalls: api[kind].count,
      podsReadySeconds: summarize(ready[kind]),
    };
  });
  const [plain, chainStats] = kinds as [ChartKindStats, ChartKindStats];
  const perRound = (kind: ChartKind): Percentiles[] => {
    const all = webhookLogDurations(opts.webhookLogPath, opts.namespaces[kind]);
    return Array.from({ length: opts.rounds }, (_, r) =>
      percentiles(all.filter((x) => x.round === r).map((x) => x.ms)),
    );
  };
  const [pr, cr] = [perRound('plain'), perRound('chain')];
  const roundRatio = (f: (i: number) => number): Summary => summarize(pr.map((_, i) => f(i)));
  return {
    roundRatioP50: roundRatio((i) => (cr[i]?.p50 ?? Number.NaN) / (pr[i]?.p50 ?? Number.NaN)),
    roundRatioP99: roundRatio((i) => (cr[i]?.p99 ?? Number.NaN) / (pr[i]?.p99 ?? Number.NaN)),
    roundRatioApiServerMean: roundRatio(
      (i) => (apiPerRound.chain[i] ?? Number.NaN) / (apiPerRound.plain[i] ?? Number.NaN),
    ),
    replicas: opts.replicas,
    rounds: opts.rounds,
    ownerChain,
    kinds,
    ratioP50: chainStats.webhookLogMs.p50 / plain.webhookLogMs.p50,
    ratioP99: chainStats.webhookLogMs.p99 / plain.webhookLogMs.p99,
    ratioApiServerMean: chainStats.apiServerCallMeanMs / plain.apiServerCallMeanMs,
    controllerErrors: [...controller.errors],
  };
}

/** "Pod → ReplicaSet → Deployment → …" as the API server records it, for one Pod of `app`. */
async function describeOwnerChain(kc: KubeConfig, namespace: string, app: string, group: string): Promise<string> {
  const core = kc.makeApiClient(CoreV1Api);
  const apps = kc.makeApiClient(AppsV1Api);
  const custom = kc.makeApiClient(CustomObjectsApi);
  const pod = (await core.listNamespacedPod({ namespace, labelSelector: `app=${app}` })).items[0];
  const chainKinds: string[] = ['Pod'];
  let owner = pod?.metadata?.ownerReferences?.find((r) => r.controller);
  for (let depth = 0; owner && depth < 6; depth++) {
    chainKinds.push(owner.kind);
    const name = owner.name;
    let next: { metadata?: { ownerReferences?: V1OwnerReference[] } } | undefined;
    if (owner.kind === 'ReplicaSet') next = await apps.readNamespacedReplicaSet({ name, namespace });
    else if (owner.kind === 'Deployment') next = await apps.readNamespacedDeployment({ name, namespace });
    else {
      const plural = `${owner.kind.toLowerCase()}s`;
      const version = owner.apiVersion.split('/')[1] ?? 'v1';
      next = (await custom.getNamespacedCustomObject({ group, version, namespace, plural, name })) as typeof next;
    }
    owner = next?.metadata?.ownerReferences?.find((r) => r.controller);
  }
  return chainKinds.join(' → ');
}
