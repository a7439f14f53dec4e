/**
 * A jest reporter beside jest's own (`--reporters default --reporters <this>`, Makefile E2E_JEST)
 * that shows an e2e run's progress and ends it with a short summary (lines.ts says what they say).
 *
 * - KUBEPLUS_ISOLATION_E2E_PROGRESS_FD=<fd>: a line per finished suite (and one when a suite has
 *   been quiet for a minute) goes to that file descriptor as it happens. `make test-e2e-both` opens
 *   it on its own stdout, which make's --output-sync does not hold back, while each run's --verbose
 *   output on stdout/stderr is printed whole when the run ends.
 * - The summary goes to $KUBEPLUS_ISOLATION_E2E_SUMMARY_DIR/<run>.txt when that is set, for
 *   `make test-e2e-both` to print both runs' summaries together at the very end; otherwise to
 *   stderr, jest's stream, at the end of the run's output (just before jest's own counts: jest
 *   adds its summary reporter after every other).
 * - KUBEPLUS_ISOLATION_E2E_RUN names the run (newest, floor) in the lines' prefix, with the minor.
 *
 * Loaded by jest outside its module registry (the built e2e/dist, like global-setup.ts).
 */
import { writeFileSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { nodeMinor, requestedMinor } from '../harness/kubernetes-versions.js';
import {
  type RunResult,
  runLabel,
  type SuiteResult,
  startLine,
  stillRunningLine,
  suiteLines,
  summaryLines,
} from './lines.js';

/** A suite quiet for this long gets a "still running" line (a CI no-output timeout is often 10 min). */
const QUIET_MS = 60_000;

export default class ProgressReporter {
  readonly #rootDir: string;
  readonly #label: string;
  readonly #run: string | undefined;
  readonly #summaryDir: string | undefined;
  #fd: number | undefined;
  #total = 0;
  #done = 0;
  #current: { path: string; started: number } | undefined;
  #lastLine = Date.now();
  #timer: NodeJS.Timeout | undefined;

  constructor(globalConfig: { rootDir: string }, _options?: unknown, _context?: unknown, env = process.env) {
    this.#rootDir = globalConfig.rootDir;
    this.#run = env.KUBEPLUS_ISOLATION_E2E_RUN || undefined;
    this.#label = runLabel(this.#run, requestedMinor(env) ?? nodeMinor());
    this.#summaryDir = env.KUBEPLUS_ISOLATION_E2E_SUMMARY_DIR || undefined;
    const fd = Number(env.KUBEPLUS_ISOLATION_E2E_PROGRESS_FD);
    this.#fd = Number.isInteger(fd) && fd > 2 ? fd : undefined;
  }

  /** One write per call, so that two runs writing to the same pipe never split each other's lines. */
  #progress(lines: readonly string[]): void {
    this.#lastLine = Date.now();
    if (this.#fd === undefined) return;
    try {
      writeSync(this.#fd, `${lines.join('\n')}\n`);
    } catch {
      this.#fd = undefined; // not open (run outside make test-e2e-both): no progress lines
    }
  }

  onRunStart(results: { numTotalTestSuites: number }): void {
    this.#total = results.numTotalTestSuites;
    this.#progress([startLine(this.#label, this.#total)]);
    if (this.#fd === undefined) return;
    this.#timer = setInterval(() => {
      const now = Date.now();
      if (this.#current === undefined || now - this.#lastLine < QUIET_MS) return;
      this.#progress([stillRunningLine(this.#label, this.#rootDir, this.#current.path, now - this.#current.started)]);
    }, QUIET_MS / 6);
    this.#timer.unref();
  }

  onTestFileStart(test: { path: string }): void {
    this.#current = { path: test.path, started: Date.now() };
  }

  onTestFileResult(_test: unknown, suite: SuiteResult): void {
    this.#current = undefined;
    this.#done += 1;
    this.#progress(suiteLines(this.#label, this.#rootDir, suite, { done: this.#done, total: this.#total }));
  }

  onRunComplete(_contexts: unknown, run: RunResult): void {
    clearInterval(this.#timer);
    const text = `${summaryLines(this.#label, this.#rootDir, run, Date.now()).join('\n')}\n`;
    if (this.#summaryDir === undefined) process.stderr.write(text);
    else writeFileSync(join(this.#summaryDir, `${this.#run ?? 'e2e'}.txt`), text);
  }
}
