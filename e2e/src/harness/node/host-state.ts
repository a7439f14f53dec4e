import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, readlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ownerAlive } from '../run-owner.js';
import { cgroupHierarchies } from './cgroups.js';
import { KUBELET_SYSCTLS, readSysctlRecordText, readSysctls, sysctlRecordPath, sysctlView } from './host-sysctls.js';
import { NODE_RUNS_DIR, readNodeRunRecords } from './run-record.js';

/**
 * What a real node could leave behind on the host, read from the host's namespaces: the test that
 * starts and stops a node compares this before and after (e2e/test/real-node.test.ts).
 */
export interface HostState {
  links: string[];
  routes: string[];
  rules: string[];
  sysctls: Record<string, string>;
  mountPoints: string[];
  /** Paths kubelet, containerd and the CNI plugins use by default, and whether each exists. */
  paths: Record<string, boolean>;
  /** Top-level directories of every cgroup hierarchy. */
  cgroups: string[];
  /** The host's nftables tables ("" when there is no nft to ask). */
  nftTables: string;
  /** The harness's own leftovers in the temp dir (node run dirs, the shared sysctl record). */
  tmpEntries: string[];
  /**
   * gVisor's processes on the host (its shim, sandbox, gofer: every process whose executable is
   * runsc or containerd-shim-runsc-v1), as `<name> <pid>`. Only the real node runs gVisor.
   */
  gvisorProcesses: string[];
}

const GVISOR_EXECUTABLES = ['runsc', 'containerd-shim-runsc-v1'] as const;

/** Every process whose executable is one of gVisor's (read from /proc; a vanished one is skipped). */
export function gvisorProcesses(): string[] {
  return readdirSync('/proc')
    .filter((e) => /^\d+$/.test(e))
    .flatMap((pid) => {
      try {
        const exe = readlinkSync(`/proc/${pid}/exe`).replace(/ \(deleted\)$/, '');
        const name = exe.slice(exe.lastIndexOf('/') + 1);
        return (GVISOR_EXECUTABLES as readonly string[]).includes(name) ? [`${name} ${pid}`] : [];
      } catch {
        return [];
      }
    })
    .sort();
}

export const DEFAULT_NODE_PATHS = [
  '/var/lib/kubelet',
  '/var/log/containers',
  '/var/log/pods',
  '/var/lib/containerd',
  '/run/containerd',
  '/var/lib/cni',
  '/etc/cni',
  '/opt/cni',
  '/opt/containerd',
  '/run/netns',
  '/etc/containerd',
  '/etc/kubernetes',
] as const;

const FORWARDING_SYSCTLS = ['net/ipv4/ip_forward', 'net/ipv6/conf/all/forwarding'] as const;

/** The machine-wide node state as it reads now: the sysctl record's text and the node runs dir's entries. */
function readShared(): { record: string; key: string } {
  let runs: string;
  try {
    runs = readdirSync(NODE_RUNS_DIR).sort().join(',');
  } catch {
    runs = '-';
  }
  const record = readSysctlRecordText();
  return { record, key: `${record}\n${runs}` };
}

/**
 * The kubelet sysctls and the machine-wide temp entries that concern this run, read consistently:
 * another run may start or stop a node while a snapshot is taken (make test runs two at once), so
 * the reads are repeated until the shared state is the same before and after them. Without that,
 * a record another run creates between "who holds it" and "does it exist" reads as this run's.
 */
function sharedTraces(): { sysctls: Record<string, string>; tmpEntries: string[] } {
  for (let attempt = 0; ; attempt++) {
    const shared = readShared();
    const view = sysctlView(shared.record, readSysctls(), process.pid);
    const runsDirIsTrace =
      existsSync(NODE_RUNS_DIR) &&
      !readNodeRunRecords().some((r) => r.owner.pid !== process.pid && ownerAlive(r.owner));
    const result = {
      sysctls: view.values ?? {},
      tmpEntries: [
        ...(view.recordIsTrace ? [sysctlRecordPath()] : []),
        // The machine-wide dir of node run records: removed with the last record (another run's keeps it).
        ...(runsDirIsTrace ? [NODE_RUNS_DIR] : []),
      ],
    };
    if (readShared().key === shared.key || attempt >= 20) return result;
  }
}

function lines(command: string, args: string[]): string[] {
  return execFileSync(command, args, { encoding: 'utf8' })
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l !== '')
    .sort();
}

/** The run whose traces to keep in a snapshot: its slot and its run directory. */
export interface OwnRun {
  slot: number;
  dir: string;
}

/**
 * Reads the host's state (`nft`: path of an nft binary to list the host's tables with, if any).
 * Other real-node runs may coexist: their traces (their veth and its routes, their cgroup root,
 * their run directory, and the kubelet sysctls while they hold them) are left out, and so is a dead
 * run's sysctl record (its originals stand for the sysctls: the next run to start writes them back),
 * so a snapshot shows this run's traces (`own`; none when undefined) and the host's own state only.
 */
export function hostState(nft?: string, own?: OwnRun): HostState {
  const foreignSlot = (slot: string): boolean => own === undefined || Number(slot) !== own.slot;
  const foreignLink = (name: string): boolean => /^kpin\d+$/.test(name) && foreignSlot(name.slice(4));
  const shared = sharedTraces();
  const sysctls: Record<string, string> = { ...shared.sysctls };
  for (const key of FORWARDING_SYSCTLS) {
    if (existsSync(`/proc/sys/${key}`)) sysctls[key] = readFileSync(`/proc/sys/${key}`, 'utf8').trim();
  }
  const mountPoints = readFileSync('/proc/self/mountinfo', 'utf8')
    .split('\n')
    .map((l) => l.split(' ')[4])
    .filter((p): p is string => p !== undefined && p !== '')
    .sort();
  const cgroups = cgroupHierarchies().flatMap((h) =>
    readdirSync(h, { withFileTypes: true })
      .filter((e) => e.isDirectory())
      .filter((e) => {
        const m = /^kubeplus-isolation-node-(\d+)$/.exec(e.name);
        return m?.[1] === undefined || !foreignSlot(m[1]);
      })
      .map((e) => join(h, e.name)),
  );
  const viaForeignLink = (route: string): boolean => {
    const dev = /\bdev (\S+)/.exec(route)?.[1];
    return dev !== undefined && foreignLink(dev);
  };
  return {
    links: lines('ip', ['-o', 'link', 'show'])
      .map((l) => l.split(':')[1]?.trim().split('@')[0] ?? l)
      .filter((l) => !foreignLink(l)),
    routes: [
      ...lines('ip', ['-4', 'route', 'show', 'table', 'all']),
      ...lines('ip', ['-6', 'route', 'show', 'table', 'all']),
    ].filter((r) => !viaForeignLink(r)),
    rules: lines('ip', ['rule', 'show']),
    sysctls,
    mountPoints,
    paths: Object.fromEntries(DEFAULT_NODE_PATHS.map((p) => [p, existsSync(p)])),
    cgroups: cgroups.sort(),
    nftTables: nft ? execFileSync(nft, ['list', 'tables'], { encoding: 'utf8' }) : '',
    tmpEntries: [
      ...readdirSync(tmpdir()).filter(
        (e) => e.startsWith('kubeplus-node-') && own !== undefined && join(tmpdir(), e) === own.dir,
      ),
      ...shared.tmpEntries,
    ].sort(),
    gvisorProcesses: gvisorProcesses(),
  };
}

/**
 * Two snapshots made comparable: the kubelet sysctls count only when neither was taken while
 * another run held them (that run writes them back when it is the last one out, not this run).
 */
export function comparableHostStates(before: HostState, after: HostState): [HostState, HostState] {
  const shared = (KUBELET_SYSCTLS as readonly string[]).filter((k) => !(k in before.sysctls) || !(k in after.sysctls));
  if (shared.length === 0) return [before, after];
  const strip = (s: HostState): HostState => ({
    ...s,
    sysctls: Object.fromEntries(
      Object.entries(s.sysctls).filter(([k]) => !(KUBELET_SYSCTLS as readonly string[]).includes(k)),
    ),
  });
  return [strip(before), strip(after)];
}
