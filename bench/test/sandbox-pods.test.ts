import { describe, expect, test } from '@jest/globals';
import { SANDBOX_POD_CONDITION } from '@kubeplus-isolation/operator/dist/desired/sandbox-policy.js';
import { perRoundSummary, rotation, roundRatio } from '../src/pod-create.js';
import { blockTable, renderReport, sandboxPodsSection } from '../src/report.js';
import { type BenchResults, mergeResults } from '../src/results.js';
import {
  ADOPTABLE_LABEL,
  benchSandboxPolicy,
  PLATFORM_RUNTIME_CLASS,
  policyPluginStats,
  type SandboxPodSetup,
  type SandboxPodsResult,
  sandboxPodBody,
  sandboxPodRatios,
} from '../src/sandbox-pods.js';
import { type Percentiles, percentiles, summarize } from '../src/stats.js';

const pct = (p50: number, p99: number): Percentiles => ({ p50, p90: p99, p99, p999: p99, max: p99, count: 10 });

describe('same-round comparisons', () => {
  test('rotation starts round r with setup r', () => {
    expect(rotation(['a', 'g', 'h'], 0)).toEqual(['a', 'g', 'h']);
    expect(rotation(['a', 'g', 'h'], 1)).toEqual(['g', 'h', 'a']);
    expect(rotation(['a', 'g', 'h'], 5)).toEqual(['h', 'a', 'g']);
  });

  test('ratios pair each round with the same round, never across rounds', () => {
    // Round 2 is slow for both: per-round ratios stay 2, a pooled ratio would not.
    const a = [pct(1, 10), pct(10, 100), pct(2, 20)];
    const g = [pct(2, 10), pct(20, 300), pct(4, 20)];
    expect(roundRatio(g, a, 'p50')).toEqual({ median: 2, min: 2, max: 2, n: 3 });
    expect(roundRatio(g, a, 'p99')).toEqual({ median: 1, min: 1, max: 3, n: 3 });
    expect(perRoundSummary(g, a, (x, y) => x.p50 - y.p50)).toEqual({ median: 2, min: 1, max: 10, n: 3 });
    // A setup missing a round is compared over the rounds both have.
    expect(roundRatio(g.slice(0, 2), a, 'p50').n).toBe(2);
  });

  test('sandboxPodRatios: g and h against a, and h against g, per concurrency', () => {
    const rounds: Record<SandboxPodSetup, Percentiles[]> = {
      a: [pct(4, 8), pct(5, 10)],
      g: [pct(4.4, 8), pct(5.5, 12)],
      h: [pct(6, 16), pct(7.5, 20)],
    };
    const [one] = sandboxPodRatios([1], (s) => rounds[s]);
    expect(one?.concurrency).toBe(1);
    expect(one?.gaP50.median).toBeCloseTo(1.1);
    expect(one?.gaP99.median).toBeCloseTo(1.1);
    expect(one?.haP50.median).toBeCloseTo(1.5);
    expect(one?.haP99.median).toBeCloseTo(2);
    expect(one?.hgP50.median).toBeCloseTo((6 / 4.4 + 7.5 / 5.5) / 2);
  });
});

describe("the bench's sandbox policy is the operator's", () => {
  const desired = benchSandboxPolicy('tenant-ns');
  const vap = desired.objects.find((o) => o.kind === 'ValidatingAdmissionPolicy') as unknown as {
    spec: {
      matchConditions: { name: string; expression: string }[];
      matchConstraints: { resourceRules: { resources: string[] }[] };
    };
  };
  const binding = desired.objects.find((o) => o.kind === 'ValidatingAdmissionPolicyBinding') as unknown as {
    spec: {
      validationActions: string[];
      matchResources: { namespaceSelector: { matchLabels: Record<string, string> } };
    };
  };

  test('enforce policy over Pods, selected by the Sandbox-Pod condition, bound to the namespace', () => {
    expect(vap.spec.matchConditions).toEqual([{ ...SANDBOX_POD_CONDITION }]);
    expect(vap.spec.matchConstraints.resourceRules.some((r) => r.resources.includes('pods'))).toBe(true);
    expect(binding.spec.validationActions).toEqual(['Deny']);
    expect(binding.spec.matchResources.namespaceSelector.matchLabels).toEqual({
      'kubernetes.io/metadata.name': 'tenant-ns',
    });
  });

  test("the platform class the Pods name is allowed; only h's Pods carry the adoption label", () => {
    expect(desired.allowedRuntimeClasses).toContain(PLATFORM_RUNTIME_CLASS.name);
    const body = (s: SandboxPodSetup) =>
      sandboxPodBody(s) as { metadata: { labels?: Record<string, string> }; spec: { runtimeClassName?: string } };
    for (const s of ['a', 'g', 'h'] as const) expect(body(s).spec.runtimeClassName).toBe(PLATFORM_RUNTIME_CLASS.name);
    expect(body('a').metadata.labels).toBeUndefined();
    expect(body('g').metadata.labels).toBeUndefined();
    expect(body('h').metadata.labels).toEqual({ [ADOPTABLE_LABEL]: 'true' });
    const { metadata: _h, ...hRest } = body('h') as { metadata: unknown };
    const { metadata: _g, ...gRest } = body('g') as { metadata: unknown };
    expect(hRest).toEqual(gRest);
  });
});

function sandboxResult(): SandboxPodsResult {
  const block = (setup: SandboxPodSetup, concurrency: number, p50: number) => ({
    setup,
    concurrency,
    pooled: percentiles([p50, p50 * 2]),
    p50: summarize([p50, p50]),
    p99: summarize([p50 * 2, p50 * 2]),
    throughput: summarize([100, 110]),
    cdf: [],
  });
  const s = summarize([1.07, 1.09]);
  return {
    blocks: [block('a', 1, 4), block('g', 1, 4.3), block('h', 1, 6)],
    ratios: [{ concurrency: 1, gaP50: s, gaP99: s, haP50: summarize([1.5]), haP99: s, hgP50: s, hgP99: s }],
    policyPlugin: policyPluginStats([1], (setup) => ({ a: [20, 30], g: [22, 33], h: [60, 90] })[setup]),
    policy: { name: 'p-enforce', minRuntimeClass: 'kata', allowedRuntimeClasses: ['bench-kata'], matchCondition: 'c' },
    checks: ['x → denied'],
    errors: [],
  };
}

function baseResults(over: Partial<BenchResults> = {}): BenchResults {
  const snap: BenchResults['loadStart'] = { at: 't', loadAverage: [1, 1, 1], otherProcesses: {}, busiest: [] };
  return {
    startedAt: 'first-start',
    finishedAt: 'first-end',
    durationSeconds: 60,
    config: {
      sections: ['patch', 'podcreate'],
      rounds: 5,
      patchTimeMs: 250,
      loadSeconds: 5,
      loadConnections: 16,
      profileSeconds: 0,
      podSerial: 150,
      podParallel: 480,
      podConcurrency: 32,
      chainReplicas: 30,
      scaleNamespaces: 0,
      scaleIsolated: 0,
      operatorInstances: 0,
      operatorTimeoutSeconds: 10,
      operatorConcurrency: undefined,
      webhookNodeOptions: '',
      outDir: 'docs',
      resultsFile: 'r.json',
      reportOnly: false,
    },
    machine: { nproc: 2, cpuModel: 'cpu', memoryGiB: 1, kernel: 'k', node: 'v24' } as BenchResults['machine'],
    versions: { commit: 'aaa' },
    loadStart: snap,
    pinned: false,
    errors: {},
    ...over,
  };
}

describe('report', () => {
  test('§6 renders the blocks and the same-round ratios, and says what each compares', () => {
    const text = sandboxPodsSection(baseResults({ sandboxPods: sandboxResult() })).join('\n');
    expect(text).toContain('| 1 | g | 4.3 (4.3–4.3) |');
    expect(text).toContain('| 1 | 1.08 (1.07–1.09) | 1.08 (1.07–1.09) | 1.5 (1.5–1.5) |');
    expect(text).toContain('g/a is what the Pod rule costs every other Pod of a governed namespace');
    expect(text).toContain('what governing every Pod of the namespace would cost per Pod');
    expect(text).toContain('x → denied');
    // Plugin time: medians 25 / 27.5 / 75 µs; same-round differences g − a 2, 3 and h − a 40, 60.
    expect(text).toContain('| 1 | 25 (20–30) | 27.5 (22–33) | 75 (60–90) | 2.5 (2–3) | 50 (40–60) |');
    expect(sandboxPodsSection(baseResults()).join('\n')).toContain('Not measured in this run');
  });

  test('the block table has the webhook column only when asked', () => {
    const blocks = sandboxResult().blocks;
    expect(blockTable(blocks, false)[0]).not.toContain('webhook');
    expect(blockTable(blocks, true)[0]).toContain('API server → webhook call');
    expect(blockTable(blocks, true)[2]).toMatch(/\| – \|$/);
  });
});

describe('BENCH_MERGE: a later run of some sections keeps the other sections of the earlier one', () => {
  const first = baseResults({ patch: [], podCreate: { blocks: [], ratios: [], errors: ['old'] } });
  const later = baseResults({
    startedAt: 'later-start',
    config: { ...baseResults().config, sections: ['sandbox-pods'], rounds: 3 },
    versions: { commit: 'bbb' },
    sandboxPods: sandboxResult(),
  });

  test('replaces only the sections the later run measured, and records that run', () => {
    const merged = mergeResults(first, later);
    expect(merged.patch).toEqual([]);
    expect(merged.podCreate?.errors).toEqual(['old']);
    expect(merged.sandboxPods).toEqual(sandboxResult());
    expect(merged.startedAt).toBe('first-start');
    expect(merged.config.rounds).toBe(5);
    expect(merged.config.sections).toEqual(['patch', 'podcreate', 'sandbox-pods']);
    expect(merged.remeasured).toHaveLength(1);
    expect(merged.remeasured?.[0]).toMatchObject({ sections: ['sandbox-pods'], startedAt: 'later-start' });
    expect(merged.remeasured?.[0]?.config.rounds).toBe(3);
    const report = renderReport(merged, []);
    expect(report).toContain('### Sections measured in a later run');
    expect(report).toContain('- `sandbox-pods`: run later-start');
    expect(report).toContain('commit `bbb`; 3 rounds');
  });

  test('a section that failed in the later run keeps its earlier figures', () => {
    const failed = { ...later, sandboxPods: undefined, config: { ...later.config, sections: ['podcreate' as const] } };
    failed.errors = { podcreate: 'boom' };
    const merged = mergeResults(first, failed);
    expect(merged.podCreate?.errors).toEqual(['old']);
    expect(merged.errors).toEqual({});
    expect(merged.remeasured).toBeUndefined();
  });

  test('measuring a section again replaces its earlier re-measurement', () => {
    const twice = mergeResults(mergeResults(first, later), { ...later, startedAt: 'third' });
    expect(twice.remeasured?.map((r) => r.startedAt)).toEqual(['third']);
    const other = mergeResults(mergeResults(first, later), {
      ...baseResults({ startedAt: 'p', config: { ...later.config, sections: ['patch'] } }),
      patch: [],
    });
    expect(other.remeasured?.map((r) => [r.startedAt, r.sections])).toEqual([
      ['later-start', ['sandbox-pods']],
      ['p', ['patch']],
    ]);
  });
});
