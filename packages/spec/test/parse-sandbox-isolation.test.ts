import { describe, expect, it } from '@jest/globals';
import { parseSandboxIsolation } from '../src/index.js';

describe('parseSandboxIsolation', () => {
  it("accepts the design document's example", () => {
    expect(parseSandboxIsolation('{\n  "minRuntimeClass": "kata",\n  "enforce": true\n}')).toEqual({
      ok: true,
      value: { minRuntimeClass: 'kata', enforce: true },
    });
  });

  it('defaults enforce to true', () => {
    expect(parseSandboxIsolation('{"minRuntimeClass":"runsc"}')).toEqual({
      ok: true,
      value: { minRuntimeClass: 'runsc', enforce: true },
    });
  });

  it('keeps enforce: false (advisory mode)', () => {
    expect(parseSandboxIsolation('{"minRuntimeClass":"runc","enforce":false}')).toEqual({
      ok: true,
      value: { minRuntimeClass: 'runc', enforce: false },
    });
  });

  it('rejects with one readable message per problem', () => {
    const r = parseSandboxIsolation('{"minRuntimeClass":"gvisor","enforce":"yes","mode":1}');
    expect(r).toEqual({
      ok: false,
      errors: [
        'minRuntimeClass must be one of runc, runsc, kata',
        'enforce must be true or false',
        'only minRuntimeClass and enforce are allowed',
      ],
    });
    expect(parseSandboxIsolation('{}')).toEqual({
      ok: false,
      errors: ['minRuntimeClass is required (one of runc, runsc, kata)'],
    });
    expect(parseSandboxIsolation('kata')).toMatchObject({
      ok: false,
      errors: [expect.stringMatching(/^not valid JSON/)],
    });
    expect(parseSandboxIsolation(null)).toEqual({ ok: false, errors: ['annotation value must be a string'] });
  });
});
