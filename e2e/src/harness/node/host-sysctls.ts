import { existsSync, mkdirSync, readFileSync, rmdirSync, rmSync, writeFileSync } from 'node:fs';
import { sleepSync } from '../wait.js';

/**
 * The kernel settings kubelet rewrites at start (pkg/kubelet/cm setupKernelTunables) that no
 * namespace isolates. The harness records them before the first real node starts and writes them
 * back when the last one on the machine stops: a shared record (pid list + originals) makes two
 * concurrent runs safe, and a record whose holders all died (a crashed run) is restored by the
 * next run before it records anew.
 */
export const KUBELET_SYSCTLS = [
  'vm/overcommit_memory',
  'vm/panic_on_oom',
  'kernel/panic',
  'kernel/panic_on_oops',
  'kernel/keys/root_maxkeys',
  'kernel/keys/root_maxbytes',
] as const;

interface SysctlRecord {
  originals: Record<string, string>;
  holders: number[];
}

/** Machine-wide on purpose (not os.tmpdir(), which differs per run): every run must find it. */
export function sysctlRecordPath(): string {
  return '/tmp/kubeplus-isolation-node-sysctls.json';
}

function withLock<T>(fn: () => T): T {
  const lock = `${sysctlRecordPath()}.lock`;
  for (let attempt = 0; ; attempt++) {
    try {
      mkdirSync(lock);
      break;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
      // A lock older than 30 s belongs to a process that died holding it.
      if (attempt > 600) rmdirSync(lock);
      sleepSync(50);
    }
  }
  try {
    return fn();
  } finally {
    rmdirSync(lock);
  }
}

const alive = (pid: number): boolean => {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
};

export function readSysctls(): Record<string, string> {
  return Object.fromEntries(
    KUBELET_SYSCTLS.filter((k) => existsSync(`/proc/sys/${k}`)).map((k) => [
      k,
      readFileSync(`/proc/sys/${k}`, 'utf8').trim(),
    ]),
  );
}

function writeSysctls(values: Record<string, string>): void {
  for (const [key, value] of Object.entries(values)) {
    try {
      if (readFileSync(`/proc/sys/${key}`, 'utf8').trim() !== value) writeFileSync(`/proc/sys/${key}`, value);
    } catch (error) {
      process.stderr.write(`harness: could not restore /proc/sys/${key}=${value}: ${(error as Error).message}\n`);
    }
  }
}

function load(): SysctlRecord | undefined {
  const text = readSysctlRecordText();
  return text === '' ? undefined : (JSON.parse(text) as SysctlRecord);
}

/**
 * The shared record's file as it reads now ("" when there is none): one read, so what a snapshot
 * decides from it (host-state.ts, sysctlView) is from one version of the record.
 */
export function readSysctlRecordText(): string {
  try {
    return readFileSync(sysctlRecordPath(), 'utf8');
  } catch {
    return '';
  }
}

/** What a host snapshot reports of the kubelet sysctls and of the shared record. */
export interface SysctlView {
  /** The kubelet sysctls' values, or undefined when another live run holds them (not this run's to judge). */
  values: Record<string, string> | undefined;
  /** Whether the record counts as a trace of this run (or of none: a record no one holds). */
  recordIsTrace: boolean;
}

/**
 * Decides, from one read of the record (`text`) and the kernel's current values (`current`), what a
 * snapshot of the host shows (`self`: this process's pid):
 * - no record: the current values;
 * - another live holder: neither the values nor the record (that run writes them back, not this);
 * - every holder dead (a run SIGKILLed with its watchdogs): the recorded originals, and no record;
 *   that is a dead run's trace, which the next run to start (or `make clean-node`) writes back;
 * - otherwise (this process holds it, or an empty holder list): the current values, and the record.
 */
export function sysctlView(
  text: string,
  current: Record<string, string>,
  self: number,
  isAlive: (pid: number) => boolean = alive,
): SysctlView {
  if (text === '') return { values: current, recordIsTrace: false };
  let record: SysctlRecord;
  try {
    record = JSON.parse(text) as SysctlRecord;
  } catch {
    return { values: current, recordIsTrace: true }; // a torn or foreign file: report it, it is a trace
  }
  const live = record.holders.filter((pid) => pid === self || isAlive(pid));
  if (live.some((pid) => pid !== self)) return { values: undefined, recordIsTrace: false };
  if (record.holders.length > 0 && live.length === 0) return { values: { ...record.originals }, recordIsTrace: false };
  return { values: current, recordIsTrace: true };
}

/** Registers `pid` (this run) as holding the kubelet sysctls; the first holder records their values. */
export function holdKubeletSysctls(pid = process.pid): void {
  withLock(() => {
    let record = load();
    if (record) {
      record.holders = record.holders.filter(alive);
      if (record.holders.length === 0) {
        writeSysctls(record.originals); // a crashed run's leftovers
        record = undefined;
      }
    }
    record ??= { originals: readSysctls(), holders: [] };
    record.holders.push(pid);
    writeFileSync(sysctlRecordPath(), JSON.stringify(record));
  });
}

/** Drops `pid`; the last holder writes the recorded values back and removes the record. */
export function releaseKubeletSysctls(pid = process.pid): void {
  withLock(() => {
    const record = load();
    if (!record) return;
    record.holders = record.holders.filter((h) => h !== pid && alive(h));
    if (record.holders.length > 0) {
      writeFileSync(sysctlRecordPath(), JSON.stringify(record));
      return;
    }
    writeSysctls(record.originals);
    rmSync(sysctlRecordPath(), { force: true });
  });
}

/**
 * Writes back a record whose holders have all died (runs SIGKILLed with their watchdogs) and
 * removes it; a record with a live holder is left alone. True when something was restored.
 */
export function restoreAbandonedSysctls(): boolean {
  return withLock(() => {
    const record = load();
    if (!record || record.holders.some(alive)) return false;
    writeSysctls(record.originals);
    rmSync(sysctlRecordPath(), { force: true });
    return true;
  });
}
