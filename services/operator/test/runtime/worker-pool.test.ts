import { describe, expect, it } from '@jest/globals';
import { ItemExponentialFailureRateLimiter } from '../../src/runtime/rate-limiter.js';
import { WorkQueue } from '../../src/runtime/work-queue.js';
import { type ProcessResult, WorkerPool } from '../../src/runtime/worker-pool.js';
import { deferred, FakeClock, flush, HttpError } from './fakes.js';

interface PoolHarness {
  clock: FakeClock;
  queue: WorkQueue;
  results: Array<[string, ProcessResult]>;
}

function poolWith(
  handle: (key: string, signal: AbortSignal) => Promise<{ requeueAfterMs?: number } | undefined>,
  opts: { concurrency?: number; classifyError?: (err: unknown) => 'conflict' | 'error' } = {},
): PoolHarness & { pool: WorkerPool } {
  const clock = new FakeClock();
  const queue = new WorkQueue({ clock, rateLimiter: new ItemExponentialFailureRateLimiter(100, 100_000) });
  const results: Array<[string, ProcessResult]> = [];
  const pool = new WorkerPool({
    name: 'test',
    queue,
    concurrency: opts.concurrency ?? 1,
    handle,
    classifyError: opts.classifyError,
    onProcessed: (key, result) => results.push([key, result]),
    clock,
  });
  return { clock, queue, results, pool };
}

describe('WorkerPool', () => {
  it('lets the event loop turn during a burst of reconciles that never wait for I/O (no starved sockets)', async () => {
    // Each reconcile is served from caches: ~1 ms of CPU and settled promises only, as an
    // up-to-date instance's is. Before the yield, all 200 ran before any I/O callback could.
    const busy = (ms: number): void => {
      const end = performance.now() + ms;
      while (performance.now() < end) {
        // a cache-served reconcile's CPU
      }
    };
    let processed = 0;
    const { queue, pool } = poolWith(
      async () => {
        busy(1);
        processed++;
        return undefined;
      },
      { concurrency: 4 },
    );
    for (let i = 0; i < 200; i++) queue.add(`k${i}`);
    const firstTurn = new Promise<number>((resolve) => setImmediate(() => resolve(processed)));
    pool.start();
    const atFirstTurn = await firstTurn;
    expect(atFirstTurn).toBeGreaterThan(0);
    expect(atFirstTurn).toBeLessThan(100); // the loop turned within the first ~20 ms, not after 200
    while (processed < 200) await flush();
    expect(processed).toBe(200);
  });

  it('forgets a key on success', async () => {
    const { queue, pool, results } = poolWith(async () => undefined);
    queue.rateLimiter.when('a'); // a past failure
    pool.start();
    queue.add('a');
    await flush();
    expect(results).toEqual([['a', 'success']]);
    expect(queue.numRequeues('a')).toBe(0);
  });

  it('retries a failing key with exponential backoff until it succeeds', async () => {
    let calls = 0;
    const { clock, queue, pool, results } = poolWith(async () => {
      calls++;
      if (calls < 3) throw new Error('boom');
      return undefined;
    });
    pool.start();
    queue.add('a');
    await flush();
    expect(calls).toBe(1);
    await clock.advance(99);
    expect(calls).toBe(1);
    await clock.advance(1); // 100ms backoff
    expect(calls).toBe(2);
    await clock.advance(199);
    expect(calls).toBe(2);
    await clock.advance(1); // 200ms backoff
    expect(calls).toBe(3);
    expect(results.map(([, r]) => r)).toEqual(['error', 'error', 'success']);
    expect(queue.numRequeues('a')).toBe(0);
  });

  it('retries 409 conflicts promptly on a separate backoff capped at 1s, without escalating the error backoff', async () => {
    let calls = 0;
    const { clock, queue, pool, results } = poolWith(async () => {
      calls++;
      throw new HttpError(409, 'conflict');
    });
    pool.start();
    queue.add('a');
    await flush();
    await clock.advance(5 + 10 + 20 + 40 + 80 + 160 + 320 + 640 + 1000 * 3);
    expect(calls).toBe(12); // the first try and 11 retries
    expect(results.every(([, r]) => r === 'requeue')).toBe(true);
    expect(queue.numRequeues('a')).toBe(0);
    await clock.advance(1000);
    expect(calls).toBe(13); // still every second, never the 1000s error cap
  });

  it('uses a custom error classification hook', async () => {
    let calls = 0;
    const { clock, queue, pool } = poolWith(
      async () => {
        calls++;
        throw new Error('transient-by-policy');
      },
      { classifyError: () => 'conflict' },
    );
    pool.start();
    queue.add('a');
    await flush();
    await clock.advance(5);
    expect(calls).toBe(2);
  });

  it('a throwing classifier counts the error as a plain error', async () => {
    const { queue, pool, results } = poolWith(
      async () => {
        throw new Error('x');
      },
      {
        classifyError: () => {
          throw new Error('bad classifier');
        },
      },
    );
    pool.start();
    queue.add('a');
    await flush();
    expect(results).toEqual([['a', 'error']]);
    expect(queue.numRequeues('a')).toBe(1);
  });

  it('requeueAfterMs re-adds the key after that delay and resets its backoff', async () => {
    let calls = 0;
    const { clock, queue, pool, results } = poolWith(async () => {
      calls++;
      return calls === 1 ? { requeueAfterMs: 30_000 } : undefined;
    });
    queue.rateLimiter.when('a');
    pool.start();
    queue.add('a');
    await flush();
    expect(results).toEqual([['a', 'requeue']]);
    expect(queue.numRequeues('a')).toBe(0);
    await clock.advance(29_999);
    expect(calls).toBe(1);
    await clock.advance(1);
    expect(calls).toBe(2);
  });

  it('treats an invalid requeueAfterMs as success', async () => {
    const { clock, queue, pool, results } = poolWith(async () => ({ requeueAfterMs: Number.NaN }));
    pool.start();
    queue.add('a');
    await clock.advance(60_000);
    expect(results).toEqual([['a', 'success']]);
  });

  it('runs at most `concurrency` keys at once and never one key concurrently with itself', async () => {
    const gates = new Map<string, PromiseWithResolvers<undefined>>();
    const running = new Set<string>();
    let maxRunning = 0;
    let selfOverlap = false;
    const handled: string[] = [];
    const { queue, pool } = poolWith(
      async (key) => {
        if (running.has(key)) selfOverlap = true;
        running.add(key);
        maxRunning = Math.max(maxRunning, running.size);
        const gate = deferred<undefined>();
        gates.set(key, gate);
        await gate.promise;
        running.delete(key);
        handled.push(key);
        return undefined;
      },
      { concurrency: 2 },
    );
    pool.start();
    for (const key of ['a', 'b', 'c', 'a', 'a']) queue.add(key);
    await flush();
    expect([...running].sort()).toEqual(['a', 'b']);
    queue.add('a'); // while 'a' is in flight
    gates.get('a')?.resolve(undefined);
    await flush();
    expect([...running].sort()).toEqual(['b', 'c']);
    gates.get('b')?.resolve(undefined);
    await flush();
    expect([...running].sort()).toEqual(['a', 'c']); // the re-added 'a', once
    gates.get('a')?.resolve(undefined);
    gates.get('c')?.resolve(undefined);
    await flush();
    expect(handled.sort()).toEqual(['a', 'a', 'b', 'c']);
    expect(maxRunning).toBe(2);
    expect(selfOverlap).toBe(false);
  });

  it('rejects a concurrency below 1', () => {
    expect(() => poolWith(async () => undefined, { concurrency: 0 })).toThrow(/concurrency/);
  });

  it('graceful stop takes no new key and lets in-flight work finish within the bound', async () => {
    const gate = deferred<undefined>();
    const started: string[] = [];
    let aborted = false;
    const { clock, queue, pool } = poolWith(async (key, signal) => {
      started.push(key);
      signal.addEventListener('abort', () => {
        aborted = true;
      });
      await gate.promise;
      return undefined;
    });
    pool.start();
    queue.add('a');
    queue.add('b');
    await flush();
    const stopped = pool.stop(5000);
    await clock.advance(1000);
    gate.resolve(undefined);
    await flush();
    await expect(stopped).resolves.toBe(true);
    expect(started).toEqual(['a']);
    expect(aborted).toBe(false);
  });

  it('graceful stop aborts in-flight work that outlives the bound', async () => {
    let aborted = false;
    const { clock, queue, pool } = poolWith(
      (_key, signal) =>
        new Promise((resolve) => {
          signal.addEventListener('abort', () => {
            aborted = true;
            resolve(undefined);
          });
        }),
    );
    pool.start();
    queue.add('a');
    await flush();
    const stopped = pool.stop(5000);
    await clock.advance(4999);
    expect(aborted).toBe(false);
    await clock.advance(1);
    await expect(stopped).resolves.toBe(false);
    expect(aborted).toBe(true);
  });

  it('abort stops at once: the in-flight signal aborts and no further key is processed', async () => {
    const seen: string[] = [];
    let inFlightSignal: AbortSignal | undefined;
    const { queue, pool } = poolWith(async (key, signal) => {
      seen.push(key);
      inFlightSignal = signal;
      await new Promise<void>((resolve) => signal.addEventListener('abort', () => resolve()));
      throw new Error('aborted');
    });
    pool.start();
    queue.add('a');
    queue.add('b');
    await flush();
    pool.abort('leadership lost');
    await flush();
    expect(inFlightSignal?.aborted).toBe(true);
    queue.add('c');
    await flush();
    expect(seen).toEqual(['a']);
    expect(queue.numRequeues('a')).toBe(0); // an interrupted reconcile is not a failure to back off
  });
});
