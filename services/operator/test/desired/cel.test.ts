import { describe, expect, it } from '@jest/globals';
import { evaluate } from '@marcbachmann/cel-js';
import fc from 'fast-check';
import { celOptionalString, celString, celStringList } from '../../src/desired/cel.js';

describe('celString', () => {
  it('quotes plain names readably', () => {
    expect(celString('kubeplus-sandbox-team-a')).toBe('"kubeplus-sandbox-team-a"');
  });

  it('escapes quote, backslash and control characters, leaving no line break', () => {
    expect(celString('a"b\\c\nd\re\tf\u0000')).toBe('"a\\"b\\\\c\\nd\\re\\tf\\u0000"');
  });

  it('writes non-ASCII as \\u / \\U escapes', () => {
    expect(celString('é😀')).toBe('"\\u00E9\\U0001F600"');
  });

  it('replaces a lone surrogate (not representable in CEL) with U+FFFD', () => {
    expect(celString('a\uD800b')).toBe('"a\\uFFFDb"');
  });

  it('denotes exactly the input, per a CEL evaluator, for any Unicode string', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'binary' }), (s) => {
        const literal = celString(s);
        expect(literal).toMatch(/^"[\x20-\x7e]*"$/);
        expect(evaluate(literal)).toBe(s);
      }),
    );
  });

  it('cannot be broken out of: an injected expression stays a string', () => {
    const attack = '" || true || "';
    expect(evaluate(`${celString(attack)} == "x"`)).toBe(false);
  });
});

describe('celStringList', () => {
  it('is a list literal of the items, in order', () => {
    expect(celStringList(['a', 'b"c'])).toBe('["a", "b\\"c"]');
    expect(celStringList([])).toBe('[]');
    expect(evaluate(`"b" in ${celStringList(['a', 'b'])}`)).toBe(true);
  });
});

describe('celOptionalString', () => {
  const expr = celOptionalString('object', ['spec', 'podTemplate', 'spec', 'runtimeClassName']);

  it('guards every step with has()', () => {
    expect(expr).toBe(
      "has(object.spec) && has(object.spec.podTemplate) && has(object.spec.podTemplate.spec) && has(object.spec.podTemplate.spec.runtimeClassName) ? object.spec.podTemplate.spec.runtimeClassName : ''",
    );
  });

  it.each([
    [{}, ''],
    [{ spec: {} }, ''],
    [{ spec: { podTemplate: {} } }, ''],
    [{ spec: { podTemplate: { spec: { containers: [] } } } }, ''],
    [{ spec: { podTemplate: { spec: { runtimeClassName: 'kata' } } } }, 'kata'],
  ])('gives the value or empty for %j', (object, want) => {
    expect(evaluate(expr, { object })).toBe(want);
  });

  it('refuses a path segment that is not a plain field name', () => {
    expect(() => celOptionalString('object', ['spec', 'a-b'])).toThrow('not a plain CEL field name');
  });
});
