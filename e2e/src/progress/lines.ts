/**
 * What an e2e run prints while it goes and when it ends (pure): a line per finished suite and a
 * summary, each prefixed with the run's name, so that two runs at once (`make test-e2e-both`) can
 * be told apart while their full --verbose output is held back until each ends (e2e/README.md
 * "What `make test` prints"). The reporter (reporter.ts) feeds jest's results in and writes.
 */

/** The parts of jest's per-test result (AssertionResult) read here. */
export interface TestCase {
  fullName: string;
  status: string;
}

/** The parts of jest's per-suite result (TestResult) read here. */
export interface SuiteResult {
  testFilePath: string;
  numPassingTests: number;
  numFailingTests: number;
  numPendingTests: number;
  numTodoTests: number;
  perfStats: { start: number; end: number };
  /** Set when the suite could not run at all (a syntax error, a failing beforeAll outside tests…). */
  testExecError?: { message: string };
  testResults: TestCase[];
}

/** The parts of jest's AggregatedResult read here. */
export interface RunResult {
  numTotalTestSuites: number;
  numPassedTestSuites: number;
  numFailedTestSuites: number;
  numPendingTestSuites: number;
  numRuntimeErrorTestSuites: number;
  numTotalTests: number;
  numPassedTests: number;
  numFailedTests: number;
  numPendingTests: number;
  numTodoTests: number;
  startTime: number;
  wasInterrupted?: boolean;
  testResults: SuiteResult[];
}

/** `e2e newest 1.36`: what the run is (its Makefile target, if any) and the Kubernetes minor it runs on. */
export function runLabel(run: string | undefined, minor: string): string {
  return ['e2e', run, minor].filter((x) => x !== undefined && x !== '').join(' ');
}

/** `41 s`, `6 min 3 s`. */
export function duration(ms: number): string {
  const s = Math.max(0, Math.round(ms / 1000));
  return s < 60 ? `${s} s` : `${Math.floor(s / 60)} min ${s % 60} s`;
}

/** A suite's path as the repository names it (e2e/test/x.test.ts). */
export function suiteName(rootDir: string, testFilePath: string): string {
  const root = rootDir.endsWith('/') ? rootDir : `${rootDir}/`;
  return testFilePath.startsWith(root) ? testFilePath.slice(root.length) : testFilePath;
}

const firstLine = (text: string): string => text.trim().split('\n')[0] ?? '';

/** `23 passed 1 skipped`: the non-zero counts of a suite or a run. */
function counts(c: { passed: number; failed: number; skipped: number; todo: number }): string {
  const parts = [`${c.passed} passed`];
  if (c.failed > 0) parts.push(`${c.failed} failed`);
  if (c.skipped > 0) parts.push(`${c.skipped} skipped`);
  if (c.todo > 0) parts.push(`${c.todo} todo`);
  return parts.join(' ');
}

export function suiteFailed(suite: SuiteResult): boolean {
  return suite.testExecError !== undefined || suite.numFailingTests > 0;
}

/**
 * The lines for one finished suite:
 * `[e2e newest 1.36] PASS e2e/test/x.test.ts 23 passed 1 skipped (41 s) [3/27]`, then, if it
 * failed, one line per failed test (or why the suite did not run).
 */
export function suiteLines(
  label: string,
  rootDir: string,
  suite: SuiteResult,
  progress: { done: number; total: number },
): string[] {
  const name = suiteName(rootDir, suite.testFilePath);
  const took = duration(suite.perfStats.end - suite.perfStats.start);
  const of = `[${progress.done}/${progress.total}]`;
  if (suite.testExecError !== undefined) {
    return [
      `[${label}] FAIL ${name} did not run (${took}) ${of}`,
      `[${label}]   ✘ ${firstLine(suite.testExecError.message)}`,
    ];
  }
  const ran = suite.numPassingTests + suite.numFailingTests;
  const status = suite.numFailingTests > 0 ? 'FAIL' : ran === 0 ? 'SKIP' : 'PASS';
  const tally = counts({
    passed: suite.numPassingTests,
    failed: suite.numFailingTests,
    skipped: suite.numPendingTests,
    todo: suite.numTodoTests,
  });
  return [
    `[${label}] ${status} ${name} ${tally} (${took}) ${of}`,
    ...suite.testResults.filter((t) => t.status === 'failed').map((t) => `[${label}]   ✘ ${t.fullName}`),
  ];
}

/** The line printed when nothing has been printed for a while: which suite is still going. */
export function stillRunningLine(label: string, rootDir: string, testFilePath: string, ms: number): string {
  return `[${label}] … ${suiteName(rootDir, testFilePath)} still running (${duration(ms)})`;
}

/** The line printed when the run starts (its --verbose output comes when it ends). */
export function startLine(label: string, suites: number): string {
  return `[${label}] started: ${suites} suites`;
}

export function runFailed(run: RunResult): boolean {
  return (
    run.numFailedTestSuites > 0 ||
    run.numRuntimeErrorTestSuites > 0 ||
    run.numFailedTests > 0 ||
    run.wasInterrupted === true
  );
}

/**
 * The run's summary: one line with the counts of suites and tests, then every failed test (and
 * suite that did not run) by name, then every skipped test by name (a skipped test's name carries
 * its reason, e.g. "[skipped on 1.30: …]").
 */
export function summaryLines(label: string, rootDir: string, run: RunResult, endTime: number): string[] {
  const failed = runFailed(run);
  const suites = `suites: ${counts({
    passed: run.numPassedTestSuites,
    failed: run.numFailedTestSuites, // jest counts the suites that did not run among them
    skipped: run.numPendingTestSuites,
    todo: 0,
  })} of ${run.numTotalTestSuites}`;
  const tests = `tests: ${counts({
    passed: run.numPassedTests,
    failed: run.numFailedTests,
    skipped: run.numPendingTests,
    todo: run.numTodoTests,
  })} of ${run.numTotalTests}`;
  const verdict = failed ? 'FAILED' : 'passed';
  const lines = [`[${label}] ${verdict}: ${suites}; ${tests} (${duration(endTime - run.startTime)})`];
  if (run.wasInterrupted === true) lines.push(`[${label}]   interrupted: not every suite ran`);
  for (const suite of run.testResults) {
    const name = suiteName(rootDir, suite.testFilePath);
    if (suite.testExecError !== undefined) {
      lines.push(`[${label}]   ✘ ${name} did not run: ${firstLine(suite.testExecError.message)}`);
    }
    for (const t of suite.testResults) if (t.status === 'failed') lines.push(`[${label}]   ✘ ${name} › ${t.fullName}`);
  }
  for (const suite of run.testResults) {
    const name = suiteName(rootDir, suite.testFilePath);
    for (const t of suite.testResults) {
      if (t.status === 'pending' || t.status === 'skipped')
        lines.push(`[${label}]   ○ skipped ${name} › ${t.fullName}`);
    }
  }
  return lines;
}
