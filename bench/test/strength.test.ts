import { describe, expect, test } from '@jest/globals';
import { loadConfig } from '../src/config.js';
import { strengthSection } from '../src/report.js';
import type { BenchResults } from '../src/results.js';
import { mergeResults } from '../src/results.js';
import {
  RUNC_RUNTIME_CLASS,
  reached,
  STRENGTH_SETUPS,
  type StrengthResult,
  type StrengthSamples,
  strengthBody,
  strengthRows,
  strengthSchedule,
} from '../src/strength.js';

describe('the schedule: a discarded warm-up, then rounds in rotating order', () => {
  test('round r starts with setup r mod 4; every round runs every setup once', () => {
    const s = strengthSchedule(5);
    expect(s).toHaveLength(6);
    expect(s.map((r) => r.warmup)).toEqual([true, false, false, false, false, false]);
    expect(s[0]?.order).toEqual(STRENGTH_SETUPS);
    expect(s[1]?.order).toEqual(['pod-runc', 'pod-gvisor', 'sandbox-runc', 'sandbox-gvisor']);
    expect(s[2]?.order).toEqual(['pod-gvisor', 'sandbox-runc', 'sandbox-gvisor', 'pod-runc']);
    expect(s[5]?.order).toEqual(['pod-runc', 'pod-gvisor', 'sandbox-runc', 'sandbox-gvisor']);
    for (const r of s) expect([...r.order].sort()).toEqual([...STRENGTH_SETUPS].sort());
    // Over 4 measured rounds each setup goes first once.
    expect(
      new Set(
        strengthSchedule(4)
          .slice(1)
          .map((r) => r.order[0]),
      ).size,
    ).toBe(4);
  });
});

describe('what each setup creates', () => {
  test('the same pause Pod, on runc or the gvisor class; a Sandbox wraps it as its template', () => {
    const pod = (s: (typeof STRENGTH_SETUPS)[number]) =>
      strengthBody(s, 'x', 'gvisor') as { kind: string; spec: Record<string, unknown> };
    expect(pod('pod-runc').kind).toBe('Pod');
    expect(pod('pod-runc').spec.runtimeClassName).toBe(RUNC_RUNTIME_CLASS.name);
    expect(pod('pod-gvisor').spec.runtimeClassName).toBe('gvisor');
    const { runtimeClassName: _a, ...runcRest } = pod('pod-runc').spec;
    const { runtimeClassName: _b, ...gvisorRest } = pod('pod-gvisor').spec;
    expect(gvisorRest).toEqual(runcRest);
    const sb = strengthBody('sandbox-gvisor', 'y', 'gvisor') as {
      apiVersion: string;
      kind: string;
      metadata: { name: string };
      spec: { podTemplate: { spec: unknown } };
    };
    expect(sb).toMatchObject({ apiVersion: 'agents.x-k8s.io/v1beta1', kind: 'Sandbox', metadata: { name: 'y' } });
    expect(sb.spec.podTemplate.spec).toEqual(pod('pod-gvisor').spec);
  });
});

describe('milestones read from watch events', () => {
  test('a Pod is running on phase Running, started once every container says started', () => {
    expect(reached('pod', 'running', { status: { phase: 'Pending' } })).toBe(false);
    expect(reached('pod', 'running', { status: { phase: 'Running' } })).toBe(true);
    expect(reached('pod', 'started', { status: { phase: 'Running' } })).toBe(false);
    expect(reached('pod', 'started', { status: { containerStatuses: [{ started: true }, { started: false }] } })).toBe(
      false,
    );
    expect(reached('pod', 'started', { status: { containerStatuses: [{ started: true }] } })).toBe(true);
  });

  test('a Sandbox is ready on its Ready condition True only', () => {
    expect(reached('sandbox', 'ready', {})).toBe(false);
    expect(reached('sandbox', 'ready', { status: { conditions: [{ type: 'Ready', status: 'False' }] } })).toBe(false);
    expect(reached('sandbox', 'ready', { status: { conditions: [{ type: 'Ready', status: 'True' }] } })).toBe(true);
    expect(reached('sandbox', 'running', { status: { phase: 'Running' } })).toBe(false);
  });
});

const samples: StrengthSamples = {
  'pod-runc': { created: [10, 12, 11], running: [700, 1400, 800], started: [700, 1400, 800] },
  'pod-gvisor': { created: [12, 12, 12], running: [1400, 2100, 1200], started: [1400, 2100, 1200] },
  'sandbox-runc': { created: [15, 15], ready: [1000, 900] },
  'sandbox-gvisor': { created: [20, 30], ready: [1500, 1800] },
};

describe('rows: per-setup medians and the same-round ratio runsc/runc', () => {
  test('ratios pair rounds, never pool them', () => {
    const rows = strengthRows(samples);
    expect(rows.map((r) => `${r.kind}/${r.milestone}`)).toEqual([
      'pod/created',
      'pod/running',
      'pod/started',
      'sandbox/created',
      'sandbox/ready',
    ]);
    const running = rows.find((r) => r.kind === 'pod' && r.milestone === 'running');
    expect(running?.runc).toEqual({ median: 800, min: 700, max: 1400, n: 3 });
    expect(running?.gvisor).toEqual({ median: 1400, min: 1200, max: 2100, n: 3 });
    // Same-round: 2, 1.5, 1.5 → median 1.5 (the ratio of medians would be 1.75).
    expect(running?.ratio).toEqual({ median: 1.5, min: 1.5, max: 2, n: 3 });
    const ready = rows.find((r) => r.kind === 'sandbox' && r.milestone === 'ready');
    expect(ready?.ratio).toEqual({ median: 1.75, min: 1.5, max: 2, n: 2 });
  });

  test('a milestone one runtime lacks is left out', () => {
    expect(strengthRows({ 'pod-runc': { running: [1] } })).toEqual([]);
  });
});

function results(over: Partial<BenchResults> = {}): BenchResults {
  const snap: BenchResults['loadStart'] = { at: 't', loadAverage: [1, 1, 1], otherProcesses: {}, busiest: [] };
  const config = { ...loadConfig(), sections: ['patch' as const], rounds: 3 };
  return {
    startedAt: 's',
    finishedAt: 'f',
    durationSeconds: 60,
    config,
    machine: { nproc: 2, cpuModel: 'cpu', memoryGiB: 1, kernel: 'k', node: 'v24' } as BenchResults['machine'],
    versions: { commit: 'aaa' },
    loadStart: snap,
    pinned: false,
    errors: {},
    ...over,
  };
}

const strength: StrengthResult = {
  rounds: 3,
  runtimeClasses: { runc: { name: 'runc', handler: 'runc' }, gvisor: { name: 'gvisor', handler: 'runsc' } },
  agentSandboxImage: 'registry.k8s.io/agent-sandbox/agent-sandbox-controller:v0.5.0',
  orders: strengthSchedule(3)
    .slice(1)
    .map((r) => r.order),
  samples,
  rows: strengthRows(samples),
};

describe('report §7', () => {
  test('renders each milestone with both runtimes and the same-round ratio, and says what is compared', () => {
    const text = strengthSection(results({ strength })).join('\n');
    expect(text).toContain('## 7. The cost of strength');
    expect(text).toContain('| Pod | phase Running | 800 (700–1,400) | 1,400 (1,200–2,100) | 1.5 (1.5–2) |');
    expect(text).toContain('| Sandbox | Ready | 950 (900–1,000) | 1,650 (1,500–1,800) | 1.75 (1.5–2) |');
    expect(text).toContain('RuntimeClass `runc` (handler `runc`)');
    expect(text).toContain('`gvisor` (handler `runsc`)');
    expect(text).toContain('The machine was shared');
    expect(text).toContain('then 3 rounds');
    // Running and started came in the same event in every round of the sample data: said once.
    expect(text).toContain('the same status update');
    const differs = { ...samples, 'pod-gvisor': { ...samples['pod-gvisor'], started: [1400, 2100, 1300] } };
    const other = strengthSection(results({ strength: { ...strength, samples: differs } })).join('\n');
    expect(other).not.toContain('the same status update');
  });

  test('not measured: says so', () => {
    expect(strengthSection(results()).join('\n')).toContain('Not measured in this run');
  });

  test('BENCH_MERGE=1 of strength keeps the earlier sections and adds §7', () => {
    const merged = mergeResults(
      results({ patch: [] }),
      results({ config: { ...results().config, sections: ['strength'] }, strength }),
    );
    expect(merged.patch).toEqual([]);
    expect(merged.strength).toEqual(strength);
    expect(merged.config.sections).toEqual(['patch', 'strength']);
  });
});
