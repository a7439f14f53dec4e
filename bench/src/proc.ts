/** Linux /proc readings: memory and CPU time of a process, pinning to CPUs, the machine itself. */
import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import os from 'node:os';

function statusField(pid: number, field: string): number {
  const text = readFileSync(`/proc/${pid}/status`, 'utf8');
  const m = new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(text);
  if (!m) throw new Error(`/proc/${pid}/status has no ${field}`);
  return Number(m[1]) * 1024;
}

/** Resident set size now, bytes. */
export function rssBytes(pid: number): number {
  return statusField(pid, 'VmRSS');
}

/** Peak resident set size since the process started, bytes. */
export function peakRssBytes(pid: number): number {
  return statusField(pid, 'VmHWM');
}

const CLOCK_TICKS = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;

/** User + system CPU time the process has used so far (all threads), seconds. */
export function cpuSeconds(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  // Fields after the parenthesised command name (which may contain spaces).
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  const utime = Number(fields[11]);
  const stime = Number(fields[12]);
  return (utime + stime) / CLOCK_TICKS;
}

/** Pins every thread of `pid` to `cpus` (taskset -a -p -c), e.g. "0" or "0-1". */
export function pinToCpus(pid: number, cpus: string): void {
  execFileSync('taskset', ['-a', '-p', '-c', cpus, String(pid)], { stdio: 'ignore' });
}

export function canPin(): boolean {
  try {
    execFileSync('taskset', ['-p', String(process.pid)], { stdio: 'ignore' });
    return os.availableParallelism() >= 2;
  } catch {
    return false;
  }
}

/** Every CPU this machine has, in taskset list form ("0-1"). */
export function allCpus(): string {
  return `0-${os.cpus().length - 1}`;
}

export interface MachineSnapshot {
  at: string;
  loadAverage: [number, number, number];
  /** Other processes of these names running besides ours (other engineers' control planes, tests). */
  otherProcesses: Record<string, number>;
  /** Processes using most CPU in the last second (name, % of one core), for context. */
  busiest: { command: string; cpuPercent: number }[];
}

const WATCHED = ['kube-apiserver', 'etcd', 'jest', 'tsc', 'biome'];

function commandLines(): { pid: number; cmd: string; comm: string }[] {
  const out: { pid: number; cmd: string; comm: string }[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const cmd = readFileSync(`/proc/${entry}/cmdline`, 'utf8').replaceAll('\0', ' ').trim();
      const comm = readFileSync(`/proc/${entry}/comm`, 'utf8').trim();
      out.push({ pid: Number(entry), cmd, comm });
    } catch {
      // gone meanwhile
    }
  }
  return out;
}

function totalTicks(pid: number): number | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return Number(fields[11]) + Number(fields[12]);
  } catch {
    return undefined;
  }
}

/** Load and what else runs; `ownPids` (and their names) are excluded from the "other" counts. */
export async function machineSnapshot(ownPids: ReadonlySet<number>): Promise<MachineSnapshot> {
  const procs = commandLines();
  const otherProcesses: Record<string, number> = {};
  for (const name of WATCHED) {
    otherProcesses[name] = procs.filter(
      (p) =>
        !ownPids.has(p.pid) &&
        p.pid !== process.pid &&
        (p.comm === name || p.cmd.includes(`/${name} `) || p.cmd.includes(`${name}.js`)),
    ).length;
  }
  const before = new Map<number, number>();
  for (const p of procs) {
    const t = totalTicks(p.pid);
    if (t !== undefined) before.set(p.pid, t);
  }
  await new Promise((r) => setTimeout(r, 1000));
  const busiest: { command: string; cpuPercent: number }[] = [];
  for (const p of procs) {
    const t0 = before.get(p.pid);
    const t1 = totalTicks(p.pid);
    if (t0 === undefined || t1 === undefined) continue;
    const pct = ((t1 - t0) / CLOCK_TICKS) * 100;
    if (pct >= 5) busiest.push({ command: p.comm, cpuPercent: Math.round(pct) });
  }
  busiest.sort((a, b) => b.cpuPercent - a.cpuPercent);
  const [l1, l5, l15] = os.loadavg();
  return {
    at: new Date().toISOString(),
    loadAverage: [l1 ?? 0, l5 ?? 0, l15 ?? 0],
    otherProcesses,
    busiest: busiest.slice(0, 6),
  };
}

export interface MachineInfo {
  nproc: number;
  cpuModel: string;
  cpuMHz: string | undefined;
  memoryGiB: number;
  kernel: string;
  node: string;
}

export function machineInfo(): MachineInfo {
  const cpuinfo = readFileSync('/proc/cpuinfo', 'utf8');
  const model = /^model name\s*:\s*(.+)$/m.exec(cpuinfo)?.[1]?.trim() ?? 'unknown';
  const mhz = /^cpu MHz\s*:\s*(.+)$/m.exec(cpuinfo)?.[1]?.trim();
  return {
    nproc: os.availableParallelism(),
    cpuModel: model,
    cpuMHz: mhz,
    memoryGiB: Math.round((os.totalmem() / 1024 ** 3) * 10) / 10,
    kernel: `${os.type()} ${os.release()}`,
    node: process.version,
  };
}
