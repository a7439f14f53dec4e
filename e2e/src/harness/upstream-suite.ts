/**
 * Upstream Agent Sandbox's own e2e suite (the pinned module's test/e2e and test/e2e/extensions,
 * compiled by `e2e/scripts/build-components.sh upstream-e2e`), run against a real node with this
 * project's chart installed (e2e/test/agent-sandbox-upstream.test.ts; e2e/README.md "Upstream's
 * own suite"). Pure: which tests run, which are excluded and why, and what a test binary's
 * `-test.v` output says about one test.
 */

/** The two compiled packages, as build-components.sh names their binaries. */
export const UPSTREAM_BINARIES = {
  core: 'agent-sandbox-e2e.test',
  extensions: 'agent-sandbox-e2e-extensions.test',
} as const;
export type UpstreamPackage = keyof typeof UPSTREAM_BINARIES;

export interface UpstreamExclusion {
  readonly pkg: UpstreamPackage;
  readonly test: string;
  readonly reason: string;
}

const UPSTREAM_IMAGE =
  'runs an image upstream builds from its own repository (no registry serves it here, and this project does not build it)';
const NO_STORAGE_CLASS =
  'needs a default StorageClass (upstream CI runs on kind, which has one; this harness has none: the claim stays Pending, the Pod unschedulable)';
const DENSITY =
  'a density/performance measurement, not a functional check (upstream skips it unless -run-perf-load-test)';

/**
 * Every upstream test this project does not run, with the reason: the ONE place they are listed.
 * Any other test of the two packages runs (a test a new pin adds runs by default).
 */
export const UPSTREAM_EXCLUSIONS: readonly UpstreamExclusion[] = [
  { pkg: 'core', test: 'TestRunChromeSandbox', reason: `chrome-sandbox: ${UPSTREAM_IMAGE}` },
  { pkg: 'extensions', test: 'TestRunPythonRuntimeSandbox', reason: `python-runtime-sandbox: ${UPSTREAM_IMAGE}` },
  { pkg: 'extensions', test: 'TestRunPythonRuntimeSandboxClaim', reason: `python-runtime-sandbox: ${UPSTREAM_IMAGE}` },
  {
    pkg: 'extensions',
    test: 'TestRunPythonRuntimeSandboxWarmpool',
    reason: `python-runtime-sandbox: ${UPSTREAM_IMAGE}`,
  },
  { pkg: 'extensions', test: 'TestRunSandboxdSandbox', reason: `sandboxd: ${UPSTREAM_IMAGE}` },
  { pkg: 'extensions', test: 'TestChromeSandboxDensity', reason: `${DENSITY}; chrome-sandbox: ${UPSTREAM_IMAGE}` },
  {
    pkg: 'extensions',
    test: 'TestPythonSandboxDensity',
    reason: `${DENSITY}; python-runtime-sandbox: ${UPSTREAM_IMAGE}`,
  },
  {
    pkg: 'extensions',
    test: 'TestRuntimeClassBurstRecovery',
    reason:
      'a burst/longevity stress benchmark (pool sizes from the CPU count, latency reports), not a functional check',
  },
  {
    pkg: 'extensions',
    test: 'TestRuntimeClassStartupComparison',
    reason: 'a cold-start vs warm-pool latency comparison (a benchmark), not a functional check',
  },
  {
    pkg: 'core',
    test: 'TestSandboxVolumeClaimTemplates',
    reason: NO_STORAGE_CLASS,
  },
  {
    pkg: 'extensions',
    test: 'TestCreateSandboxClaimVolumeClaimTemplates',
    reason: NO_STORAGE_CLASS,
  },
  {
    pkg: 'extensions',
    test: 'TestRuntimeClassLifecycle',
    reason:
      "upstream's CI runs it skipped (no SANDBOX_RUNTIME_CLASS); run here (gvisor), its wait for the pool to show fewer ready replicas after a claim (polled every 1 s, runtime_class_test.go:145) never succeeds: the controller refills the pool in under a second",
  },
];

/** The busybox image archive build-components.sh assembles (`upstream-e2e`) and its name. */
export const BUSYBOX_ARCHIVE = 'busybox-image.tar';

/**
 * The images upstream's tests name, as this project's stand-ins (no registry is reached): each
 * imported image `from` is also tagged `to` in the node's containerd (`docker.io/library/…` is how
 * containerd names a Docker Hub short name). Upstream's tests never force a pull.
 */
export const UPSTREAM_IMAGE_STANDINS: ReadonlyArray<{ from: string; to: string; what: string }> = [
  {
    from: 'kubeplus-isolation.local/pause:1',
    to: 'registry.k8s.io/pause:3.10',
    what: "this project's pause (a static C program, build-components.sh), not Kubernetes' pause 3.10",
  },
  {
    from: 'kubeplus-isolation.local/busybox:1.35.0-debian12',
    to: 'docker.io/library/busybox:1.36',
    what: "Debian 12's busybox-static (BusyBox 1.35.0), not Docker Hub's busybox 1.36",
  },
];

/** The exclusions of one package. */
export function exclusionsOf(pkg: UpstreamPackage): UpstreamExclusion[] {
  return UPSTREAM_EXCLUSIONS.filter((e) => e.pkg === pkg);
}

/**
 * The top-level test names of `<binary> -test.list .` output (benchmarks, examples and fuzz
 * targets left out: `go test` runs none of them without -test.bench/-test.fuzz).
 */
export function parseTestList(output: string): string[] {
  return output
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => /^Test[A-Za-z0-9_]*$/.test(l) && l !== 'TestMain');
}

export interface UpstreamPlanEntry {
  readonly pkg: UpstreamPackage;
  readonly test: string;
  /** Set when the test is excluded: why. */
  readonly excluded?: string;
}

/**
 * Every test of the listed packages, each either run or excluded with its reason. An exclusion
 * naming a test the binary does not hold is an error (a new pin renamed or removed it: review).
 */
export function upstreamPlan(listed: Readonly<Record<UpstreamPackage, readonly string[]>>): UpstreamPlanEntry[] {
  const stale = UPSTREAM_EXCLUSIONS.filter((e) => !listed[e.pkg].includes(e.test));
  if (stale.length > 0) {
    throw new Error(
      `upstream-suite: excluded tests the compiled suite does not hold (renamed or removed by the pin? review UPSTREAM_EXCLUSIONS): ${stale.map((e) => `${e.pkg}/${e.test}`).join(', ')}`,
    );
  }
  return (Object.keys(UPSTREAM_BINARIES) as UpstreamPackage[]).flatMap((pkg) =>
    listed[pkg].map((test) => {
      const excluded = UPSTREAM_EXCLUSIONS.find((e) => e.pkg === pkg && e.test === test)?.reason;
      return excluded === undefined ? { pkg, test } : { pkg, test, excluded };
    }),
  );
}

/** The arguments that run exactly one top-level test (and all its subtests), verbosely, one at a time. */
export function runArgs(test: string, timeoutMinutes: number): string[] {
  if (!/^Test[A-Za-z0-9_]*$/.test(test)) throw new Error(`upstream-suite: not a Go test name: ${test}`);
  return ['-test.v', '-test.parallel=1', '-test.count=1', `-test.timeout=${timeoutMinutes}m`, '-test.run', `^${test}$`];
}

export type UpstreamResult = 'pass' | 'fail' | 'skip';

export interface UpstreamOutcome {
  /** The test's own verdict; `fail` too when the binary ended without one (a panic, a timeout). */
  readonly result: UpstreamResult;
  /** Why, when it did not pass: Go's skip message, or that no verdict was printed. */
  readonly detail?: string;
  /** Go's reported duration, seconds. */
  readonly seconds?: number;
}

/**
 * What `-test.v` output of a run of the one top-level test `test` says: its
 * `--- PASS|FAIL|SKIP: <test> (Ns)` line (subtests' lines are indented and carry a `/`), a skip's
 * message (the last line the test logged before it), or a failure when no verdict was printed
 * (the binary panicked or timed out).
 */
export function parseOutcome(output: string, test: string): UpstreamOutcome {
  const lines = output.split('\n');
  const verdict = new RegExp(`^--- (PASS|FAIL|SKIP): ${test} \\(([0-9.]+)s\\)`);
  const at = lines.findIndex((l) => verdict.test(l));
  if (at < 0) {
    const panic = lines.find((l) => /^panic: /.test(l));
    return {
      result: 'fail',
      detail: `no verdict for ${test} in the output${panic ? ` (${panic.trim()})` : ''}: the binary ended before the test did`,
    };
  }
  const [, word, secs] = verdict.exec(lines[at] ?? '') ?? [];
  const seconds = Number(secs);
  const result: UpstreamResult = word === 'PASS' ? 'pass' : word === 'SKIP' ? 'skip' : 'fail';
  if (result !== 'skip') return { result, seconds };
  // -test.v streams t.Log/t.Skip lines (indented, `file.go:N: `) as they happen: before the verdict.
  const logged = lines
    .slice(0, at)
    .filter((l) => /^ {4}[\w.-]+\.go:\d+: /.test(l))
    .map((l) => l.trim().replace(/^[\w.-]+\.go:\d+: /, ''));
  return { result, seconds, detail: logged.at(-1) ?? 'skipped by the test itself' };
}

/**
 * The assertion failures in a test's output (testify's `Error Trace:` … `Messages:` blocks), which
 * upstream's framework follows with pages of controller logs: what a failure message leads with.
 */
export function failureBlocks(output: string): string {
  const lines = output.split('\n');
  const picked: string[] = [];
  let inBlock = false;
  for (const line of lines) {
    // testify's block: `<indent>\tError Trace:\t…`, then lines of the same tab-led shape
    // (Error, Test, Messages and their continuations).
    if (/^ *\tError Trace:/.test(line)) inBlock = true;
    else if (inBlock && !/^ *\t/.test(line)) inBlock = false;
    if (inBlock) picked.push(line);
  }
  return picked.join('\n');
}

/** The last `lines` lines of a test's output, for a failure message. */
export function outputTail(output: string, lines = 60): string {
  return output.trimEnd().split('\n').slice(-lines).join('\n');
}

/** One result line per test, and the counts (printed at the end of the run). */
export function summarize(
  results: ReadonlyArray<{ pkg: UpstreamPackage; test: string; result: UpstreamResult | 'excluded'; detail?: string }>,
): string {
  const count = (r: string): number => results.filter((x) => x.result === r).length;
  const rows = results.map((r) => `  ${r.result.padEnd(8)} ${r.pkg}/${r.test}${r.detail ? ` — ${r.detail}` : ''}`);
  return [
    `upstream Agent Sandbox e2e: ${count('pass')} passed, ${count('fail')} failed, ${count('skip')} skipped by themselves, ${count('excluded')} excluded, of ${results.length}`,
    ...rows,
  ].join('\n');
}
