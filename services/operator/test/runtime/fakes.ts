/** Test doubles shared by the controller-runtime tests: a hand-driven clock, an in-memory Lease, an informer source. */
import { Writable } from 'node:stream';
import { createLogger, type Logger, type LogLevel } from '@kubeplus-isolation/service';
import type { KubernetesObject } from '@kubernetes/client-node';
import type { Clock } from '../../src/runtime/clock.js';
import type { InformerSource } from '../../src/runtime/informer.js';
import type { LeaderElectionRecord, LeaseLock, ObservedLease } from '../../src/runtime/leader-election.js';

/** Lets every pending promise continuation run (a macrotask turn drains the microtask queue). */
export async function flush(): Promise<void> {
  for (let i = 0; i < 3; i++) await new Promise<void>((resolve) => setImmediate(resolve));
}

interface Timer {
  at: number;
  seq: number;
  fn: () => void;
  cancelled: boolean;
}

/** A Clock whose time moves only when the test says so; timers fire in order, promises settle in between. */
export class FakeClock implements Clock {
  private timers: Timer[] = [];
  private seq = 0;

  constructor(private t = Date.UTC(2026, 0, 1)) {}

  now(): number {
    return this.t;
  }

  schedule(ms: number, fn: () => void): () => void {
    const timer: Timer = { at: this.t + Math.max(0, ms), seq: this.seq++, fn, cancelled: false };
    this.timers.push(timer);
    return () => {
      timer.cancelled = true;
    };
  }

  /** Moves time forward by `ms`, firing due timers in order and settling promises after each. */
  async advance(ms: number): Promise<void> {
    const target = this.t + ms;
    await flush();
    for (;;) {
      this.timers = this.timers.filter((timer) => !timer.cancelled);
      const next = this.timers.filter((timer) => timer.at <= target).sort((a, b) => a.at - b.at || a.seq - b.seq)[0];
      if (next === undefined) break;
      this.timers.splice(this.timers.indexOf(next), 1);
      this.t = Math.max(this.t, next.at);
      next.fn();
      await flush();
    }
    this.t = target;
    await flush();
  }

  /** Moves time without running timers, as a blocked event loop does; they run late on the next `advance`. */
  jump(ms: number): void {
    this.t += ms;
  }

  /** Live timers. */
  pendingTimers(): number {
    return this.timers.filter((timer) => !timer.cancelled).length;
  }
}

export class HttpError extends Error {
  constructor(
    readonly code: number,
    message = `HTTP ${code}`,
  ) {
    super(message);
  }
}

/** One Lease in memory, shared by several electors' `LeaseLock` views. */
export class MemoryLease {
  lease: ObservedLease | undefined;
  private rv = 0;
  writes: Array<{ by: string; op: 'create' | 'update'; record: LeaderElectionRecord }> = [];

  /** Writes the lease directly, as another party would. */
  put(record: LeaderElectionRecord): void {
    this.lease = { record: { ...record }, resourceVersion: String(++this.rv) };
  }

  view(name: string): MemoryLeaseLock {
    return new MemoryLeaseLock(this, name);
  }

  /** @internal */
  commit(by: string, op: 'create' | 'update', record: LeaderElectionRecord): ObservedLease {
    this.writes.push({ by, op, record: { ...record } });
    this.put(record);
    return this.snapshot() as ObservedLease;
  }

  snapshot(): ObservedLease | undefined {
    return this.lease && { record: { ...this.lease.record }, resourceVersion: this.lease.resourceVersion };
  }
}

export type LockFault = 'none' | 'error' | 'hang';

/** One replica's connection to a MemoryLease; faults simulate a partitioned or broken API server. */
export class MemoryLeaseLock implements LeaseLock {
  readonly description = 'kube-system/test-lease';
  fault: LockFault = 'none';
  calls = 0;
  /** Runs between this view's read and its write: lets a test slip in a concurrent writer. */
  beforeWrite: (() => void) | undefined;

  constructor(
    private readonly store: MemoryLease,
    readonly name: string,
  ) {}

  async get(signal: AbortSignal): Promise<ObservedLease | undefined> {
    await this.faultPoint(signal);
    return this.store.snapshot();
  }

  async create(record: LeaderElectionRecord, signal: AbortSignal): Promise<ObservedLease> {
    await this.faultPoint(signal);
    this.beforeWrite?.();
    if (this.store.lease) throw new HttpError(409, 'leases.coordination.k8s.io "test-lease" already exists');
    return this.store.commit(this.name, 'create', record);
  }

  async update(record: LeaderElectionRecord, resourceVersion: string, signal: AbortSignal): Promise<ObservedLease> {
    await this.faultPoint(signal);
    this.beforeWrite?.();
    if (this.store.lease?.resourceVersion !== resourceVersion) {
      throw new HttpError(409, 'the object has been modified; please apply your changes to the latest version');
    }
    return this.store.commit(this.name, 'update', record);
  }

  private faultPoint(signal: AbortSignal): Promise<void> {
    this.calls++;
    if (this.fault === 'error') return Promise.reject(new HttpError(500, 'etcdserver: request timed out'));
    if (this.fault === 'hang') return new Promise<void>(() => undefined);
    if (signal.aborted) return Promise.reject(new Error('aborted'));
    return Promise.resolve();
  }
}

type Verb = 'add' | 'update' | 'delete' | 'change' | 'error' | 'connect';

/** An in-memory stand-in for an informer's source (ListWatchCache): the test decides how each start() goes. */
export class FakeInformerSource<T extends KubernetesObject> implements InformerSource<T> {
  readonly objects = new Map<string, T>();
  private readonly callbacks = new Map<Verb, Array<(arg: never) => void>>();
  /** Outcome of each upcoming start(); when empty, starts succeed. `forbidden`: the list gets 403. */
  readonly startPlan: Array<'ok' | 'list-error' | 'reject' | 'forbidden'> = [];
  starts = 0;
  stops = 0;
  running = false;

  on(verb: Verb, cb: (arg: never) => void): void {
    const list = this.callbacks.get(verb) ?? [];
    list.push(cb);
    this.callbacks.set(verb, list);
  }

  off(verb: Verb, cb: (arg: never) => void): void {
    const list = this.callbacks.get(verb) ?? [];
    this.callbacks.set(
      verb,
      list.filter((c) => c !== cb),
    );
  }

  async start(): Promise<void> {
    this.starts++;
    const plan = this.startPlan.shift() ?? 'ok';
    if (plan === 'reject') throw new Error('No currently active cluster');
    if (plan === 'list-error' || plan === 'forbidden') {
      // What ListWatch does when its list call fails: report through `error`, then resolve.
      this.emitError(
        plan === 'forbidden'
          ? new HttpError(
              403,
              'robots.other.io is forbidden: User "system:serviceaccount:x:op" cannot list resource "robots"',
            )
          : new HttpError(503, 'service unavailable'),
      );
      return;
    }
    this.running = true;
  }

  async stop(): Promise<void> {
    this.stops++;
    this.running = false;
    // ListWatch reports the abort of its own watch request as an error.
    this.emitError(Object.assign(new Error('This operation was aborted'), { name: 'AbortError' }));
  }

  get(name: string, namespace?: string): T | undefined {
    return this.objects.get(`${namespace ?? ''}/${name}`);
  }

  list(namespace?: string): ReadonlyArray<T> {
    return [...this.objects.values()].filter((o) => !namespace || o.metadata?.namespace === namespace);
  }

  /** An object appears (add) or changes (update), as a watch event would deliver it. */
  upsert(obj: T): void {
    const key = `${obj.metadata?.namespace ?? ''}/${obj.metadata?.name ?? ''}`;
    const verb = this.objects.has(key) ? 'update' : 'add';
    this.objects.set(key, obj);
    this.emit(verb, obj);
  }

  remove(obj: T): void {
    const key = `${obj.metadata?.namespace ?? ''}/${obj.metadata?.name ?? ''}`;
    if (this.objects.delete(key)) this.emit('delete', obj);
  }

  /** Listed and watching (again): what ListWatch emits as `connect` after every complete list. */
  connect(): void {
    for (const cb of this.callbacks.get('connect') ?? []) (cb as (e: unknown) => void)(undefined);
  }

  /** The watch breaks: ListWatch emits `error` and stops. */
  failWatch(err: unknown = new HttpError(500, 'connection reset')): void {
    this.running = false;
    this.emitError(err);
  }

  private emit(verb: 'add' | 'update' | 'delete', obj: T): void {
    for (const cb of this.callbacks.get(verb) ?? []) (cb as (o: T) => void)(obj);
  }

  private emitError(err: unknown): void {
    for (const cb of this.callbacks.get('error') ?? []) (cb as (e: unknown) => void)(err);
  }
}

/** A Kubernetes-ish object for tests. */
export function obj(name: string, namespace?: string, resourceVersion = '1'): KubernetesObject {
  return { apiVersion: 'v1', kind: 'Thing', metadata: { name, namespace, resourceVersion } };
}

/** A promise with its resolve/reject functions exposed. */
export function deferred<T = void>(): PromiseWithResolvers<T> {
  return Promise.withResolvers<T>();
}

/** A JSON logger whose lines are kept for assertions (read them after `await flush()`). */
export function captureLogger(level: LogLevel = 'debug'): { logger: Logger; lines(): Array<Record<string, unknown>> } {
  const raw: string[] = [];
  const stream = new Writable({
    write(chunk: Buffer, _encoding, callback) {
      raw.push(chunk.toString());
      callback();
    },
  });
  return {
    logger: createLogger({ level, stream }),
    lines: () =>
      raw
        .join('')
        .split('\n')
        .filter(Boolean)
        .map((line) => JSON.parse(line) as Record<string, unknown>),
  };
}
