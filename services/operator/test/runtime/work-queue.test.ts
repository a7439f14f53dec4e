import { describe, expect, it } from '@jest/globals';
import { ItemExponentialFailureRateLimiter } from '../../src/runtime/rate-limiter.js';
import { WorkQueue, type WorkQueueMetrics } from '../../src/runtime/work-queue.js';
import { FakeClock } from './fakes.js';

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
