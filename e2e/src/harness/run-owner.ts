import { readFileSync, writeFileSync } from 'node:fs';

/**
 * Which process owns a run's files on the host (a control plane's or a real node's temp dir), so a
 * later run can tell a dead run's leftovers from a live run's: the pid and its start time (field 22
 * of /proc/<pid>/stat, clock ticks since boot), which together never name two processes.
 */
export interface RunOwner {
  pid: number;
  startTime: number;
}

/** Start time of `pid` in clock ticks since boot; undefined once it is gone. */
export function processStartTime(pid: number): number | undefined {
  let stat: string;
  try {
    stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  } catch {
    return undefined;
  }
  // "pid (comm) state ppid …": comm may hold spaces and parentheses, so count from the last ')'.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  const ticks = Number(fields[19]); // field 22 overall: 2 fields precede the ')' tail
  return Number.isFinite(ticks) ? ticks : undefined;
}

export function runOwner(pid = process.pid): RunOwner {
  const startTime = processStartTime(pid);
  if (startTime === undefined) throw new Error(`process ${pid} has no /proc entry`);
  return { pid, startTime };
}

/** True while the owning process runs (a pid reused by another process does not count). */
export function ownerAlive(owner: RunOwner): boolean {
  return processStartTime(owner.pid) === owner.startTime;
}

/** Name of the owner file in a control plane's temp dir. */
export const OWNER_FILE = 'owner.json';

export function writeOwner(path: string, owner: RunOwner = runOwner()): void {
  writeFileSync(path, `${JSON.stringify(owner)}\n`);
}

/** The owner a file records; undefined when missing or unreadable (a run from before owner files). */
export function readOwner(path: string): RunOwner | undefined {
  try {
    const o = JSON.parse(readFileSync(path, 'utf8')) as Partial<RunOwner>;
    return typeof o.pid === 'number' && typeof o.startTime === 'number'
      ? { pid: o.pid, startTime: o.startTime }
      : undefined;
  } catch {
    return undefined;
  }
}
