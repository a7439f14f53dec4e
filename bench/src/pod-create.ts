/**
 * Benchmark 3: Pod CREATE latency through the real kube-apiserver, three setups side by side on
 * one control plane (started with PodNodeSelector + PodTolerationRestriction):
 *   a  plain namespace: no webhook call (namespaceSelector does not match), the plugins find no
 *      annotation — the baseline;
 *   b  namespace annotated for PodNodeSelector + PodTolerationRestriction: the same placement done
 *      in process by the API server itself, the zero-network-hop floor;
 *   c  namespace labeled + annotated for this webhook: the API server calls it over HTTPS;
 *   d  namespace labeled for the reference webhook (reference-webhook.ts: the least a Node.js
 *      webhook can do for the same patch), registered the same way: what any webhook costs;
 *   e  namespace governed by the chart's node-isolation MutatingAdmissionPolicy (the
 *      admission-policy engine) with its NodeIsolation parameter: the same patch in CEL, in process;
 *   f  namespace governed by the least MutatingAdmissionPolicy there is: no parameter, no variable,
 *      one constant JSON patch (reinvocation Never): what any such policy costs, the floor of e.
 * Rounds interleave a–f (rotating the order) at each concurrency, so drift and the other
 * engineers' load hit all alike. Pods name a scheduler that does not exist, so no scheduling work
 * competes with the measurement; they stay Pending until the control plane stops (deleting them
 * would cost as long as creating them, and in the background it would disturb what follows).
 */
import { type ApiResponse, forEachConcurrent, type RawApi } from './kube.js';
import { cdfPoints, type Percentiles, percentiles, type Summary, summarize } from './stats.js';

export type Setup = 'a' | 'b' | 'c' | 'd' | 'e' | 'f';
export const SETUPS: readonly Setup[] = ['a', 'b', 'c', 'd', 'e', 'f'];

/** Sum (seconds) and count of the API server's calls to each webhook, by webhook name. */
export type WebhookCallTotals = Record<string, { sum: number; count: number }>;

export interface PodCreateOptions {
  rounds: number;
  /** Creates per block at concurrency 1 and at the high concurrency. */
  serialCreates: number;
  parallelCreates: number;
  concurrency: number;
  namespaces: Record<Setup, string>;
  /** Webhook name the API server calls for setups c and d. */
  webhookNames: Partial<Record<Setup, string>>;
  /** The API server's apiserver_admission_webhook_admission_duration_seconds sum/count by webhook. */
  webhookCalls: () => Promise<WebhookCallTotals>;
}

export interface BlockStats {
  setup: Setup;
  concurrency: number;
  /** All rounds pooled. */
  pooled: Percentiles;
  /** Per-round p50 / p99, summarized over rounds. */
  p50: Summary;
  p99: Summary;
  /** Creates per second (wall time of the block), summarized over rounds. */
  throughput: Summary;
  cdf: { q: number; value: number }[];
  /** Mean duration of the API server's call to the webhook (c, d), from its own metric, ms. */
  apiServerWebhookCallMs?: number;
}

export interface RatioStats {
  concurrency: number;
  /** Per-round ratios and differences (same round, side by side), summarized over rounds. */
  caP50: Summary;
  caP99: Summary;
  cbP50: Summary;
  cbP99: Summary;
  baP50: Summary;
  baP99: Summary;
  cdP50: Summary;
  cdP99: Summary;
  daP50: Summary;
  daP99: Summary;
  /** The policy engine against the in-process plugins (its floor) and against the baseline. */
  ebP50: Summary;
  ebP99: Summary;
  eaP50: Summary;
  eaP99: Summary;
  /** The least MutatingAdmissionPolicy against the plugins, and the policy engine against it (absent before setup f). */
  fbP50?: Summary;
  fbP99?: Summary;
  efP50?: Summary;
  efP99?: Summary;
  /** c − a in ms. */
  addedP50Ms: Summary;
  addedP99Ms: Summary;
}

export interface PodCreateResult {
  blocks: BlockStats[];
  ratios: RatioStats[];
  errors: string[];
}

function podBody(): unknown {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { generateName: 'bench-' },
    spec: {
      // No scheduler has this name: the Pod stays Pending and costs the scheduler nothing.
      schedulerName: 'kubeplus-bench-unscheduled',
      containers: [{ name: 'main', image: 'registry.k8s.io/pause:3.10' }],
    },
  };
}

/**
 * `count` Pod CREATEs, `concurrency` at a time, each timed to its 201; create i goes to
 * `namespaces[i % namespaces.length]` (one namespace, or spread over many).
 */
export async function createPods(
  api: RawApi,
  namespaces: string | readonly string[],
  count: number,
  concurrency: number,
  errors: string[],
): Promise<{ latencies: number[]; seconds: number }> {
  const list = typeof namespaces === 'string' ? [namespaces] : namespaces;
  const latencies: number[] = [];
  const started = process.hrtime.bigint();
  await forEachConcurrent(count, concurrency, async (i) => {
    const path = `/api/v1/namespaces/${list[i % list.length]}/pods`;
    const t0 = process.hrtime.bigint();
    const res: ApiResponse = await api.request('POST', path, podBody());
    const ms = Number(process.hrtime.bigint() - t0) / 1e6;
    if (res.status === 201) latencies.push(ms);
    else if (errors.length < 20) errors.push(`POST ${path}: HTTP ${res.status}: ${res.body.slice(0, 200)}`);
  });
  return { latencies, seconds: Number(process.hrtime.bigint() - started) / 1e9 };
}

export async function runPodCreateBench(
  api: RawApi,
  opts: PodCreateOptions,
  log: (line: string) => void,
): Promise<PodCreateResult> {
  const concurrencies = [1, opts.concurrency];
  const key = (s: Setup, c: number): string => `${s}/${c}`;
  const pooled = new Map<string, number[]>();
  const perRound = new Map<string, Percentiles[]>();
  const rates = new Map<string, number[]>();
  const errors: string[] = [];
  const calls = new Map<string, { sum: number; count: number }>();
  // Round 0 warms every path (connections, the API server's caches, the webhook's JIT) and is discarded.
  for (let round = 0; round <= opts.rounds; round++) {
    const order = SETUPS.map((_, i) => SETUPS[(i + round) % SETUPS.length] as Setup);
    let createSeconds = 0;
    const roundStarted = process.hrtime.bigint();
    for (const c of concurrencies) {
      const count = c === 1 ? opts.serialCreates : opts.parallelCreates;
      // Only c's blocks call c's webhook and only d's call d's: one scrape before and one after
      // the pass attributes the API server's webhook-call totals to them.
      const before = round > 0 ? await opts.webhookCalls() : undefined;
      for (const setup of order) {
        const res = await createPods(api, opts.namespaces[setup], count, c, errors);
        createSeconds += res.seconds;
        if (round === 0) continue;
        const k = key(setup, c);
        pooled.set(k, [...(pooled.get(k) ?? []), ...res.latencies]);
        perRound.set(k, [...(perRound.get(k) ?? []), percentiles(res.latencies)]);
        rates.set(k, [...(rates.get(k) ?? []), res.latencies.length / res.seconds]);
      }
      if (before) {
        const after = await opts.webhookCalls();
        for (const setup of SETUPS) {
          const webhook = opts.webhookNames[setup];
          if (!webhook) continue;
          const k = key(setup, c);
          const acc = calls.get(k) ?? { sum: 0, count: 0 };
          acc.sum += (after[webhook]?.sum ?? 0) - (before[webhook]?.sum ?? 0);
          acc.count += (after[webhook]?.count ?? 0) - (before[webhook]?.count ?? 0);
          calls.set(k, acc);
        }
      }
    }
    const total = Number(process.hrtime.bigint() - roundStarted) / 1e9;
    log(
      `  pod create: ${round === 0 ? 'warm-up round' : `round ${round}/${opts.rounds}`} done (order ${order.join('')}; ` +
        `creating ${createSeconds.toFixed(0)} s, metrics scrapes ${(total - createSeconds).toFixed(0)} s)`,
    );
  }
  const blocks: BlockStats[] = [];
  for (const c of concurrencies) {
    for (const setup of SETUPS) {
      const k = key(setup, c);
      const rounds = perRound.get(k) ?? [];
      blocks.push({
        setup,
        concurrency: c,
        pooled: percentiles(pooled.get(k) ?? []),
        p50: summarize(rounds.map((r) => r.p50)),
        p99: summarize(rounds.map((r) => r.p99)),
        throughput: summarize(rates.get(k) ?? []),
        cdf: cdfPoints(pooled.get(k) ?? []),
        ...(calls.has(k) && {
          apiServerWebhookCallMs: ((calls.get(k)?.sum ?? 0) / (calls.get(k)?.count || Number.NaN)) * 1000,
        }),
      });
    }
  }
  const ratios: RatioStats[] = concurrencies.map((c) => {
    const r = (s: Setup): Percentiles[] => perRound.get(key(s, c)) ?? [];
    const [a, b, cc, d, e, f] = [r('a'), r('b'), r('c'), r('d'), r('e'), r('f')];
    const each = (f: (i: number) => number): Summary => summarize(a.map((_, i) => f(i)));
    const at = (list: Percentiles[], i: number): Percentiles => list[i] as Percentiles;
    return {
      concurrency: c,
      caP50: each((i) => at(cc, i).p50 / at(a, i).p50),
      caP99: each((i) => at(cc, i).p99 / at(a, i).p99),
      cbP50: each((i) => at(cc, i).p50 / at(b, i).p50),
      cbP99: each((i) => at(cc, i).p99 / at(b, i).p99),
      baP50: each((i) => at(b, i).p50 / at(a, i).p50),
      baP99: each((i) => at(b, i).p99 / at(a, i).p99),
      cdP50: each((i) => at(cc, i).p50 / at(d, i).p50),
      cdP99: each((i) => at(cc, i).p99 / at(d, i).p99),
      daP50: each((i) => at(d, i).p50 / at(a, i).p50),
      daP99: each((i) => at(d, i).p99 / at(a, i).p99),
      ebP50: each((i) => at(e, i).p50 / at(b, i).p50),
      ebP99: each((i) => at(e, i).p99 / at(b, i).p99),
      eaP50: each((i) => at(e, i).p50 / at(a, i).p50),
      eaP99: each((i) => at(e, i).p99 / at(a, i).p99),
      fbP50: each((i) => at(f, i).p50 / at(b, i).p50),
      fbP99: each((i) => at(f, i).p99 / at(b, i).p99),
      efP50: each((i) => at(e, i).p50 / at(f, i).p50),
      efP99: each((i) => at(e, i).p99 / at(f, i).p99),
      addedP50Ms: each((i) => at(cc, i).p50 - at(a, i).p50),
      addedP99Ms: each((i) => at(cc, i).p99 - at(a, i).p99),
    };
  });
  return { blocks, ratios, errors };
}
