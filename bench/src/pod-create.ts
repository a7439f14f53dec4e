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

export interface BlockStats<S extends string = Setup> {
  setup: S;
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

/**
 * The Pod every block creates: one pause container, a scheduler that does not exist (so the Pod
 * stays Pending and costs the scheduler nothing), plus `labels` and `runtimeClassName` if given.
 */
export function podBody(extra: { labels?: Record<string, string>; runtimeClassName?: string } = {}): unknown {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { generateName: 'bench-', ...(extra.labels && { labels: extra.labels }) },
    spec: {
      // No scheduler has this name: the Pod stays Pending and costs the scheduler nothing.
      schedulerName: 'kubeplus-bench-unscheduled',
      ...(extra.runtimeClassName !== undefined && { runtimeClassName: extra.runtimeClassName }),
      containers: [{ name: 'main', image: 'registry.k8s.io/pause:3.10' }],
    },
  };
}

/**
 * `count` Pod CREATEs, `concurrency` at a time, each timed to its 201; create i goes to
 * `namespaces[i % namespaces.length]` (one namespace, or spread over many). `body`: the Pod.
 */
export async function createPods(
  api: RawApi,
  namespaces: string | readonly string[],
  count: number,
  concurrency: number,
  errors: string[],
  body: unknown = podBody(),
): Promise<{ latencies: number[]; seconds: number }> {
  const list = typeof namespaces === 'string' ? [namespaces] : namespaces;
  const latencies: number[] = [];
  const started = process.hrtime.bigint();
  await forEachConcurrent(count, concurrency, async (i) => {
    const path = `/api/v1/namespaces/${list[i % list.length]}/pods`;
    const t0 = process.hrtime.bigint();
    const res: ApiResponse = await api.request('POST', path, body);
    const ms = Number(process.hrtime.bigint() - t0) / 1e6;
    if (res.status === 201) latencies.push(ms);
    else if (errors.length < 20) errors.push(`POST ${path}: HTTP ${res.status}: ${res.body.slice(0, 200)}`);
  });
  return { latencies, seconds: Number(process.hrtime.bigint() - started) / 1e9 };
}

/** `setups` rotated by `round`: round r starts with setup r (mod the count). */
export function rotation<S>(setups: readonly S[], round: number): S[] {
  return setups.map((_, i) => setups[(i + round) % setups.length] as S);
}

/**
 * Summary over rounds of a same-round comparison: `f(numerator's round i, denominator's round i)`
 * for every round both measured (e.g. a ratio of p50s, or a difference in ms).
 */
export function perRoundSummary(
  numerator: readonly Percentiles[],
  denominator: readonly Percentiles[],
  f: (n: Percentiles, d: Percentiles) => number,
): Summary {
  const n = Math.min(numerator.length, denominator.length);
  return summarize(Array.from({ length: n }, (_, i) => f(numerator[i] as Percentiles, denominator[i] as Percentiles)));
}

/** Same-round ratio numerator/denominator at `q`, summarized over rounds. */
export function roundRatio(
  numerator: readonly Percentiles[],
  denominator: readonly Percentiles[],
  q: 'p50' | 'p99',
): Summary {
  return perRoundSummary(numerator, denominator, (n, d) => n[q] / d[q]);
}

export interface RoundsOptions<S extends string> {
  /** The setups measured side by side, in the order of round 1 (the order rotates every round). */
  setups: readonly S[];
  rounds: number;
  serialCreates: number;
  parallelCreates: number;
  concurrency: number;
  /** One block: `count` creates for `setup` at `concurrency` clients. */
  block: (setup: S, count: number, concurrency: number) => Promise<{ latencies: number[]; seconds: number }>;
  /**
   * Called before each measured pass (every setup once at one concurrency); the function it
   * returns is called after the pass (e.g. to attribute metric deltas to the pass).
   */
  aroundPass?: (concurrency: number) => Promise<() => Promise<void>>;
  /** The same around each measured block (one setup at one concurrency); `round` counts from 1. */
  aroundBlock?: (setup: S, concurrency: number, round: number) => Promise<() => Promise<void>>;
  /** Log prefix of the per-round lines. */
  name: string;
}

export interface RoundsData<S extends string> {
  concurrencies: number[];
  /** Per-round percentiles of `setup` at `concurrency`, in round order. */
  perRound: (setup: S, concurrency: number) => Percentiles[];
  /** One block per concurrency and setup (concurrency-major), without apiServerWebhookCallMs. */
  blocks: BlockStats<S>[];
}

/**
 * Interleaved rotating rounds at 1 client and at `concurrency` clients: a discarded warm-up round
 * (connections, the API server's caches, any webhook's JIT), then `rounds` rounds, each running
 * every setup's block one after the other at each concurrency, the order rotating per round, so
 * drift and other load on the machine hit every setup alike.
 */
export async function runRounds<S extends string>(
  opts: RoundsOptions<S>,
  log: (line: string) => void,
): Promise<RoundsData<S>> {
  const concurrencies = [1, opts.concurrency];
  const key = (s: S, c: number): string => `${s}/${c}`;
  const pooled = new Map<string, number[]>();
  const perRound = new Map<string, Percentiles[]>();
  const rates = new Map<string, number[]>();
  for (let round = 0; round <= opts.rounds; round++) {
    const order = rotation(opts.setups, round);
    let createSeconds = 0;
    const roundStarted = process.hrtime.bigint();
    for (const c of concurrencies) {
      const count = c === 1 ? opts.serialCreates : opts.parallelCreates;
      const after = round > 0 && opts.aroundPass ? await opts.aroundPass(c) : undefined;
      for (const setup of order) {
        const afterBlock = round > 0 && opts.aroundBlock ? await opts.aroundBlock(setup, c, round) : undefined;
        const res = await opts.block(setup, count, c);
        createSeconds += res.seconds;
        if (afterBlock) await afterBlock();
        if (round === 0) continue;
        const k = key(setup, c);
        pooled.set(k, [...(pooled.get(k) ?? []), ...res.latencies]);
        perRound.set(k, [...(perRound.get(k) ?? []), percentiles(res.latencies)]);
        rates.set(k, [...(rates.get(k) ?? []), res.latencies.length / res.seconds]);
      }
      if (after) await after();
    }
    const total = Number(process.hrtime.bigint() - roundStarted) / 1e9;
    log(
      `  ${opts.name}: ${round === 0 ? 'warm-up round' : `round ${round}/${opts.rounds}`} done (order ${order.join('')}; ` +
        `creating ${createSeconds.toFixed(0)} s, other ${(total - createSeconds).toFixed(0)} s)`,
    );
  }
  const blocks: BlockStats<S>[] = [];
  for (const c of concurrencies) {
    for (const setup of opts.setups) {
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
      });
    }
  }
  return { concurrencies, perRound: (s, c) => perRound.get(key(s, c)) ?? [], blocks };
}

export async function runPodCreateBench(
  api: RawApi,
  opts: PodCreateOptions,
  log: (line: string) => void,
): Promise<PodCreateResult> {
  const errors: string[] = [];
  const calls = new Map<string, { sum: number; count: number }>();
  const data = await runRounds(
    {
      setups: SETUPS,
      rounds: opts.rounds,
      serialCreates: opts.serialCreates,
      parallelCreates: opts.parallelCreates,
      concurrency: opts.concurrency,
      block: (setup, count, c) => createPods(api, opts.namespaces[setup], count, c, errors),
      // Only c's blocks call c's webhook and only d's call d's: one scrape before and one after
      // the pass attributes the API server's webhook-call totals to them.
      aroundPass: async (c) => {
        const before = await opts.webhookCalls();
        return async () => {
          const after = await opts.webhookCalls();
          for (const setup of SETUPS) {
            const webhook = opts.webhookNames[setup];
            if (!webhook) continue;
            const k = `${setup}/${c}`;
            const acc = calls.get(k) ?? { sum: 0, count: 0 };
            acc.sum += (after[webhook]?.sum ?? 0) - (before[webhook]?.sum ?? 0);
            acc.count += (after[webhook]?.count ?? 0) - (before[webhook]?.count ?? 0);
            calls.set(k, acc);
          }
        };
      },
      name: 'pod create',
    },
    log,
  );
  const blocks: BlockStats[] = data.blocks.map((b) => {
    const call = calls.get(`${b.setup}/${b.concurrency}`);
    return call ? { ...b, apiServerWebhookCallMs: (call.sum / (call.count || Number.NaN)) * 1000 } : b;
  });
  const ratios: RatioStats[] = data.concurrencies.map((c) => {
    const r = (s: Setup): Percentiles[] => data.perRound(s, c);
    const [a, b, cc, d, e, f] = [r('a'), r('b'), r('c'), r('d'), r('e'), r('f')];
    return {
      concurrency: c,
      caP50: roundRatio(cc, a, 'p50'),
      caP99: roundRatio(cc, a, 'p99'),
      cbP50: roundRatio(cc, b, 'p50'),
      cbP99: roundRatio(cc, b, 'p99'),
      baP50: roundRatio(b, a, 'p50'),
      baP99: roundRatio(b, a, 'p99'),
      cdP50: roundRatio(cc, d, 'p50'),
      cdP99: roundRatio(cc, d, 'p99'),
      daP50: roundRatio(d, a, 'p50'),
      daP99: roundRatio(d, a, 'p99'),
      ebP50: roundRatio(e, b, 'p50'),
      ebP99: roundRatio(e, b, 'p99'),
      eaP50: roundRatio(e, a, 'p50'),
      eaP99: roundRatio(e, a, 'p99'),
      fbP50: roundRatio(f, b, 'p50'),
      fbP99: roundRatio(f, b, 'p99'),
      efP50: roundRatio(e, f, 'p50'),
      efP99: roundRatio(e, f, 'p99'),
      addedP50Ms: perRoundSummary(cc, a, (x, y) => x.p50 - y.p50),
      addedP99Ms: perRoundSummary(cc, a, (x, y) => x.p99 - y.p99),
    };
  });
  return { blocks, ratios, errors };
}
