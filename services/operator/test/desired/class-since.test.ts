import { describe, expect, it } from '@jest/globals';
import type { RuntimeClassInfo } from '@kubeplus-isolation/spec';
import { allowedClassesSince } from '../../src/desired/class-since.js';
import { makeInstance, OWN_CLASS } from './helpers.js';

const instance = makeInstance();
const owner = { group: instance.group, kind: instance.kind, namespace: instance.namespace, name: instance.name };
const T0 = '2026-12-07T05:00:00Z';
const T1 = '2026-12-07T06:00:00Z';
const own = (handler: string, createdAt = T1): RuntimeClassInfo => ({
  name: OWN_CLASS,
  handler,
  generated: true,
  owner,
  createdAt,
});

describe('allowedClassesSince: when each allowed class got its current handler', () => {
  const ownIs = { name: OWN_CLASS, handler: 'kata', conflict: false, instance };

  it('every allowed class has an entry: its creationTimestamp, or "" when not known', () => {
    const classes: RuntimeClassInfo[] = [
      { name: 'kata-qemu', handler: 'kata-qemu', generated: false, createdAt: T0 },
      { name: 'vm', handler: 'kata', generated: false },
      own('kata'),
    ];
    expect(allowedClassesSince(['kata-qemu', OWN_CLASS, 'vm'], classes, ownIs)).toEqual({
      'kata-qemu': T0,
      [OWN_CLASS]: T1,
      vm: '',
    });
    // Keys in the allowed list's order: the same input always writes the same object.
    expect(Object.keys(allowedClassesSince(['kata-qemu', OWN_CLASS, 'vm'], classes, ownIs))).toEqual([
      'kata-qemu',
      OWN_CLASS,
      'vm',
    ]);
  });

  it('the own class while it still has the old handler (a minimum just raised) or is absent: not known', () => {
    expect(allowedClassesSince([OWN_CLASS], [own('runsc', T0)], ownIs)).toEqual({ [OWN_CLASS]: '' });
    expect(allowedClassesSince([OWN_CLASS], [], ownIs)).toEqual({ [OWN_CLASS]: '' });
    // Another instance's class under the own name is not the own class's time either.
    const foreign = { ...own('kata'), owner: { ...owner, namespace: 'team-b' } };
    expect(allowedClassesSince([OWN_CLASS], [foreign], ownIs)).toEqual({ [OWN_CLASS]: '' });
  });

  it('when the own name is held by a platform class (a conflict), that class is judged like any other', () => {
    const platform: RuntimeClassInfo = { name: OWN_CLASS, handler: 'kata', generated: false, createdAt: T0 };
    expect(allowedClassesSince([OWN_CLASS], [platform], { ...ownIs, conflict: true })).toEqual({ [OWN_CLASS]: T0 });
  });
});
