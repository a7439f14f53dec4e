import { spawn } from 'node:child_process';
import { closeSync, openSync, readFileSync, writeSync } from 'node:fs';

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
}

/** A child process running in its own process group, logging to a file. */
export interface ManagedProcess {
  readonly name: string;
  readonly pid: number;
  readonly logPath: string;
  /** Resolves when the process has exited (never rejects). */
  readonly exit: Promise<ProcessExit>;
  /** The exit status once the process has exited, else undefined. */
  exited(): ProcessExit | undefined;
  /** SIGTERM to the whole process group, SIGKILL after `graceMs`; resolves once it has exited. */
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
 * Starts `spec.command` detached (a new process group, so a Ctrl-C in the terminal does not reach it
 * directly and stop() can kill everything it forks) with output going to `spec.logPath`.
 * The child is unref'ed: it never keeps the Node.js event loop alive on its own.
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
  let status: ProcessExit | undefined;
  const exit = new Promise<ProcessExit>((resolve) => {
    child.once('exit', (code, signal) => {
      status = { code, signal };
      resolve(status);
    });
    child.once('error', (error) => {
      writeLogLine(spec.logPath, `# spawn error: ${error.message}`);
      status ??= { code: null, signal: null };
      resolve(status);
    });
  });
  const { pid } = child;
  if (pid === undefined) {
    // spawn failed synchronously (e.g. ENOENT); the 'error' event above records it in the log.
    throw new Error(`could not start ${spec.name}: ${spec.command} is missing or not executable`);
  }
  child.unref();
  return {
    name: spec.name,
    pid,
    logPath: spec.logPath,
    exit,
    exited: () => status,
    async stop(graceMs = 10_000) {
      if (status) {
        // The leader is gone; make sure nothing it forked survives it.
        signalProcessGroup(pid, 'SIGKILL');
        return status;
      }
      signalProcessGroup(pid, 'SIGTERM');
      let timer: NodeJS.Timeout | undefined;
      const timedOut = await Promise.race([
        exit.then(() => false),
        new Promise<boolean>((resolve) => {
          timer = setTimeout(() => resolve(true), graceMs);
        }),
      ]);
      clearTimeout(timer); // a pending grace timer would hold the event loop open
      if (timedOut) writeLogLine(spec.logPath, `# harness: no exit ${graceMs}ms after SIGTERM, sending SIGKILL`);
      signalProcessGroup(pid, 'SIGKILL');
      return exit;
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
