import { describe, expect, it } from '@jest/globals';
import { ItemExponentialFailureRateLimiter } from '../../src/runtime/rate-limiter.js';
import { WorkQueue, type WorkQueueMetrics } from '../../src/runtime/work-queue.js';
import { type ProcessResult, WorkerPool } from '../../src/runtime/worker-pool.js';
import { deferred, FakeClock, flush, HttpError } from './fakes.js';

function recordingMetrics() {
  const seen = { depth: [] as number[], adds: 0, retries: 0, durations: [] as number[], longest: () => 0 };
  const metrics: WorkQueueMetrics = {
    depth: (n) => seen.depth.push(n),
    add: () => seen.adds++,
    retry: () => seen.retries++,
    workDuration: (s) => seen.durations.push(s),
    longestRunning: (read) => {
      seen.longest = read;
    },
  };
  return { seen, metrics };
}

describe('ItemExponentialFailureRateLimiter', () => {
  it('doubles the delay per failure of a key from the base, up to the cap', () => {
    const limiter = new ItemExponentialFailureRateLimiter(5, 100);
    expect([1, 2, 3, 4, 5, 6].map(() => limiter.when('a'))).toEqual([5, 10, 20, 40, 80, 100]);
    expect(limiter.numRequeues('a')).toBe(6);
    expect(limiter.when('b')).toBe(5);
  });

  it('starts over after forget', () => {
    const limiter = new ItemExponentialFailureRateLimiter(5, 1000);
    limiter.when('a');
    limiter.when('a');
    limiter.forget('a');
    expect(limiter.numRequeues('a')).toBe(0);
    expect(limiter.when('a')).toBe(5);
  });

  it('defaults to client-go values (5ms base, 1000s cap) and never overflows', () => {
    const limiter = new ItemExponentialFailureRateLimiter();
    expect(limiter.when('a')).toBe(5);
    for (let i = 0; i < 2000; i++) limiter.when('a');
    expect(limiter.when('a')).toBe(1_000_000);
  });

  it('rejects nonsensical configuration', () => {
    expect(() => new ItemExponentialFailureRateLimiter(0, 10)).toThrow(/baseDelayMs/);
    expect(() => new ItemExponentialFailureRateLimiter(10, 5)).toThrow(/maxDelayMs/);
  });
});

describe('WorkQueue', () => {
  it('queues a key once however often it is added while queued', async () => {
    const queue = new WorkQueue({ clock: new FakeClock() });
    queue.add('a');
    queue.add('b');
    queue.add('a');
    expect(queue.len()).toBe(2);
    expect(await queue.get()).toBe('a');
    expect(await queue.get()).toBe('b');
    expect(queue.len()).toBe(0);
  });

  it('re-queues a key added during processing exactly once, only after done', async () => {
    const queue = new WorkQueue({ clock: new FakeClock() });
    queue.add('a');
    expect(await queue.get()).toBe('a');
    queue.add('a');
    queue.add('a');
    expect(queue.len()).toBe(0); // not handed out again while in flight
    queue.add('b');
    expect(await queue.get()).toBe('b');
    queue.done('a');
    expect(queue.len()).toBe(1);
    expect(await queue.get()).toBe('a');
    queue.done('a');
    queue.done('b');
    expect(queue.len()).toBe(0);
  });

  it('hands a key to a waiting get as soon as it is added', async () => {
    const queue = new WorkQueue({ clock: new FakeClock() });
    const next = queue.get();
    queue.add('a');
    await expect(next).resolves.toBe('a');
    expect(queue.processingLen()).toBe(1);
  });

  it('addAfter makes the key available only after the delay; the earlier of two delays wins', async () => {
    const clock = new FakeClock();
    const queue = new WorkQueue({ clock });
    queue.addAfter('a', 1000);
    queue.addAfter('a', 5000);
    queue.addAfter('b', 300);
    queue.addAfter('b', 100);
    expect(queue.len()).toBe(0);
    expect(queue.delayedLen()).toBe(2);
    await clock.advance(99);
    expect(queue.len()).toBe(0);
    await clock.advance(1);
    expect(queue.len()).toBe(1);
    expect(await queue.get()).toBe('b');
    await clock.advance(899);
    expect(queue.len()).toBe(0);
    await clock.advance(1);
    expect(await queue.get()).toBe('a');
    await clock.advance(10_000);
    expect(queue.len()).toBe(0); // the superseded 5000ms entry did not add it again
  });

  it('addAfter with a non-positive delay adds at once', () => {
    const queue = new WorkQueue({ clock: new FakeClock() });
    queue.addAfter('a', 0);
    queue.addAfter('b', -5);
    expect(queue.len()).toBe(2);
  });

  it('addRateLimited backs a key off exponentially and counts retries', async () => {
    const clock = new FakeClock();
    const { seen, metrics } = recordingMetrics();
    const queue = new WorkQueue({ clock, rateLimiter: new ItemExponentialFailureRateLimiter(100, 10_000), metrics });
    queue.addRateLimited('a');
    await clock.advance(99);
    expect(queue.len()).toBe(0);
    await clock.advance(1);
    expect(await queue.get()).toBe('a');
    queue.done('a');
    queue.addRateLimited('a');
    await clock.advance(199);
    expect(queue.len()).toBe(0);
    await clock.advance(1);
    expect(queue.len()).toBe(1);
    expect(queue.numRequeues('a')).toBe(2);
    expect(seen.retries).toBe(2);
    queue.forget('a');
    expect(queue.numRequeues('a')).toBe(0);
  });

  it('after shutDown ignores adds, drops queued and delayed keys, and wakes getters with undefined', async () => {
    const clock = new FakeClock();
    const queue = new WorkQueue({ clock });
    const waiting = queue.get();
    queue.shutDown();
    await expect(waiting).resolves.toBeUndefined();
    queue.add('a');
    queue.addAfter('b', 10);
    await clock.advance(100);
    expect(queue.len()).toBe(0);
    await expect(queue.get()).resolves.toBeUndefined();
    expect(queue.isShuttingDown()).toBe(true);
    expect(clock.pendingTimers()).toBe(0);
  });

  it('reports depth, adds, work duration and the longest-running item through its metrics hooks', async () => {
    const clock = new FakeClock();
    const { seen, metrics } = recordingMetrics();
    const queue = new WorkQueue({ clock, metrics });
    queue.add('a');
    queue.add('b');
    queue.add('a');
    expect(seen.adds).toBe(2);
    expect(seen.depth.at(-1)).toBe(2);
    await queue.get();
    expect(seen.depth.at(-1)).toBe(1);
    await clock.advance(1500);
    await queue.get();
    await clock.advance(500);
    expect(seen.longest()).toBe(2); // 'a' has run for 2s
    queue.done('a');
    expect(seen.durations).toEqual([2]);
    expect(seen.longest()).toBe(0.5);
    queue.done('b');
    expect(seen.longest()).toBe(0);
  });

  it('keeps FIFO order across many keys', async () => {
    const queue = new WorkQueue({ clock: new FakeClock() });
    const keys = Array.from({ length: 3000 }, (_, i) => `k${i}`);
    for (const key of keys) queue.add(key);
    const out: string[] = [];
    for (let i = 0; i < keys.length; i++) out.push((await queue.get()) ?? '');
    expect(out).toEqual(keys);
  });
});

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
