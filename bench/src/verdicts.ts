/**
 * The report's verdicts: a target, what was measured, whether the target was met. Pure.
 *
 * A latency target is judged as a same-run ratio against the floor of what is judged — the least
 * that does the same job in the same setting, measured side by side in the same rounds — never
 * as an absolute "+N ms": an absolute bound says as much about the machine and its other load as
 * about the code, and neither this webhook nor the bare reference could meet the one it had. The
 * ratios to the setups without any hop (c/a, e/b) stay in the report as figures, not verdicts:
 * no webhook and no policy can reach them, so as targets they only measured the platform.
 */
import type { RatioStats } from './pod-create.js';
import type { Summary } from './stats.js';
import type { WebhookLoadResult } from './webhook-bench.js';

export interface Verdict {
  target: string;
  /** What the target compares (or where an absolute bound comes from), in a few words. */
  basis: string;
  /** Why that is the floor: written once below the table, the basis pointing to it. */
  why?: string;
  measured: string;
  /** undefined: not measured. */
  met: boolean | undefined;
  detail: string;
  noisy?: string;
}

/** Significant-digit formatting for ratios. */
function sig(n: number | undefined, digits = 3): string {
  if (n === undefined || !Number.isFinite(n)) return 'n/a';
  const abs = Math.abs(n);
  if (abs >= 1000) return Math.round(n).toLocaleString('en-US');
  return Number(n.toPrecision(digits)).toString();
}

function spread(s: Summary): string {
  return `${sig(s.median)}× (${sig(s.min)}–${sig(s.max)})`;
}

/** When the rounds' own min–max straddles the limit, the median's verdict is not one every round agrees with. */
export function disagreement(s: Summary, limit: number): string | undefined {
  return s.min <= limit && s.max > limit ? 'rounds disagree: the per-round range spans the target' : undefined;
}

/** The verdict column: met / missed with its detail, or not measured. */
export function verdictCell(v: Verdict): string {
  if (v.met === undefined) return '**not measured**';
  const noisy = v.noisy ? `; ${v.noisy}` : '';
  return v.met ? `**met** (${v.detail}${noisy})` : `**missed** (${v.detail}${noisy})`;
}

/** The Verdicts table, then each distinct `why` once, numbered, the basis cells pointing to theirs. */
export function verdictTable(verdicts: readonly Verdict[]): string[] {
  const cell = (s: string): string => s.replaceAll('|', '\\|');
  const notes: string[] = [];
  const note = (why: string | undefined): string => {
    if (why === undefined) return '';
    if (!notes.includes(why)) notes.push(why);
    return ` [${notes.indexOf(why) + 1}]`;
  };
  const rows = verdicts.map(
    (v) => `| ${cell(v.target)} | ${cell(v.basis)}${note(v.why)} | ${cell(v.measured)} | ${verdictCell(v)} |`,
  );
  return [
    '| target | compares (the floor) | measured | verdict |',
    '| --- | --- | --- | --- |',
    ...rows,
    ...(notes.length > 0 ? ['', 'Why each floor is one:', '', ...notes.map((n, i) => `${i + 1}. ${n}`)] : []),
  ];
}

/**
 * `ratio` (median over rounds of same-round ratios) at most `limit`: met on the median; the
 * detail says by how much; `noisy` when the rounds' range spans the limit.
 */
export function ratioAtMost(
  target: string,
  basis: Pick<Verdict, 'basis' | 'why'>,
  ratio: Summary | undefined,
  limit: number,
  figures = '',
): Verdict {
  if (ratio === undefined || !Number.isFinite(ratio.median)) {
    return { target, ...basis, measured: 'n/a', met: undefined, detail: '' };
  }
  const met = ratio.median <= limit;
  return {
    target,
    ...basis,
    measured: `${spread(ratio)}${figures ? `; ${figures}` : ''}`,
    met,
    noisy: disagreement(ratio, limit),
    detail: met ? `${sig(limit - ratio.median)} under the bound` : `by ${sig(ratio.median - limit)}`,
  };
}

/** `ratio` at least `limit` (a throughput share). */
export function ratioAtLeast(
  target: string,
  basis: Pick<Verdict, 'basis' | 'why'>,
  ratio: Summary | undefined,
  limit: number,
  figures = '',
): Verdict {
  if (ratio === undefined || !Number.isFinite(ratio.median)) {
    return { target, ...basis, measured: 'n/a', met: undefined, detail: '' };
  }
  const met = ratio.median >= limit;
  return {
    target,
    ...basis,
    measured: `${spread(ratio)}${figures ? `; ${figures}` : ''}`,
    met,
    noisy:
      ratio.min < limit && ratio.max >= limit ? 'rounds disagree: the per-round range spans the target' : undefined,
    detail: met ? `${sig(ratio.median - limit)} over the bound` : `short by ${sig(limit - ratio.median)}`,
  };
}

/** The webhook hop (c) against the bare reference webhook (d): at most this much slower. */
export const WEBHOOK_HOP_BOUND = 1.05;
/** The policy engine (e) against the least MutatingAdmissionPolicy (f): at most this much slower. */
export const POLICY_ENGINE_BOUND = 1.1;
/** The webhook alone: at least this share of the reference's admissions per CPU-second (1-container Pods). */
export const WEBHOOK_CPU_SHARE = 0.7;
/** The webhook alone: p50 and p99 at most this multiple of the reference's. */
export const WEBHOOK_LATENCY_BOUND = 1.3;

const WEBHOOK_HOP_BASIS = {
  basis: 'c ÷ d: this webhook ÷ the bare reference webhook, §3, same rounds',
  why:
    'The webhook hop: this webhook (c) against the bare reference webhook (d), registered with the same entry and measured in the same rounds: ' +
    "the API server's call of any webhook — encoding the review, the HTTPS round trip, decoding and applying the patch — is " +
    'in both, so what remains is what services/webhook adds; no webhook answers faster than one that only parses and patches, so d is the floor of c.',
};

const POLICY_ENGINE_BASIS = {
  basis: 'e ÷ f: the policy engine ÷ the least MutatingAdmissionPolicy, §3, same rounds',
  why:
    'The policy engine (e) against the least MutatingAdmissionPolicy (f: no parameter, no variable, one constant patch), ' +
    'same rounds: what any policy costs in this API server (matching the policy and its binding, running a mutation, ' +
    "applying its patch) is in both, so what remains is the engine's own CEL (parameter lookup, variables); no policy " +
    'costs less than f, so f is the floor of e.',
};

function clients(n: number): string {
  return `${n} client${n === 1 ? '' : 's'}`;
}

/** §3's verdicts: c/d ≤ 1.05 and e/f ≤ 1.10 at p50 and p99, per concurrency; c/a and e/b as figures. */
export function podCreateVerdicts(ratios: readonly RatioStats[]): Verdict[] {
  const out: Verdict[] = [];
  for (const x of ratios) {
    for (const q of ['p50', 'p99'] as const) {
      const cd = q === 'p50' ? x.cdP50 : x.cdP99;
      const ca = q === 'p50' ? x.caP50 : x.caP99;
      const added = q === 'p50' ? x.addedP50Ms : x.addedP99Ms;
      out.push(
        ratioAtMost(
          `webhook hop: c/d ≤ ${WEBHOOK_HOP_BOUND} at ${q} (${clients(x.concurrency)})`,
          WEBHOOK_HOP_BASIS,
          cd,
          WEBHOOK_HOP_BOUND,
          `for reference, not judged: c/a ${sig(ca.median)}×, c − a ${sig(added.median)} ms`,
        ),
      );
    }
  }
  for (const x of ratios) {
    for (const q of ['p50', 'p99'] as const) {
      const ef = q === 'p50' ? x.efP50 : x.efP99;
      if (ef === undefined) continue; // results from before setup f
      const eb = q === 'p50' ? x.ebP50 : x.ebP99;
      const ea = q === 'p50' ? x.eaP50 : x.eaP99;
      out.push(
        ratioAtMost(
          `policy engine: e/f ≤ ${POLICY_ENGINE_BOUND} at ${q} (${clients(x.concurrency)})`,
          POLICY_ENGINE_BASIS,
          ef,
          POLICY_ENGINE_BOUND,
          `for reference, not judged: e/b ${sig(eb.median)}×, e/a ${sig(ea.median)}×`,
        ),
      );
    }
  }
  return out;
}

const WEBHOOK_ALONE_BASIS = {
  basis: 'webhook ÷ the reference webhook, §2, same rounds, same pinned core',
  why:
    'The webhook process alone against the reference webhook (bench/src/reference-webhook.ts: bare node:https, JSON.parse, ' +
    'the same patch; no framework, log, metrics or validation), same rounds, same pinned core, 1-container reviews: the TLS, ' +
    'HTTP and JSON work any Node.js webhook does is in both, so the ratio is what express, validation, the log line and ' +
    'the metrics cost; no Node.js webhook does less per review, so the reference is the floor.',
};

/** §2's verdicts: per CPU-second ≥ 0.70× the reference's, p50 and p99 ≤ 1.3× (same-round ratios). */
export function webhookAloneVerdicts(w: WebhookLoadResult): Verdict[] {
  return [
    ratioAtLeast(
      `webhook alone: admissions per CPU-second ≥ ${WEBHOOK_CPU_SHARE}× the reference's`,
      WEBHOOK_ALONE_BASIS,
      w.ratioPerCpuSecond,
      WEBHOOK_CPU_SHARE,
      w.ratioRps ? `admissions/s ${spread(w.ratioRps)}` : '',
    ),
    ratioAtMost(
      `webhook alone: p50 ≤ ${WEBHOOK_LATENCY_BOUND}× the reference's`,
      WEBHOOK_ALONE_BASIS,
      w.ratioP50,
      WEBHOOK_LATENCY_BOUND,
    ),
    ratioAtMost(
      `webhook alone: p99 ≤ ${WEBHOOK_LATENCY_BOUND}× the reference's`,
      WEBHOOK_ALONE_BASIS,
      w.ratioP99,
      WEBHOOK_LATENCY_BOUND,
    ),
  ];
}

function mib(n: number): string {
  return n.toFixed(1);
}

/** Issue 24's memory target: the webhook's RSS right after the §2 load, with the image's NODE_OPTIONS. */
export const WEBHOOK_RSS_AFTER_LOAD_MIB = 96;

/**
 * The webhook's RSS after the §2 load against WEBHOOK_RSS_AFTER_LOAD_MIB (absolute, from the
 * issue), with the reference webhook's after the same load — run with the same settings — as the
 * figure that says whether any Node.js webhook could meet it here.
 */
export function webhookRssVerdict(afterLoadMiB: number, referenceAfterLoadMiB: number | undefined): Verdict {
  const bound = WEBHOOK_RSS_AFTER_LOAD_MIB;
  const met = afterLoadMiB <= bound;
  const floor =
    referenceAfterLoadMiB === undefined
      ? ''
      : `; the reference webhook after the same load ${mib(referenceAfterLoadMiB)} MiB (${referenceAfterLoadMiB <= bound ? 'within' : 'over'} the bound), the webhook ${mib(Math.abs(afterLoadMiB - referenceAfterLoadMiB))} MiB ${afterLoadMiB > referenceAfterLoadMiB ? 'above' : 'below'} it`;
  return {
    target: `webhook RSS after the §2 load ≤ ${bound} MiB (image's NODE_OPTIONS)`,
    basis: 'absolute, from issue 24 (not a floor); the reference webhook with the same settings is shown as the floor',
    measured: `${mib(afterLoadMiB)} MiB${floor}`,
    met,
    detail: met ? `${mib(bound - afterLoadMiB)} MiB under the bound` : `by ${mib(afterLoadMiB - bound)} MiB`,
  };
}
