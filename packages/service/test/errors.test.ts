import { describe, expect, it } from '@jest/globals';
import { describeError } from '../src/index.js';

describe('describeError', () => {
  it('appends causes, so a bare "fetch failed" says why', () => {
    const refused = Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:6443'), { code: 'ECONNREFUSED' });
    const tls = Object.assign(new Error('self-signed certificate'), { code: 'DEPTH_ZERO_SELF_SIGNED_CERT' });
    expect(describeError(new TypeError('fetch failed', { cause: refused }))).toBe(
      'fetch failed: connect ECONNREFUSED 127.0.0.1:6443',
    );
    expect(describeError(new TypeError('fetch failed', { cause: tls }))).toBe(
      'fetch failed: self-signed certificate (DEPTH_ZERO_SELF_SIGNED_CERT)',
    );
    expect(describeError(new Error('outer', { cause: new Error('middle', { cause: 'inner' }) }))).toBe(
      'outer: middle: inner',
    );
  });

  it('keeps the API server Status message and the HTTP status', () => {
    const err = Object.assign(new Error('HTTP-Code: 409\nMessage: …'), {
      code: 409,
      body: JSON.stringify({ kind: 'Status', message: 'the object has been modified' }),
    });
    expect(describeError(err)).toBe('HTTP 409: the object has been modified');
    expect(describeError('plain')).toBe('plain');
  });

  it('bounds the cause chain', () => {
    let err: Error = new Error('e0');
    for (let i = 1; i < 10; i++) err = new Error(`e${i}`, { cause: err });
    expect(describeError(err)).toBe('e9: e8: e7: e6');
  });
});

describe('describeError options', () => {
  it('bounds the length for fail-open details and names a top-level errno code', () => {
    const reset = Object.assign(new Error('socket hang up'), { code: 'ECONNRESET' });
    expect(describeError(reset)).toBe('socket hang up (ECONNRESET)');
    expect(describeError(new Error('x'.repeat(50)), 10)).toBe(`${'x'.repeat(10)}...`);
  });
});

describe('describeError, as the webhook uses it (fail-open details, log fields)', () => {
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
