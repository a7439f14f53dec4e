/**
 * The harness's process handling (e2e/src/harness/process.ts, services.ts, control-plane.ts), seen
 * from outside: each case runs a small Node.js script in a process of its own, importing the BUILT
 * harness (e2e/dist, like the demo and the benchmark do), and observes what that script and the
 * processes it started do.
 *
 * - Awaiting a child's exit must hold the event loop open: the harness unrefs its children, so a
 *   script whose only pending work is `await proc.stop()` / `await proc.exit` used to end before
 *   the exit was delivered (Node.js exit code 13, nothing printed).
 * - Every process the harness started must die with the script: when it ends normally, and when it
 *   is interrupted (SIGINT, SIGTERM, SIGHUP), after which the signal is re-raised so the script still
 *   dies of it. Interrupted scripts used to leave services (startService) running.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterAll, afterEach, beforeAll, describe, expect, test } from '@jest/globals';
import { repoRoot, waitFor } from '@kubeplus-isolation/e2e';
import { trackedGroups, trackForReaper, untrackForReaper } from '../../src/harness/reaper.js';

const DIST = join(repoRoot(), 'e2e', 'dist', 'harness');
const distUrl = (file: string): string => pathToFileURL(join(DIST, file)).href;

interface Script {
  readonly child: ChildProcess;
  readonly exit: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /** The script's scratch directory (argv[2]): logs of what it started. */
  readonly scratch: string;
  /** Everything the script printed on stdout so far. */
  stdout(): string;
  stderr(): string;
}

let dir: string;
/** Process groups the scripts reported, and the scripts themselves: killed after each case. */
const started: number[] = [];
const running: ChildProcess[] = [];

beforeAll(() => {
  if (!existsSync(join(DIST, 'process.js'))) throw new Error(`${DIST} is missing: run make build first`);
  dir = mkdtempSync(join(tmpdir(), 'kubeplus-harness-test-'));
});

afterEach(() => {
  // Whatever a failed case left behind.
  for (const child of running.splice(0)) {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  }
  for (const pid of started.splice(0)) {
    try {
      process.kill(-pid, 'SIGKILL');
    } catch {
      // gone, as it should be
    }
  }
});

afterAll(() => {
  rmSync(dir, { recursive: true, force: true });
});

let scripts = 0;

/** Runs `source` (an ES module) with this Node.js; argv[2] is a fresh scratch directory. */
function runScript(source: string): Script {
  const n = ++scripts;
  const scratch = join(dir, `case-${n}`);
  rmSync(scratch, { recursive: true, force: true });
  const file = join(dir, `case-${n}.mjs`);
  writeFileSync(file, source);
  const child = spawn(process.execPath, [file, scratch], { stdio: ['ignore', 'pipe', 'pipe'] });
  running.push(child);
  let out = '';
  let err = '';
  child.stdout?.on('data', (chunk: Buffer) => {
    out += chunk.toString();
  });
  child.stderr?.on('data', (chunk: Buffer) => {
    err += chunk.toString();
  });
  const exit = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => {
    child.once('close', (code, signal) => resolve({ code, signal }));
  });
  return { child, exit, scratch, stdout: () => out, stderr: () => err };
}

/** Waits for the first stdout line of the script holding JSON (the pids it started). */
function firstJsonLine<T>(script: Script, what: string): Promise<T> {
  return waitFor(
    `the script to print ${what}`,
    async (observe) => {
      observe({ stdout: script.stdout(), stderr: script.stderr(), exited: script.child.exitCode });
      const line = script
        .stdout()
        .split('\n')
        .find((l) => l.startsWith('{'));
      return line === undefined ? undefined : (JSON.parse(line) as T);
    },
    { timeoutMs: 120_000, intervalMs: 50 },
  );
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ESRCH') return false;
    throw error;
  }
}

/** Waits (bounded) until none of `pids` exists any more; fails naming the survivors. */
async function expectAllGone(pids: readonly number[]): Promise<void> {
  await waitFor(
    `processes ${pids.join(', ')} to be gone`,
    async (observe) => {
      const alive = pids.filter(isAlive);
      observe({ alive });
      return alive.length === 0;
    },
    { timeoutMs: 15_000, intervalMs: 50 },
  );
  for (const pid of pids) expect(isAlive(pid)).toBe(false);
}

const PRELUDE = `
import { mkdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { signalProcessGroup, startProcess } from ${JSON.stringify(distUrl('process.js'))};
const scratch = process.argv[2];
mkdirSync(scratch, { recursive: true });
const log = (name) => join(scratch, name + '.log');
const sleeper = (name) => startProcess({ name, command: 'sleep', args: ['600'], logPath: log(name) });
const idle = () => new Promise(() => setInterval(() => {}, 1 << 30));
`;

describe('awaiting a child process exit holds the event loop open', () => {
  test('await stop() of a child that ignores SIGTERM resolves once SIGKILL has ended it', async () => {
    const script = runScript(`${PRELUDE}
const proc = startProcess({
  name: 'stubborn',
  command: 'sh',
  args: ['-c', 'trap "" TERM; echo trapped; exec sleep 600'],
  logPath: log('stubborn'),
});
console.log(JSON.stringify({ pid: proc.pid }));
// SIGTERM must find the trap in place, or there is nothing for SIGKILL to do.
while (!readFileSync(log('stubborn'), 'utf8').split('\\n').includes('trapped')) {
  await new Promise((resolve) => setTimeout(resolve, 20));
}
console.log('stopped: ' + JSON.stringify(await proc.stop(100)));
`);
    const { pid } = await firstJsonLine<{ pid: number }>(script, 'its pid');
    started.push(pid);
    const exit = await script.exit;
    expect({ exit, stdout: script.stdout(), stderr: script.stderr() }).toEqual({
      exit: { code: 0, signal: null },
      stdout: `{"pid":${pid}}\nstopped: {"code":null,"signal":"SIGKILL"}\n`,
      stderr: '',
    });
    expect(readFileSync(join(script.scratch, 'stubborn.log'), 'utf8')).toContain(
      'no exit 100ms after SIGTERM, sending SIGKILL',
    );
    await expectAllGone([pid]);
  });

  test('await exit after the group was SIGKILLed resolves with the signal', async () => {
    const script = runScript(`${PRELUDE}
const proc = sleeper('victim');
signalProcessGroup(proc.pid, 'SIGKILL');
console.log('exit: ' + JSON.stringify(await proc.exit));
`);
    const exit = await script.exit;
    expect({ exit, stdout: script.stdout(), stderr: script.stderr() }).toEqual({
      exit: { code: 0, signal: null },
      stdout: 'exit: {"code":null,"signal":"SIGKILL"}\n',
      stderr: '',
    });
  });
});

describe('every process the harness started dies with the script', () => {
  test('a running child does not keep the script alive, and is killed when the script ends', async () => {
    const script = runScript(`${PRELUDE}
const proc = sleeper('left-running');
console.log(JSON.stringify({ pids: [proc.pid] }));
`);
    const { pids } = await firstJsonLine<{ pids: number[] }>(script, 'its pids');
    started.push(...pids);
    expect(await script.exit).toEqual({ code: 0, signal: null });
    await expectAllGone(pids);
  });

  test.each(['SIGINT', 'SIGTERM', 'SIGHUP'] as const)(
    '%s kills every process group it started (processes, services), then the signal ends the script',
    async (signal) => {
      const script = runScript(`${PRELUDE}
import { writeFileSync } from 'node:fs';
import { startService } from ${JSON.stringify(distUrl('services.js'))};
const entry = join(scratch, 'idle-service.mjs');
writeFileSync(entry, 'setInterval(() => {}, 1 << 30);\\n');
// startService reads only the cluster's log dir and temp dir (for the reaper's pid file).
const cluster = { dir: scratch, state: { logDir: scratch } };
const service = await startService(cluster, { name: 'service', entry, args: [] });
// A leader that forked: its child is in its process group, so it must die too.
const forker = startProcess({ name: 'forker', command: 'sh', args: ['-c', 'sleep 600 & echo $!; wait'], logPath: log('forker') });
const plain = sleeper('plain');
let grandchild;
while (!(grandchild = readFileSync(log('forker'), 'utf8').split('\\n').find((l) => /^\\d+$/.test(l)))) {
  await new Promise((resolve) => setTimeout(resolve, 20));
}
console.log(JSON.stringify({ pids: [service.process.pid, forker.pid, Number(grandchild), plain.pid] }));
await idle();
`);
      const { pids } = await firstJsonLine<{ pids: number[] }>(script, 'its pids');
      started.push(...pids);
      expect(pids.filter(isAlive)).toEqual(pids);
      script.child.kill(signal);
      expect(await script.exit).toEqual({ code: null, signal });
      await expectAllGone(pids);
    },
  );

  test('SIGINT during a control plane run also kills what only the pid file knows, and removes the temp dir', async () => {
    // Services a jest suite starts live in another module realm (or another process): the run's
    // reaper pid file is what this process knows of them.
    const script = runScript(`${PRELUDE}
import { spawn } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { startControlPlane } from ${JSON.stringify(distUrl('control-plane.js'))};
import { trackForReaper } from ${JSON.stringify(distUrl('reaper.js'))};
import { startService } from ${JSON.stringify(distUrl('services.js'))};
const cp = await startControlPlane({ tmpRoot: scratch });
const entry = join(scratch, 'idle-service.mjs');
writeFileSync(entry, 'setInterval(() => {}, 1 << 30);\\n');
const service = await startService(cp, { name: 'service', entry, args: [] });
const foreign = spawn('sleep', ['600'], { detached: true, stdio: 'ignore' });
foreign.unref();
trackForReaper(join(cp.dir, 'pids'), foreign.pid);
const components = cp.processes.map((p) => p.pid);
console.log(JSON.stringify({ dir: cp.dir, pids: [...components, service.process.pid, foreign.pid] }));
await idle();
`);
    const { pids, dir: cpDir } = await firstJsonLine<{ pids: number[]; dir: string }>(script, 'its pids');
    started.push(...pids);
    expect(pids).toHaveLength(6);
    expect(pids.filter(isAlive)).toEqual(pids);
    script.child.kill('SIGINT');
    expect(await script.exit).toEqual({ code: null, signal: 'SIGINT' });
    await expectAllGone(pids);
    expect(existsSync(cpDir)).toBe(false);
  });
});

describe('the reaper pid file', () => {
  test('lists the groups tracked and not untracked since, in order', () => {
    const pidFile = join(dir, 'pids');
    for (const pid of [101, 102, 103]) trackForReaper(pidFile, pid);
    untrackForReaper(pidFile, 102);
    untrackForReaper(pidFile, 101);
    trackForReaper(pidFile, 101); // the same pid, a new process
    expect(trackedGroups(pidFile).sort()).toEqual([101, 103]);
    expect(trackedGroups(join(dir, 'no-such-file'))).toEqual([]);
  });
});
