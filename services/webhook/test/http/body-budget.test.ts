import { afterEach, beforeEach, describe, expect, it, jest } from '@jest/globals';
import {
  type Admission,
  BodyBudget,
  type BodyBudgetOptions,
  type Hold,
  READ_COST_PER_BYTE,
} from '../../src/http/body-budget.js';

const KiB = 1024;
const MiB = 1024 * KiB;

/**
 * Scaled down: small ≤ 256 KiB on the wire; 3 MiB of estimated memory for small reviews, 12 MiB
 * for large ones (one review of 4 MiB is held as 12 MiB while it is read).
 */
const OPTIONS: BodyBudgetOptions = {
  smallReviewBytes: 256 * KiB,
  smallBudgetBytes: 3 * MiB,
  largeBudgetBytes: 12 * MiB,
  maxQueued: 2,
  maxWaitMs: 1_000,
};

function admitted(a: Admission): Hold {
  if (a.kind !== 'admitted') throw new Error(`expected admitted, got ${a.kind}`);
  return a.hold;
}

describe('BodyBudget', () => {
  beforeEach(() => {
    jest.useFakeTimers();
  });
  afterEach(() => {
    jest.useRealTimers();
  });

  it('sorts reviews into lanes by declared size: up to smallReviewBytes is small', () => {
    const budget = new BodyBudget(OPTIONS);
    expect(budget.laneOf(5 * KiB)).toBe('small');
    expect(budget.laneOf(256 * KiB)).toBe('small');
    expect(budget.laneOf(256 * KiB + 1)).toBe('large');
    expect(budget.capacity('small')).toBe(3 * MiB);
    expect(budget.capacity('large')).toBe(12 * MiB);
  });

  it('holds READ_COST_PER_BYTE × the declared bytes while a body is read, until released (once)', () => {
    const budget = new BodyBudget(OPTIONS);
    const a = admitted(budget.admit(100 * KiB));
    const b = admitted(budget.admit(2 * MiB));
    expect(READ_COST_PER_BYTE).toBe(3);
    expect(budget.inUse()).toEqual({ small: 300 * KiB, large: 6 * MiB });
    a.release();
    a.release();
    b.release();
    expect(budget.inUse()).toEqual({ small: 0, large: 0 });
    expect(a.bytes).toBe(0);
  });

  it('a hold grows to the estimate once the body is read, when the lane has room; else nothing changes', () => {
    const budget = new BodyBudget(OPTIONS);
    const other = admitted(budget.admit(256 * KiB)); // 768 KiB
    const hold = admitted(budget.admit(256 * KiB)); // 768 KiB
    expect(hold.resize(2 * MiB)).toBe(true);
    expect(budget.inUse().small).toBe(768 * KiB + 2 * MiB);
    // 768 KiB + 2.5 MiB > 3 MiB: refused, and the hold keeps what it had.
    expect(hold.resize(2.5 * MiB)).toBe(false);
    expect(hold.bytes).toBe(2 * MiB);
    // Shrinking always fits.
    expect(hold.resize(100 * KiB)).toBe(true);
    expect(budget.inUse().small).toBe(768 * KiB + 100 * KiB);
    other.release();
    hold.release();
    expect(budget.inUse().small).toBe(0);
    expect(hold.resize(1)).toBe(false);
  });

  it('refuses a small review at once when the small lane is full, never queues it', () => {
    const budget = new BodyBudget(OPTIONS);
    const held = [0, 1, 2, 3].map(() => admitted(budget.admit(256 * KiB)));
    const refused = budget.admit(1);
    expect(refused).toMatchObject({ kind: 'refused', lane: 'small' });
    expect(refused.kind === 'refused' && refused.message).toContain('webhook overloaded');
    held[0]?.release();
    expect(budget.admit(256 * KiB).kind).toBe('admitted');
  });

  it('small reviews are never starved by large ones: a full large lane and a full queue leave the small lane alone', () => {
    const budget = new BodyBudget(OPTIONS);
    admitted(budget.admit(4 * MiB));
    expect(budget.admit(4 * MiB).kind).toBe('queued');
    expect(budget.admit(4 * MiB).kind).toBe('queued');
    expect(budget.admit(4 * MiB)).toMatchObject({ kind: 'refused', lane: 'large' });
    expect(budget.admit(5 * KiB).kind).toBe('admitted');
    expect(budget.inUse()).toEqual({ small: 15 * KiB, large: 12 * MiB });
  });

  it('serves large reviews in arrival order as the lane frees', async () => {
    const budget = new BodyBudget(OPTIONS);
    const first = admitted(budget.admit(4 * MiB));
    const second = budget.admit(3 * MiB);
    const third = budget.admit(1 * MiB);
    if (second.kind !== 'queued' || third.kind !== 'queued') throw new Error('expected both queued');
    expect(budget.queued()).toBe(2);
    first.release();
    // 9 MiB and then 3 MiB fit the 12 MiB lane together: both are granted, in order.
    expect(await second.granted).toBeDefined();
    expect(await third.granted).toBeDefined();
    expect(budget.inUse().large).toBe(12 * MiB);
    expect(budget.queued()).toBe(0);
  });

  it('a hold that shrinks to its estimate lets the next large review in', async () => {
    const budget = new BodyBudget(OPTIONS);
    const first = admitted(budget.admit(4 * MiB)); // 12 MiB while read
    const next = budget.admit(1 * MiB);
    if (next.kind !== 'queued') throw new Error('expected queued');
    // Read: one long string, estimated at 9 MiB; 3 MiB are free for the next.
    expect(first.resize(9 * MiB)).toBe(true);
    expect(await next.granted).toBeDefined();
  });

  it('a later small-enough large review does not overtake the head of the queue', async () => {
    const budget = new BodyBudget(OPTIONS);
    const first = admitted(budget.admit(3 * MiB)); // 9 MiB
    const head = budget.admit(4 * MiB); // 12 MiB: waits
    // 1 MiB (3 MiB held) would fit beside the first, but the head is waiting: it queues behind it.
    const behind = budget.admit(1 * MiB);
    expect(head.kind).toBe('queued');
    expect(behind.kind).toBe('queued');
    first.release();
    if (head.kind !== 'queued' || behind.kind !== 'queued') throw new Error('expected queued');
    const headHold = await head.granted;
    expect(budget.inUse().large).toBe(12 * MiB);
    expect(budget.queued()).toBe(1);
    headHold?.release();
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
    expect(budget.inUse().large).toBe(12 * MiB);
  });

  it('a cancelled wait (the client went away) leaves the queue, and the next one moves up', async () => {
    const budget = new BodyBudget(OPTIONS);
    const first = admitted(budget.admit(4 * MiB));
    const gone = budget.admit(4 * MiB);
    const next = budget.admit(4 * MiB);
    if (gone.kind !== 'queued' || next.kind !== 'queued') throw new Error('expected queued');
    gone.cancel();
    expect(await gone.granted).toBeUndefined();
    first.release();
    expect(await next.granted).toBeDefined();
  });

  it('bounds the memory held whatever callers send: a seeded storm of admissions, estimates and releases', async () => {
    const budget = new BodyBudget(OPTIONS);
    let seed = 42;
    const random = (): number => {
      seed = (seed * 1103515245 + 12345) % 2 ** 31;
      return seed / 2 ** 31;
    };
    const held: Hold[] = [];
    for (let step = 0; step < 5_000; step++) {
      const r = random();
      if (r < 0.5) {
        const a = budget.admit(Math.floor(random() * 4 * MiB) + 1);
        if (a.kind === 'admitted') held.push(a.hold);
        if (a.kind === 'queued') void a.granted.then((h) => h && held.push(h));
      } else if (r < 0.7 && held.length > 0) {
        held[Math.floor(random() * held.length)]?.resize(Math.floor(random() * 12 * MiB));
      } else if (held.length > 0) {
        held.splice(Math.floor(random() * held.length), 1)[0]?.release();
      }
      if (step % 100 === 0) await Promise.resolve();
      const inUse = budget.inUse();
      expect(inUse.small).toBeLessThanOrEqual(OPTIONS.smallBudgetBytes);
      expect(inUse.large).toBeLessThanOrEqual(OPTIONS.largeBudgetBytes);
      expect(budget.queued()).toBeLessThanOrEqual(OPTIONS.maxQueued);
    }
  });
});
