/**
 * The e2e runs' progress lines and summaries (e2e/src/progress): what `make test` prints while its
 * two e2e runs go and when they end, from fake jest results.
 */
import { closeSync, mkdtempSync, openSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, test } from '@jest/globals';
import {
  duration,
  type RunResult,
  runLabel,
  type SuiteResult,
  stillRunningLine,
  suiteLines,
  summaryLines,
} from '../../src/progress/lines.js';
import ProgressReporter from '../../src/progress/reporter.js';

const ROOT = '/repo';

const suite = (file: string, tests: Array<[string, string]>, ms = 41_000, execError?: string): SuiteResult => ({
  testFilePath: `${ROOT}/e2e/test/${file}`,
  numPassingTests: tests.filter(([, s]) => s === 'passed').length,
  numFailingTests: tests.filter(([, s]) => s === 'failed').length,
  numPendingTests: tests.filter(([, s]) => s === 'pending').length,
  numTodoTests: tests.filter(([, s]) => s === 'todo').length,
  perfStats: { start: 1_000, end: 1_000 + ms },
  ...(execError === undefined ? {} : { testExecError: { message: execError } }),
  testResults: tests.map(([fullName, status]) => ({ fullName, status })),
});

const passing = suite('cli.test.ts', [
  ['validate › accepts a valid manifest', 'passed'],
  ['validate › rejects an invalid one', 'passed'],
  ['engine [skipped on 1.30: the admission-policy engine is a MutatingAdmissionPolicy v1]', 'pending'],
]);
const failing = suite(
  'node-isolation.test.ts',
  [
    ['node isolation › places a Pod', 'passed'],
    ['node isolation › denies a conflicting nodeSelector', 'failed'],
  ],
  125_000,
);
const broken = suite('chart.test.ts', [], 2_000, 'Cannot find module ./missing.js\n    at resolve (x.js:1:1)');

function run(suites: SuiteResult[], over: Partial<RunResult> = {}): RunResult {
  const count = (status: string): number =>
    suites.flatMap((s) => s.testResults).filter((t) => t.status === status).length;
  return {
    numTotalTestSuites: suites.length,
    numPassedTestSuites: suites.filter((s) => s.testExecError === undefined && s.numFailingTests === 0).length,
    numFailedTestSuites: suites.filter((s) => s.testExecError !== undefined || s.numFailingTests > 0).length,
    numPendingTestSuites: 0,
    numRuntimeErrorTestSuites: suites.filter((s) => s.testExecError !== undefined).length,
    numTotalTests: suites.flatMap((s) => s.testResults).length,
    numPassedTests: count('passed'),
    numFailedTests: count('failed'),
    numPendingTests: count('pending'),
    numTodoTests: count('todo'),
    startTime: 0,
    testResults: suites,
    ...over,
  };
}

describe('the lines', () => {
  test('the label names the run and its minor; durations read in seconds, then minutes', () => {
    expect(runLabel('newest', '1.36')).toBe('e2e newest 1.36');
    expect(runLabel(undefined, '1.30')).toBe('e2e 1.30');
    expect(duration(41_400)).toBe('41 s');
    expect(duration(363_000)).toBe('6 min 3 s');
  });

  test('a passing suite: one line with its name relative to the repository, its counts, time and place in the run', () => {
    expect(suiteLines('e2e newest 1.36', ROOT, passing, { done: 3, total: 27 })).toEqual([
      '[e2e newest 1.36] PASS e2e/test/cli.test.ts 2 passed 1 skipped (41 s) [3/27]',
    ]);
  });

  test('a failing suite names each failed test under its line', () => {
    expect(suiteLines('e2e floor 1.30', ROOT, failing, { done: 4, total: 20 })).toEqual([
      '[e2e floor 1.30] FAIL e2e/test/node-isolation.test.ts 1 passed 1 failed (2 min 5 s) [4/20]',
      '[e2e floor 1.30]   ✘ node isolation › denies a conflicting nodeSelector',
    ]);
  });

  test('a suite that could not run says so, with the first line of why', () => {
    expect(suiteLines('e2e floor 1.30', ROOT, broken, { done: 1, total: 20 })).toEqual([
      '[e2e floor 1.30] FAIL e2e/test/chart.test.ts did not run (2 s) [1/20]',
      '[e2e floor 1.30]   ✘ Cannot find module ./missing.js',
    ]);
  });

  test('a suite whose every test was skipped is SKIP, not PASS', () => {
    const skipped = suite('gvisor-sandbox.test.ts', [['runs in gVisor [skipped: no runsc]', 'pending']], 100);
    expect(suiteLines('e2e 1.36', ROOT, skipped, { done: 1, total: 1 })).toEqual([
      '[e2e 1.36] SKIP e2e/test/gvisor-sandbox.test.ts 0 passed 1 skipped (0 s) [1/1]',
    ]);
  });

  test('a quiet suite gets a line saying it is still running', () => {
    expect(stillRunningLine('e2e newest 1.36', ROOT, `${ROOT}/e2e/test/real-node.test.ts`, 180_000)).toBe(
      '[e2e newest 1.36] … e2e/test/real-node.test.ts still running (3 min 0 s)',
    );
  });

  test('the summary of a green run: counts of suites and tests, then the skipped tests with their reasons', () => {
    expect(summaryLines('e2e newest 1.36', ROOT, run([passing]), 754_000)).toEqual([
      '[e2e newest 1.36] passed: suites: 1 passed of 1; tests: 2 passed 1 skipped of 3 (12 min 34 s)',
      '[e2e newest 1.36]   ○ skipped e2e/test/cli.test.ts › engine [skipped on 1.30: the admission-policy engine is a MutatingAdmissionPolicy v1]',
    ]);
  });

  test('the summary of a red run says FAILED and names every failed test and every suite that did not run', () => {
    expect(summaryLines('e2e floor 1.30', ROOT, run([passing, failing, broken]), 60_000)).toEqual([
      '[e2e floor 1.30] FAILED: suites: 1 passed 2 failed of 3; tests: 3 passed 1 failed 1 skipped of 5 (1 min 0 s)',
      '[e2e floor 1.30]   ✘ e2e/test/node-isolation.test.ts › node isolation › denies a conflicting nodeSelector',
      '[e2e floor 1.30]   ✘ e2e/test/chart.test.ts did not run: Cannot find module ./missing.js',
      '[e2e floor 1.30]   ○ skipped e2e/test/cli.test.ts › engine [skipped on 1.30: the admission-policy engine is a MutatingAdmissionPolicy v1]',
    ]);
  });

  test('an interrupted run is FAILED even with no failed test', () => {
    const lines = summaryLines('e2e 1.36', ROOT, run([passing], { wasInterrupted: true }), 1_000);
    expect(lines[0]).toMatch(/^\[e2e 1\.36\] FAILED: /);
    expect(lines[1]).toBe('[e2e 1.36]   interrupted: not every suite ran');
  });
});

describe('the reporter', () => {
  let dir: string;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'progress-reporter-'));
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  test('progress lines go to the given file descriptor as suites finish; the summary to <run>.txt', () => {
    const fd = openSync(join(dir, 'progress'), 'w');
    try {
      const reporter = new ProgressReporter(
        { rootDir: ROOT },
        {},
        {},
        {
          KUBEPLUS_ISOLATION_E2E_RUN: 'floor',
          KUBEPLUS_ISOLATION_K8S: '1.30',
          KUBEPLUS_ISOLATION_E2E_PROGRESS_FD: String(fd),
          KUBEPLUS_ISOLATION_E2E_SUMMARY_DIR: dir,
        },
      );
      reporter.onRunStart({ numTotalTestSuites: 2 });
      reporter.onTestFileStart({ path: passing.testFilePath });
      reporter.onTestFileResult({}, passing);
      expect(readFileSync(join(dir, 'progress'), 'utf8')).toBe(
        '[e2e floor 1.30] started: 2 suites\n[e2e floor 1.30] PASS e2e/test/cli.test.ts 2 passed 1 skipped (41 s) [1/2]\n',
      );
      reporter.onTestFileStart({ path: failing.testFilePath });
      reporter.onTestFileResult({}, failing);
      reporter.onRunComplete({}, run([passing, failing], { startTime: Date.now() }));
      expect(readFileSync(join(dir, 'progress'), 'utf8').split('\n').slice(2)).toEqual([
        '[e2e floor 1.30] FAIL e2e/test/node-isolation.test.ts 1 passed 1 failed (2 min 5 s) [2/2]',
        '[e2e floor 1.30]   ✘ node isolation › denies a conflicting nodeSelector',
        '',
      ]);
      expect(readFileSync(join(dir, 'floor.txt'), 'utf8').split('\n')[0]).toBe(
        '[e2e floor 1.30] FAILED: suites: 1 passed 1 failed of 2; tests: 3 passed 1 failed 1 skipped of 5 (0 s)',
      );
    } finally {
      closeSync(fd);
    }
  });

  test('without a progress file descriptor (run outside make test-e2e-both) the run still gets its summary', () => {
    const reporter = new ProgressReporter(
      { rootDir: ROOT },
      {},
      {},
      {
        KUBEPLUS_ISOLATION_E2E_RUN: 'newest',
        KUBEPLUS_ISOLATION_K8S: '1.36',
        KUBEPLUS_ISOLATION_E2E_SUMMARY_DIR: dir,
      },
    );
    reporter.onRunStart({ numTotalTestSuites: 1 });
    reporter.onTestFileResult({}, passing);
    reporter.onRunComplete({}, run([passing], { startTime: Date.now() }));
    expect(readFileSync(join(dir, 'newest.txt'), 'utf8')).toMatch(
      /^\[e2e newest 1\.36\] passed: suites: 1 passed of 1;/,
    );
  });
});
