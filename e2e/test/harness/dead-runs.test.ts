/**
 * The sweep that removes what dead runs left (e2e/src/harness/dead-runs.ts), on files of its own:
 * a run is dead when its owner process is gone, and only then is anything of it touched. The
 * host-wide part (a real node's namespaces, cgroups, veth, sysctls, killed with its watchdogs) is
 * proven on a real node in real-node.test.ts ("a SIGKILL of a whole run, its watchdogs too"). Sweeps
 * take turns through a lock (sweep-lock.ts).
 */
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import {
  acquireSweepLock,
  describeSweep,
  ownerAlive,
  processStartTime,
  type RunOwner,
  readNodeRunRecords,
  readOwner,
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

describe('the sweep lock: one sweep at a time on a machine', () => {
  /** A dead control plane under `tmp` (no process groups): what a sweep removes. */
  function deadControlPlane(tmp: string): string {
    const dir = join(tmp, 'kubeplus-e2e-dead');
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, 'owner.json'), JSON.stringify(deadOwner()));
    return dir;
  }

  test('a sweep waits while another live process holds the lock, and sweeps once it lets go', () => {
    const tmp = join(root, 'lock-wait');
    const dead = deadControlPlane(tmp);
    const lock = join(root, 'wait.lock');
    const released = join(root, 'released');
    // Another process holds the lock for half a second, then marks that it let go and releases it.
    const holder = spawn('sh', ['-c', `sleep 0.5; touch ${released}; rm -rf ${lock}`], { stdio: 'ignore' });
    children.push(holder);
    mkdirSync(lock);
    writeFileSync(join(lock, 'owner.json'), JSON.stringify(runOwner(holder.pid)));

    const report = sweepDeadRuns({ tmp, nodeRunsDir: join(root, 'none'), host: false, lock });

    expect(existsSync(released)).toBe(true); // it swept only after the holder had let go
    expect(report).toMatchObject({ controlPlanes: [dead], problems: [] });
    expect(existsSync(lock)).toBe(false); // and released the lock it took
  });

  test('a lock held past the timeout: nothing is swept, and the report says who holds it', () => {
    const tmp = join(root, 'lock-timeout');
    const dead = deadControlPlane(tmp);
    const lock = join(root, 'timeout.lock');
    const holder = groupLeader();
    mkdirSync(lock);
    writeFileSync(join(lock, 'owner.json'), JSON.stringify(runOwner(holder.pid)));

    const report = sweepDeadRuns({ tmp, nodeRunsDir: join(root, 'none'), host: false, lock, lockTimeoutMs: 300 });

    expect(report.controlPlanes).toEqual([]);
    expect(existsSync(dead)).toBe(true);
    expect(describeSweep(report)).toBe(
      `could not remove: nothing swept: process ${holder.pid} has held the sweep lock ${lock} for over 300 ms`,
    );
    expect(existsSync(lock)).toBe(true); // still the live holder's
  });

  test("a dead holder's lock is taken over at once; so is one left without an owner, once it is old", () => {
    const lock = join(root, 'stale.lock');
    mkdirSync(lock);
    writeFileSync(join(lock, 'owner.json'), JSON.stringify(deadOwner()));
    const taken = acquireSweepLock({ path: lock, timeoutMs: 0 });
    expect('release' in taken && readOwner(join(lock, 'owner.json'))).toEqual(runOwner());
    if ('release' in taken) taken.release();
    expect(existsSync(lock)).toBe(false);

    // Its maker died between mkdir and writing the owner: waited for while new, taken once old.
    mkdirSync(lock);
    expect(acquireSweepLock({ path: lock, timeoutMs: 0 })).toEqual({ heldBy: 'a process taking it now' });
    const old = new Date(Date.now() - 60_000);
    utimesSync(lock, old, old);
    const retaken = acquireSweepLock({ path: lock, timeoutMs: 0 });
    expect('release' in retaken).toBe(true);
    if ('release' in retaken) retaken.release();
    expect(existsSync(lock)).toBe(false);
  });

  test('the holder sweeps without waiting for itself, and the lock stays its own until it releases it', () => {
    const tmp = join(root, 'lock-holder');
    const dead = deadControlPlane(tmp);
    const lock = join(root, 'holder.lock');
    const held = acquireSweepLock({ path: lock, timeoutMs: 0 });
    if (!('release' in held)) throw new Error(`lock held by ${held.heldBy}`);

    const report = sweepDeadRuns({ tmp, nodeRunsDir: join(root, 'none'), host: false, lock, lockTimeoutMs: 0 });

    expect(report).toMatchObject({ controlPlanes: [dead], problems: [] });
    expect(readOwner(join(lock, 'owner.json'))).toEqual(runOwner());
    held.release();
    held.release(); // a second call is a no-op
    expect(existsSync(lock)).toBe(false);
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
