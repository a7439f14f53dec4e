/**
 * Cleans every trace a DEAD run left on the host: one killed with SIGKILL together with its
 * watchdogs (reaper.ts, node/node-reaper.ts), as a CI timeout, an OOM kill of the session or a
 * `kill -9` of the process tree does. Nothing of such a run survives to clean up, so the next run
 * does it before it starts (every control plane and real node, so every suite, the demo and the
 * bench) and `make clean-node` does it on demand. Only runs whose owner process is gone are
 * touched: a live run's files, cgroups, veth and sysctls are left alone, even one starting now.
 *
 * What a run leaves and how it is found:
 *   real node      its record (node/run-record.ts: owner, dir, namespaces, veth, cgroup root) →
 *                  every process in its mount namespace and below its cgroup root is killed
 *                  (containerd, shims, gVisor's sandboxes, containers), the veth deleted, the
 *                  cgroup root removed, its dir and record removed
 *   cgroups, veths kubeplus-isolation-node-<slot> and kpin<slot> of no live run → removed (its
 *                  routes go with the veth)
 *   sysctls        the shared record with no live holder → written back
 *   control plane  <tmp>/kubeplus-e2e-*\/owner.json → the process groups it tracked (etcd,
 *                  kube-apiserver, the services…) killed, the dir removed
 *
 * One sweep runs at a time on the machine (sweep-lock.ts): a sweep waits for another to finish.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { cgroupHierarchies, removeCgroupRoot } from './node/cgroups.js';
import { restoreAbandonedSysctls } from './node/host-sysctls.js';
import { killNodeNamespace } from './node/namespace.js';
import { NODE_RUNS_DIR, readNodeRunRecords, removeNodeRunRecord } from './node/run-record.js';
import { REAPER_PID_FILE, trackedGroups } from './reaper.js';
import { OWNER_FILE, ownerAlive, processStartTime, readOwner } from './run-owner.js';
import { acquireSweepLock, SWEEP_LOCK } from './sweep-lock.js';

/** What a sweep removed and what it could not. */
export interface SweepReport {
  nodeRuns: string[];
  controlPlanes: string[];
  cgroupRoots: string[];
  links: string[];
  sysctlsRestored: boolean;
  /** Left for a later sweep: a live run has not recorded its slot yet, so these may be its own. */
  deferred: string[];
  problems: string[];
}

export interface SweepOptions {
  /** Where control planes' temp dirs are (default os.tmpdir()). */
  tmp?: string;
  /** Where real nodes' records are (default the machine-wide NODE_RUNS_DIR). */
  nodeRunsDir?: string;
  /** Also sweep host-wide state named by slot: cgroup roots, veths, the sysctl record (default true). */
  host?: boolean;
  /** The lock that makes sweeps take turns (default the machine-wide SWEEP_LOCK). */
  lock?: string;
  /** How long to wait for another sweep to finish (default 60 s); then nothing is swept. */
  lockTimeoutMs?: number;
}

const CGROUP_ROOT = /^kubeplus-isolation-node-(\d+)$/;
const HOST_LINK = /^kpin(\d+)$/;

function entries(dir: string, pattern: RegExp): string[] {
  try {
    return readdirSync(dir).filter((e) => pattern.test(e));
  } catch {
    return [];
  }
}

/** Removes what dead runs left, once no other sweep is running; see the file's comment. */
export function sweepDeadRuns(opts: SweepOptions = {}): SweepReport {
  const report: SweepReport = {
    nodeRuns: [],
    controlPlanes: [],
    cgroupRoots: [],
    links: [],
    sysctlsRestored: false,
    deferred: [],
    problems: [],
  };
  const lock = opts.lock ?? SWEEP_LOCK;
  const timeoutMs = opts.lockTimeoutMs ?? 60_000;
  const attempt = acquireSweepLock({ path: lock, timeoutMs });
  if (!('release' in attempt)) {
    report.problems.push(`nothing swept: ${attempt.heldBy} has held the sweep lock ${lock} for over ${timeoutMs} ms`);
    return report;
  }
  try {
    sweepLocked(opts, report);
  } finally {
    attempt.release();
  }
  return report;
}

function sweepLocked(opts: SweepOptions, report: SweepReport): void {
  const tmp = opts.tmp ?? tmpdir();
  const runsDir = opts.nodeRunsDir ?? NODE_RUNS_DIR;
  const notRemoved = (left: string[]): void => {
    report.problems.push(...left.map((d) => `cgroup ${d} not removed`));
  };

  const liveSlots = new Set<number>();
  let starting = false;
  for (const record of readNodeRunRecords(runsDir)) {
    if (ownerAlive(record.owner)) {
      const slot = record.namespace?.hostLink ? HOST_LINK.exec(record.namespace.hostLink.name)?.[1] : undefined;
      if (slot === undefined) starting = true;
      else liveSlots.add(Number(slot));
      continue;
    }
    if (record.cgroupRoot) notRemoved(removeCgroupRoot(record.cgroupRoot));
    if (record.namespace) killNodeNamespace(record.namespace);
    if (record.cgroupRoot) notRemoved(removeCgroupRoot(record.cgroupRoot));
    rmSync(record.dir, { recursive: true, force: true });
    removeNodeRunRecord(record.owner, runsDir);
    report.nodeRuns.push(record.dir);
  }

  if (opts.host !== false) {
    // Named by slot: a live run between claiming its slot and recording it could own any of these.
    const roots = new Set(
      cgroupHierarchies().flatMap((h) =>
        entries(h, CGROUP_ROOT).filter((e) => !liveSlots.has(Number(CGROUP_ROOT.exec(e)?.[1]))),
      ),
    );
    const links = entries('/sys/class/net', HOST_LINK).filter((l) => !liveSlots.has(Number(HOST_LINK.exec(l)?.[1])));
    if (starting) {
      report.deferred.push(...[...roots].map((r) => `cgroup root /${r}`), ...links.map((l) => `veth ${l}`));
    } else {
      for (const root of roots) {
        notRemoved(removeCgroupRoot(`/${root}`));
        report.cgroupRoots.push(`/${root}`);
      }
      for (const link of links) {
        try {
          execFileSync('ip', ['link', 'del', link], { stdio: 'ignore' });
          report.links.push(link);
        } catch {
          if (existsSync(`/sys/class/net/${link}`)) report.problems.push(`veth ${link} not deleted`);
        }
      }
    }
    report.sysctlsRestored = restoreAbandonedSysctls();
  }

  for (const name of entries(tmp, /^kubeplus-e2e-/)) {
    const dir = join(tmp, name);
    const owner = readOwner(join(dir, OWNER_FILE));
    if (!owner || ownerAlive(owner)) continue; // a live run (or one from before owner files)
    for (const pgid of trackedGroups(join(dir, REAPER_PID_FILE))) {
      // A group whose leader started before the run did is another process's reused id.
      const started = processStartTime(pgid);
      if (started === undefined || started < owner.startTime) continue;
      try {
        process.kill(-pgid, 'SIGKILL');
      } catch {
        // gone meanwhile
      }
    }
    rmSync(dir, { recursive: true, force: true });
    report.controlPlanes.push(dir);
  }
}

/** What a sweep did, for logs ('' when it found nothing). */
export function describeSweep(r: SweepReport): string {
  const parts = [
    ...r.nodeRuns.map((d) => `real node ${d}`),
    ...r.controlPlanes.map((d) => `control plane ${d}`),
    ...r.cgroupRoots.map((c) => `cgroup root ${c}`),
    ...r.links.map((l) => `veth ${l}`),
    ...(r.sysctlsRestored ? ['kubelet sysctls written back'] : []),
  ];
  const lines = parts.length > 0 ? [`removed what dead runs left: ${parts.join('; ')}`] : [];
  if (r.deferred.length > 0) lines.push(`left for the next sweep (a run is starting): ${r.deferred.join(', ')}`);
  if (r.problems.length > 0) lines.push(`could not remove: ${r.problems.join('; ')}`);
  return lines.join('\n');
}
