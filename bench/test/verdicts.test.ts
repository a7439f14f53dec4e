import { describe, expect, test } from '@jest/globals';
import type { RatioStats } from '../src/pod-create.js';
import type { Summary } from '../src/stats.js';
import {
  disagreement,
  POLICY_ENGINE_BOUND,
  podCreateVerdicts,
  ratioAtLeast,
  ratioAtMost,
  type Verdict,
  verdictCell,
  verdictTable,
  WEBHOOK_HOP_BOUND,
  WEBHOOK_RSS_AFTER_LOAD_MIB,
  webhookAloneVerdicts,
  webhookRssVerdict,
} from '../src/verdicts.js';

const s = (median: number, min = median, max = median): Summary => ({ median, min, max, n: 5 });
const basis = { basis: 'x ÷ y', why: 'y is the least that does the job.' };

/** §3 ratios of one concurrency: every field `one`, with the c/d and e/f ratios given. */
function ratios(concurrency: number, cd: [Summary, Summary], ef?: [Summary, Summary]): RatioStats {
  const one = s(1);
  return {
    concurrency,
    caP50: s(1.4),
    caP99: s(1.5),
    cbP50: one,
    cbP99: one,
    baP50: one,
    baP99: one,
    cdP50: cd[0],
    cdP99: cd[1],
    daP50: one,
    daP99: one,
    ebP50: s(1.47),
    ebP99: s(2.25),
    eaP50: s(1.46),
    eaP99: s(3.03),
    ...(ef && { fbP50: one, fbP99: one, efP50: ef[0], efP99: ef[1] }),
    addedP50Ms: s(1.01),
    addedP99Ms: s(1.87),
  };
}

describe('ratioAtMost / ratioAtLeast', () => {
  test('a ratio is met on its median, at the bound inclusive, and missed just over it', () => {
    expect(ratioAtMost('t', basis, s(1.05), 1.05).met).toBe(true);
    expect(ratioAtMost('t', basis, s(1.0501), 1.05).met).toBe(false);
    expect(ratioAtMost('t', basis, s(1.2), 1.1).detail).toBe('by 0.1');
    expect(ratioAtLeast('t', basis, s(0.7), 0.7).met).toBe(true);
    expect(ratioAtLeast('t', basis, s(0.69), 0.7)).toMatchObject({ met: false, detail: 'short by 0.01' });
  });

  test('rounds whose range spans the bound are flagged, a range on one side is not', () => {
    expect(ratioAtMost('t', basis, s(1.0, 0.9, 1.2), 1.05).noisy).toMatch(/rounds disagree/);
    expect(ratioAtMost('t', basis, s(1.0, 0.9, 1.04), 1.05).noisy).toBeUndefined();
    expect(ratioAtLeast('t', basis, s(0.8, 0.6, 0.9), 0.7).noisy).toMatch(/rounds disagree/);
    expect(disagreement(s(1, 1.06, 1.2), 1.05)).toBeUndefined();
  });

  test('no ratio, or not a number, is not measured — never met', () => {
    for (const v of [ratioAtMost('t', basis, undefined, 1.05), ratioAtLeast('t', basis, s(Number.NaN), 0.7)]) {
      expect(v.met).toBeUndefined();
      expect(verdictCell(v)).toBe('**not measured**');
    }
  });
});

describe('§3: the webhook hop against the reference webhook, the policy engine against the least policy', () => {
  const x1 = ratios(1, [s(0.96, 0.7, 1.42), s(1.08, 0.9, 1.3)], [s(1.09), s(1.2)]);
  const x32 = ratios(32, [s(1.04), s(0.97)]);
  const verdicts = podCreateVerdicts([x1, x32]);
  const find = (prefix: string) => verdicts.filter((v) => v.target.startsWith(prefix));

  test('c/d ≤ 1.05 at p50 and p99 for every concurrency, judged on c/d alone', () => {
    const hop = find('webhook hop');
    expect(hop.map((v) => v.target)).toEqual([
      `webhook hop: c/d ≤ ${WEBHOOK_HOP_BOUND} at p50 (1 client)`,
      `webhook hop: c/d ≤ ${WEBHOOK_HOP_BOUND} at p99 (1 client)`,
      `webhook hop: c/d ≤ ${WEBHOOK_HOP_BOUND} at p50 (32 clients)`,
      `webhook hop: c/d ≤ ${WEBHOOK_HOP_BOUND} at p99 (32 clients)`,
    ]);
    expect(hop.map((v) => v.met)).toEqual([true, false, true, true]);
    // c/a is 1.4 and c − a 1 ms: reported, but they do not decide.
    expect(hop[0]?.measured).toContain('c/a 1.4×');
    expect(hop[0]?.measured).toContain('not judged');
  });

  test('e/f ≤ 1.10 where setup f was measured; e/b is a figure, not a verdict', () => {
    const engine = find('policy engine');
    expect(engine.map((v) => [v.target, v.met])).toEqual([
      [`policy engine: e/f ≤ ${POLICY_ENGINE_BOUND} at p50 (1 client)`, true],
      [`policy engine: e/f ≤ ${POLICY_ENGINE_BOUND} at p99 (1 client)`, false],
    ]);
    expect(engine[0]?.measured).toContain('e/b 1.47×');
    expect(verdicts.some((v) => v.target.includes('e/b'))).toBe(false);
    expect(verdicts.some((v) => /adds ≤ \d ms/.test(v.target))).toBe(false);
  });

  test('every verdict says what it compares and why that is the floor', () => {
    for (const v of verdicts) {
      expect(v.basis).toMatch(/÷/);
      expect(v.why).toMatch(/is the floor/);
    }
  });
});

describe('§2: the webhook alone against the reference', () => {
  test('per CPU-second ≥ 0.70×, p50 and p99 ≤ 1.3× the reference, same rounds', () => {
    const [cpu, p50, p99] = webhookAloneVerdicts({
      cases: [],
      ratioRps: s(0.7),
      ratioPerCpuSecond: s(0.72),
      ratioP50: s(1.31),
      ratioP99: s(1.1),
    });
    expect([cpu?.met, p50?.met, p99?.met]).toEqual([true, false, true]);
    expect(cpu?.measured).toContain('admissions/s 0.7×');
  });

  test('results without the latency ratios (older runs) leave those not measured', () => {
    const v = webhookAloneVerdicts({ cases: [], ratioRps: s(0.4), ratioPerCpuSecond: s(0.43) });
    expect(v.map((x) => x.met)).toEqual([false, undefined, undefined]);
  });
});

describe('§2: the webhook RSS after load against 96 MiB, with the reference as the floor', () => {
  test('met at or under the bound, missed above it, by how much', () => {
    expect(WEBHOOK_RSS_AFTER_LOAD_MIB).toBe(96);
    expect(webhookRssVerdict(96, undefined)).toMatchObject({ met: true, detail: '0.0 MiB under the bound' });
    expect(webhookRssVerdict(110.25, undefined)).toMatchObject({
      met: false,
      detail: 'by 14.3 MiB',
      measured: '110.3 MiB',
    });
  });

  test("names the reference's figure and whether even it is within the bound", () => {
    const v = webhookRssVerdict(112, 101.5);
    expect(v.met).toBe(false);
    expect(v.measured).toBe(
      '112.0 MiB; the reference webhook after the same load 101.5 MiB (over the bound), the webhook 10.5 MiB above it',
    );
    expect(webhookRssVerdict(94, 90).measured).toContain('90.0 MiB (within the bound), the webhook 4.0 MiB above it');
    expect(webhookRssVerdict(113.1, 124.9).measured).toContain(
      '124.9 MiB (over the bound), the webhook 11.8 MiB below it',
    );
  });
});

describe('verdictTable', () => {
  test('a row per verdict; each distinct reason written once below, numbered, the basis pointing to it', () => {
    const v = (target: string, why?: string): Verdict => ({
      target,
      basis: 'a | b',
      ...(why && { why }),
      measured: '1×',
      met: true,
      detail: 'ok',
    });
    const lines = verdictTable([
      v('one', 'first reason.'),
      v('two'),
      v('three', 'second reason.'),
      v('four', 'first reason.'),
    ]);
    expect(lines.slice(2, 6)).toEqual([
      '| one | a \\| b [1] | 1× | **met** (ok) |',
      '| two | a \\| b | 1× | **met** (ok) |',
      '| three | a \\| b [2] | 1× | **met** (ok) |',
      '| four | a \\| b [1] | 1× | **met** (ok) |',
    ]);
    expect(lines.slice(-2)).toEqual(['1. first reason.', '2. second reason.']);
  });
});
