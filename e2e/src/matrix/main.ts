#!/usr/bin/env node
/**
 * `make test-matrix`: the e2e suites on every Kubernetes minor the chart accepts, then the refusal
 * below its floor; writes docs/kubernetes-versions.md. Per minor: its binaries (build-components.sh,
 * cached), then jest on a control plane of that minor (KUBEPLUS_ISOLATION_K8S): the API-level suites,
 * and on the older minors the chart on a real node of that minor. On the newest the real-node suites
 * are `make test`'s, not repeated here. Exit status 1 if any minor failed.
 *
 *   node e2e/dist/matrix/main.js --floor 1.30 --below-floor 1.29 1.30 1.32 1.34 1.35 1.36
 */
import { execFileSync, spawn } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { cpus } from 'node:os';
import { join } from 'node:path';
import { nodeMinor } from '../harness/kubernetes-versions.js';
import { repoRoot } from '../harness/repo.js';
import { type JestJson, type MinorRun, passed, renderMatrix } from './report.js';

function parse(argv: readonly string[]): { floor: string; below?: string; minors: string[]; skip: string[] } {
  let floor = '';
  let below: string | undefined;
  const minors: string[] = [];
  const skip: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i] ?? '';
    if (a === '--floor') floor = argv[++i] ?? '';
    else if (a === '--below-floor') below = argv[++i];
    else if (a === '--skip') skip.push(...(argv[++i] ?? '').split(/[ ,]+/).filter((m) => m !== ''));
    else if (/^1\.\d+$/.test(a)) minors.push(a);
    else throw new Error(`test-matrix: unexpected argument ${JSON.stringify(a)}`);
  }
  if (floor === '' || minors.length === 0)
    throw new Error('usage: main.js --floor 1.30 [--below-floor 1.29] <minor>...');
  return { floor, ...(below === undefined ? {} : { below }), minors, skip };
}

const root = repoRoot();
const say = (m: string): void => {
  process.stderr.write(`[matrix] ${m}\n`);
};

function assetsFor(minor: string): string {
  const env: NodeJS.ProcessEnv = { ...process.env, KUBEPLUS_ISOLATION_K8S: minor };
  delete env.KUBEPLUS_ISOLATION_ASSETS;
  const script = join(root, 'e2e', 'scripts', 'build-components.sh');
  execFileSync(script, [], { env, stdio: ['ignore', 'ignore', 'inherit'] });
  // The node's binaries too: the chart on a real node of this minor.
  return (
    execFileSync(script, ['node'], { env, stdio: ['ignore', 'pipe', 'inherit'] })
      .toString()
      .trim()
      .split('\n')
      .at(-1) ?? ''
  );
}

async function runMinor(minor: string, scope: string, apiOnly: boolean, out: string): Promise<MinorRun> {
  const began = performance.now();
  const run: MinorRun = { minor, version: '', scope, results: undefined, seconds: 0 };
  try {
    const assets = assetsFor(minor);
    run.version = execFileSync(join(assets, 'kube-apiserver'), ['--version']).toString().trim().split(' ').at(-1) ?? '';
    say(`Kubernetes ${run.version}: ${scope}`);
    const file = join(out, `${minor}.json`);
    const code = await new Promise<number | null>((resolve) => {
      const child = spawn(
        process.execPath,
        [
          '--experimental-vm-modules',
          '--no-warnings=ExperimentalWarning',
          join(root, 'node_modules', 'jest', 'bin', 'jest.js'),
          '--selectProjects',
          'e2e',
          '--runInBand',
          '--json',
          `--outputFile=${file}`,
        ],
        {
          cwd: root,
          stdio: 'inherit',
          env: {
            ...process.env,
            KUBEPLUS_ISOLATION_K8S: minor,
            KUBEPLUS_ISOLATION_ASSETS: assets,
            ...(apiOnly ? { KUBEPLUS_ISOLATION_E2E_API_ONLY: '1' } : {}),
          },
        },
      );
      child.on('exit', (c) => resolve(c));
    });
    try {
      run.results = JSON.parse(readFileSync(file, 'utf8')) as JestJson;
    } catch {
      run.error = `jest exited ${code} without results`;
    }
  } catch (error) {
    run.error = (error as Error).message.split('\n')[0];
  }
  run.seconds = (performance.now() - began) / 1000;
  say(`${minor}: ${passed(run) ? 'pass' : 'FAIL'} in ${Math.round(run.seconds)} s`);
  return run;
}

async function main(): Promise<number> {
  const { floor, below, minors, skip } = parse(process.argv.slice(2));
  const newest = nodeMinor();
  const out = join(root, 'e2e', 'dist', 'matrix-results');
  mkdirSync(out, { recursive: true });
  const runs: MinorRun[] = [];
  for (const minor of minors) {
    if (skip.includes(minor)) {
      runs.push({
        minor,
        version: '',
        scope: 'not in this run (K8S_MATRIX_SKIP)',
        results: undefined,
        skipped: true,
        seconds: 0,
      });
      continue;
    }
    const scope =
      minor === newest
        ? 'API-level suites (the real-node suites: `make test`)'
        : `API-level suites + the chart on a real node of ${minor}${minor === floor ? ' (the floor)' : ''}`;
    runs.push(await runMinor(minor, scope, minor === newest, out));
  }
  if (below !== undefined) runs.push(await runMinor(below, 'below the floor: helm install must refuse', false, out));
  const commit = execFileSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: root }).toString().trim();
  const dirty =
    execFileSync('git', ['status', '--porcelain'], { cwd: root }).toString().trim() !== '' ? '+changes' : '';
  const doc = renderMatrix(runs, {
    commit: `${commit}${dirty}`,
    date: `${new Date().toISOString().slice(0, 16).replace('T', ' ')} UTC`,
    machine: `${cpus().length} cores`,
  });
  writeFileSync(join(root, 'docs', 'kubernetes-versions.md'), doc);
  say(`wrote docs/kubernetes-versions.md:\n${doc}`);
  return runs.every(passed) ? 0 : 1;
}

main().then(
  (code) => process.exit(code),
  (error: unknown) => {
    process.stderr.write(`${(error as Error).message}\n`);
    process.exit(2);
  },
);
