import { spawn } from 'node:child_process';
import { appendFileSync, closeSync, openSync, rmSync } from 'node:fs';

/**
 * Watchdog for the case no in-process handler can cover: the harness process being SIGKILLed
 * (or crashing natively). It runs as a separate, detached `node -e` process, checks every 500ms
 * that the harness process is alive, and once it is not, kills every process group listed in the
 * pid file (SIGTERM, then SIGKILL after 3s) and removes the temp dir unless told to keep it.
 * It exits by itself when the pid file disappears (normal teardown) and is also killed by stop().
 */
const REAPER_SCRIPT = `
const fs = require('node:fs');
const [parentPid, pidFile, tmpDir, keep] = process.argv.slice(1);
const alive = (pid) => { try { process.kill(pid, 0); return true; } catch (e) { return e.code === 'EPERM'; } };
const groups = () => { try { return fs.readFileSync(pidFile, 'utf8').split('\\n').filter(Boolean).map(Number); } catch { return []; } };
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
    process.exit(0);
  }, 3000);
}, 500);
`;

/** Name of the pid file in a cluster dir: one process-group id per line, killed if the harness dies. */
export const REAPER_PID_FILE = 'pids';

/** Adds a process group to a reaper's pid file (from any process of the test run). */
export function trackForReaper(pidFile: string, pid: number): void {
  appendFileSync(pidFile, `${pid}\n`);
}

export interface Reaper {
  /** Records a process group the reaper must kill if the harness dies. */
  track(pid: number): void;
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
    track: (pid) => trackForReaper(opts.pidFile, pid),
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
