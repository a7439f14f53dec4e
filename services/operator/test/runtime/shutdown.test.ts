import { EventEmitter } from 'node:events';
import { describe, expect, it } from '@jest/globals';
import type { ManagerExit } from '../../src/runtime/manager.js';
import { runUntilSignalled, type SignalSource } from '../../src/runtime/shutdown.js';
import { deferred, FakeClock, flush } from './fakes.js';

function harness(
  run: (signal: AbortSignal) => Promise<ManagerExit>,
  shutdownTimeoutMs = 10_000,
  clock = new FakeClock(),
) {
  const emitter = new EventEmitter();
  const exits: number[] = [];
  const result = runUntilSignalled(run, {
    signals: emitter as unknown as SignalSource,
    exit: (code) => exits.push(code),
    shutdownTimeoutMs,
    clock,
  });
  return { clock, emitter, exits, result };
}

/** A run that shuts down `after` ms after its signal aborts. */
function runStoppingAfter(clock: FakeClock, after: number) {
  return (signal: AbortSignal): Promise<ManagerExit> =>
    new Promise((resolve) => {
      signal.addEventListener('abort', () => clock.schedule(after, () => resolve('shutdown')));
    });
}

describe('runUntilSignalled', () => {
  it('SIGTERM starts a graceful shutdown and exits 0 when it completes', async () => {
    const clock = new FakeClock();
    const h = harness(runStoppingAfter(clock, 3_000), 10_000, clock);
    h.emitter.emit('SIGTERM');
    await h.clock.advance(2_999);
    expect(h.exits).toEqual([]);
    await h.clock.advance(1);
    await expect(h.result).resolves.toBe(0);
    expect(h.exits).toEqual([0]);
    expect(h.emitter.listenerCount('SIGTERM')).toBe(0);
  });

  it('exits 1 when the graceful shutdown exceeds its bound', async () => {
    const clock = new FakeClock();
    const h = harness(runStoppingAfter(clock, 60_000), 10_000, clock);
    h.emitter.emit('SIGINT');
    await h.clock.advance(10_000);
    expect(h.exits).toEqual([1]);
    await h.clock.advance(60_000);
    expect(h.exits).toEqual([1]); // exit is called once
  });

  it('a second signal exits 1 immediately', async () => {
    const never = deferred<ManagerExit>();
    const h = harness(() => never.promise);
    h.emitter.emit('SIGTERM');
    await flush();
    expect(h.exits).toEqual([]);
    h.emitter.emit('SIGTERM');
    expect(h.exits).toEqual([1]);
  });

  it('exits 1 when leadership is lost, so the pod restarts as a clean standby', async () => {
    const h = harness(async () => 'leadership-lost');
    await expect(h.result).resolves.toBe(1);
    expect(h.exits).toEqual([1]);
  });

  it('exits 1 when the run fails', async () => {
    const h = harness(async () => {
      throw new Error('kubeconfig not found');
    });
    await expect(h.result).resolves.toBe(1);
  });
});
