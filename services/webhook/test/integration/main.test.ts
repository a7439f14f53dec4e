/**
 * The built entry point (dist/main.js) as a process: flags, exit codes, SIGTERM drain, and the
 * modules it loads. The package is built first (tsc -b, incremental), so this tests the current sources.
 */
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it, jest } from '@jest/globals';
import { generatePair } from '../helpers/certs.js';
import { FakeApiServer } from '../helpers/fake-apiserver.js';
import { decodePatch, namespace, review, TEAM_A_ANNOTATION } from '../helpers/fixtures.js';
import { eventually, httpsJson } from '../helpers/https-client.js';

// Real processes and sockets on a shared 2-core machine: generous per-test bounds.
jest.setTimeout(30_000);

const ROOT = join(import.meta.dirname, '../../../..');
const MAIN = join(ROOT, 'services/webhook/dist/main.js');
const ENV: NodeJS.ProcessEnv = { ...process.env, PATH: `${dirname(process.execPath)}:${process.env.PATH ?? ''}` };
delete ENV.KUBERNETES_SERVICE_HOST;
delete ENV.KUBECONFIG;

interface Run {
  child: ChildProcess;
  stdout: () => string;
  stderr: () => string;
  exit: Promise<number | null>;
}

function run(args: string[], nodeArgs: string[] = [], env: NodeJS.ProcessEnv = {}): Run {
  const child = spawn(process.execPath, [...nodeArgs, MAIN, ...args], {
    env: { ...ENV, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
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

beforeAll(() => {
  execFileSync(join(ROOT, 'node_modules/.bin/tsc'), ['-b', 'services/webhook'], { cwd: ROOT, env: ENV, stdio: 'pipe' });
}, 120_000);

describe('kubeplus-node-isolation-webhook (process)', () => {
  it('--help prints every flag and exits 0', async () => {
    const r = run(['--help']);
    expect(await r.exit).toBe(0);
    expect(r.stdout()).toContain('--live-lookup-timeout <duration>');
    expect(r.stdout()).toContain('env LIVE_LOOKUP_TIMEOUT');
  });

  it('--version prints the package version and exits 0', async () => {
    const r = run(['--version']);
    expect(await r.exit).toBe(0);
    expect(r.stdout()).toBe(`kubeplus-node-isolation-webhook ${readFileSync(join(ROOT, 'VERSION'), 'utf8').trim()}\n`);
  });

  it('an invalid flag value exits 2 with a clear message on stderr', async () => {
    const r = run(['--port=http']);
    expect(await r.exit).toBe(2);
    expect(r.stderr()).toMatch(/--port: must be a port number from 0 to 65535, got "http"/);
    expect(r.stderr()).toContain('--help');
  });

  it('outside a cluster and without --kubeconfig it exits 1, saying what to do', async () => {
    const r = run(['--port=0', '--metrics-port=0']);
    expect(await r.exit).toBe(1);
    expect(logLines(r.stdout()).find((l) => l.level === 'error')?.error).toMatch(/pass --kubeconfig/);
  });
});

describe('SIGTERM', () => {
  const api = new FakeApiServer();
  beforeAll(() => api.start());
  afterAll(() => api.stop());

  it('drains: the in-flight admission completes, then the process exits 0', async () => {
    const pair = await generatePair(mkdtempSync(join(tmpdir(), 'webhook-main-')), 'webhook');
    const r = run([
      '--port=0',
      '--metrics-port=0',
      '--bind-address=127.0.0.1',
      `--tls-cert-file=${pair.certFile}`,
      `--tls-key-file=${pair.keyFile}`,
      `--kubeconfig=${api.kubeconfig()}`,
      '--live-lookup-timeout=5s',
      '--shutdown-delay=0',
      '--shutdown-timeout=5s',
    ]);
    try {
      await eventually(async () => logLines(r.stdout()).some((l) => l.msg === 'webhook serving'), 'startup');
      const port = logLines(r.stdout()).find((l) => l.msg === 'webhook serving')?.port as number;
      await eventually(async () => (await httpsJson(port, 'GET', '/readyz')).status === 200, 'informer synced');

      // A namespace the watch has not announced: its admission waits on a slow live GET.
      api.getDelayMs = 700;
      api.put(namespace('late', { annotation: TEAM_A_ANNOTATION }), { announce: false });
      const inFlight = httpsJson(port, 'POST', '/mutate/pods', review({ namespace: 'late' }));
      await eventually(async () => api.requests.includes('GET /api/v1/namespaces/late'), 'the live GET');
      r.child.kill('SIGTERM');

      const res = await inFlight;
      expect(res.status).toBe(200);
      const body = res.body as { response: { patch?: string } };
      expect(decodePatch(body.response.patch ?? '')).toEqual(
        expect.arrayContaining([{ op: 'add', path: '/spec/nodeSelector', value: { pool: 'team-a-pool' } }]),
      );
      expect(await r.exit).toBe(0);
      const messages = logLines(r.stdout()).map((l) => l.msg);
      expect(messages).toEqual(expect.arrayContaining(['signal received', 'shutdown complete']));
      await expect(httpsJson(port, 'GET', '/healthz')).rejects.toMatchObject({ code: 'ECONNREFUSED' });
    } finally {
      api.getDelayMs = 0;
      r.child.kill('SIGKILL');
    }
  }, 20_000);
});

/**
 * @kubernetes/client-node is not loaded at run time: importing it alone costs ~80 MiB of RSS
 * (README.md, "Memory"). A resolve hook records every module the running webhook loads, ESM and
 * CommonJS, while it lists, watches and serves; the list must hold the webhook's own client
 * modules (so the hook saw the graph) and nothing of client-node.
 */
describe('modules loaded at run time', () => {
  let api: FakeApiServer;
  beforeAll(async () => {
    api = new FakeApiServer({
      tls: await generatePair(mkdtempSync(join(tmpdir(), 'webhook-graph-api-')), 'apiserver'),
    });
    await api.start();
  });
  afterAll(() => api.stop());

  it('include the webhook and its API client, and not @kubernetes/client-node', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'webhook-graph-'));
    const hook = join(dir, 'record-modules.mjs');
    const list = join(dir, 'modules.txt');
    writeFileSync(
      hook,
      [
        "import { writeFileSync } from 'node:fs';",
        "import { registerHooks } from 'node:module';",
        'const seen = new Set();',
        'registerHooks({ resolve(specifier, context, next) { const r = next(specifier, context); seen.add(r.url); return r; } });',
        "process.on('exit', () => writeFileSync(process.env.MODULE_LIST_FILE, [...seen].join('\\n')));",
      ].join('\n'),
    );
    const pair = await generatePair(join(dir, 'tls'), 'webhook');
    api.put(namespace('team-a', { annotation: TEAM_A_ANNOTATION }), { announce: false });
    const r = run(
      [
        '--port=0',
        '--metrics-port=0',
        '--bind-address=127.0.0.1',
        `--tls-cert-file=${pair.certFile}`,
        `--tls-key-file=${pair.keyFile}`,
        `--kubeconfig=${api.kubeconfig()}`,
        '--shutdown-delay=0',
      ],
      ['--import', hook],
      { MODULE_LIST_FILE: list },
    );
    try {
      await eventually(async () => logLines(r.stdout()).some((l) => l.msg === 'webhook serving'), 'startup');
      const port = logLines(r.stdout()).find((l) => l.msg === 'webhook serving')?.port as number;
      await eventually(async () => (await httpsJson(port, 'GET', '/readyz')).status === 200, 'informer synced');
      // A cache miss: the live GET path runs too.
      await httpsJson(port, 'POST', '/mutate/pods', review({ namespace: 'not-yet-seen' }));
      r.child.kill('SIGTERM');
      expect(await r.exit).toBe(0);
    } finally {
      r.child.kill('SIGKILL');
    }
    const modules = readFileSync(list, 'utf8').split('\n');
    for (const own of ['main.js', 'webhook.js', 'kube/client.js', 'kube/connection.js', 'cache/informer.js']) {
      expect(modules).toContainEqual(expect.stringMatching(new RegExp(`/services/webhook/dist/${own}$`)));
    }
    expect(modules).toContainEqual(expect.stringMatching(/js-yaml/));
    expect(modules.filter((m) => /client-node/.test(m))).toEqual([]);
    expect(api.requests).toContain('GET /api/v1/namespaces/not-yet-seen');
    const pkg = JSON.parse(readFileSync(join(ROOT, 'services/webhook/package.json'), 'utf8')) as {
      dependencies: Record<string, string>;
    };
    expect(Object.keys(pkg.dependencies)).not.toContain('@kubernetes/client-node');
  });
});
