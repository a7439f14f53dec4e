/** The shared list/watch loop (ListWatchLoop) and its restarts (WatchRestarts), over a fake transport and clock. */
import { describe, expect, it } from '@jest/globals';
import {
  backoffCeilingMs,
  backoffDelayMs,
  isGone,
  type ListerWatcher,
  ListWatchLoop,
  type ListWatchLoopOptions,
  quietCloseDelayMs,
  type WatchClock,
  WatchIdleError,
  WatchRestarts,
  type WatchStream,
} from '../src/index.js';

const flush = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

/** Time moved by hand: timers run when `advance` passes them. */
class FakeClock implements WatchClock {
  #now = 1_000_000;
  #timers: Array<{ at: number; fn: () => void; cancelled: boolean }> = [];

  now(): number {
    return this.#now;
  }

  schedule(ms: number, fn: () => void): () => void {
    const timer = { at: this.#now + Math.max(0, ms), fn, cancelled: false };
    this.#timers.push(timer);
    return () => {
      timer.cancelled = true;
    };
  }

  /** Live (not cancelled, not run) timers. */
  get pending(): number {
    return this.#timers.filter((t) => !t.cancelled).length;
  }

  async advance(ms: number): Promise<void> {
    const until = this.#now + ms;
    for (;;) {
      await flush();
      const due = this.#timers.filter((t) => !t.cancelled && t.at <= until).sort((a, b) => a.at - b.at)[0];
      if (due === undefined) break;
      this.#now = due.at;
      due.cancelled = true;
      due.fn();
    }
    this.#now = until;
    this.#timers = this.#timers.filter((t) => !t.cancelled);
    await flush();
  }
}

/** The transport: the test decides how each list goes and drives the open watch. */
class FakeListerWatcher implements ListerWatcher {
  rv = 10;
  lists = 0;
  listFailures: unknown[] = [];
  /** The resourceVersion of each watch opened. */
  watches: string[] = [];
  aborted: unknown[] = [];
  #stream: WatchStream | undefined;

  async list(_signal: AbortSignal): Promise<string> {
    this.lists += 1;
    const failure = this.listFailures.shift();
    if (failure !== undefined) throw failure;
    return String(this.rv);
  }

  watch(resourceVersion: string, stream: WatchStream, signal: AbortSignal): void {
    this.watches.push(resourceVersion);
    this.#stream = stream;
    signal.addEventListener(
      'abort',
      () => {
        this.aborted.push(signal.reason);
        this.end(signal.reason);
      },
      { once: true },
    );
    stream.connected();
  }

  get open(): boolean {
    return this.#stream !== undefined;
  }

  event(type: string, rv: string | undefined, name = 'x'): void {
    this.#stream?.event(type, { metadata: { name, ...(rv !== undefined && { resourceVersion: rv }) } });
  }

  error(code: number): void {
    this.#stream?.event('ERROR', { kind: 'Status', code, message: `code ${code}` });
  }

  end(err?: unknown): void {
    const stream = this.#stream;
    this.#stream = undefined;
    stream?.closed(err);
  }
}

function setup(opts: Partial<ListWatchLoopOptions> = {}) {
  const clock = new FakeClock();
  const lw = new FakeListerWatcher();
  const events: string[] = [];
  let connects = 0;
  const closes: unknown[] = [];
  const loop = new ListWatchLoop(lw, {
    event: (type, object) => events.push(`${type} ${(object as { metadata: { name: string } }).metadata.name}`),
    connected: () => {
      connects += 1;
    },
    closed: (err) => closes.push(err),
    clock,
    idleTimeoutMs: 0,
    quietCloseDelayMs: 1_000,
    quietCloseMaxDelayMs: 4_000,
    ...opts,
  });
  let failure: unknown;
  let settled = false;
  const run = (): Promise<void> => {
    settled = false;
    const running = loop.start().then(
      () => {
        settled = true;
      },
      (e: unknown) => {
        failure = e;
        settled = true;
      },
    );
    return running;
  };
  return {
    clock,
    lw,
    loop,
    events,
    closes,
    run,
    connects: () => connects,
    failure: () => failure,
    settled: () => settled,
  };
}

describe('backoffDelayMs', () => {
  it('doubles per attempt up to the cap, jittered within [ceiling/2, ceiling]', () => {
    expect(backoffDelayMs(0, 1000, 30_000, 0)).toBe(500);
    expect(backoffDelayMs(0, 1000, 30_000, 0.999999)).toBe(1000);
    expect(backoffDelayMs(3, 1000, 30_000, 0)).toBe(4000);
    expect(backoffDelayMs(10, 1000, 30_000, 0.999999)).toBe(30_000);
    expect(backoffDelayMs(10_000, 1000, 30_000, 0)).toBe(15_000);
  });

  it('stays within [ceiling/2, ceiling] for any random in [0, 1), and the ceiling never passes the cap', () => {
    for (let attempt = 0; attempt < 40; attempt++) {
      const ceiling = backoffCeilingMs(attempt, 800, 30_000);
      expect(ceiling).toBe(Math.min(30_000, 800 * 2 ** attempt));
      for (const r of [0, 0.25, 0.5, 0.75, 0.999999]) {
        const d = backoffDelayMs(attempt, 800, 30_000, r);
        expect(d).toBeGreaterThanOrEqual(ceiling / 2);
        expect(d).toBeLessThanOrEqual(ceiling);
      }
    }
  });
});

describe('quietCloseDelayMs', () => {
  it('reopens at once after a watch that delivered anything, else waits longer each time, capped', () => {
    expect(quietCloseDelayMs(0, 3, 1000, 30_000)).toBe(0);
    expect(quietCloseDelayMs(8000, 1, 1000, 30_000)).toBe(0);
    expect(quietCloseDelayMs(0, 0, 1000, 30_000)).toBe(1000);
    expect(quietCloseDelayMs(1000, 0, 1000, 30_000)).toBe(2000);
    expect(quietCloseDelayMs(16_000, 0, 1000, 30_000)).toBe(30_000);
    expect(quietCloseDelayMs(30_000, 0, 1000, 30_000)).toBe(30_000);
  });
});

describe('isGone', () => {
  it('is a 410, whichever field carries it', () => {
    expect(isGone({ statusCode: 410 })).toBe(true);
    expect(isGone({ code: 410 })).toBe(true);
    expect(isGone({ statusCode: 500 })).toBe(false);
    expect(isGone(new Error('x'))).toBe(false);
    expect(isGone(undefined)).toBe(false);
  });
});

describe('ListWatchLoop', () => {
  it('lists, then watches from the list resourceVersion; events move the resourceVersion it resumes from', async () => {
    const s = setup();
    void s.run();
    await flush();
    expect(s.lw.lists).toBe(1);
    expect(s.lw.watches).toEqual(['10']);
    expect(s.connects()).toBe(1);
    s.lw.event('ADDED', '11', 'a');
    s.lw.event('MODIFIED', '12', 'a');
    s.lw.event('BOOKMARK', '15');
    s.lw.event('DELETED', undefined, 'b'); // no resourceVersion: the last one stays
    expect(s.events).toEqual(['ADDED a', 'MODIFIED a', 'BOOKMARK x', 'DELETED b']);
    expect(s.loop.resourceVersion).toBe('15');
    // The server ends the watch: reopened from there at once (it delivered events), without relisting.
    s.lw.end();
    await flush();
    expect(s.lw.watches).toEqual(['10', '15']);
    expect(s.lw.lists).toBe(1);
    expect(s.closes).toEqual([undefined]);
    await s.loop.stop();
  });

  it('relists on 410 Gone, as an ERROR event or as the watch’s status, and resumes from the new list', async () => {
    const s = setup();
    void s.run();
    await flush();
    s.lw.event('ADDED', '11', 'a');
    s.lw.error(410);
    s.lw.end();
    s.lw.rv = 50;
    await flush();
    expect(s.lw.lists).toBe(2);
    expect(s.lw.watches).toEqual(['10', '50']);
    expect(s.events).toEqual(['ADDED a']); // the ERROR event is not handed on
    s.lw.event('ADDED', '51', 'b');
    s.lw.rv = 60;
    s.lw.end(Object.assign(new Error('Gone'), { statusCode: 410 }));
    await flush();
    expect(s.lw.lists).toBe(3);
    expect(s.lw.watches).toEqual(['10', '50', '60']);
    expect(s.settled()).toBe(false);
    await s.loop.stop();
  });

  it('waits before reopening a watch that ended without delivering anything, longer each time, capped', async () => {
    const s = setup();
    void s.run();
    await flush();
    s.lw.end(); // nothing delivered: 1 s
    await s.clock.advance(999);
    expect(s.lw.watches).toHaveLength(1);
    await s.clock.advance(1);
    expect(s.lw.watches).toHaveLength(2);
    s.lw.end(); // 2 s
    await s.clock.advance(1_999);
    expect(s.lw.watches).toHaveLength(2);
    await s.clock.advance(1);
    expect(s.lw.watches).toHaveLength(3);
    s.lw.end(); // 4 s (the cap)
    await s.clock.advance(4_000);
    expect(s.lw.watches).toHaveLength(4);
    s.lw.end(); // still 4 s
    await s.clock.advance(3_999);
    expect(s.lw.watches).toHaveLength(4);
    await s.clock.advance(1);
    expect(s.lw.watches).toHaveLength(5);
    // A watch that delivered something: at once again, and the delay starts over.
    s.lw.event('BOOKMARK', '20');
    s.lw.end();
    await flush();
    expect(s.lw.watches).toHaveLength(6);
    s.lw.end();
    await s.clock.advance(1_000);
    expect(s.lw.watches).toHaveLength(7);
    expect(s.lw.lists).toBe(1);
    await s.loop.stop();
  });

  it('reopens a watch idle for its timeout from its resourceVersion; each event restarts the clock', async () => {
    const s = setup({ idleTimeoutMs: 400 });
    void s.run();
    await flush();
    for (let i = 0; i < 5; i++) {
      await s.clock.advance(300);
      s.lw.event('BOOKMARK', String(20 + i));
    }
    expect(s.lw.watches).toEqual(['10']); // 1.5 s with events every 300 ms: never idle
    await s.clock.advance(399);
    expect(s.lw.watches).toEqual(['10']);
    await s.clock.advance(1);
    expect(s.lw.aborted).toHaveLength(1);
    expect(s.lw.aborted[0]).toBeInstanceOf(WatchIdleError);
    expect(s.closes[0]).toBeInstanceOf(WatchIdleError);
    // Not an error: reopened at once, from the last bookmark, without relisting.
    expect(s.lw.watches).toEqual(['10', '24']);
    expect(s.lw.lists).toBe(1);
    expect(s.settled()).toBe(false);
    // The idle timer of an ended watch is gone: only the open watch's remains.
    expect(s.clock.pending).toBe(1);
    await s.loop.stop();
    expect(s.clock.pending).toBe(0);
  });

  it('stops with the failure of a list, a watch, or a non-410 ERROR event; start() again resumes without relisting', async () => {
    const s = setup({
      statusError: (status) => new Error(`status ${status.code}: ${status.message}`),
    });
    s.lw.listFailures.push(Object.assign(new Error('forbidden'), { statusCode: 403 }));
    await s.run();
    expect(String(s.failure())).toMatch(/forbidden/);
    expect(s.lw.watches).toEqual([]);

    const running = s.run();
    await flush();
    expect(s.lw.lists).toBe(2);
    s.lw.event('ADDED', '11', 'a');
    s.lw.end(Object.assign(new Error('connection reset'), { code: 'ECONNRESET' }));
    await running;
    expect(String(s.failure())).toMatch(/connection reset/);
    expect(s.loop.resourceVersion).toBe('11');

    const again = s.run();
    await flush();
    expect(s.lw.lists).toBe(2); // resumed from 11
    expect(s.lw.watches).toEqual(['10', '11']);
    s.lw.error(500);
    s.lw.end();
    await again;
    expect(String(s.failure())).toBe('Error: status 500: code 500');
  });

  it('a transport that throws opening a watch stops the loop with that error, and leaves no timer behind', async () => {
    const s = setup({ idleTimeoutMs: 400 });
    const broken = new Error('token file unreadable');
    s.lw.watch = () => {
      throw broken;
    };
    await s.run();
    expect(s.failure()).toBe(broken);
    expect(s.closes).toEqual([broken]);
    expect(s.clock.pending).toBe(0);
  });

  it('a custom isGone relists on what it names (e.g. a resourceVersion the server cannot parse)', async () => {
    const s = setup({ isGone: (err) => (err as { statusCode?: number }).statusCode === 400 });
    s.loop.resourceVersion = 'edited-by-hand';
    void s.run();
    await flush();
    expect(s.lw.lists).toBe(0);
    expect(s.lw.watches).toEqual(['edited-by-hand']);
    s.lw.end(Object.assign(new Error('Bad Request'), { statusCode: 400 }));
    await s.clock.advance(1_000); // the watch delivered nothing: the quiet delay first
    expect(s.lw.lists).toBe(1);
    expect(s.lw.watches).toEqual(['edited-by-hand', '10']);
    expect(s.settled()).toBe(false);
    await s.loop.stop();
  });

  it('stop() ends the open watch, or a pending wait, and the run resolves without an error', async () => {
    const s = setup();
    const running = s.run();
    await flush();
    expect(s.lw.open).toBe(true);
    await s.loop.stop();
    await running;
    expect(s.lw.open).toBe(false);
    expect(s.failure()).toBeUndefined();
    expect(s.lw.aborted).toHaveLength(1);

    const waiting = s.run();
    await flush();
    s.lw.end(); // nothing delivered: waits 1 s
    await flush();
    await s.loop.stop();
    await waiting;
    await s.clock.advance(10_000);
    expect(s.lw.watches).toHaveLength(2); // no watch after stop
    expect(s.failure()).toBeUndefined();
    expect(s.clock.pending).toBe(0);
  });

  it('start() while running returns the same run', async () => {
    const s = setup();
    const a = s.loop.start();
    const b = s.loop.start();
    expect(a).toBe(b);
    await flush();
    expect(s.lw.lists).toBe(1);
    await s.loop.stop();
  });
});

describe('WatchRestarts', () => {
  it('restarts after each failure with capped exponential backoff (no jitter: the ceiling)', async () => {
    const clock = new FakeClock();
    let restarts = 0;
    const r = new WatchRestarts(() => restarts++, { initialMs: 800, maxMs: 3_000, jitter: false, clock });
    expect(r.failed(new Error('a'))).toBe(800);
    await clock.advance(799);
    expect(restarts).toBe(0);
    await clock.advance(1);
    expect(restarts).toBe(1);
    expect(r.failed(new Error('b'))).toBe(1_600);
    await clock.advance(1_600);
    expect(r.failed(new Error('c'))).toBe(3_000); // capped
    await clock.advance(3_000);
    expect(r.failed(new Error('d'))).toBe(3_000);
    expect(restarts).toBe(3);
    expect(r.failures).toBe(4);
  });

  it('jitters within [ceiling/2, ceiling] with the injected random', () => {
    const clock = new FakeClock();
    const randoms = [0, 0.999999, 0.5];
    const r = new WatchRestarts(() => undefined, {
      initialMs: 1_000,
      maxMs: 30_000,
      jitter: true,
      clock,
      random: () => randoms.shift() ?? 0,
    });
    expect(r.failed('x')).toBe(500);
    r.stop();
    const r2 = new WatchRestarts(() => undefined, {
      initialMs: 1_000,
      maxMs: 30_000,
      jitter: true,
      clock,
      random: () => randoms.shift() ?? 0,
    });
    expect(r2.failed('x')).toBe(1_000);
  });

  it('schedules one restart at a time, but counts every failure', async () => {
    const clock = new FakeClock();
    let restarts = 0;
    const r = new WatchRestarts(() => restarts++, { initialMs: 100, maxMs: 1_000, jitter: false, clock });
    expect(r.failed('a')).toBe(100);
    expect(r.failed('b')).toBeUndefined();
    expect(r.pending).toBe(true);
    expect(r.failures).toBe(2);
    expect(r.lastError).toBe('b');
    await clock.advance(1_000);
    expect(restarts).toBe(1);
  });

  it('keeps since when it is down (failing or disconnected) until up; up resets the backoff', async () => {
    const clock = new FakeClock();
    const r = new WatchRestarts(() => undefined, { initialMs: 100, maxMs: 1_000, jitter: false, clock });
    expect(r.downForMs()).toBeUndefined();
    r.down();
    await clock.advance(5_000);
    expect(r.downForMs()).toBe(5_000);
    r.failed('a'); // still down since then
    await clock.advance(1_000);
    expect(r.downForMs()).toBe(6_000);
    expect(r.downSince).toBe(clock.now() - 6_000);
    r.failed('b');
    expect(r.up()).toBe(true);
    expect(r.downForMs()).toBeUndefined();
    expect(r.lastError).toBeUndefined();
    expect(r.failures).toBe(0);
    await clock.advance(1_000);
    expect(r.failed('c')).toBe(100); // back to the first delay
    expect(r.up()).toBe(true);
    expect(r.up()).toBe(false);
  });

  it('schedules nothing after stop(), and a pending restart never runs', async () => {
    const clock = new FakeClock();
    let restarts = 0;
    const r = new WatchRestarts(() => restarts++, { initialMs: 100, maxMs: 1_000, jitter: false, clock });
    r.failed('a');
    r.stop();
    expect(r.failed('b')).toBeUndefined();
    await clock.advance(10_000);
    expect(restarts).toBe(0);
    expect(clock.pending).toBe(0);
  });
});
