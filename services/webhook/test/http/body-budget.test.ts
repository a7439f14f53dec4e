import { afterEach, beforeEach, describe, expect, it, jest } from '@jest/globals';
import { type Admission, BodyBudget, type BodyBudgetOptions, type Release } from '../../src/http/body-budget.js';

const KiB = 1024;
const MiB = 1024 * KiB;

/** The chart's defaults, scaled down: small ≤ 256 KiB, 1 MiB of small, one 4 MiB review at a time. */
const OPTIONS: BodyBudgetOptions = {
  smallReviewBytes: 256 * KiB,
  smallBudgetBytes: 1 * MiB,
  largeBudgetBytes: 4 * MiB,
  maxQueued: 2,
  maxWaitMs: 1_000,
};

function admitted(a: Admission): Release {
  if (a.kind !== 'admitted') throw new Error(`expected admitted, got ${a.kind}`);
  return a.release;
}

describe('BodyBudget', () => {
  beforeEach(() => {
    jest.useFakeTimers();
  });
  afterEach(() => {
    jest.useRealTimers();
  });

  it('sorts reviews into lanes by size: up to smallReviewBytes is small', () => {
    const budget = new BodyBudget(OPTIONS);
    expect(budget.laneOf(5 * KiB)).toBe('small');
    expect(budget.laneOf(256 * KiB)).toBe('small');
    expect(budget.laneOf(256 * KiB + 1)).toBe('large');
  });

  it('holds the bytes of admitted reviews until released (once, however often release is called)', () => {
    const budget = new BodyBudget(OPTIONS);
    const a = admitted(budget.admit(100 * KiB));
    const b = admitted(budget.admit(2 * MiB));
    expect(budget.inUse()).toEqual({ small: 100 * KiB, large: 2 * MiB });
    a();
    a();
    b();
    expect(budget.inUse()).toEqual({ small: 0, large: 0 });
  });

  it('refuses a small review at once when the small lane is full, never queues it', () => {
    const budget = new BodyBudget(OPTIONS);
    const held = [0, 1, 2, 3].map(() => admitted(budget.admit(256 * KiB)));
    const refused = budget.admit(1);
    expect(refused).toMatchObject({ kind: 'refused', lane: 'small' });
    expect(refused.kind === 'refused' && refused.message).toContain('webhook overloaded');
    held[0]?.();
    expect(budget.admit(256 * KiB).kind).toBe('admitted');
  });

  it('small reviews are never starved by large ones: a full large lane and a full queue leave the small lane alone', () => {
    const budget = new BodyBudget(OPTIONS);
    admitted(budget.admit(4 * MiB));
    expect(budget.admit(4 * MiB).kind).toBe('queued');
    expect(budget.admit(4 * MiB).kind).toBe('queued');
    expect(budget.admit(4 * MiB)).toMatchObject({ kind: 'refused', lane: 'large' });
    expect(budget.admit(5 * KiB).kind).toBe('admitted');
    expect(budget.inUse()).toEqual({ small: 5 * KiB, large: 4 * MiB });
  });

  it('serves large reviews in arrival order as the lane frees, one of the largest size at a time', async () => {
    const budget = new BodyBudget(OPTIONS);
    const first = admitted(budget.admit(4 * MiB));
    const second = budget.admit(3 * MiB);
    const third = budget.admit(1 * MiB);
    if (second.kind !== 'queued' || third.kind !== 'queued') throw new Error('expected both queued');
    expect(budget.queued()).toBe(2);
    first();
    // 3 MiB and then 1 MiB fit the 4 MiB lane together: both are granted, in order.
    const secondRelease = await second.granted;
    const thirdRelease = await third.granted;
    expect(secondRelease).toBeDefined();
    expect(thirdRelease).toBeDefined();
    expect(budget.inUse().large).toBe(4 * MiB);
    expect(budget.queued()).toBe(0);
  });

  it('a later small-enough large review does not overtake the head of the queue', async () => {
    const budget = new BodyBudget(OPTIONS);
    const first = admitted(budget.admit(3 * MiB));
    const head = budget.admit(4 * MiB);
    // 1 MiB would fit beside the first, but the head is waiting: it queues behind it.
    const behind = budget.admit(1 * MiB);
    expect(head.kind).toBe('queued');
    expect(behind.kind).toBe('queued');
    first();
    if (head.kind !== 'queued' || behind.kind !== 'queued') throw new Error('expected queued');
    const headRelease = await head.granted;
    expect(budget.inUse().large).toBe(4 * MiB);
    expect(budget.queued()).toBe(1);
    headRelease?.();
    expect(await behind.granted).toBeDefined();
  });

  it('a wait longer than maxWaitMs ends unserved, and its place is given up', async () => {
    const budget = new BodyBudget(OPTIONS);
    admitted(budget.admit(4 * MiB));
    const waiting = budget.admit(1 * MiB);
    if (waiting.kind !== 'queued') throw new Error('expected queued');
    jest.advanceTimersByTime(999);
    expect(budget.queued()).toBe(1);
    jest.advanceTimersByTime(1);
    expect(await waiting.granted).toBeUndefined();
    expect(budget.queued()).toBe(0);
    expect(budget.inUse().large).toBe(4 * MiB);
  });

  it('a cancelled wait (the client went away) leaves the queue, and the next one moves up', async () => {
    const budget = new BodyBudget(OPTIONS);
    const first = admitted(budget.admit(4 * MiB));
    const gone = budget.admit(4 * MiB);
    const next = budget.admit(4 * MiB);
    if (gone.kind !== 'queued' || next.kind !== 'queued') throw new Error('expected queued');
    gone.cancel();
    expect(await gone.granted).toBeUndefined();
    first();
    expect(await next.granted).toBeDefined();
  });

  it('bounds the bytes held whatever callers send: a seeded storm of admissions and releases', () => {
    const budget = new BodyBudget(OPTIONS);
    let seed = 42;
    const random = (): number => {
      seed = (seed * 1103515245 + 12345) % 2 ** 31;
      return seed / 2 ** 31;
    };
    const held: Release[] = [];
    for (let step = 0; step < 5_000; step++) {
      if (random() < 0.6) {
        const bytes = Math.floor(random() * 4 * MiB) + 1;
        const a = budget.admit(bytes);
        if (a.kind === 'admitted') held.push(a.release);
        if (a.kind === 'queued') void a.granted.then((r) => r && held.push(r));
      } else if (held.length > 0) {
        held.splice(Math.floor(random() * held.length), 1)[0]?.();
      }
      const inUse = budget.inUse();
      expect(inUse.small).toBeLessThanOrEqual(OPTIONS.smallBudgetBytes);
      expect(inUse.large).toBeLessThanOrEqual(OPTIONS.largeBudgetBytes);
      expect(budget.queued()).toBeLessThanOrEqual(OPTIONS.maxQueued);
    }
  });
});
