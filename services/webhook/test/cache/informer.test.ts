import { afterEach, beforeEach, describe, expect, it, jest } from '@jest/globals';
import { ISOLATED_NAMESPACES_SELECTOR, NamespaceWatcher } from '../../src/cache/informer.js';
import { NamespaceCache } from '../../src/cache/namespace-cache.js';
import { FakeInformer, recordingLogger } from '../helpers/fake-informer.js';
import { namespace, TEAM_A, TEAM_A_ANNOTATION } from '../helpers/fixtures.js';

describe('ISOLATED_NAMESPACES_SELECTOR', () => {
  it('selects exactly the label the operator sets', () => {
    expect(ISOLATED_NAMESPACES_SELECTOR).toBe('kubeplus.io/node-isolation-enabled=true');
  });
});

describe('NamespaceWatcher', () => {
  let now = 0;
  const clock = (): number => now;

  beforeEach(() => {
    now = 1_000_000;
    jest.useFakeTimers({ doNotFake: ['nextTick', 'queueMicrotask'] });
  });
  afterEach(() => {
    jest.useRealTimers();
  });

  function setup(opts: { maxStalenessMs?: number } = {}) {
    const informer = new FakeInformer();
    const cache = new NamespaceCache();
    const logger = recordingLogger();
    let errors = 0;
    const watcher = new NamespaceWatcher(informer.factory, cache, {
      maxStalenessMs: opts.maxStalenessMs ?? 60_000,
      backoffInitialMs: 1_000,
      backoffMaxMs: 30_000,
      random: () => 0,
      now: clock,
      logger,
      onError: () => {
        errors += 1;
      },
    });
    return { informer, cache, watcher, logger, errors: () => errors };
  }

  it('feeds informer add/update/delete events into the cache', async () => {
    const { informer, cache, watcher } = setup();
    watcher.start();
    await jest.advanceTimersByTimeAsync(0);
    informer.emit('add', namespace('team-a', { annotation: TEAM_A_ANNOTATION }));
    expect(cache.get('team-a')).toMatchObject({ state: 'valid', spec: TEAM_A });
    informer.emit('update', namespace('team-a', { resourceVersion: '2' }));
    expect(cache.get('team-a')).toEqual({ state: 'annotation_missing' });
    informer.emit('update', namespace('team-a', { labeled: false, resourceVersion: '3' }));
    expect(cache.get('team-a')).toBeUndefined();
    informer.emit('add', namespace('team-b', { annotation: TEAM_A_ANNOTATION }));
    informer.emit('delete', namespace('team-b'));
    expect(cache.size).toBe(0);
  });

  it('is not ready before the informer has listed and connected its watch, ready after', async () => {
    const { informer, watcher } = setup();
    let connect: () => void = () => undefined;
    informer.onStart = () =>
      new Promise((resolve) => {
        connect = () => {
          informer.hooks?.connected();
          resolve();
        };
      });
    expect(watcher.readiness()).toMatchObject({ ready: false, reason: expect.stringMatching(/initial list/) });
    watcher.start();
    await jest.advanceTimersByTimeAsync(0);
    expect(watcher.readiness().ready).toBe(false);
    expect(watcher.status().synced).toBe(false);
    connect();
    expect(watcher.readiness()).toEqual({ ready: true });
    expect(watcher.status()).toMatchObject({ synced: true, connected: true, staleForMs: undefined });
  });

  it('restarts the informer with backoff after an error, counting each error', async () => {
    const { informer, watcher, errors, logger } = setup();
    watcher.start();
    await jest.advanceTimersByTimeAsync(0);
    expect(informer.starts).toBe(1);

    informer.emit('error', new Error('watch failed: 500'));
    expect(errors()).toBe(1);
    await jest.advanceTimersByTimeAsync(499);
    expect(informer.starts).toBe(1);
    await jest.advanceTimersByTimeAsync(1);
    expect(informer.starts).toBe(2);
    expect(logger.records.find((r) => r.level === 'warn')?.meta).toMatchObject({
      error: 'watch failed: 500',
      retryInMs: 500,
    });
  });

  it('backs off further while restarts keep failing, and resets once a watch connects', async () => {
    const { informer, watcher } = setup();
    informer.onStart = async () => informer.emit('error', new Error('connection refused'));
    watcher.start();
    await jest.advanceTimersByTimeAsync(0);
    await jest.advanceTimersByTimeAsync(500); // attempt 0: 500 ms
    expect(informer.starts).toBe(2);
    await jest.advanceTimersByTimeAsync(999); // attempt 1: 1000 ms
    expect(informer.starts).toBe(2);
    await jest.advanceTimersByTimeAsync(1);
    expect(informer.starts).toBe(3);

    informer.onStart = async () => informer.hooks?.connected();
    await jest.advanceTimersByTimeAsync(2_000); // attempt 2: 2000 ms → connects
    expect(informer.starts).toBe(4);
    expect(watcher.readiness().ready).toBe(true);
    informer.emit('error', new Error('again'));
    await jest.advanceTimersByTimeAsync(500); // back to the first delay
    expect(informer.starts).toBe(5);
  });

  it('treats a start() that throws (e.g. credentials) like a watch error', async () => {
    const { informer, watcher, errors } = setup();
    informer.onStart = async () => {
      throw new Error('exec credential plugin failed');
    };
    watcher.start();
    await jest.advanceTimersByTimeAsync(0);
    expect(errors()).toBe(1);
    expect(watcher.status().lastError).toBe('exec credential plugin failed');
    await jest.advanceTimersByTimeAsync(500);
    expect(informer.starts).toBe(2);
  });

  it('goes unready once the watch has been disconnected longer than the bound, ready again on reconnect', async () => {
    const { informer, watcher } = setup({ maxStalenessMs: 60_000 });
    watcher.start();
    await jest.advanceTimersByTimeAsync(0);
    informer.onStart = async () => informer.emit('error', new Error('apiserver unreachable'));
    informer.emit('error', new Error('apiserver unreachable'));
    now += 60_000;
    expect(watcher.readiness().ready).toBe(true);
    now += 1;
    expect(watcher.readiness()).toMatchObject({
      ready: false,
      reason: expect.stringMatching(/disconnected for 60s.*apiserver unreachable/),
    });
    informer.hooks?.connected();
    expect(watcher.readiness().ready).toBe(true);
  });

  it('counts a watch that ended without error as stale until the next connect', async () => {
    const { informer, watcher } = setup();
    watcher.start();
    await jest.advanceTimersByTimeAsync(0);
    informer.hooks?.closed();
    now += 5_000;
    expect(watcher.status()).toMatchObject({ connected: false, staleForMs: 5_000 });
    informer.hooks?.connected();
    expect(watcher.status()).toMatchObject({ connected: true, staleForMs: undefined });
  });

  it('stops the informer and schedules no restart after stop()', async () => {
    const { informer, watcher } = setup();
    watcher.start();
    await jest.advanceTimersByTimeAsync(0);
    informer.emit('error', new Error('x'));
    await watcher.stop();
    await jest.advanceTimersByTimeAsync(60_000);
    expect(informer.starts).toBe(1);
    expect(informer.stops).toBe(1);
    informer.emit('error', new Error('late'));
    await jest.advanceTimersByTimeAsync(60_000);
    expect(informer.starts).toBe(1);
  });
});
