import { describe, expect, it } from '@jest/globals';
import {
  findWeakSandboxes,
  type RuntimeClassHandler,
  rfc3339Seconds,
  type SandboxLike,
  type SandboxPodLike,
  STARTED_BEFORE_CLASS_HANDLER,
  startedBeforeHandler,
} from '../src/index.js';

describe('rfc3339Seconds: a creationTimestamp as Kubernetes writes it', () => {
  it('keeps the API form, reads a Date (typed clients) and cuts sub-seconds', () => {
    expect(rfc3339Seconds('2026-12-07T05:50:00Z')).toBe('2026-12-07T05:50:00Z');
    expect(rfc3339Seconds(new Date('2026-12-07T05:50:00.999Z'))).toBe('2026-12-07T05:50:00Z');
    expect(rfc3339Seconds('2026-12-07T06:50:00+01:00')).toBe('2026-12-07T05:50:00Z');
  });

  it('is undefined for anything that is not a time', () => {
    for (const bad of [undefined, null, '', 'yesterday', 42, {}, new Date(Number.NaN)]) {
      expect(rfc3339Seconds(bad)).toBeUndefined();
    }
  });
});

describe('startedBeforeHandler: created at or before the class got its current handler', () => {
  const since = '2026-12-07T05:50:00Z';
  it('before and in the same second count as before (the safe side); one second later does not', () => {
    expect(startedBeforeHandler('2026-12-07T05:49:59Z', since)).toBe(true);
    expect(startedBeforeHandler('2026-12-07T05:50:00Z', since)).toBe(true);
    expect(startedBeforeHandler(new Date('2026-12-07T05:50:00.700Z'), since)).toBe(true);
    expect(startedBeforeHandler('2026-12-07T05:50:01Z', since)).toBe(false);
  });

  it('claims nothing it cannot read', () => {
    expect(startedBeforeHandler(undefined, since)).toBe(false);
    expect(startedBeforeHandler('2026-12-07T05:49:00Z', '')).toBe(false);
  });
});

describe('findWeakSandboxes: a Sandbox or Pod started before its class got its current handler', () => {
  const SINCE = '2026-12-07T06:00:00Z';
  const BEFORE = '2026-12-07T05:00:00Z';
  const AFTER = '2026-12-07T07:00:00Z';
  /** kubeplus-sandbox-a re-created with kata at SINCE (a raised minimum); gvisor's time unknown. */
  const CLASSES: RuntimeClassHandler[] = [
    { name: 'kubeplus-sandbox-a', handler: 'kata', createdAt: SINCE },
    { name: 'gvisor', handler: 'runsc' },
    { name: 'runc', handler: 'runc', createdAt: '2020-01-01T00:00:00Z' },
  ];
  const sandbox = (name: string, runtimeClassName: string, creationTimestamp: string): SandboxLike => ({
    metadata: { name, uid: `uid-${name}`, creationTimestamp },
    spec: { podTemplate: { spec: { runtimeClassName } } },
  });
  const pod = (owner: string, runtimeClassName: string, creationTimestamp: string): SandboxPodLike => ({
    metadata: { name: owner, ownerReferences: [{ uid: `uid-${owner}`, controller: true }], creationTimestamp },
    spec: { runtimeClassName },
  });

  it('what runs is judged: a Sandbox whose Pod is not found runs nothing old, whenever it was created', () => {
    expect(
      findWeakSandboxes(
        'kata',
        [sandbox('old', 'kubeplus-sandbox-a', BEFORE), sandbox('new', 'kubeplus-sandbox-a', AFTER)],
        CLASSES,
      ),
    ).toEqual([]);
    expect(STARTED_BEFORE_CLASS_HANDLER).toBe('started-before-class-handler');
  });

  it('a Pod whose class time is unknown is not judged by time', () => {
    const pods = [pod('gv', 'gvisor', BEFORE)];
    expect(findWeakSandboxes('runsc', [sandbox('gv', 'gvisor', BEFORE)], CLASSES, undefined, pods)).toEqual([]);
  });

  it('what runs decides: an old Sandbox whose Pod was created after the time is fine; a Pod from before is named', () => {
    const pods = [pod('renewed', 'kubeplus-sandbox-a', AFTER), pod('stale', 'kubeplus-sandbox-a', SINCE)];
    const weak = findWeakSandboxes(
      'kata',
      [sandbox('renewed', 'kubeplus-sandbox-a', BEFORE), sandbox('stale', 'kubeplus-sandbox-a', BEFORE)],
      CLASSES,
      undefined,
      pods,
    );
    expect(weak.map((w) => w.name)).toEqual(['stale']);
    expect(weak[0]?.pod).toEqual({
      name: 'stale',
      runtimeClassName: 'kubeplus-sandbox-a',
      handler: 'kata',
      level: 'kata',
    });
    expect(weak[0]?.startedBeforeHandler).toEqual({
      runtimeClassName: 'kubeplus-sandbox-a',
      since: SINCE,
      createdAt: SINCE,
    });
  });

  it('a class weaker by name is the finding as before, and at minimum runc no time is judged', () => {
    const weak = findWeakSandboxes('kata', [sandbox('w', 'runc', BEFORE)], CLASSES);
    expect(weak).toHaveLength(1);
    expect(weak[0]?.startedBeforeHandler).toBeUndefined();
    const pods = [pod('old', 'kubeplus-sandbox-a', BEFORE)];
    expect(findWeakSandboxes('runc', [sandbox('old', 'kubeplus-sandbox-a', BEFORE)], CLASSES, undefined, pods)).toEqual(
      [],
    );
    expect(
      findWeakSandboxes('kata', [sandbox('old', 'kubeplus-sandbox-a', BEFORE)], CLASSES, undefined, pods),
    ).toHaveLength(1);
  });
});
