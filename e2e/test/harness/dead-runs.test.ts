/**
 * The sweep that removes what dead runs left (e2e/src/harness/dead-runs.ts), on files of its own:
 * a run is dead when its owner process is gone, and only then is anything of it touched. The
 * host-wide part (a real node's namespaces, cgroups, veth, sysctls, killed with its watchdogs) is
 * proven on a real node in real-node.test.ts ("a SIGKILL of a whole run, its watchdogs too").
 */
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import {
  describeSweep,
  ownerAlive,
  processStartTime,
  type RunOwner,
  readNodeRunRecords,
  repoRoot,
  runOwner,
  sweepDeadRuns,
  waitFor,
  writeNodeRunRecord,
} from '@kubeplus-isolation/e2e';
import { armNodeReaper, watchdogEntry } from '../../src/harness/node/node-reaper.js';

let root: string;
const children: ChildProcess[] = [];

/** The identity of a process that has exited: a dead run's owner. */
function deadOwner(): RunOwner {
  const child = spawnSync(
    process.execPath,
    [
      '-e',
      'console.log(process.pid + " " + require("fs").readFileSync("/proc/self/stat","utf8").split(") ")[1].split(" ")[19])',
    ],
    {
      encoding: 'utf8',
    },
  );
  const [pid, ticks] = child.stdout.trim().split(' ').map(Number);
  return { pid: pid ?? 0, startTime: ticks ?? 0 };
}

/** A process in a group of its own, as the harness starts components. */
function groupLeader(): ChildProcess {
  const child = spawn('sleep', ['600'], { detached: true, stdio: 'ignore' });
  children.push(child);
  return child;
}

beforeAll(() => {
  root = mkdtempSync(join(tmpdir(), 'dead-runs-test-'));
});
afterAll(() => {
  for (const c of children) {
    try {
      process.kill(-(c.pid ?? 0), 'SIGKILL');
    } catch {
      // gone
    }
  }
  rmSync(root, { recursive: true, force: true });
});

describe('run owners', () => {
  test('a live process is alive; the same pid with another start time, and an exited process, are not', () => {
    const me = runOwner();
    expect(me.startTime).toBe(processStartTime(process.pid));
    expect(ownerAlive(me)).toBe(true);
    expect(ownerAlive({ pid: me.pid, startTime: me.startTime + 1 })).toBe(false);
    expect(ownerAlive(deadOwner())).toBe(false);
  });
});

describe('sweepDeadRuns', () => {
  test("kills a dead control plane's process groups and removes its dir; a live one's stays", async () => {
    const tmp = join(root, 'cp');
    const dead = join(tmp, 'kubeplus-e2e-dead');
    const live = join(tmp, 'kubeplus-e2e-live');
    for (const d of [dead, live]) mkdirSync(d, { recursive: true });
    const owner = deadOwner();
    // The dead run's "etcd": started after its owner, so its group is the run's own.
    const orphan = groupLeader();
    const survivor = groupLeader();
    writeFileSync(join(dead, 'owner.json'), JSON.stringify(owner));
    writeFileSync(join(dead, 'pids'), `${orphan.pid}\n`);
    writeFileSync(join(live, 'owner.json'), JSON.stringify(runOwner()));
    writeFileSync(join(live, 'pids'), `${survivor.pid}\n`);
    const exited = new Promise((r) => orphan.on('exit', (_c, sig) => r(sig)));

    const report = sweepDeadRuns({ tmp, nodeRunsDir: join(root, 'none'), host: false });

    expect(report.controlPlanes).toEqual([dead]);
    expect(await exited).toBe('SIGKILL');
    expect(existsSync(dead)).toBe(false);
    expect(existsSync(live)).toBe(true);
    expect(survivor.exitCode).toBeNull();
    expect(describeSweep(report)).toBe(`removed what dead runs left: control plane ${dead}`);
  });

  test('spares a process group whose leader started before the dead run did (a reused id)', async () => {
    const tmp = join(root, 'reused');
    const dead = join(tmp, 'kubeplus-e2e-dead');
    mkdirSync(dead, { recursive: true });
    const older = groupLeader();
    await new Promise((r) => setTimeout(r, 50)); // at least one clock tick (10 ms) later
    const owner = deadOwner();
    expect(owner.startTime).toBeGreaterThan(processStartTime(older.pid ?? 0) ?? Number.POSITIVE_INFINITY);
    writeFileSync(join(dead, 'owner.json'), JSON.stringify(owner));
    writeFileSync(join(dead, 'pids'), `${older.pid}\n`);

    sweepDeadRuns({ tmp, nodeRunsDir: join(root, 'none'), host: false });

    expect(existsSync(dead)).toBe(false);
    expect(older.exitCode).toBeNull();
    expect(ownerAlive(runOwner(older.pid))).toBe(true);
  });

  test("removes a dead real node's dir and record, keeps a live one's, and the records' dir goes with the last", () => {
    const runsDir = join(root, 'node-runs');
    const deadDir = mkdtempSync(join(root, 'kubeplus-node-'));
    const liveDir = mkdtempSync(join(root, 'kubeplus-node-'));
    const live = runOwner();
    writeNodeRunRecord({ owner: deadOwner(), dir: deadDir }, runsDir);
    writeNodeRunRecord({ owner: live, dir: liveDir }, runsDir);

    const report = sweepDeadRuns({ tmp: join(root, 'none'), nodeRunsDir: runsDir, host: false });

    expect(report.nodeRuns).toEqual([deadDir]);
    expect(existsSync(deadDir)).toBe(false);
    expect(existsSync(liveDir)).toBe(true);
    expect(readNodeRunRecords(runsDir).map((r) => r.dir)).toEqual([liveDir]);

    // The live run ends without cleaning up (its owner is now "another start time"): swept too.
    writeNodeRunRecord({ owner: { ...live, startTime: live.startTime + 1 }, dir: liveDir }, runsDir);
    rmSync(join(runsDir, `${live.pid}-${live.startTime}.json`));
    sweepDeadRuns({ tmp: join(root, 'none'), nodeRunsDir: runsDir, host: false });
    expect(existsSync(liveDir)).toBe(false);
    expect(existsSync(runsDir)).toBe(false);
  });
});

describe("the real node's watchdog, armed from a jest suite", () => {
  test('runs (the built file: the sources cannot run under plain node) and tears down once its parent is gone', async () => {
    expect(watchdogEntry()).toBe(join(repoRoot(), 'e2e', 'dist', 'harness', 'node', 'node-reaper.js'));
    const dir = mkdtempSync(join(root, 'kubeplus-node-'));
    const parent = deadOwner();
    // Nothing of a node to kill: no namespace, a cgroup root that does not exist; the dir must go.
    armNodeReaper({
      parentPid: parent.pid,
      namespace: { holderPid: parent.pid, mountNs: 'mnt:[0]' },
      cgroupRoot: '/kubeplus-isolation-node-watchdog-test',
      owner: parent,
      dir,
      keepDir: false,
    });
    await waitFor("the watchdog to remove the dead parent's node dir", async () => !existsSync(dir) || undefined, {
      timeoutMs: 10_000,
      intervalMs: 100,
    });
  });
});
