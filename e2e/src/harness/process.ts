import { spawn } from 'node:child_process';
import { closeSync, openSync, readFileSync, writeSync } from 'node:fs';
import { trackForReaper, untrackForReaper } from './reaper.js';

export interface ProcessExit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

export interface ProcessSpec {
  /** Short name, used for the log file and in error messages. */
  name: string;
  command: string;
  args: readonly string[];
  /** stdout and stderr are both appended to this file (the parent holds no pipe). */
  logPath: string;
  env?: NodeJS.ProcessEnv;
  cwd?: string;
  /**
   * Also list the process group in this reaper pid file (reaper.ts) while its leader runs: the
   * control plane's reaper, interrupt cleanup and teardown kill what is listed there.
   */
  reaperPidFile?: string;
}

/** A child process running in its own process group, logging to a file. */
export interface ManagedProcess {
  readonly name: string;
  readonly pid: number;
  readonly logPath: string;
  /**
   * Resolves when the process has exited (never rejects). Reading it holds the event loop open
   * until then (so `await proc.exit` works as a process's last pending work).
   */
  readonly exit: Promise<ProcessExit>;
  /** The exit status once the process has exited, else undefined. */
  exited(): ProcessExit | undefined;
  /**
   * SIGTERM to the whole process group, SIGKILL after `graceMs`; resolves once it has exited (and
   * with it everything in its group). Holds the event loop open meanwhile.
   */
  stop(graceMs?: number): Promise<ProcessExit>;
}

export function describeExit(exit: ProcessExit): string {
  return exit.signal ? `killed by ${exit.signal}` : `exited with code ${exit.code}`;
}

/** Sends `signal` to the process group led by `pid`; false if there is no such group any more. */
export function signalProcessGroup(pid: number, signal: NodeJS.Signals): boolean {
  try {
    process.kill(-pid, signal);
    return true;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ESRCH') return false;
    throw error;
  }
}

/**
 * Every process group startProcess() started whose leader has not exited yet (pid → name). They
 * are killed (SIGKILL, the whole group) when this Node.js process exits, and when it is
 * interrupted: SIGINT, SIGTERM or SIGHUP kill them all synchronously, run the interrupt cleanups
 * (onInterrupt), then re-raise the signal so the process still dies of it (exit status 128+n for a
 * shell). Without this, children started outside a control plane (services, the benchmark's
 * processes) survived a Ctrl-C: they are detached and the signal's default action skips 'exit'
 * handlers. The handlers are installed only while there is something to clean up.
 *
 * One registry per module instance: jest runs suites in their own module registry with a
 * stand-in `process` object that never receives signals. What those suites start is also listed in
 * the control plane's reaper pid file (ProcessSpec.reaperPidFile), which the control plane's own
 * interrupt cleanup and teardown kill (see control-plane.ts).
 */
const running = new Map<number, string>();
const interruptCleanups = new Set<() => void>();
const INTERRUPT_SIGNALS = ['SIGINT', 'SIGTERM', 'SIGHUP'] as const;
let handlersInstalled = false;

function killAllNow(): void {
  for (const pid of running.keys()) signalProcessGroup(pid, 'SIGKILL');
}

function onInterruptSignal(signal: NodeJS.Signals): void {
  killAllNow();
  for (const cleanup of [...interruptCleanups]) {
    try {
      cleanup();
    } catch (error) {
      process.stderr.write(`harness: interrupt cleanup failed: ${(error as Error).message}\n`);
    }
  }
  setHandlers(false);
  // No listener left (unless someone else added one): the default action ends the process.
  process.kill(process.pid, signal);
}

function setHandlers(install: boolean): void {
  if (install === handlersInstalled) return;
  handlersInstalled = install;
  if (install) {
    process.on('exit', killAllNow);
    for (const s of INTERRUPT_SIGNALS) process.on(s, onInterruptSignal);
  } else {
    process.off('exit', killAllNow);
    for (const s of INTERRUPT_SIGNALS) process.off(s, onInterruptSignal);
  }
}

function updateHandlers(): void {
  setHandlers(running.size > 0 || interruptCleanups.size > 0);
}

/**
 * Registers synchronous work to do when this process is interrupted (SIGINT, SIGTERM, SIGHUP):
 * it runs after every running process group has been killed, before the signal is re-raised
 * (e.g. remove a temp dir). Returns the function that unregisters it.
 */
export function onInterrupt(cleanup: () => void): () => void {
  interruptCleanups.add(cleanup);
  updateHandlers();
  return () => {
    interruptCleanups.delete(cleanup);
    updateHandlers();
  };
}

/**
 * Starts `spec.command` detached (a new process group, so a Ctrl-C in the terminal does not reach it
 * directly and stop() can kill everything it forks) with output going to `spec.logPath`.
 * The child is unref'ed: it never keeps the Node.js event loop alive on its own, only while someone
 * awaits its exit (`exit`, `stop()`). It is killed with this process (see `running` above).
 * When its leader exits, whatever it forked is killed too (SIGKILL to the group).
 */
export function startProcess(spec: ProcessSpec): ManagedProcess {
  const fd = openSync(spec.logPath, 'a');
  writeSync(fd, `# ${new Date().toISOString()} ${spec.command} ${spec.args.join(' ')}\n`);
  let child: ReturnType<typeof spawn>;
  try {
    child = spawn(spec.command, spec.args, {
      cwd: spec.cwd,
      env: spec.env ?? process.env,
      detached: true,
      stdio: ['ignore', fd, fd],
    });
  } finally {
    closeSync(fd);
  }
  const { pid } = child;
  let status: ProcessExit | undefined;
  const exit = new Promise<ProcessExit>((resolve) => {
    child.once('exit', (code, signal) => {
      status = { code, signal };
      if (pid !== undefined) {
        // The leader is gone; make sure nothing it forked survives it, then forget the group
        // (its id may be reused by an unrelated process group from now on).
        signalProcessGroup(pid, 'SIGKILL');
        running.delete(pid);
        if (spec.reaperPidFile) untrackForReaper(spec.reaperPidFile, pid);
        updateHandlers();
      }
      resolve(status);
    });
    child.once('error', (error) => {
      writeLogLine(spec.logPath, `# spawn error: ${error.message}`);
      status ??= { code: null, signal: null };
      resolve(status);
    });
  });
  if (pid === undefined) {
    // spawn failed synchronously (e.g. ENOENT); the 'error' event above records it in the log.
    throw new Error(`could not start ${spec.name}: ${spec.command} is missing or not executable`);
  }
  running.set(pid, spec.name);
  if (spec.reaperPidFile) trackForReaper(spec.reaperPidFile, pid);
  updateHandlers();
  child.unref();
  /**
   * The exit promise, holding the event loop open until it settles: an unref'ed child's 'exit'
   * is not delivered if nothing else keeps the loop alive, so `await proc.exit` (or stop()) as a
   * process's last pending work would let Node.js end with the await unsettled (exit code 13).
   * Once the child has exited its handle is closed, so the ref holds nothing any more.
   */
  const awaited = (): Promise<ProcessExit> => {
    if (!status) child.ref();
    return exit;
  };
  return {
    name: spec.name,
    pid,
    logPath: spec.logPath,
    get exit() {
      return awaited();
    },
    exited: () => status,
    async stop(graceMs = 10_000) {
      // Already exited: its group was killed then.
      if (status) return status;
      const exited = awaited();
      signalProcessGroup(pid, 'SIGTERM');
      let timer: NodeJS.Timeout | undefined;
      const timedOut = await Promise.race([
        exited.then(() => false),
        new Promise<boolean>((resolve) => {
          timer = setTimeout(() => resolve(true), graceMs);
        }),
      ]);
      clearTimeout(timer); // a pending grace timer would hold the event loop open
      if (timedOut) {
        writeLogLine(spec.logPath, `# harness: no exit ${graceMs}ms after SIGTERM, sending SIGKILL`);
        signalProcessGroup(pid, 'SIGKILL');
      }
      return exited;
    },
  };
}

function writeLogLine(path: string, line: string): void {
  try {
    const fd = openSync(path, 'a');
    try {
      writeSync(fd, `${line}\n`);
    } finally {
      closeSync(fd);
    }
  } catch {
    // The log directory may already be gone during teardown.
  }
}

/** The last `lines` lines of a text file ('' if it cannot be read). */
export function tailFile(path: string, lines = 40): string {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch {
    return '';
  }
  const all = text.split('\n');
  if (all.at(-1) === '') all.pop();
  return all.slice(-lines).join('\n');
}
