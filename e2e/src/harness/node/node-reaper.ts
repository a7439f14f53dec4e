/**
 * The real node's watchdog for the one case no in-process handler covers: the process running the
 * node being SIGKILLed (or crashing natively). The control plane's reaper (harness/reaper.ts)
 * kills its process groups and temp dir then, but the node's processes live in their own mount
 * and network namespace, outside those groups, and the node also holds a cgroup root and the
 * kubelet's host sysctls.
 *
 * A detached `node` process (this file, run as a script) checks every 500 ms that the process
 * running the node is alive. Once it is not, it does what stop() would: kills every process in
 * the node's mount namespace and deletes its veth (killNodeNamespace), removes the cgroup root,
 * releases the dead process's hold on the kubelet's sysctls (the last holder writes the recorded
 * values back) and removes the node's dir. It exits by itself when its marker file disappears:
 * stop() disarms it first, then tears down in process.
 */
import { spawn } from 'node:child_process';
import { existsSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { repoRoot } from '../repo.js';
import type { RunOwner } from '../run-owner.js';
import { removeCgroupRoot } from './cgroups.js';
import { releaseKubeletSysctls } from './host-sysctls.js';
import { killNodeNamespace, type NodeNamespaceRef } from './namespace.js';
import { removeNodeRunRecord } from './run-record.js';

export const NODE_REAPER_MARKER = 'node-reaper.armed';

export interface NodeReaperSpec {
  /** The process running the node (holds the sysctls). */
  parentPid: number;
  namespace: NodeNamespaceRef;
  cgroupRoot: string;
  /** The run's record (run-record.ts), removed once the node is torn down. */
  owner: RunOwner;
  /** The node's dir (holds the marker file); removed unless `keepDir`. */
  dir: string;
  keepDir: boolean;
}

/** Starts the watchdog; returns the function that disarms it (stop() calls it before tearing down). */
export function armNodeReaper(spec: NodeReaperSpec): () => void {
  const marker = join(spec.dir, NODE_REAPER_MARKER);
  writeFileSync(marker, `${spec.parentPid}\n`);
  const child = spawn(process.execPath, [watchdogEntry(), JSON.stringify(spec)], {
    detached: true,
    stdio: 'ignore',
  });
  child.unref();
  return () => rmSync(marker, { force: true });
}

/**
 * The file the watchdog process runs: this module, built. Under jest the harness runs from its
 * TypeScript sources, which plain `node` cannot run (their imports name the built .js files), so
 * the watchdog then runs e2e/dist's copy (`make build`, which every e2e target does first); before
 * this, a jest suite's watchdog died at once and a SIGKILLed suite left its node behind.
 */
export function watchdogEntry(): string {
  const here = fileURLToPath(import.meta.url);
  if (here.endsWith('.js')) return here;
  const built = join(repoRoot(), 'e2e', 'dist', 'harness', 'node', 'node-reaper.js');
  if (!existsSync(built)) throw new Error(`${built} is missing: run \`make build\` (the real node's watchdog runs it)`);
  return built;
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** What the watchdog does once the process running the node has died. */
export function reapNode(spec: NodeReaperSpec): void {
  removeCgroupRoot(spec.cgroupRoot);
  killNodeNamespace(spec.namespace);
  removeCgroupRoot(spec.cgroupRoot);
  releaseKubeletSysctls(spec.parentPid);
  removeNodeRunRecord(spec.owner);
  if (!spec.keepDir) rmSync(spec.dir, { recursive: true, force: true });
}

function watch(spec: NodeReaperSpec): void {
  const marker = join(spec.dir, NODE_REAPER_MARKER);
  const timer = setInterval(() => {
    if (!existsSync(marker)) process.exit(0);
    if (alive(spec.parentPid)) return;
    clearInterval(timer);
    reapNode(spec);
    process.exit(0);
  }, 500);
}

if (process.argv[1] === fileURLToPath(import.meta.url) && process.argv[2] !== undefined) {
  watch(JSON.parse(process.argv[2]) as NodeReaperSpec);
}
