import { describe, expect, it } from '@jest/globals';
import {
  CLOCK_SKEW_MARGIN_MS,
  catchUpCutoff,
  createdAtOf,
  formatPosition,
  parsePosition,
  planTermStart,
} from '../../../src/controllers/audit/watch-checkpoint.js';

const T = Date.UTC(2026, 0, 1, 12, 0, 0);

describe('the Pod watch position on the Lease', () => {
  it('round-trips a position, with and without a resourceVersion', () => {
    const text = formatPosition({ resourceVersion: '4711', seenAt: T });
    expect(JSON.parse(text)).toEqual({ resourceVersion: '4711', seenAt: '2026-01-01T12:00:00.000Z' });
    expect(parsePosition(text)).toEqual({ resourceVersion: '4711', seenAt: T });
    expect(parsePosition(formatPosition({ seenAt: T }))).toEqual({ seenAt: T });
  });

  it('reads anything malformed as no position, never throws', () => {
    for (const bad of [
      undefined,
      '',
      'not json',
      '[]',
      'null',
      '{}',
      '{"resourceVersion":"1"}',
      '{"resourceVersion":1,"seenAt":"2026-01-01T00:00:00Z"}',
      '{"resourceVersion":"","seenAt":"2026-01-01T00:00:00Z"}',
      '{"resourceVersion":"0","seenAt":"2026-01-01T00:00:00Z"}',
      '{"resourceVersion":"1","seenAt":"yesterday"}',
    ]) {
      expect(parsePosition(bad)).toBeUndefined();
    }
  });
});

describe('planTermStart', () => {
  const previous = (over: Partial<Parameters<typeof planTermStart>[0] & object> = {}) => ({
    checkpoint: undefined,
    holderIdentity: 'old_1',
    acquiredAt: T - 3_600_000,
    leaseTransitions: 2,
    createdAt: T - 86_400_000,
    ...over,
  });

  it('starts from now on the very first term (no Lease before this one, or one nobody ever held)', () => {
    expect(planTermStart(undefined)).toEqual({ from: 'now' });
    expect(planTermStart(previous({ holderIdentity: '', acquiredAt: undefined, leaseTransitions: 0 }))).toEqual({
      from: 'now',
    });
  });

  it('resumes from the position the previous term left', () => {
    const checkpoint = formatPosition({ resourceVersion: '900', seenAt: T - 20_000 });
    expect(planTermStart(previous({ checkpoint }))).toEqual({
      from: 'checkpoint',
      position: { resourceVersion: '900', seenAt: T - 20_000 },
    });
  });

  it('catches up since the previous term began when it left no position (an older operator, or one killed at once)', () => {
    expect(planTermStart(previous())).toEqual({
      from: 'catch-up',
      reason: 'missing',
      position: { seenAt: T - 3_600_000 },
    });
    expect(planTermStart(previous({ checkpoint: 'garbage' }))).toEqual({
      from: 'catch-up',
      reason: 'missing',
      position: { seenAt: T - 3_600_000 },
    });
    // A released Lease (holder "") still had a term; without acquireTime, since the Lease's creation.
    expect(planTermStart(previous({ holderIdentity: '', acquiredAt: undefined }))).toEqual({
      from: 'catch-up',
      reason: 'missing',
      position: { seenAt: T - 86_400_000 },
    });
    expect(planTermStart(previous({ acquiredAt: undefined, createdAt: undefined }))).toEqual({
      from: 'catch-up',
      reason: 'missing',
      position: { seenAt: 0 },
    });
  });

  it('finishes a catch-up the previous term left unfinished (a position without a resourceVersion)', () => {
    expect(planTermStart(previous({ checkpoint: formatPosition({ seenAt: T - 600_000 }) }))).toEqual({
      from: 'catch-up',
      reason: 'missing',
      position: { seenAt: T - 600_000 },
    });
  });
});

describe('catch-up cut-off', () => {
  it('reaches back the clock-skew margin before the position', () => {
    expect(CLOCK_SKEW_MARGIN_MS).toBeGreaterThanOrEqual(10_000);
    expect(catchUpCutoff({ resourceVersion: '1', seenAt: T })).toBe(T - CLOCK_SKEW_MARGIN_MS);
    expect(catchUpCutoff({ seenAt: T }, 5_000)).toBe(T - 5_000);
  });

  it('reads a Pod’s creationTimestamp from the watch (string) or client-node (Date)', () => {
    expect(createdAtOf({ metadata: { creationTimestamp: '2026-01-01T12:00:00Z' } })).toBe(T);
    expect(createdAtOf({ metadata: { creationTimestamp: new Date(T) } })).toBe(T);
    expect(createdAtOf({ metadata: {} })).toBeUndefined();
    expect(createdAtOf({ metadata: { creationTimestamp: 'soon' } })).toBeUndefined();
  });
});
