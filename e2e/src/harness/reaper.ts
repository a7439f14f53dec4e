import { spawn } from 'node:child_process';
import { appendFileSync, closeSync, constants, openSync, readFileSync, rmSync, writeSync } from 'node:fs';

/**
 * Watchdog for the case no in-process handler can cover: the harness process being SIGKILLed
 * (or crashing natively). It runs as a separate, detached `node -e` process, checks every 500ms
 * that the harness process is alive, and once it is not, kills every process group listed in the
 * pid file (SIGTERM, then SIGKILL after 3s) and removes the temp dir unless told to keep it.
 * The pid file is append-only (several processes of a test run write to it): a line `<pid>` adds a
 * process group, a line `-<pid>` removes it again (its leader has exited and the group was killed),
 * so a pid reused later by an unrelated process group is never signalled.
 * It exits by itself when the pid file disappears (normal teardown) and is also killed by stop().
 */
const REAPER_SCRIPT = `
const fs = require('node:fs');
const [parentPid, pidFile, tmpDir, keep] = process.argv.slice(1);
const alive = (pid) => { try { process.kill(pid, 0); return true; } catch (e) { return e.code === 'EPERM'; } };
const groups = () => {
  const live = new Set();
  let text = '';
  try { text = fs.readFileSync(pidFile, 'utf8'); } catch {}
  for (const line of text.split('\\n')) { const n = Number(line); if (n > 0) live.add(n); else if (n < 0) live.delete(-n); }
  return [...live];
};
const signalAll = (pids, sig) => { for (const p of pids) { try { process.kill(-p, sig); } catch {} } };
const timer = setInterval(() => {
  if (!fs.existsSync(pidFile)) process.exit(0);
  if (alive(Number(parentPid))) return;
  clearInterval(timer);
  const pids = groups();
  signalAll(pids, 'SIGTERM');
  setTimeout(() => {
    signalAll(pids, 'SIGKILL');
    if (keep !== '1') { try { fs.rmSync(tmpDir, { recursive: true, force: true }); } catch {} }
    else { try { fs.rmSync(tmpDir + '/owner.json', { force: true }); } catch {} }
    process.exit(0);
  }, 3000);
}, 500);
`;

/** Name of the pid file in a cluster dir: process groups killed if the harness dies (see above). */
export const REAPER_PID_FILE = 'pids';

/** Adds a process group to a reaper's pid file (from any process of the test run). */
export function trackForReaper(pidFile: string, pid: number): void {
  appendFileSync(pidFile, `${pid}\n`);
}

/** Removes a process group from a reaper's pid file: it is gone (a no-op once the file is). */
export function untrackForReaper(pidFile: string, pid: number): void {
  let fd: number;
  try {
    fd = openSync(pidFile, constants.O_WRONLY | constants.O_APPEND); // never creates it again
  } catch {
    return; // No pid file any more: the control plane is torn down, nothing reads it.
  }
  try {
    writeSync(fd, `-${pid}\n`);
  } finally {
    closeSync(fd);
  }
}

/** The process groups a pid file lists: tracked and not untracked since. */
export function trackedGroups(pidFile: string): number[] {
  let text: string;
  try {
    text = readFileSync(pidFile, 'utf8');
  } catch {
    return [];
  }
  const live = new Set<number>();
  for (const line of text.split('\n')) {
    const n = Number(line);
    if (n > 0) live.add(n);
    else if (n < 0) live.delete(-n);
  }
  return [...live];
}

/** SIGKILLs every process group a pid file lists (e.g. services started by another process of the run). */
export function killTrackedGroups(pidFile: string): void {
  for (const pid of trackedGroups(pidFile)) {
    try {
      process.kill(-pid, 'SIGKILL');
    } catch {
      // Already gone.
    }
  }
}

export interface Reaper {
  /** Normal shutdown: the harness cleans up itself, the reaper is no longer needed. */
  dismiss(): void;
}

export function startReaper(opts: {
  pidFile: string;
  tmpDir: string;
  keepTmpOnCrash: boolean;
  logPath: string;
}): Reaper {
  appendFileSync(opts.pidFile, '');
  const log = openSync(opts.logPath, 'a');
  let child: ReturnType<typeof spawn>;
  try {
    child = spawn(
      process.execPath,
      ['-e', REAPER_SCRIPT, String(process.pid), opts.pidFile, opts.tmpDir, opts.keepTmpOnCrash ? '1' : '0'],
      { detached: true, stdio: ['ignore', log, log] },
    );
  } finally {
    closeSync(log);
  }
  child.unref();
  const reaperPid = child.pid;
  return {
    dismiss() {
      rmSync(opts.pidFile, { force: true });
      if (reaperPid !== undefined) {
        try {
          process.kill(reaperPid, 'SIGKILL');
        } catch {
          // Already gone: it exits by itself once the pid file is removed.
        }
      }
    },
  };
}
