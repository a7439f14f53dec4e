/**
 * Benchmark 2: the webhook's HTTPS server alone. The real built binary
 * (services/webhook/dist/main.js, started by the e2e harness with its production flags and log
 * level) whose cache its real Namespace informer filled from the real API server before the load
 * starts; autocannon POSTs AdmissionReviews for an isolated namespace over keep-alive TLS
 * connections at fixed concurrency. The server under test is pinned to CPU 0 and this process
 * (the load generator) to the other CPU, so the server has exactly one core. The reference
 * webhook (reference-webhook.ts) runs the same way in the same rounds, for a same-run ratio.
 */
import { type LoadResult, runLoad } from './load.js';
import { admissionReview, makePod } from './pods.js';
import { type Summary, summarize } from './stats.js';

export interface LoadTarget {
  /**
   * `webhook`: the real built webhook; `reference`: bare node:https (reference-webhook.ts);
   * `express` / `direct`: the webhook's own route inside its express app / called by node:https
   * itself (dispatch-webhook.ts), to show what express's dispatch costs; `express-node-messages`:
   * the express app on node:http's own request and response classes (what the message classes of
   * http/express-messages.ts save).
   */
  name: 'webhook' | 'reference' | 'express' | 'express-node-messages' | 'direct';
  url: string;
  pid: number;
  containerCounts: readonly number[];
}

export interface WebhookLoadOptions {
  namespace: string;
  targets: readonly LoadTarget[];
  rounds: number;
  durationSeconds: number;
  connections: number;
  /** Pins `pid` to CPU 0 and this process to CPU 1; the returned function undoes it. */
  pin: (pid: number) => () => void;
}

export interface WebhookLoadCase {
  target: LoadTarget['name'];
  containers: number;
  bodyBytes: number;
  rps: Summary;
  perCpuSecond: Summary;
  p50: Summary;
  p99: Summary;
  p999: Summary;
  requests: number;
  failures: number;
}

export interface WebhookLoadResult {
  cases: WebhookLoadCase[];
  /** webhook ÷ reference, 1-container Pods, per round. */
  ratioRps?: Summary;
  ratioPerCpuSecond?: Summary;
  ratioP50?: Summary;
  ratioP99?: Summary;
  /** direct ÷ express admissions per CPU-second, 1-container Pods, per round: what express's dispatch costs. */
  ratioDirectPerCpuSecond?: Summary;
  /** direct ÷ reference admissions per CPU-second, per round: the webhook's route without express's dispatch. */
  ratioDirectToReference?: Summary;
  /** express ÷ express-node-messages admissions per CPU-second, per round: what born-express messages save. */
  ratioMessageClasses?: Summary;
}

export function reviewBody(containers: number, namespace: string): string {
  return JSON.stringify(admissionReview(makePod({ containers, tolerations: 0 }), namespace));
}

export async function runWebhookLoad(
  opts: WebhookLoadOptions,
  log: (line: string) => void,
): Promise<WebhookLoadResult> {
  const sizes = [...new Set(opts.targets.flatMap((t) => t.containerCounts))];
  const bodies = new Map(sizes.map((c) => [c, reviewBody(c, opts.namespace)]));
  // Sanity: both servers patch these Pods (a fail-open answer would be cheaper and meaningless).
  for (const t of opts.targets) {
    for (const c of t.containerCounts) {
      const res = await postInsecure(t.url, bodies.get(c) as string);
      if (!res.includes('"patch"'))
        throw new Error(`${t.name} did not patch a ${c}-container Pod: ${res.slice(0, 300)}`);
    }
  }
  const runs = new Map<string, LoadResult[]>();
  const key = (t: string, c: number): string => `${t}/${c}`;
  const one = async (t: LoadTarget, c: number, seconds: number, record: boolean): Promise<void> => {
    const unpin = opts.pin(t.pid);
    try {
      const r = await runLoad({
        url: t.url,
        bodies: [bodies.get(c) as string],
        connections: opts.connections,
        durationSeconds: seconds,
        serverPid: t.pid,
      });
      if (record) runs.set(key(t.name, c), [...(runs.get(key(t.name, c)) ?? []), r]);
    } finally {
      unpin();
    }
  };
  // Warm-up (JIT, TLS sessions, connection pool), discarded.
  for (const t of opts.targets) for (const c of t.containerCounts) await one(t, c, 2, false);
  const plan = opts.targets.flatMap((t) => t.containerCounts.map((c) => ({ t, c })));
  for (let round = 0; round < opts.rounds; round++) {
    const order = plan.map((_, i) => plan[(i + round) % plan.length] as (typeof plan)[number]);
    for (const { t, c } of order) await one(t, c, opts.durationSeconds, true);
    log(`  webhook server: round ${round + 1}/${opts.rounds} done`);
  }
  const cases = plan.map(({ t, c }) => {
    const list = runs.get(key(t.name, c)) ?? [];
    return {
      target: t.name,
      containers: c,
      bodyBytes: Buffer.byteLength(bodies.get(c) as string),
      rps: summarize(list.map((r) => r.rps)),
      perCpuSecond: summarize(list.map((r) => r.perCpuSecond ?? Number.NaN)),
      p50: summarize(list.map((r) => r.latencyMs.p50)),
      p99: summarize(list.map((r) => r.latencyMs.p99)),
      p999: summarize(list.map((r) => r.latencyMs.p999)),
      requests: list.reduce((s, r) => s + r.requests, 0),
      failures: list.reduce((s, r) => s + r.errors + r.non2xx + r.timeouts, 0),
    };
  });
  const paired = (a: LoadTarget['name'], b: LoadTarget['name'], f: (r: LoadResult) => number): Summary | undefined => {
    const x = runs.get(key(a, 1));
    const y = runs.get(key(b, 1));
    return x && y && x.length === y.length ? summarize(x.map((r, i) => f(r) / f(y[i] as LoadResult))) : undefined;
  };
  const ratio = (f: (r: LoadResult) => number): Summary | undefined => paired('webhook', 'reference', f);
  const perCpu = (r: LoadResult): number => r.perCpuSecond ?? Number.NaN;
  const out: WebhookLoadResult = {
    cases,
    ratioRps: ratio((r) => r.rps),
    ratioPerCpuSecond: ratio(perCpu),
    ratioP50: ratio((r) => r.latencyMs.p50),
    ratioP99: ratio((r) => r.latencyMs.p99),
  };
  const direct = paired('direct', 'express', perCpu);
  if (direct) out.ratioDirectPerCpuSecond = direct;
  const directRef = paired('direct', 'reference', perCpu);
  if (directRef) out.ratioDirectToReference = directRef;
  const messages = paired('express', 'express-node-messages', perCpu);
  if (messages) out.ratioMessageClasses = messages;
  return out;
}

/** One POST, certificate not verified (as autocannon does; our own server on loopback). */
export async function postInsecure(url: string, body: string): Promise<string> {
  const { request } = await import('node:https');
  return new Promise((resolve, reject) => {
    const req = request(
      url,
      { method: 'POST', rejectUnauthorized: false, headers: { 'content-type': 'application/json' } },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}
