import { describe, expect, it } from '@jest/globals';
import { describeError } from '../src/errors.js';

describe('describeError', () => {
  it('follows the cause chain, naming error codes (undici says only "fetch failed")', () => {
    const refused = Object.assign(new Error('connect ECONNREFUSED 10.0.0.1:443'), { code: 'ECONNREFUSED' });
    expect(describeError(new TypeError('fetch failed', { cause: refused }))).toBe(
      'fetch failed: connect ECONNREFUSED 10.0.0.1:443',
    );
    const reset = Object.assign(new Error('socket hang up'), { code: 'ECONNRESET' });
    expect(describeError(reset)).toBe('socket hang up (ECONNRESET)');
  });

  it('describes non-Error values and bounds the length', () => {
    expect(describeError('plain')).toBe('plain');
    expect(describeError({ code: 500 })).toBe('{"code":500}');
    expect(describeError(new Error('x'.repeat(1000)), 50)).toHaveLength(53);
  });
});
