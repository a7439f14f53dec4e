/**
 * Informers: an in-memory cache of one resource kept current by list+watch, with event
 * handlers. The cache and its loop: list-watch-cache.ts (the shared `ListWatchLoop`: resume,
 * relist on 410 Gone, idle timeout), over client-node's list calls and Watch on a cluster
 * (kube/informer-sources.ts); tests supply an in-memory source.
 *
 * A source reports any failure other than those (list failure, watch refused, connection reset)
 * as `error` and stops. `ResourceInformer` restarts it with exponential backoff (`WatchRestarts`,
 * like client-go's reflector), reports `hasSynced()` once the first list has completed (client-go's
 * `HasSynced`) and `isStale()` while the watch has been down longer than `staleAfterMs`, so
 * /readyz can tell a replica serving from an outdated cache. Handlers added late get the
 * cached objects replayed as adds, like client-go's `AddEventHandler`; a throwing handler is
 * logged and never breaks the cache. `lastFailure()` tells what is failing (e.g. HTTP 403: no
 * RBAC) until the next successful list+watch; `listener` hears of failures and recoveries.
 *
 * `informersReady` aggregates their readiness for /readyz. Custom-resource kinds that come and go
 * at run time: dynamic-informers.ts.
 */

import {
  createSilentLogger,
  describeError,
  httpStatusOf,
  type Logger,
  WatchRestarts,
} from '@kubeplus-isolation/service';
import type { Informer, KubernetesObject, ObjectCache } from '@kubernetes/client-node';
import { type Clock, systemClock } from './clock.js';

/** An informer's cache and its list+watch (list-watch-cache.ts; tests supply an in-memory one). */
export type InformerSource<T extends KubernetesObject> = Informer<T> & ObjectCache<T>;

export interface EventHandlers<T> {
  add?(obj: T): void;
  update?(obj: T): void;
  delete?(obj: T): void;
}

/** Read access to an informer's cache. */
export interface Lister<T> {
  /** By name (and namespace, for namespaced resources). */
  get(name: string, namespace?: string): T | undefined;
  /** All cached objects, or those of one namespace. */
  list(namespace?: string): readonly T[];
}

/** What the manager and /readyz need from any informer. */
export interface SyncedInformer {
  readonly name: string;
  start(): void;
  stop(): Promise<void>;
  /** The initial list has completed (stays true across later reconnects). */
  hasSynced(): boolean;
  /** The watch has been failing for longer than the staleness bound. */
  isStale(): boolean;
  /** Resolves true once synced; false if `signal` aborts or the informer stops first. */
  waitForSync(signal?: AbortSignal): Promise<boolean>;
}

export interface InformerOptions<T extends KubernetesObject = KubernetesObject> {
  /** For logs, e.g. `namespaces` or `cloudark.io/v1/agents`. */
  name: string;
  clock?: Clock;
  logger?: Logger;
  /** First restart delay after an error (doubles per consecutive failure). Default 800ms. */
  initialBackoffMs?: number;
  /** Restart delay cap. Default 30s. */
  maxBackoffMs?: number;
  /** Down for this long → stale. Default 60s. */
  staleAfterMs?: number;
  /**
   * Level of the line logged for each failed list/watch (default warn). E.g. debug for a failure
   * the listener reports once itself, instead of a warning per retry.
   */
  failureLogLevel?(err: unknown): 'warn' | 'debug';
  /** Told of each failed list/watch (after the informer's own bookkeeping) and of the recovery after failures. */
  listener?: InformerListener;
  /**
   * Trims each object in place as it enters the cache, before any handler sees it (client-go's
   * `SetTransform`). Default `stripManagedFields`: nothing here reads managedFields, often the
   * largest part of an object's metadata.
   */
  transform?(obj: T): void;
}

/** Drops `metadata.managedFields` (in place). */
export function stripManagedFields(obj: KubernetesObject): void {
  if (obj.metadata?.managedFields !== undefined) delete obj.metadata.managedFields;
}

/** Keeps only apiVersion, kind and metadata (without managedFields), in place: for caches read for metadata only. */
export function keepMetadataOnly(obj: KubernetesObject): void {
  const record = obj as unknown as Record<string, unknown>;
  for (const key of Object.keys(record)) {
    if (key !== 'apiVersion' && key !== 'kind' && key !== 'metadata') delete record[key];
  }
  stripManagedFields(obj);
}

export interface InformerListener {
  failed?(informer: string, err: unknown): void;
  recovered?(informer: string): void;
}

/** The current run of failures of an informer's list/watch. */
export interface InformerFailure {
  /** HTTP status of the latest failure, if it had one (e.g. 403: forbidden by RBAC). */
  status: number | undefined;
  /** The latest failure, described. */
  error: string;
  /** Failures in a row. */
  failures: number;
  /** When the first of them happened (ms since the epoch). */
  since: number;
}

/** A list+watch cache of one resource, restarted with backoff whenever its source stops on a failure. */
export class ResourceInformer<T extends KubernetesObject> implements Lister<T>, SyncedInformer {
  readonly name: string;
  private readonly handlers = new Set<EventHandlers<T>>();
  private readonly logger: Logger;
  private readonly staleAfterMs: number;
  private readonly failureLogLevel: (err: unknown) => 'warn' | 'debug';
  private readonly listener: InformerListener | undefined;
  /** Restarts after a failure, the failures in a row, and since when. */
  private readonly restarts: WatchRestarts;
  private readonly syncWaiters = new Set<(synced: boolean) => void>();
  private started = false;
  private stopped = false;
  private synced = false;
  private errorCount = 0;

  constructor(
    private readonly source: InformerSource<T>,
    options: InformerOptions<T>,
  ) {
    this.name = options.name;
    this.logger = (options.logger ?? createSilentLogger()).child({ informer: options.name });
    this.restarts = new WatchRestarts(() => void this.connect(), {
      initialMs: options.initialBackoffMs ?? 800,
      maxMs: options.maxBackoffMs ?? 30_000,
      jitter: false,
      clock: options.clock ?? systemClock,
    });
    this.staleAfterMs = options.staleAfterMs ?? 60_000;
    this.failureLogLevel = options.failureLogLevel ?? (() => 'warn');
    this.listener = options.listener;
    // The source (ListWatchCache, like client-node's ListWatch) stores the very object it hands to
    // its callbacks, and this informer's callbacks are registered first: transforming it here trims the cache itself.
    const transform = options.transform ?? stripManagedFields;
    const admit = (obj: T): T => {
      try {
        transform(obj);
      } catch (err) {
        this.logger.warn('informer transform failed', { error: describeError(err) });
      }
      return obj;
    };
    source.on('add', (obj) => this.dispatch('add', admit(obj)));
    source.on('update', (obj) => this.dispatch('update', admit(obj)));
    source.on('delete', (obj) => this.dispatch('delete', obj));
    source.on('error', (err) => this.onError(err));
  }

  /** Starts listing and watching (once); returns at once — use `waitForSync` to wait. */
  start(): void {
    if (this.started || this.stopped) return;
    this.started = true;
    void this.connect();
  }

  async stop(): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    this.restarts.stop();
    for (const resolve of this.syncWaiters) resolve(false);
    this.syncWaiters.clear();
    try {
      await this.source.stop();
    } catch (err) {
      this.logger.warn('error stopping informer', { error: describeError(err) });
    }
  }

  hasSynced(): boolean {
    return this.synced;
  }

  isStale(): boolean {
    const downForMs = this.restarts.downForMs();
    return downForMs !== undefined && downForMs >= this.staleAfterMs;
  }

  /** The failures since the last successful list+watch; undefined while it works (or has not failed yet). */
  lastFailure(): InformerFailure | undefined {
    const since = this.restarts.downSince;
    if (since === undefined) return undefined;
    const err = this.restarts.lastError;
    return { status: httpStatusOf(err), error: describeError(err), failures: this.restarts.failures, since };
  }

  waitForSync(signal?: AbortSignal): Promise<boolean> {
    if (this.synced) return Promise.resolve(true);
    if (this.stopped || signal?.aborted) return Promise.resolve(false);
    return new Promise((resolve) => {
      const onAbort = (): void => {
        this.syncWaiters.delete(done);
        resolve(false);
      };
      const done = (synced: boolean): void => {
        signal?.removeEventListener('abort', onAbort);
        resolve(synced);
      };
      this.syncWaiters.add(done);
      signal?.addEventListener('abort', onAbort, { once: true });
    });
  }

  get(name: string, namespace?: string): T | undefined {
    return this.source.get(name, namespace);
  }

  list(namespace?: string): readonly T[] {
    return this.source.list(namespace);
  }

  /**
   * Registers handlers; with `replay` (default) every cached object is first delivered as an
   * add. Returns a function that unregisters them.
   */
  addEventHandler(handlers: EventHandlers<T>, { replay = true }: { replay?: boolean } = {}): () => void {
    this.handlers.add(handlers);
    if (replay && handlers.add) {
      for (const obj of this.source.list()) this.call(handlers, 'add', obj);
    }
    return () => {
      this.handlers.delete(handlers);
    };
  }

  private async connect(): Promise<void> {
    if (this.stopped) return;
    const errorsBefore = this.errorCount;
    try {
      // Resolves once the list is done and the watch request is made; failures on the way
      // are reported through the `error` event (and sometimes a rejection).
      await this.source.start();
    } catch (err) {
      if (this.errorCount === errorsBefore) this.onError(err);
      return;
    }
    if (this.stopped || this.errorCount !== errorsBefore) return;
    const recovered = this.restarts.up();
    if (recovered) this.logger.info('informer recovered');
    if (recovered) this.notify(() => this.listener?.recovered?.(this.name));
    if (!this.synced) {
      this.synced = true;
      this.logger.info('informer synced', { objects: this.source.list().length });
      for (const resolve of this.syncWaiters) resolve(true);
      this.syncWaiters.clear();
    }
  }

  private onError(err: unknown): void {
    // A source may report the abort of its own watch request when stopped: not a failure.
    if (this.stopped) return;
    this.errorCount++;
    const delay = this.restarts.failed(err);
    if (delay === undefined) return;
    const fields = { error: describeError(err), retryInMs: delay, failures: this.restarts.failures };
    if (this.failureLogLevel(err) === 'debug') this.logger.debug('informer list/watch failed; restarting', fields);
    else this.logger.warn('informer list/watch failed; restarting', fields);
    this.notify(() => this.listener?.failed?.(this.name, err));
  }

  private notify(call: () => void): void {
    try {
      call();
    } catch (error) {
      this.logger.error('informer listener failed', { error: describeError(error) });
    }
  }

  private dispatch(event: keyof EventHandlers<T>, obj: T): void {
    for (const handlers of this.handlers) this.call(handlers, event, obj);
  }

  private call(handlers: EventHandlers<T>, event: keyof EventHandlers<T>, obj: T): void {
    try {
      handlers[event]?.(obj);
    } catch (err) {
      this.logger.error('informer event handler failed', {
        event,
        namespace: obj.metadata?.namespace,
        name: obj.metadata?.name,
        error: describeError(err),
      });
    }
  }
}

/** Aggregate readiness of informers for /readyz: every one synced and none stale. */
export function informersReady(informers: readonly SyncedInformer[]): { ok: boolean; message: string } {
  const notSynced = informers.filter((i) => !i.hasSynced()).map((i) => i.name);
  const stale = informers.filter((i) => i.isStale()).map((i) => i.name);
  if (notSynced.length === 0 && stale.length === 0) return { ok: true, message: 'informers synced' };
  const parts: string[] = [];
  if (notSynced.length > 0) parts.push(`not synced: ${notSynced.join(', ')}`);
  if (stale.length > 0) parts.push(`stale: ${stale.join(', ')}`);
  return { ok: false, message: parts.join('; ') };
}
