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
        'only minRuntimeClass, enforce and runtimeClassName are allowed',
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

  it('keeps runtimeClassName, a platform RuntimeClass to use instead of a generated one', () => {
    expect(parseSandboxIsolation('{"minRuntimeClass":"runsc","runtimeClassName":"gvisor"}')).toEqual({
      ok: true,
      value: { minRuntimeClass: 'runsc', enforce: true, runtimeClassName: 'gvisor' },
    });
    expect(
      parseSandboxIsolation('{"minRuntimeClass":"kata","enforce":false,"runtimeClassName":"kata-qemu.example.com"}'),
    ).toEqual({
      ok: true,
      value: { minRuntimeClass: 'kata', enforce: false, runtimeClassName: 'kata-qemu.example.com' },
    });
    // At most 253 characters, as Kubernetes names a RuntimeClass.
    const longest = `${'a'.repeat(63)}.${'b'.repeat(63)}.${'c'.repeat(63)}.${'d'.repeat(61)}`;
    expect(longest).toHaveLength(253);
    expect(parseSandboxIsolation(JSON.stringify({ minRuntimeClass: 'runsc', runtimeClassName: longest }))).toEqual({
      ok: true,
      value: { minRuntimeClass: 'runsc', enforce: true, runtimeClassName: longest },
    });
  });

  it('rejects a runtimeClassName that cannot name a RuntimeClass', () => {
    const message =
      "runtimeClassName must name a RuntimeClass: a DNS-1123 subdomain (an object name such as a RuntimeClass's): at most 253 characters of lower-case letters, digits, '-' and '.', starting and ending with a letter or digit";
    for (const bad of [
      '',
      'GVisor',
      'gvisor_1',
      '-gvisor',
      'gvisor.',
      'a b',
      `${'a'.repeat(250)}.bcd`,
      7,
      null,
      true,
    ]) {
      expect(parseSandboxIsolation(JSON.stringify({ minRuntimeClass: 'runsc', runtimeClassName: bad }))).toEqual({
        ok: false,
        errors: [message],
      });
    }
  });
});
