import { describe, expect, it } from '@jest/globals';
import { ItemExponentialFailureRateLimiter } from '../../src/runtime/rate-limiter.js';

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
