/**
 * The built entry point (dist/main.js) as a process: flags, exit codes, start-up failures.
 * The package is built first (tsc -b, incremental), so this tests the current sources. Running
 * against a real API server (leader election, handover, SIGTERM) is the e2e suites' job.
 */
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { beforeAll, describe, expect, it, jest } from '@jest/globals';

// Real processes on a shared 2-core machine: generous per-test bounds.
jest.setTimeout(30_000);

const ROOT = join(import.meta.dirname, '../../..');
const MAIN = join(ROOT, 'services/operator/dist/main.js');
const ENV: NodeJS.ProcessEnv = { ...process.env, PATH: `${dirname(process.execPath)}:${process.env.PATH ?? ''}` };
for (const name of ['KUBERNETES_SERVICE_HOST', 'KUBECONFIG', 'POD_NAMESPACE', 'POD_NAME', 'METRICS_PORT'])
  delete ENV[name];

interface Run {
  child: ChildProcess;
  stdout: () => string;
  stderr: () => string;
  exit: Promise<number | null>;
}

function run(args: string[]): Run {
  const child = spawn(process.execPath, [MAIN, ...args], { env: ENV, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  child.stdout?.on('data', (c: Buffer) => {
    out += c.toString();
  });
  child.stderr?.on('data', (c: Buffer) => {
    err += c.toString();
  });
  const exit = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  return { child, stdout: () => out, stderr: () => err, exit };
}

function logLines(text: string): Array<Record<string, unknown>> {
  return text
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as Record<string, unknown>);
}

/** A loopback port nothing listens on (bound, then released). */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  await new Promise<void>((resolve) => server.close(() => resolve()));
  if (address === null || typeof address === 'string') throw new Error('no port');
  return address.port;
}

beforeAll(() => {
  execFileSync(join(ROOT, 'node_modules/.bin/tsc'), ['-b', 'services/operator'], {
    cwd: ROOT,
    env: ENV,
    stdio: 'pipe',
  });
}, 120_000);

describe('kubeplus-isolation-operator (process)', () => {
  it('--help prints every flag and exits 0', async () => {
    const r = run(['--help']);
    expect(await r.exit).toBe(0);
    expect(r.stdout()).toContain('--leader-election-id <name>');
    expect(r.stdout()).toContain('env LEASE_DURATION; default "15s"');
  });

  it('--version prints the package version and exits 0', async () => {
    const r = run(['--version']);
    expect(await r.exit).toBe(0);
    expect(r.stdout()).toBe(`kubeplus-isolation-operator ${readFileSync(join(ROOT, 'VERSION'), 'utf8').trim()}\n`);
  });

  it('an invalid flag value exits 2 with a clear message on stderr', async () => {
    const r = run(['--lease-duration=15']);
    expect(await r.exit).toBe(2);
    expect(r.stderr()).toMatch(/^kubeplus-isolation-operator: --lease-duration: must be a duration such as 15s/);
    expect(r.stderr()).toContain('--help');
  });

  it('outside a cluster and without --kubeconfig it exits 1, saying what to do', async () => {
    const r = run(['--metrics-port=0']);
    expect(await r.exit).toBe(1);
    expect(logLines(r.stdout()).find((l) => l.level === 'error')?.error).toMatch(/pass --kubeconfig/);
  });

  /** A kubeconfig naming an API server on a closed loopback port (nothing answers). */
  async function unreachableKubeconfig(): Promise<string> {
    const port = await closedPort();
    const kubeconfig = join(mkdtempSync(join(tmpdir(), 'operator-main-')), 'kubeconfig');
    writeFileSync(
      kubeconfig,
      [
        'apiVersion: v1',
        'kind: Config',
        `clusters: [{name: c, cluster: {server: "https://127.0.0.1:${port}", insecure-skip-tls-verify: true}}]`,
        'users: [{name: u, user: {token: t}}]',
        'contexts: [{name: x, context: {cluster: c, user: u}}]',
        'current-context: x',
      ].join('\n'),
    );
    return kubeconfig;
  }

  it('exits 1 naming the failed step when the API server cannot be reached', async () => {
    const kubeconfig = await unreachableKubeconfig();
    const r = run([`--kubeconfig=${kubeconfig}`, '--metrics-port=0']);
    expect(await r.exit).toBe(1);
    const error = logLines(r.stdout()).find((l) => l.level === 'error');
    expect(error?.msg).toBe('operator failed');
    // The first step: finding KubePlus's namespace (no --platform-namespace given).
    expect(error?.error).toMatch(
      /^cannot list MutatingWebhookConfigurations to find KubePlus's namespace .*ECONNREFUSED/,
    );
  });

  it('with --platform-namespace, nothing is listed to find it: the first step that fails is API discovery', async () => {
    const kubeconfig = await unreachableKubeconfig();
    const r = run([`--kubeconfig=${kubeconfig}`, '--metrics-port=0', '--platform-namespace=default']);
    expect(await r.exit).toBe(1);
    const error = logLines(r.stdout()).find((l) => l.level === 'error');
    expect(error?.msg).toBe('operator failed');
    expect(error?.error).toMatch(/^API discovery of admissionregistration.k8s.io failed: .*ECONNREFUSED/);
    expect(logLines(r.stdout()).find((l) => l.msg === 'platform namespace')).toMatchObject({
      platformNamespace: 'default',
      source: 'flag',
    });
  });
});
