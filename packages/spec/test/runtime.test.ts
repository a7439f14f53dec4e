import { describe, expect, it } from '@jest/globals';
import {
  compareLevels,
  DEFAULT_HANDLER_LEVELS,
  handlerMeetsMinimum,
  levelOfHandler,
  parseHandlerLevels,
} from '../src/index.js';

describe('runtime strength', () => {
  it('orders runc < runsc < kata', () => {
    expect(compareLevels('runc', 'runsc')).toBeLessThan(0);
    expect(compareLevels('runsc', 'kata')).toBeLessThan(0);
    expect(compareLevels('kata', 'kata')).toBe(0);
    expect(compareLevels('kata', 'runc')).toBeGreaterThan(0);
  });

  it.each([
    ['runc', 'runc'],
    ['crun', 'runc'],
    ['runsc', 'runsc'],
    ['gvisor', 'runsc'],
    ['kata', 'kata'],
    ['kata-qemu', 'kata'],
    ['kata-fc', 'kata'],
    ['kata-clh', 'kata'],
    ['kata-cloud-hypervisor', 'kata'],
    ['kata-dragonball', 'kata'],
    ['kata-qemu-snp', 'kata'],
    ['kata-qemu-tdx', 'kata'],
  ])('handler %s is %s level', (handler, level) => {
    expect(levelOfHandler(handler)).toBe(level);
  });

  it('does not know handlers it was not told about', () => {
    expect(levelOfHandler('katapult')).toBeUndefined();
    expect(levelOfHandler('youki')).toBeUndefined();
    expect(levelOfHandler('')).toBeUndefined();
  });

  it('judges a handler against a minimum; unknown handlers only meet runc', () => {
    expect(handlerMeetsMinimum('kata-fc', 'kata')).toBe(true);
    expect(handlerMeetsMinimum('runsc', 'kata')).toBe(false);
    expect(handlerMeetsMinimum('runsc', 'runsc')).toBe(true);
    expect(handlerMeetsMinimum('kata', 'runsc')).toBe(true);
    expect(handlerMeetsMinimum('runc', 'runsc')).toBe(false);
    expect(handlerMeetsMinimum('mystery', 'runsc')).toBe(false);
    expect(handlerMeetsMinimum('mystery', 'runc')).toBe(true);
  });
});

describe('parseHandlerLevels', () => {
  it('extends and overrides the defaults, with * for prefixes', () => {
    const r = parseHandlerLevels(' youki=runc, my-vm-*=kata ,gvisor=kata ');
    if (!r.ok) throw new Error(r.errors.join('; '));
    expect(levelOfHandler('youki', r.value)).toBe('runc');
    expect(levelOfHandler('my-vm-large', r.value)).toBe('kata');
    expect(levelOfHandler('gvisor', r.value)).toBe('kata');
    expect(levelOfHandler('kata-qemu', r.value)).toBe('kata');
    expect(DEFAULT_HANDLER_LEVELS.exact.gvisor).toBe('runsc'); // defaults untouched
  });

  it('prefers the longest matching prefix', () => {
    const r = parseHandlerLevels('kata-insecure-*=runc');
    if (!r.ok) throw new Error(r.errors.join('; '));
    expect(levelOfHandler('kata-insecure-dev', r.value)).toBe('runc');
    expect(levelOfHandler('kata-qemu', r.value)).toBe('kata');
  });

  it('reports every malformed item', () => {
    expect(parseHandlerLevels('foo,=kata,*=kata,bar=vm')).toEqual({
      ok: false,
      errors: [
        '"foo": expected handler=level (e.g. kata-qemu=kata)',
        '"=kata": expected handler=level (e.g. kata-qemu=kata)',
        '"*=kata": expected handler=level (e.g. kata-qemu=kata)',
        '"bar=vm": level must be one of runc, runsc, kata',
      ],
    });
  });

  it('accepts an empty setting as the defaults', () => {
    expect(parseHandlerLevels('')).toEqual({ ok: true, value: DEFAULT_HANDLER_LEVELS });
  });
});
