import { describe, expect, it } from '@jest/globals';
import { CountedPods } from '../../../src/controllers/audit/counted-pods.js';

describe('CountedPods', () => {
  it('counts a UID once, a Pod without one always, and forgets Pods no catch-up can reach', () => {
    const counted = new CountedPods();
    expect(counted.first('a', 1_000)).toBe(true);
    expect(counted.first('a', 1_000)).toBe(false);
    expect(counted.first('b', 5_000)).toBe(true);
    expect(counted.first(undefined, 5_000)).toBe(true);
    expect(counted.first(undefined, 5_000)).toBe(true);
    expect(counted.size).toBe(2);
    counted.forgetBefore(2_000);
    expect(counted.size).toBe(1);
    expect(counted.first('b', 5_000)).toBe(false);
  });
});
