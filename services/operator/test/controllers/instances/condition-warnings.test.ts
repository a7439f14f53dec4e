import { describe, expect, test } from '@jest/globals';
import { ConditionWarnings } from '../../../src/controllers/instances/condition-warnings.js';

const unavailable = { reason: 'MutatingAdmissionPolicyUnavailable', message: 'advisory mode: no MAP' };
const stricter = { reason: 'StricterSandboxPolicy', message: 'governed by kata' };

describe('ConditionWarnings', () => {
  test('a standing condition is announced once, not at every resync, and again after the re-announce interval', () => {
    const w = new ConditionWarnings(1_000);
    expect(w.toAnnounce('a', [unavailable], 0)).toEqual([unavailable]);
    expect(w.toAnnounce('a', [unavailable], 10)).toEqual([]);
    expect(w.toAnnounce('a', [unavailable], 999)).toEqual([]);
    expect(w.toAnnounce('a', [unavailable], 1_000)).toEqual([unavailable]);
    expect(w.toAnnounce('a', [unavailable], 1_500)).toEqual([]);
  });

  test('a changed message, a new condition, and a condition that returns are announced at once', () => {
    const w = new ConditionWarnings(60_000);
    expect(w.toAnnounce('a', [unavailable], 0)).toEqual([unavailable]);
    const changed = { ...unavailable, message: 'advisory mode: no MAP, class b' };
    expect(w.toAnnounce('a', [changed, stricter], 1)).toEqual([changed, stricter]);
    expect(w.toAnnounce('a', [stricter], 2)).toEqual([]); // unavailable stopped holding: forgotten
    expect(w.toAnnounce('a', [changed, stricter], 3)).toEqual([changed]);
  });

  test('instances are independent, and nothing is kept for an instance without conditions or forgotten', () => {
    const w = new ConditionWarnings(60_000);
    expect(w.toAnnounce('a', [unavailable], 0)).toEqual([unavailable]);
    expect(w.toAnnounce('b', [unavailable], 0)).toEqual([unavailable]);
    expect(w.size).toBe(2);
    expect(w.toAnnounce('b', [], 1)).toEqual([]);
    expect(w.size).toBe(1);
    w.forget('a');
    expect(w.size).toBe(0);
    expect(w.toAnnounce('a', [unavailable], 2)).toEqual([unavailable]);
  });
});
