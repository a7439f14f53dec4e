/**
 * Upstream Agent Sandbox's OWN e2e suite (the pinned sigs.k8s.io/agent-sandbox module's test/e2e
 * and test/e2e/extensions, compiled by `e2e/scripts/build-components.sh upstream-e2e`), run
 * unmodified against a real node with this project's chart installed and the upstream controller
 * running (Deployment agent-sandbox-controller in agent-sandbox-system, which upstream's framework
 * checks): issue 36, "Upstream's suite as a check". One jest test per upstream test, each run
 * alone (`-test.run ^<name>$ -test.parallel=1`); the tests not run are listed, with their reasons,
 * in UPSTREAM_EXCLUSIONS (e2e/src/harness/upstream-suite.ts) and shown here as skipped with them.
 *
 * The images upstream's tests name are this project's stand-ins, imported into the node's
 * containerd and tagged with upstream's names (UPSTREAM_IMAGE_STANDINS): nothing is pulled.
 *
 * `make test-agent-sandbox-upstream` runs it (KUBEPLUS_ISOLATION_UPSTREAM_SUITE=<the binaries' directory>); elsewhere
 * (`make test`) it is shown skipped, saying so (e2e/README.md "Upstream's own suite": why).
 */
import { execFile, execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import {
  BUSYBOX_ARCHIVE,
  failureBlocks,
  outputTail,
  parseOutcome,
  parseTestList,
  type RealNodeCluster,
  resolveNodeAssets,
  runArgs,
  summarize,
  UPSTREAM_BINARIES,
  UPSTREAM_IMAGE_STANDINS,
  type UpstreamPackage,
  type UpstreamResult,
  upstreamPlan,
} from '@kubeplus-isolation/e2e';
import { prepareSandboxNode, startProjectNode } from './support/real-node.js';

/** Set by `make test-agent-sandbox-upstream`: the directory of the test binaries and the busybox archive. */
const UPSTREAM_DIR = process.env.KUBEPLUS_ISOLATION_UPSTREAM_SUITE ?? '';
/** Go's own limit per test, and jest's a minute above it (the slowest upstream test takes ~2 min here). */
const GO_TIMEOUT_MIN = 8;
const POOL = 'upstream-pool';

/** Where build-components.sh put the test binaries and the busybox archive. */
function upstreamAssets(dir: string): string {
  const files = [...Object.values(UPSTREAM_BINARIES), BUSYBOX_ARCHIVE];
  const missing = files.filter((f) => !existsSync(join(dir, f)));
  if (missing.length > 0) {
    throw new Error(
      `upstream Agent Sandbox e2e: ${missing.join(', ')} missing in KUBEPLUS_ISOLATION_UPSTREAM_SUITE=${dir}: build them with \`e2e/scripts/build-components.sh upstream-e2e\` (\`make test-agent-sandbox-upstream\` does)`,
    );
  }
  return dir;
}

if (UPSTREAM_DIR === '') {
  describe.skip('upstream Agent Sandbox e2e [not run here: `make test-agent-sandbox-upstream` runs it]', () => {
    test('upstream Agent Sandbox e2e', () => {});
  });
} else {
  const assets = upstreamAssets(UPSTREAM_DIR);
  const binary = (pkg: UpstreamPackage): string => join(assets, UPSTREAM_BINARIES[pkg]);
  const plan = upstreamPlan({
    core: parseTestList(execFileSync(binary('core'), ['-test.list', '.'], { encoding: 'utf8' })),
    extensions: parseTestList(execFileSync(binary('extensions'), ['-test.list', '.'], { encoding: 'utf8' })),
  });
  const results: Array<{ pkg: UpstreamPackage; test: string; result: UpstreamResult | 'excluded'; detail?: string }> =
    plan.map((e) =>
      e.excluded === undefined
        ? { pkg: e.pkg, test: e.test, result: 'fail', detail: 'not run' }
        : { pkg: e.pkg, test: e.test, result: 'excluded', detail: e.excluded },
    );

  describe('upstream Agent Sandbox e2e, unmodified, beside the chart on a real node', () => {
    let cluster: RealNodeCluster;
    let work: string;

    beforeAll(async () => {
      work = mkdtempSync(join(tmpdir(), 'kpi-upstream-e2e-'));
      cluster = await startProjectNode([join(assets, BUSYBOX_ARCHIVE)]);
      const ctr = join(await resolveNodeAssets(), 'ctr');
      for (const s of UPSTREAM_IMAGE_STANDINS) {
        cluster.nodeExec(ctr, [
          '--address',
          cluster.layout.containerdSocket,
          '-n',
          'k8s.io',
          'images',
          'tag',
          '--force',
          s.from,
          s.to,
        ]);
        process.stderr.write(`[upstream] ${s.to} on the node is ${s.what}\n`);
      }
      await prepareSandboxNode(cluster, POOL);
    });

    afterAll(async () => {
      process.stderr.write(`${summarize(results)}\n`);
      await cluster?.stop();
      if (work) rmSync(work, { recursive: true, force: true });
    });

    for (const entry of plan) {
      const name = `${entry.pkg}/${entry.test}`;
      if (entry.excluded !== undefined) {
        test.skip(`${name} [excluded: ${entry.excluded}]`, () => {});
        continue;
      }
      test(
        name,
        async () => {
          const began = performance.now();
          const output = await new Promise<string>((resolve) => {
            execFile(
              binary(entry.pkg),
              runArgs(entry.test, GO_TIMEOUT_MIN),
              {
                cwd: work,
                env: {
                  ...process.env,
                  KUBECONFIG: cluster.cp.kubeconfigPath,
                  ARTIFACTS: join(work, 'artifacts'),
                },
                maxBuffer: 64 << 20,
              },
              // A failing test exits 1: its verdict is in the output either way.
              (_error, stdout, stderr) => resolve(`${stdout}${stderr}`),
            );
          });
          const outcome = parseOutcome(output, entry.test);
          const row = results.find((r) => r.pkg === entry.pkg && r.test === entry.test);
          if (row) {
            row.result = outcome.result;
            row.detail = outcome.detail;
          }
          process.stderr.write(
            `[upstream] ${outcome.result} ${name} (${((performance.now() - began) / 1000).toFixed(1)} s)${outcome.detail ? `: ${outcome.detail}` : ''}\n`,
          );
          if (outcome.result !== 'pass') {
            throw new Error(
              `${name}: ${outcome.result === 'skip' ? `skipped itself, but is not excluded: ${outcome.detail}` : (outcome.detail ?? 'failed')}\n--- its assertion failures ---\n${failureBlocks(output) || '(none printed)'}\n--- its output (tail) ---\n${outputTail(output, 30)}`,
            );
          }
          expect(outcome.result).toBe('pass');
        },
        (GO_TIMEOUT_MIN + 1) * 60_000,
      );
    }
  });
}
