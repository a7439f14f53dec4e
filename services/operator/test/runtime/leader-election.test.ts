import { describe, expect, it } from '@jest/globals';
import { type LeaderElectionOptions, LeaderElector, resolveTimings } from '../../src/runtime/leader-election.js';
import { FakeClock, flush, MemoryLease, type MemoryLeaseLock } from './fakes.js';

// Small, client-go-proportioned timings: lease 15s, renew deadline 10s, retry 2s.
const TIMINGS = { leaseDurationMs: 15_000, renewDeadlineMs: 10_000, retryPeriodMs: 2_000 };

interface Candidate {
  elector: LeaderElector;
  lock: MemoryLeaseLock;
  log: string[];
  stop: AbortController;
  done: Promise<void>;
  leadingSignal(): AbortSignal | undefined;
}

function candidate(
  store: MemoryLease,
  clock: FakeClock,
  identity: string,
  extra: Partial<LeaderElectionOptions> = {},
): Candidate {
  const lock = store.view(identity);
  const log: string[] = [];
  let signal: AbortSignal | undefined;
  const elector = new LeaderElector({
    lock,
    identity,
    clock,
    random: () => 0, // no jitter: retries exactly every retryPeriod
    ...TIMINGS,
    callbacks: {
      onStartedLeading: (s) => {
        signal = s;
        log.push('started');
      },
      onStoppedLeading: () => log.push('stopped'),
      onNewLeader: (id) => log.push(`leader:${id}`),
    },
    ...extra,
  });
  const stop = new AbortController();
  const done = elector.run(stop.signal);
  return { elector, lock, log, stop, done, leadingSignal: () => signal };
}

describe('resolveTimings', () => {
  it('defaults to client-go values', () => {
    expect(resolveTimings({})).toEqual({ leaseDurationMs: 15_000, renewDeadlineMs: 10_000, retryPeriodMs: 2_000 });
  });

  it('enforces leaseDuration > renewDeadline > 1.2 × retryPeriod > 0', () => {
    expect(() => resolveTimings({ leaseDurationMs: 10_000, renewDeadlineMs: 10_000 })).toThrow(/leaseDurationMs/);
    expect(() => resolveTimings({ renewDeadlineMs: 2_400, retryPeriodMs: 2_000 })).toThrow(/retryPeriodMs/);
    expect(() => resolveTimings({ retryPeriodMs: 0 })).toThrow(/positive/);
    expect(() => resolveTimings({ leaseDurationMs: Number.NaN })).toThrow(/positive/);
  });
});

describe('LeaderElector', () => {
  it('creates the lease when none exists and leads', async () => {
    const clock = new FakeClock();
    const store = new MemoryLease();
    const a = candidate(store, clock, 'a');
    await flush();
    expect(a.elector.isLeader()).toBe(true);
    expect(a.log).toEqual(['leader:a', 'started']);
    expect(store.lease?.record).toMatchObject({ holderIdentity: 'a', leaseDurationSeconds: 15, leaseTransitions: 0 });
    a.stop.abort();
    await a.done;
  });

  it('with two candidates on one lease, exactly one leads and the other sees it as leader', async () => {
    const clock = new FakeClock();
    const store = new MemoryLease();
    const a = candidate(store, clock, 'a');
    const b = candidate(store, clock, 'b');
    await clock.advance(60_000);
    expect(a.elector.isLeader()).toBe(true);
    expect(b.elector.isLeader()).toBe(false);
    expect(b.log).toEqual(['leader:a']);
    expect(b.elector.getLeader()).toBe('a');
    // The leader kept renewing: b never got to write.
    expect(store.writes.filter((w) => w.by === 'b')).toEqual([]);
    expect(store.writes.filter((w) => w.by === 'a').length).toBeGreaterThan(20);
    a.stop.abort();
    b.stop.abort();
    await Promise.all([a.done, b.done]);
  });

  it('renews every retryPeriod, keeping acquireTime and leaseTransitions', async () => {
    const clock = new FakeClock();
    const store = new MemoryLease();
    const a = candidate(store, clock, 'a');
    await flush();
    // Like client-go: acquire, then the renew loop's immediate first renewal.
    expect(store.writes.map((w) => w.op)).toEqual(['create', 'update']);
    const acquired = store.lease?.record.acquireTime?.getTime();
    await clock.advance(1_999);
    expect(store.writes).toHaveLength(2);
    await clock.advance(1);
    expect(store.writes).toHaveLength(3);
    await clock.advance(2_000);
    expect(store.writes).toHaveLength(4);
    expect(store.lease?.record.acquireTime?.getTime()).toBe(acquired);
    expect(store.lease?.record.renewTime?.getTime()).toBe(clock.now());
    expect(store.lease?.record.leaseTransitions).toBe(0);
    a.stop.abort();
    await a.done;
  });

  it('when the leader dies without releasing, a standby takes over only after leaseDuration, counting a transition', async () => {
    const clock = new FakeClock();
    const store = new MemoryLease();
    const a = candidate(store, clock, 'a', { releaseOnCancel: false });
    await flush();
    const b = candidate(store, clock, 'b');
    await clock.advance(10_000);
    a.stop.abort(); // killed: no release
    await a.done;
    const lastRenewal = store.lease?.record.renewTime?.getTime() ?? 0;
    // b last saw the record change at the last renewal; it must wait a full lease duration from then.
    await clock.advance(lastRenewal + TIMINGS.leaseDurationMs - clock.now() - 1);
    expect(b.elector.isLeader()).toBe(false);
    await clock.advance(TIMINGS.retryPeriodMs + 1);
    expect(b.elector.isLeader()).toBe(true);
    expect(b.log).toEqual(['leader:a', 'leader:b', 'started']);
    expect(store.lease?.record).toMatchObject({ holderIdentity: 'b', leaseTransitions: 1 });
    b.stop.abort();
    await b.done;
  });

  it('judges expiry on its own clock from when it saw the record change, not the remote renewTime', async () => {
    const clock = new FakeClock();
    const store = new MemoryLease();
    // A holder whose clock is far behind: by our clock its renewTime expired long ago.
    store.put({
      holderIdentity: 'ghost',
      leaseDurationSeconds: 15,
      acquireTime: new Date(0),
      renewTime: new Date(0),
      leaseTransitions: 3,
    });
    const b = candidate(store, clock, 'b');
    await clock.advance(14_000);
    expect(b.elector.isLeader()).toBe(false);
    await clock.advance(2_000);
    expect(b.elector.isLeader()).toBe(true);
    expect(store.lease?.record).toMatchObject({ holderIdentity: 'b', leaseTransitions: 4 });
    b.stop.abort();
    await b.done;
  });

  it('does not take over a lease whose holder keeps renewing, however old the timestamps look', async () => {
    const clock = new FakeClock();
    const store = new MemoryLease();
    const b = candidate(store, clock, 'b');
    for (let i = 0; i < 20; i++) {
      store.put({
        holderIdentity: 'other',
        leaseDurationSeconds: 15,
        acquireTime: new Date(0),
        renewTime: new Date(i), // changes each time, but is always "ancient"
        leaseTransitions: 0,
      });
      await clock.advance(5_000);
    }
    expect(b.elector.isLeader()).toBe(false);
    b.stop.abort();
    await b.done;
  });

  it('releases the lease on graceful stop so a standby takes over on its next retry', async () => {
    const clock = new FakeClock();
    const store = new MemoryLease();
    const a = candidate(store, clock, 'a');
    await flush();
    const b = candidate(store, clock, 'b');
    await clock.advance(5_000);
    a.stop.abort();
    await a.done;
    expect(a.log).toEqual(['leader:a', 'started', 'stopped']);
    expect(store.lease?.record).toMatchObject({ holderIdentity: '', leaseDurationSeconds: 1 });
    expect(a.leadingSignal()?.aborted).toBe(true);
    await clock.advance(TIMINGS.retryPeriodMs);
    expect(b.elector.isLeader()).toBe(true);
    expect(store.lease?.record).toMatchObject({ holderIdentity: 'b', leaseTransitions: 1 });
    b.stop.abort();
    await b.done;
  });

  it('stops leading as soon as renewals have failed for renewDeadline', async () => {
    const clock = new FakeClock();
    const store = new MemoryLease();
    const a = candidate(store, clock, 'a');
    await flush();
    await clock.advance(4_000); // renewed at 2s and 4s
    a.lock.fault = 'error';
    // Next renewal cycle starts at 6s; its deadline is 6s + 10s = 16s.
    await clock.advance(11_999);
    expect(a.elector.isLeader()).toBe(true);
    expect(a.leadingSignal()?.aborted).toBe(false);
    await clock.advance(1);
    expect(a.elector.isLeader()).toBe(false);
    expect(a.leadingSignal()?.aborted).toBe(true);
    expect(a.log).toEqual(['leader:a', 'started', 'stopped']);
    await a.done; // run returns after losing the lease
    expect(store.lease?.record.holderIdentity).toBe('a'); // not released: it could not write
  });

  it('stops leading at the renew deadline even while a renewal request hangs', async () => {
    const clock = new FakeClock();
    const store = new MemoryLease();
    const a = candidate(store, clock, 'a');
    await flush();
    a.lock.fault = 'hang';
    await clock.advance(2_000 + 9_999);
    expect(a.elector.isLeader()).toBe(true);
    await clock.advance(1);
    expect(a.elector.isLeader()).toBe(false);
    expect(a.log.at(-1)).toBe('stopped');
    await a.done;
  });

  it('keeps leading through renewal failures shorter than renewDeadline', async () => {
    const clock = new FakeClock();
    const store = new MemoryLease();
    const a = candidate(store, clock, 'a');
    await flush();
    a.lock.fault = 'error';
    await clock.advance(8_000);
    a.lock.fault = 'none';
    await clock.advance(30_000);
    expect(a.elector.isLeader()).toBe(true);
    expect(a.log).toEqual(['leader:a', 'started']);
    a.stop.abort();
    await a.done;
  });

  it('treats a 409 on create as a lost race: the loser does not lead and follows the winner', async () => {
    const clock = new FakeClock();
    const store = new MemoryLease();
    const b = store.view('b');
    // 'a' creates the lease between b's read (not found) and b's create.
    b.beforeWrite = () => {
      b.beforeWrite = undefined;
      store.commit('a', 'create', {
        holderIdentity: 'a',
        leaseDurationSeconds: 15,
        acquireTime: new Date(clock.now()),
        renewTime: new Date(clock.now()),
        leaseTransitions: 0,
      });
    };
    const log: string[] = [];
    const elector = new LeaderElector({
      lock: b,
      identity: 'b',
      clock,
      random: () => 0,
      callbacks: {
        onStartedLeading: () => {
          log.push('started');
        },
        onStoppedLeading: () => log.push('stopped'),
      },
    });
    const stop = new AbortController();
    const done = elector.run(stop.signal);
    await clock.advance(4_000);
    expect(elector.isLeader()).toBe(false);
    expect(log).toEqual([]);
    expect(elector.getLeader()).toBe('a');
    stop.abort();
    await done;
  });

  it('treats a 409 on update (stale resourceVersion) as a lost race and retries', async () => {
    const clock = new FakeClock();
    const store = new MemoryLease();
    store.put({
      holderIdentity: '',
      leaseDurationSeconds: 1,
      acquireTime: undefined,
      renewTime: undefined,
      leaseTransitions: 5,
    });
    const lock = store.view('b');
    let raced = 0;
    lock.beforeWrite = () => {
      if (raced++ === 0) {
        // Someone else touches the lease (e.g. an annotation edit): our resourceVersion is stale.
        const current = store.snapshot();
        if (current) store.put(current.record);
      }
    };
    const log: string[] = [];
    const elector = new LeaderElector({
      lock,
      identity: 'b',
      clock,
      random: () => 0,
      callbacks: {
        onStartedLeading: () => {
          log.push('started');
        },
        onStoppedLeading: () => log.push('stopped'),
      },
    });
    const stop = new AbortController();
    const done = elector.run(stop.signal);
    await flush();
    expect(elector.isLeader()).toBe(false);
    expect(store.writes).toEqual([]);
    await clock.advance(TIMINGS.retryPeriodMs);
    expect(elector.isLeader()).toBe(true);
    expect(store.lease?.record).toMatchObject({ holderIdentity: 'b', leaseTransitions: 6 });
    stop.abort();
    await done;
  });

  it('re-acquires its own lease after a restart with the same identity without waiting for expiry', async () => {
    const clock = new FakeClock();
    const store = new MemoryLease();
    store.put({
      holderIdentity: 'a',
      leaseDurationSeconds: 15,
      acquireTime: new Date(clock.now()),
      renewTime: new Date(clock.now()),
      leaseTransitions: 2,
    });
    const a = candidate(store, clock, 'a');
    await flush();
    expect(a.elector.isLeader()).toBe(true);
    expect(store.lease?.record.leaseTransitions).toBe(2);
    a.stop.abort();
    await a.done;
  });

  it('reads a lease with missing fields as unheld and takes it', async () => {
    const clock = new FakeClock();
    const store = new MemoryLease();
    store.put({
      holderIdentity: '',
      leaseDurationSeconds: 0,
      acquireTime: undefined,
      renewTime: undefined,
      leaseTransitions: 0,
    });
    const a = candidate(store, clock, 'a');
    await flush();
    expect(a.elector.isLeader()).toBe(true);
    a.stop.abort();
    await a.done;
  });

  it('survives throwing callbacks', async () => {
    const clock = new FakeClock();
    const store = new MemoryLease();
    const elector = new LeaderElector({
      lock: store.view('a'),
      identity: 'a',
      clock,
      callbacks: {
        onStartedLeading: () => {
          throw new Error('bad callback');
        },
        onStoppedLeading: () => {
          throw new Error('bad callback');
        },
        onNewLeader: () => {
          throw new Error('bad callback');
        },
      },
    });
    const stop = new AbortController();
    const done = elector.run(stop.signal);
    await clock.advance(5_000);
    expect(elector.isLeader()).toBe(true);
    stop.abort();
    await expect(done).resolves.toBeUndefined();
    expect(store.lease?.record.holderIdentity).toBe('');
  });

  it('returns without campaigning when already aborted, and refuses concurrent runs', async () => {
    const clock = new FakeClock();
    const store = new MemoryLease();
    const lock = store.view('a');
    const elector = new LeaderElector({
      lock,
      identity: 'a',
      clock,
      callbacks: { onStartedLeading: () => undefined, onStoppedLeading: () => undefined },
    });
    await elector.run(AbortSignal.abort());
    expect(lock.calls).toBe(0);
    const stop = new AbortController();
    const running = elector.run(stop.signal);
    await expect(elector.run(stop.signal)).rejects.toThrow(/already in progress/);
    stop.abort();
    await running;
  });

  it('defaults the identity to hostname_<random>', () => {
    const elector = new LeaderElector({
      lock: new MemoryLease().view('x'),
      callbacks: { onStartedLeading: () => undefined, onStoppedLeading: () => undefined },
    });
    expect(elector.identity).toMatch(/^.+_[0-9a-f-]{36}$/);
  });
});
