/** docs/kubernetes-versions.md as `make test-matrix` writes it (e2e/src/matrix/report.ts). */
import { expect, test } from '@jest/globals';
import { type JestJson, type MinorRun, passed, renderMatrix } from '../../src/matrix/report.js';

const results = (failed: number, skipped: string[]): JestJson => ({
  numPassedTests: 10,
  numFailedTests: failed,
  numPendingTests: skipped.length,
  numTotalTestSuites: 3,
  startTime: 0,
  testResults: [
    {
      name: '/repo/e2e/test/node-isolation-engines.test.ts',
      status: failed > 0 ? 'failed' : 'passed',
      assertionResults: [
        ...skipped.map((fullName) => ({ fullName, status: 'pending', title: fullName })),
        ...Array.from({ length: failed }, () => ({ fullName: 'it broke', status: 'failed', title: 'it broke' })),
      ],
    },
  ],
});

test('one row per minor with its counts and result; skipped tests listed with the reason their names carry; a failure stands out', () => {
  const runs: MinorRun[] = [
    { minor: '1.36', version: 'v1.36.3', scope: 'API-level suites', results: results(0, []), seconds: 600 },
    {
      minor: '1.30',
      version: 'v1.30.14',
      scope: 'API-level suites + the chart on a real node of 1.30',
      results: results(0, ['engine [skipped on 1.30: the admission-policy engine is a MutatingAdmissionPolicy v1]']),
      seconds: 660,
    },
    { minor: '1.29', version: '', scope: 'below the floor', results: undefined, error: 'build failed', seconds: 5 },
    { minor: '1.32', version: 'v1.32.13', scope: 'API-level suites', results: results(1, []), seconds: 60 },
    {
      minor: '1.35',
      version: '',
      scope: 'not in this run (K8S_MATRIX_SKIP)',
      results: undefined,
      skipped: true,
      seconds: 0,
    },
  ];
  const doc = renderMatrix(runs, { commit: 'abc1234', date: '2026-12-02 10:00 UTC', machine: '2 cores' });
  expect(doc).toContain('| 1.36 | v1.36.3 | API-level suites | 3 | 10 | 0 | 0 | 10 min | pass |');
  expect(doc).toContain(
    '| 1.30 | v1.30.14 | API-level suites + the chart on a real node of 1.30 | 3 | 10 | 0 | 1 | 11 min | pass |',
  );
  expect(doc).toContain('| 1.29 | — | below the floor | 0 | 0 | 0 | 0 | 0 min | **FAIL**: build failed |');
  expect(doc).toContain('| 1.32 | v1.32.13 | API-level suites | 3 | 10 | 1 | 0 | 1 min | **FAIL** |');
  expect(doc).toContain(
    '- skipped 1 in e2e/test/node-isolation-engines.test.ts: the admission-policy engine is a MutatingAdmissionPolicy v1',
  );
  expect(doc).toContain('- FAILED e2e/test/node-isolation-engines.test.ts: it broke');
  expect(doc).toContain('at abc1234 on 2026-12-02 10:00 UTC (2 cores)');
  expect(doc).toContain('| 1.35 | — | not in this run (K8S_MATRIX_SKIP) | | | | | | not run |');
  expect(runs.map(passed)).toEqual([true, true, false, false, true]);
});
