import { describe, expect, it } from '@jest/globals';
import { dedupeTolerations, normalizeToleration, type Toleration, tolerationKey } from '../src/index.js';

/** Semantic equality through the identity key: what every user of the tolerations compares. */
const same = (a: Toleration, b: Toleration): boolean => tolerationKey(a) === tolerationKey(b);

describe('tolerations', () => {
  it('treats an empty operator as Equal and empty value/effect as absent', () => {
    expect(same({ key: 'a', value: 'v' }, { key: 'a', operator: 'Equal', value: 'v', effect: '' })).toBe(true);
    expect(same({ key: 'a', operator: 'Exists' }, { key: 'a', operator: 'Exists', value: '' })).toBe(true);
  });

  it('distinguishes every field', () => {
    const base = {
      key: 'a',
      operator: 'Equal' as const,
      value: 'v',
      effect: 'NoExecute' as const,
      tolerationSeconds: 5,
    };
    expect(same(base, { ...base, key: 'b' })).toBe(false);
    expect(same(base, { ...base, value: 'w' })).toBe(false);
    expect(same(base, { ...base, effect: 'NoSchedule' })).toBe(false);
    expect(same(base, { ...base, tolerationSeconds: 6 })).toBe(false);
    expect(same(base, { key: 'a', operator: 'Equal', value: 'v', effect: 'NoExecute' })).toBe(false);
    expect(same({ key: 'a', operator: 'Exists' }, { key: 'a' })).toBe(false);
  });

  it('normalizes to a fixed field order', () => {
    expect(Object.keys(normalizeToleration({ effect: 'NoSchedule', value: 'v', key: 'k' }))).toEqual([
      'key',
      'operator',
      'value',
      'effect',
    ]);
  });

  it('drops semantic duplicates, keeping the first and the order', () => {
    expect(
      dedupeTolerations([{ key: 'b' }, { key: 'a' }, { key: 'b', operator: 'Equal' }, { key: 'a', value: '' }]),
    ).toEqual([
      { key: 'b', operator: 'Equal' },
      { key: 'a', operator: 'Equal' },
    ]);
  });
});
