/**
 * The decisions behind running upstream Agent Sandbox's own e2e suite (e2e/src/harness/upstream-suite.ts):
 * which tests run, which are excluded and why, and what a test binary's -test.v output says.
 */
import { describe, expect, test } from '@jest/globals';
import {
  failureBlocks,
  parseOutcome,
  parseTestList,
  runArgs,
  summarize,
  UPSTREAM_EXCLUSIONS,
  upstreamPlan,
} from '@kubeplus-isolation/e2e';

const CORE = ['TestSimpleSandbox', 'TestRunChromeSandbox', 'TestSandboxVolumeClaimTemplates'];
const EXTENSIONS = UPSTREAM_EXCLUSIONS.filter((e) => e.pkg === 'extensions')
  .map((e) => e.test)
  .concat('TestSandboxClaimTTLAfterFinished');

describe('upstream suite plan', () => {
  test('-test.list output: top-level tests only, no benchmarks', () => {
    expect(
      parseTestList('TestSimpleSandbox\nBenchmarkWarmPoolParallelClaim\nTestRunChromeSandbox\nExampleX\n\n'),
    ).toEqual(['TestSimpleSandbox', 'TestRunChromeSandbox']);
  });

  test('every listed test runs unless excluded, and an excluded one carries its reason', () => {
    const plan = upstreamPlan({ core: CORE, extensions: EXTENSIONS });
    expect(plan.find((e) => e.test === 'TestSimpleSandbox')).toEqual({ pkg: 'core', test: 'TestSimpleSandbox' });
    expect(plan.find((e) => e.test === 'TestSandboxClaimTTLAfterFinished')?.excluded).toBeUndefined();
    expect(plan.find((e) => e.test === 'TestRunChromeSandbox')?.excluded).toMatch(/image upstream builds/);
    expect(plan.filter((e) => e.excluded !== undefined)).toHaveLength(UPSTREAM_EXCLUSIONS.length);
  });

  test('an exclusion the compiled suite no longer holds is an error, naming it', () => {
    expect(() => upstreamPlan({ core: ['TestSimpleSandbox'], extensions: EXTENSIONS })).toThrow(
      /core\/TestRunChromeSandbox/,
    );
  });

  test('one test at a time, anchored; a name that is no Go test name is refused', () => {
    expect(runArgs('TestSimpleSandbox', 8)).toEqual([
      '-test.v',
      '-test.parallel=1',
      '-test.count=1',
      '-test.timeout=8m',
      '-test.run',
      '^TestSimpleSandbox$',
    ]);
    expect(() => runArgs('Test.*', 8)).toThrow(/not a Go test name/);
  });
});

describe('upstream suite outcome', () => {
  test('pass and fail come from the top-level verdict line, not a subtest', () => {
    const out = [
      '=== RUN   TestSandboxVolumeClaimTemplatesImmutable',
      '=== RUN   TestSandboxVolumeClaimTemplatesImmutable/unset→set',
      '    --- FAIL: TestSandboxVolumeClaimTemplatesImmutable/unset→set (0.20s)',
      '--- FAIL: TestSandboxVolumeClaimTemplatesImmutable (1.50s)',
      'FAIL',
    ].join('\n');
    expect(parseOutcome(out, 'TestSandboxVolumeClaimTemplatesImmutable')).toEqual({ result: 'fail', seconds: 1.5 });
    expect(parseOutcome('=== RUN   TestA\n--- PASS: TestA (12.03s)\nPASS\n', 'TestA')).toEqual({
      result: 'pass',
      seconds: 12.03,
    });
    // A test whose name is a prefix of another's is not confused with it.
    expect(parseOutcome('--- PASS: TestAB (1.00s)\n', 'TestA').result).toBe('fail');
  });

  test("a skip carries the test's own message, logged before the verdict", () => {
    const out = [
      '=== RUN   TestRuntimeClassLifecycle',
      '    runtime_class_test.go:44: SANDBOX_RUNTIME_CLASS not set — skipping runtime class lifecycle test',
      '--- SKIP: TestRuntimeClassLifecycle (0.00s)',
      'PASS',
    ].join('\n');
    expect(parseOutcome(out, 'TestRuntimeClassLifecycle')).toEqual({
      result: 'skip',
      seconds: 0,
      detail: 'SANDBOX_RUNTIME_CLASS not set — skipping runtime class lifecycle test',
    });
  });

  test('no verdict (a panic, a timeout) is a failure that says so', () => {
    const out = '=== RUN   TestA\npanic: test timed out after 8m0s\n\trunning tests:\n';
    const outcome = parseOutcome(out, 'TestA');
    expect(outcome.result).toBe('fail');
    expect(outcome.detail).toMatch(/no verdict for TestA .*panic: test timed out after 8m0s/);
  });

  test("a failure leads with testify's assertion blocks, without the controller logs after them", () => {
    const out = [
      '    runtime_class_test.go:144: Waiting for pool to observe consumed sandbox...',
      '    runtime_class_test.go:145: ',
      '        \tError Trace:\tsigs.k8s.io/agent-sandbox@v1.0.1/test/e2e/extensions/runtime_class_test.go:145',
      '        \tError:      \tCondition never satisfied',
      '        \tTest:       \tTestRuntimeClassLifecycle',
      '        \tMessages:   \tpool should observe consumed sandbox',
      '    runtime_class_test.go:47: === Controller logs ===',
      '        {"level":"info","msg":"Found Pod"}',
    ].join('\n');
    const blocks = failureBlocks(out);
    expect(blocks).toMatch(
      /Error Trace:.*runtime_class_test.go:145\n.*Condition never satisfied\n.*Test:.*TestRuntimeClassLifecycle\n.*Messages:.*pool should observe consumed sandbox$/,
    );
    expect(blocks).not.toContain('Found Pod');
    expect(failureBlocks('--- PASS: TestA (1.00s)\n')).toBe('');
  });

  test('the summary counts each kind and lists every test with its reason', () => {
    const text = summarize([
      { pkg: 'core', test: 'TestA', result: 'pass' },
      { pkg: 'core', test: 'TestB', result: 'excluded', detail: 'needs an image' },
      { pkg: 'extensions', test: 'TestC', result: 'fail' },
    ]);
    expect(text.split('\n')[0]).toBe(
      'upstream Agent Sandbox e2e: 1 passed, 1 failed, 0 skipped by themselves, 1 excluded, of 3',
    );
    expect(text).toContain('excluded core/TestB — needs an image');
  });
});
