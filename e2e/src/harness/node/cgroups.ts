import { copyFileSync, existsSync, mkdirSync, readdirSync, readFileSync, rmdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { sleepSync } from '../wait.js';

/**
 * The node's cgroup root (kubelet's cgroupRoot, cgroupfs driver): one directory of the same name
 * in every mounted hierarchy, created before kubelet starts (it refuses a root with missing paths)
 * and removed, with everything kubelet and runc created below it, when the node stops. Cgroups are
 * not namespaced: this is host state, and the only cgroup state the node leaves anywhere.
 */
const CGROUP_MOUNT = '/sys/fs/cgroup';

/** The hierarchies' mount points: /sys/fs/cgroup itself on a v2-only host, else each v1 (and the hybrid unified) one. */
export function cgroupHierarchies(): string[] {
  const mounts = readFileSync('/proc/self/mountinfo', 'utf8').split('\n');
  const points = mounts
    .map((line) => {
      const [left, right] = line.split(' - ');
      const fsType = right?.split(' ')[0];
      return fsType === 'cgroup' || fsType === 'cgroup2' ? left?.split(' ')[4] : undefined;
    })
    .filter((p): p is string => p?.startsWith(CGROUP_MOUNT) === true);
  return [...new Set(points)].sort();
}

/** Creates `root` (e.g. /kubeplus-isolation-node-3) in every hierarchy; cpuset gets its parent's cpus and mems. */
export function createCgroupRoot(root: string): void {
  for (const hierarchy of cgroupHierarchies()) {
    const dir = join(hierarchy, root);
    mkdirSync(dir, { recursive: true });
    for (const file of ['cpuset.cpus', 'cpuset.mems']) {
      const parent = join(hierarchy, file);
      if (existsSync(parent) && readFileSync(join(dir, file), 'utf8').trim() === '')
        copyFileSync(parent, join(dir, file));
    }
  }
}

function subtree(dir: string): string[] {
  const out: string[] = [];
  const walk = (d: string): void => {
    let entries: string[];
    try {
      entries = readdirSync(d);
    } catch {
      return;
    }
    for (const e of entries) {
      const child = join(d, e);
      try {
        if (statSync(child).isDirectory()) walk(child);
      } catch {
        // removed meanwhile
      }
    }
    out.push(d); // children before parents
  };
  walk(dir);
  return out;
}

function pidsIn(dir: string): number[] {
  try {
    return readFileSync(join(dir, 'cgroup.procs'), 'utf8')
      .split('\n')
      .filter((l) => l !== '')
      .map(Number);
  } catch {
    return [];
  }
}

/** Every pid in `root`'s subtree, in any hierarchy (the node's containers). */
export function processesInCgroupRoot(root: string): number[] {
  const pids = new Set<number>();
  for (const hierarchy of cgroupHierarchies()) {
    for (const dir of subtree(join(hierarchy, root))) for (const pid of pidsIn(dir)) pids.add(pid);
  }
  return [...pids];
}

/**
 * SIGKILLs every process left below `root` and removes the subtree in every hierarchy (children
 * first; a cgroup is removable once empty). Synchronous, so it can run from an interrupt handler.
 * Returns what could not be removed (empty on success).
 */
export function removeCgroupRoot(root: string): string[] {
  let left: string[] = [];
  for (let attempt = 0; attempt < 100; attempt++) {
    for (const pid of processesInCgroupRoot(root)) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // gone
      }
    }
    left = [];
    for (const hierarchy of cgroupHierarchies()) {
      const top = join(hierarchy, root);
      if (!existsSync(top)) continue;
      for (const dir of subtree(top)) {
        try {
          rmdirSync(dir);
        } catch {
          left.push(dir);
        }
      }
    }
    if (left.length === 0) return [];
    sleepSync(50);
  }
  return left;
}
