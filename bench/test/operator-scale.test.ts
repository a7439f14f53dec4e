import { describe, expect, test } from '@jest/globals';
import { intList, operatorPoints, sandboxLayout, sandboxModes } from '../src/config.js';
import { operatorScalePoints, operatorScaleSection } from '../src/operator-report.js';
import type { BenchResults } from '../src/results.js';
import { CompletionTracker, firstSuccess, type OperatorScaleResult, slowApiRequests } from '../src/scale.js';

describe('firstSuccess: the end-of-point /metrics read', () => {
  test('the first attempt that succeeds, each failure reported with its number', async () => {
    const failures: number[] = [];
    let calls = 0;
    const value = await firstSuccess(
      3,
      async () => {
        calls += 1;
        if (calls < 3) throw new Error('The operation was aborted due to timeout');
        return 'samples';
      },
      (_e, n) => failures.push(n),
    );
    expect(value).toBe('samples');
    expect(failures).toEqual([1, 2]);
  });

  test('undefined once every attempt failed, after exactly that many', async () => {
    let calls = 0;
    const value = await firstSuccess(3, async () => {
      calls += 1;
      throw new Error('down');
    });
    expect(value).toBeUndefined();
    expect(calls).toBe(3);
  });
});

describe('BENCH_OPERATOR_SANDBOX', () => {
  test('1 is both annotations, 0 node isolation only, in the order given; unset: both', () => {
    expect(sandboxModes(undefined)).toEqual([true]);
    expect(sandboxModes(' ')).toEqual([true]);
    expect(sandboxModes('0')).toEqual([false]);
    expect(sandboxModes('0, 1')).toEqual([false, true]);
    expect(() => sandboxModes('yes')).toThrow('BENCH_OPERATOR_SANDBOX: "yes" is neither 0 nor 1');
  });
});

describe('BENCH_OPERATOR_SANDBOX_LAYOUT', () => {
  test("the operator's layouts by name; unset: shared; anything else refused with the choices", () => {
    expect(sandboxLayout(undefined)).toBe('shared');
    expect(sandboxLayout(' per-instance ')).toBe('per-instance');
    expect(sandboxLayout('shared')).toBe('shared');
    expect(() => sandboxLayout('per-tenant')).toThrow(
      'BENCH_OPERATOR_SANDBOX_LAYOUT: "per-tenant" is not one of per-instance, shared',
    );
  });
});

describe('BENCH_OPERATOR_INSTANCES', () => {
  test('is a comma-separated list of positive counts, in the order given; unset or empty: the default', () => {
    expect(intList('X', '1000, 5000,10000', [1])).toEqual([1000, 5000, 10000]);
    expect(intList('X', '200', [1])).toEqual([200]);
    expect(intList('X', undefined, [1000, 5000])).toEqual([1000, 5000]);
    expect(intList('X', ' ', [7])).toEqual([7]);
    expect(() => intList('X', '1000,,5000', [1])).toThrow(/X=1000,,5000/);
    expect(() => intList('X', '0', [1])).toThrow(/positive integers/);
    expect(() => intList('X', '1e3x', [1])).toThrow(/positive integers/);
  });

  test('older results held one count', () => {
    expect(operatorPoints(1000)).toEqual([1000]);
    expect(operatorPoints([1000, 5000])).toEqual([1000, 5000]);
  });
});

describe('CompletionTracker', () => {
  const ns = (name: string, annotated: boolean) => ({
    metadata: { name, ...(annotated && { annotations: { done: 'yes' } }) },
  });
  const tracker = () =>
    new CompletionTracker(
      new Set(['a', 'b']),
      (o) => o.metadata?.name,
      (o) => o.metadata?.annotations?.done !== undefined,
    );

  test('completes when every wanted name is done, at the time of that event, and stays complete', () => {
    const t = tracker();
    t.event('ADDED', ns('a', true), 1);
    t.event('ADDED', ns('other', true), 2); // not wanted
    t.event('ADDED', ns('b', false), 3); // not done yet
    expect(t.completedAt).toBeUndefined();
    expect(t.count).toBe(1);
    t.event('MODIFIED', ns('b', true), 4);
    expect(t.completedAt).toBe(4);
    t.event('DELETED', ns('a', true), 5);
    expect(t.count).toBe(1);
    expect(t.completedAt).toBe(4);
  });

  test('an object that stops being done, or is deleted, no longer counts', () => {
    const t = tracker();
    t.event('ADDED', ns('a', true), 1);
    t.event('MODIFIED', ns('a', false), 2);
    t.event('ADDED', ns('b', true), 3);
    expect(t.completedAt).toBeUndefined();
    t.event('DELETED', ns('b', true), 4);
    t.event('ADDED', ns('a', true), 5);
    expect(t.count).toBe(1);
    expect(t.completedAt).toBeUndefined();
  });
});

function point(over: Partial<OperatorScaleResult>): OperatorScaleResult {
  return {
    instances: 1000,
    concurrency: 'its default (--concurrency 8)',
    nodeOptions: '--max-semi-space-size=16',
    createSeconds: 6,
    namespacesIsolatedSeconds: 40,
    runtimeClassesSeconds: 50,
    fullyIsolatedSeconds: 50,
    policyBindings: 1000,
    reconcileP50Ms: { instances: 30 },
    reconcileP99Ms: { instances: 900 },
    reconciles: { 'instances/success': 2000, 'instances/error': 0 },
    rssReadyMiB: 100,
    rssMiB: 200,
    peakRssMiB: 250,
    heapUsedMiB: 80,
    cpuSeconds: 20,
    timedOut: false,
    namespacesIsolated: 1000,
    runtimeClasses: 1000,
    ...over,
  };
}

function results(scaleOperator: BenchResults['scaleOperator']): BenchResults {
  return {
    config: { operatorTimeoutSeconds: 900 },
    scaleOperator,
  } as unknown as BenchResults;
}

describe('§5 operator with many instances', () => {
  test('one row per point with the growth per 1,000 instances, and the verdicts of the points the issue names', () => {
    const r = results([
      point({}),
      point({ instances: 5000, fullyIsolatedSeconds: 300, rssMiB: 500, cpuSeconds: 100 }),
      point({
        instances: 10_000,
        timedOut: true,
        fullyIsolatedSeconds: Number.NaN,
        namespacesIsolated: 9000,
        runtimeClasses: 8100,
        rssMiB: 900,
        cpuSeconds: 250,
      }),
    ]);
    const { lines, verdicts } = operatorScaleSection(r);
    const text = lines.join('\n');
    // 1,000: 50 s, so 50 s per 1,000, 20 instances/s; RSS (200 − 100) per 1,000.
    expect(text).toContain('| 1,000 | 6.0 | **50.0** | 50.0 | 20.0 | 100 / 200 / 250 | 100.0 | 80 | 20.0 | 20.0 |');
    // 5,000: 60 s per 1,000; RSS (500 − 100) / 5 = 80 per 1,000; CPU 20 per 1,000.
    expect(text).toContain('| 5,000 | 6.0 | **300.0** | 60.0 | 16.7 | 100 / 500 / 250 | 80.0 | 80 | 100.0 | 20.0 |');
    // 10,000 timed out: the wait starts after the last create, so the deadline is 6 + 900 s from
    // the first; its rate is what was done by then (8,100 of both / 906 s).
    expect(text).toContain('| 10,000 | 6.0 | not within 906 (9,000 namespaces, 8,100 classes) | n/a | 8.9 |');
    expect(text).toContain('`NODE_OPTIONS=--max-semi-space-size=16`');
    expect(text).toContain('| 1,000 | 30 / 900 | n/a | n/a | instances/success 2,000 | 1,000 |');
    expect(verdicts).toEqual([
      {
        target: 'operator: 1,000 instances fully isolated within 60 s',
        basis: 'absolute, from issue 24 (not a floor)',
        measured: '50.0 s',
        met: true,
        detail: '10.0 s to spare',
      },
      {
        target: 'operator: 10,000 instances fully isolated within 10 minutes',
        basis: 'absolute, from issue 24 (not a floor)',
        measured: 'not within 906 s: 9,000 namespaces / 8,100 RuntimeClasses done by then',
        met: false,
        detail: 'at 8.9 instances/s, 10,000 take ~1,119 s',
      },
    ]);
  });

  test('a section re-measured later is judged by that run’s timeout', () => {
    const r = {
      ...results([point({ instances: 10_000, timedOut: true, namespacesIsolated: 5000, runtimeClasses: 5000 })]),
      remeasured: [{ sections: ['scale-operator'], config: { operatorTimeoutSeconds: 1200 } }],
    } as unknown as BenchResults;
    expect(operatorScaleSection(r).verdicts[0]?.measured).toBe(
      'not within 1,206 s: 5,000 namespaces / 5,000 RuntimeClasses done by then',
    );
  });

  test('a node-isolation-only point is marked, counts its namespaces alone, and is never judged', () => {
    const r = results([
      point({ instances: 1000, sandbox: false, runtimeClasses: 0, runtimeClassesSeconds: 0, fullyIsolatedSeconds: 20 }),
      point({
        instances: 2000,
        sandbox: false,
        timedOut: true,
        fullyIsolatedSeconds: Number.NaN,
        namespacesIsolated: 1812,
        runtimeClasses: 0,
      }),
      point({ instances: 1000, fullyIsolatedSeconds: 70 }),
    ]);
    const { lines, verdicts } = operatorScaleSection(r);
    const text = lines.join('\n');
    expect(text).toContain('| 1,000 (node isolation only) | 6.0 | **20.0** | 20.0 | 50.0 |');
    // Timed out: its rate is the namespaces done (1,812 / 906 s), not min(namespaces, classes) = 0.
    expect(text).toContain(
      '| 2,000 (node isolation only) | 6.0 | not within 906 (1,812 namespaces, 0 classes) | n/a | 2.0 |',
    );
    expect(verdicts).toEqual([expect.objectContaining({ measured: '70.0 s', met: false })]);
    expect(text).toContain('The verdicts judge only the rows with both.');
    expect(operatorScaleSection(results([point({})])).lines.join('\n')).not.toContain('node isolation only');
  });

  test('reads results of the single-point era, and renders nothing without any', () => {
    const old = results(point({ fullyIsolatedSeconds: 78.8 }));
    expect(operatorScalePoints(old)).toHaveLength(1);
    expect(operatorScaleSection(old).verdicts[0]).toMatchObject({
      measured: '78.8 s',
      met: false,
      detail: 'by 18.8 s',
    });
    expect(operatorScaleSection(results(undefined))).toEqual({ lines: [], verdicts: [] });
  });
});

describe("slowApiRequests: the operator's slow-request log lines", () => {
  test('counts them, keeps the longest and the first five, and ignores every other line', () => {
    const line = (o: Record<string, unknown>): string => JSON.stringify({ ts: 't', level: 'warn', ...o });
    const log = [
      line({ msg: 'reconciled', durationMs: 999_999 }),
      'not json at all, but mentions "slow API request"',
      ...Array.from({ length: 6 }, (_, i) =>
        line({
          msg: 'slow API request',
          method: 'PATCH',
          path: `/api/v1/namespaces/t${i}`,
          status: 200,
          durationMs: 10_000 + i,
        }),
      ),
      line({ msg: 'slow API request', method: 'GET', path: '/api/v1/pods', error: 'aborted', durationMs: 104_200 }),
    ].join('\n');
    const slow = slowApiRequests(log);
    expect(slow.count).toBe(7);
    expect(slow.longestMs).toBe(104_200);
    expect(slow.examples).toEqual([0, 1, 2, 3, 4].map((i) => `PATCH /api/v1/namespaces/t${i} 200 ${10_000 + i} ms`));
    expect(slowApiRequests('')).toEqual({ count: 0, longestMs: 0, examples: [] });
  });
});
