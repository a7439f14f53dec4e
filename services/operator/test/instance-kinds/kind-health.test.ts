import { describe, expect, it } from '@jest/globals';
import {
  countInstanceKinds,
  ForbiddenKindReporter,
  instanceKindState,
  instanceKindsReadiness,
  type KindInformer,
} from '../../src/instance-kinds/kind-health.js';
import type { InformerFailure } from '../../src/runtime/informer.js';
import { captureLogger, HttpError } from '../runtime/fakes.js';

function kind(
  name: string,
  state: { synced?: boolean; stale?: boolean; failure?: Partial<InformerFailure> } = {},
): KindInformer {
  return {
    name,
    start: () => undefined,
    stop: async () => undefined,
    waitForSync: async () => true,
    hasSynced: () => state.synced ?? true,
    isStale: () => state.stale ?? false,
    lastFailure: () =>
      state.failure === undefined
        ? undefined
        : { status: undefined, error: 'x', failures: 1, since: 0, ...state.failure },
  };
}

const forbidden = { status: 403 };

describe('instanceKindState', () => {
  it('is forbidden while the latest failure is a 403, whether or not it had synced', () => {
    expect(instanceKindState(kind('a', { synced: false, failure: forbidden }))).toBe('forbidden');
    expect(instanceKindState(kind('a', { synced: true, stale: true, failure: forbidden }))).toBe('forbidden');
  });

  it('is otherwise pending before its first list, stale while its watch is down past the bound, else synced', () => {
    expect(instanceKindState(kind('a', { synced: false, failure: { status: 503 } }))).toBe('pending');
    expect(instanceKindState(kind('a', { synced: false }))).toBe('pending');
    expect(instanceKindState(kind('a', { stale: true, failure: { status: undefined } }))).toBe('stale');
    expect(instanceKindState(kind('a', { failure: { status: 500 } }))).toBe('synced'); // failing, not yet stale
    expect(instanceKindState(kind('a'))).toBe('synced');
  });

  it('counts every state, zero included', () => {
    expect(
      countInstanceKinds([
        kind('a'),
        kind('b', { failure: forbidden, synced: false }),
        kind('c', { failure: forbidden }),
        kind('d', { synced: false }),
      ]),
    ).toEqual({ synced: 1, pending: 1, stale: 0, forbidden: 2 });
    expect(countInstanceKinds([])).toEqual({ synced: 0, pending: 0, stale: 0, forbidden: 0 });
  });
});

describe('instanceKindsReadiness', () => {
  const crds = kind('customresourcedefinitions');
  it('is ok with forbidden Kinds, naming them', () => {
    expect(
      instanceKindsReadiness([crds], [kind('a/v1/x'), kind('b/v1/y', { synced: false, failure: forbidden })]),
    ).toEqual({
      ok: true,
      message: 'informers synced; forbidden by RBAC (not watched, retried): b/v1/y',
    });
  });

  it('still fails for Kinds (and other informers) not synced or stale for any other reason', () => {
    expect(
      instanceKindsReadiness(
        [crds, kind('namespaces', { synced: false })],
        [kind('a/v1/x', { synced: false, failure: { status: 500 } }), kind('b/v1/y', { failure: forbidden })],
      ),
    ).toEqual({
      ok: false,
      message: 'not synced: namespaces, a/v1/x; forbidden by RBAC (not watched, retried): b/v1/y',
    });
    expect(instanceKindsReadiness([crds], [kind('a/v1/x', { stale: true })])).toEqual({
      ok: false,
      message: 'stale: a/v1/x',
    });
    expect(instanceKindsReadiness([crds], [])).toEqual({ ok: true, message: 'informers synced' });
  });
});

describe('ForbiddenKindReporter', () => {
  const denied = new HttpError(403, 'robots.other.io is forbidden: User "system:serviceaccount:ns:op" cannot list');

  it('warns once per Kind while it stays forbidden, then notes its recovery once', () => {
    const { logger, lines } = captureLogger('debug');
    const reporter = new ForbiddenKindReporter(logger);
    for (let i = 0; i < 5; i++) reporter.listener.failed?.('other.io/v1/robots', denied);
    reporter.listener.failed?.('other.io/v1/gadgets', denied);
    reporter.listener.recovered?.('other.io/v1/robots');
    reporter.listener.recovered?.('other.io/v1/robots');
    reporter.listener.recovered?.('cloudark.io/v1/agents'); // never forbidden: nothing to say
    expect(lines().map((l) => [l.level, String(l.msg).split(':')[0], l.gvr])).toEqual([
      ['warn', 'instance Kind forbidden', 'other.io/v1/robots'],
      ['warn', 'instance Kind forbidden', 'other.io/v1/gadgets'],
      ['info', 'instance Kind readable again', 'other.io/v1/robots'],
    ]);
    expect(lines()[0]).toMatchObject({ error: expect.stringContaining('cannot list') });
    expect(lines()[0]?.msg).toContain('operator.instanceGroups');
  });

  it('warns again after another failure kind, or once the Kind was forgotten (CRD deleted and re-created)', () => {
    const { logger, lines } = captureLogger('debug');
    const reporter = new ForbiddenKindReporter(logger);
    reporter.listener.failed?.('g/v1/r', denied);
    reporter.listener.failed?.('g/v1/r', new HttpError(500, 'etcd'));
    reporter.listener.failed?.('g/v1/r', denied);
    reporter.forget({ group: 'g', version: 'v1', resource: 'r' });
    reporter.listener.failed?.('g/v1/r', denied);
    expect(lines().filter((l) => l.level === 'warn')).toHaveLength(3);
  });

  it('lowers only 403s to debug in the informer log', () => {
    const reporter = new ForbiddenKindReporter();
    expect(reporter.failureLogLevel(denied)).toBe('debug');
    expect(reporter.failureLogLevel(Object.assign(new Error('Forbidden'), { statusCode: 403 }))).toBe('debug'); // watch
    expect(reporter.failureLogLevel(new HttpError(503))).toBe('warn');
    expect(reporter.failureLogLevel(new Error('fetch failed'))).toBe('warn');
  });
});
