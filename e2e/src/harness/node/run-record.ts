import { mkdirSync, readdirSync, readFileSync, renameSync, rmdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { RunOwner } from '../run-owner.js';
import type { NodeNamespaceRef } from './namespace.js';

/**
 * What a real node holds on the host, recorded as it acquires each piece (owner and dir first, then
 * its namespaces and veth, then its cgroup root): what sweepDeadRuns (dead-runs.ts) needs to clean
 * up after a run that died together with its watchdog, and what tells it which slots are live.
 * Machine-wide on purpose, like the sysctl record (not os.tmpdir(), which a run may change): every
 * run must see every other run's record.
 */
export interface NodeRunRecord {
  owner: RunOwner;
  /** The node's temp dir. */
  dir: string;
  namespace?: NodeNamespaceRef;
  cgroupRoot?: string;
}

export const NODE_RUNS_DIR = '/tmp/kubeplus-isolation-node-runs';

function recordPath(owner: RunOwner, runsDir: string): string {
  return join(runsDir, `${owner.pid}-${owner.startTime}.json`);
}

/** Writes (or rewrites) a run's record atomically: a sweep never reads half of one. */
export function writeNodeRunRecord(record: NodeRunRecord, runsDir = NODE_RUNS_DIR): void {
  const path = recordPath(record.owner, runsDir);
  for (let attempt = 0; ; attempt++) {
    try {
      mkdirSync(runsDir, { recursive: true });
      writeFileSync(`${path}.tmp`, `${JSON.stringify(record)}\n`);
      renameSync(`${path}.tmp`, path);
      return;
    } catch (error) {
      // Another run's removeNodeRunRecord may have removed the (then empty) dir in between.
      if ((error as NodeJS.ErrnoException).code !== 'ENOENT' || attempt >= 3) throw error;
    }
  }
}

/** Removes a run's record, and the records' dir once empty (it is host state too). */
export function removeNodeRunRecord(owner: RunOwner, runsDir = NODE_RUNS_DIR): void {
  rmSync(recordPath(owner, runsDir), { force: true });
  try {
    rmdirSync(runsDir);
  } catch {
    // not empty (another run's record), or already gone
  }
}

/** Every readable record (a half-written `.tmp` is not one). */
export function readNodeRunRecords(runsDir = NODE_RUNS_DIR): NodeRunRecord[] {
  let names: string[];
  try {
    names = readdirSync(runsDir).filter((n) => n.endsWith('.json'));
  } catch {
    return [];
  }
  return names.flatMap((n) => {
    try {
      const r = JSON.parse(readFileSync(join(runsDir, n), 'utf8')) as NodeRunRecord;
      return typeof r.owner?.pid === 'number' && typeof r.owner.startTime === 'number' && typeof r.dir === 'string'
        ? [r]
        : [];
    } catch {
      return [];
    }
  });
}
