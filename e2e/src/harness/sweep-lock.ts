/**
 * One sweep of dead runs at a time on a machine (dead-runs.ts). Every control plane and real node
 * sweeps before it starts, and `make test` runs two jest runs at once, so without this two sweeps
 * race over the same dead run (one kills what the other is listing, one removes the cgroup the
 * other is emptying), and a test that inspects a dead run's traces before sweeping them itself
 * (real-node.test.ts, "a SIGKILL of a whole run") sees another run's sweep remove them first.
 *
 * The lock is a directory (mkdir is atomic) holding the owner's identity (run-owner.ts). A lock
 * whose owner has died is taken over; one without an owner file for longer than OWNERLESS_MS (its
 * maker died between mkdir and writing it) too. The holder may sweep again while it holds it.
 */
import { mkdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { ownerAlive, readOwner, runOwner } from './run-owner.js';

/** The machine-wide lock, beside the real nodes' run records (node/run-record.ts). */
export const SWEEP_LOCK = '/tmp/kubeplus-isolation-sweep.lock';

const OWNERLESS_MS = 10_000;
const POLL_MS = 100;

/** Held locks of this process (path → depth), so the holder's own sweep does not wait for itself. */
const held = new Map<string, number>();

function sleep(ms: number): void {
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
}

export type LockAttempt = { release: () => void } | { heldBy: string };

/** One try: the lock, or who holds it. A dead holder's lock is taken over. */
function tryLock(path: string): LockAttempt {
  const depth = held.get(path);
  if (depth !== undefined) {
    held.set(path, depth + 1);
    return { release: releaser(path) };
  }
  try {
    mkdirSync(path);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
    const owner = readOwner(join(path, 'owner.json'));
    let stale: boolean;
    if (owner !== undefined) stale = !ownerAlive(owner);
    else {
      try {
        stale = Date.now() - statSync(path).mtimeMs > OWNERLESS_MS;
      } catch {
        stale = false; // released meanwhile: the next try takes it
      }
    }
    if (!stale) return { heldBy: owner === undefined ? 'a process taking it now' : `process ${owner.pid}` };
    rmSync(path, { recursive: true, force: true });
    return tryLock(path);
  }
  writeFileSync(join(path, 'owner.json'), `${JSON.stringify(runOwner())}\n`);
  held.set(path, 1);
  return { release: releaser(path) };
}

function releaser(path: string): () => void {
  let done = false;
  return () => {
    if (done) return;
    done = true;
    const depth = (held.get(path) ?? 1) - 1;
    if (depth > 0) {
      held.set(path, depth);
      return;
    }
    held.delete(path);
    rmSync(path, { recursive: true, force: true });
  };
}

/**
 * Takes the sweep lock, waiting (blocking: sweeps are synchronous and take a second or two) up to
 * `timeoutMs` while a live process holds it. Returns the release function, or who still holds it.
 */
export function acquireSweepLock(opts: { path?: string; timeoutMs?: number } = {}): LockAttempt {
  const path = opts.path ?? SWEEP_LOCK;
  const deadline = Date.now() + (opts.timeoutMs ?? 60_000);
  for (;;) {
    const attempt = tryLock(path);
    if ('release' in attempt || Date.now() >= deadline) return attempt;
    sleep(POLL_MS);
  }
}
