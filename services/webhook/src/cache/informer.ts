/**
 * One Namespace informer (list + watch of the isolated namespaces only) feeding the cache,
 * and the state readiness depends on:
 *
 * - synced: the initial list has been applied and a watch has connected once. Until then the
 *   cache may be empty, and a replica that took traffic would fail open on every Pod.
 * - stale: since when no watch is connected (watch ended, list/watch error). A gap of a
 *   moment happens at every routine reconnect; a long one means this replica misses updates.
 *
 * NamespaceListWatch lists (in pages), then watches from the list's resourceVersion with
 * bookmarks, and keeps the resourceVersion of the last event or bookmark. It reconnects by
 * itself, from that resourceVersion, when the API server ends a watch (its `timeoutSeconds`, a
 * restart) or when nothing arrived for WATCH_IDLE_TIMEOUT_MS, and relists when the
 * resourceVersion is too old (410 Gone, as a status or an ERROR event). Any other failure (a
 * list or watch error, a network error) is reported as an `error`; NamespaceWatcher then
 * restarts it with capped exponential backoff and jitter, and it resumes from the last
 * resourceVersion (or relists).
 *
 * The objects it hands on are slim (`slimNamespace`: name, resourceVersion, our label and our
 * annotation; no managedFields, status, or anyone else's labels and annotations), and it keeps
 * only each namespace's name and resourceVersion (to tell adds from updates, skip unchanged
 * objects, and find what a relist no longer returns); the list is read in pages, so a (re)list
 * never holds more than one page of full objects.
 */
import { setTimeout as delay } from 'node:timers/promises';
import { describeError } from '@kubeplus-isolation/service';
import {
  NODE_ISOLATION_ENABLED_LABEL,
  NODE_ISOLATION_ENABLED_VALUE,
  NODE_ISOLATION_RESOLVED_ANNOTATION,
} from '@kubeplus-isolation/spec';

/** Bound on an error's description in fail-open details and log fields. */
const MAX_DETAIL = 300;

import { KubeApiError, type KubeClient, type KubeStatus, WatchIdleError } from '../kube/client.js';
import type { LogSink } from '../log.js';
import type { NamespaceLike } from './namespace-cache.js';
import { NAMESPACES_PATH } from './namespace-reader.js';

/** Only namespaces the operator labeled: the informer never holds the rest of the cluster. */
export const ISOLATED_NAMESPACES_SELECTOR = `${NODE_ISOLATION_ENABLED_LABEL}=${NODE_ISOLATION_ENABLED_VALUE}`;
/** Bound on the informer's (re)list, all pages; a hung list would otherwise hold the informer unsynced forever. */
const LIST_TIMEOUT_MS = 60_000;
/** Namespaces per list page: what a (re)list holds as full objects at a time. */
export const LIST_PAGE_SIZE = 500;
/** The server ends each watch after a random 5-10 minutes (client-go's reflector: the same range). */
export const MIN_WATCH_TIMEOUT_SECONDS = 300;
/**
 * A watch that received nothing this long is presumed dead and reopened from its
 * resourceVersion. With bookmarks the API server sends something at least every minute.
 */
export const WATCH_IDLE_TIMEOUT_MS = 150_000;
/** Reconnect delay after a watch that ended cleanly without delivering anything (doubling, capped). */
const QUIET_CLOSE_DELAY_MS = 1_000;
const QUIET_CLOSE_MAX_DELAY_MS = 30_000;

/** A Namespace reduced to what the informer and the cache read. */
export interface SlimNamespace {
  metadata: {
    name?: string;
    resourceVersion?: string;
    labels?: Record<string, string>;
    annotations?: Record<string, string>;
  };
}

/** The object without anything the webhook does not read (the strings themselves are shared, not copied). */
export function slimNamespace(ns: NamespaceLike & { metadata?: { resourceVersion?: string } }): SlimNamespace {
  const meta = ns.metadata ?? {};
  const out: SlimNamespace = { metadata: {} };
  if (meta.name !== undefined) out.metadata.name = meta.name;
  if (meta.resourceVersion !== undefined) out.metadata.resourceVersion = meta.resourceVersion;
  const label = meta.labels?.[NODE_ISOLATION_ENABLED_LABEL];
  if (label !== undefined) out.metadata.labels = { [NODE_ISOLATION_ENABLED_LABEL]: label };
  const annotation = meta.annotations?.[NODE_ISOLATION_RESOLVED_ANNOTATION];
  if (annotation !== undefined) out.metadata.annotations = { [NODE_ISOLATION_RESOLVED_ANNOTATION]: annotation };
  return out;
}

/** What the watcher needs of an informer (NamespaceListWatch; a fake in tests). */
export interface InformerLike<T> {
  on(verb: 'add' | 'update' | 'delete', cb: (obj: T) => void): void;
  on(verb: 'error', cb: (err?: unknown) => void): void;
  /** Runs until stop() or until it reports an error; start() again resumes. */
  start(): Promise<void>;
  stop(): Promise<void>;
}

/** Connection events of the informer's watch requests. */
export interface WatchHooks {
  /** A watch request got its 200 response: events flow from now on. */
  connected(): void;
  /** A watch request ended, cleanly or not. */
  closed(err?: unknown): void;
}

/** Where namespace events go (the NamespaceCache). */
export interface NamespaceSink {
  upsert(ns: NamespaceLike): void;
  remove(ns: NamespaceLike): void;
}

export interface ListWatchOptions {
  listPageSize?: number;
  listTimeoutMs?: number;
  watchIdleTimeoutMs?: number;
  /** `timeoutSeconds` of the next watch request. */
  watchTimeoutSeconds?: () => number;
  quietCloseDelayMs?: number;
  quietCloseMaxDelayMs?: number;
}

interface NamespaceListPage {
  metadata?: { resourceVersion?: string; continue?: string };
  items?: NamespaceLike[];
}

type Verb = 'add' | 'update' | 'delete';

/** How one watch request ended. */
interface WatchEnd {
  err: Error | undefined;
  /** The Status of an ERROR event, if one came. */
  errorStatus: KubeStatus | undefined;
  /** Events delivered (ADDED, MODIFIED, DELETED, BOOKMARK; not ERROR). */
  events: number;
}

/**
 * Delay before reopening a watch the server ended cleanly (or before the relist after a 410):
 * none after a watch that delivered something (bookmarks included); after one that did not,
 * `initialMs`, doubling while it keeps happening, capped at `maxMs` (a server that ends every
 * watch at once is not hammered).
 */
export function quietCloseDelayMs(previousMs: number, events: number, initialMs: number, maxMs: number): number {
  if (events > 0) return 0;
  return Math.min(previousMs > 0 ? previousMs * 2 : initialMs, maxMs);
}

function randomWatchTimeoutSeconds(): number {
  return Math.floor(MIN_WATCH_TIMEOUT_SECONDS * (1 + Math.random()));
}

function isGone(end: WatchEnd): boolean {
  return end.errorStatus?.code === 410 || (end.err instanceof KubeApiError && end.err.statusCode === 410);
}

/**
 * List + watch of the labeled namespaces (see the top of this file), over KubeClient. Events:
 * `add`/`update`/`delete` with slim objects, `error` when it stopped on a failure.
 */
export class NamespaceListWatch implements InformerLike<SlimNamespace> {
  readonly #client: KubeClient;
  readonly #hooks: WatchHooks;
  readonly #opts: Required<ListWatchOptions>;
  readonly #callbacks: Record<Verb, Array<(ns: SlimNamespace) => void>> = { add: [], update: [], delete: [] };
  readonly #errorCallbacks: Array<(err?: unknown) => void> = [];
  /** name → resourceVersion of every namespace delivered and not deleted since. */
  readonly #known = new Map<string, string>();
  #resourceVersion = '';
  #running: Promise<void> | undefined;
  #stop: AbortController | undefined;

  constructor(client: KubeClient, hooks: WatchHooks, opts: ListWatchOptions = {}) {
    this.#client = client;
    this.#hooks = hooks;
    this.#opts = {
      listPageSize: LIST_PAGE_SIZE,
      listTimeoutMs: LIST_TIMEOUT_MS,
      watchIdleTimeoutMs: WATCH_IDLE_TIMEOUT_MS,
      watchTimeoutSeconds: randomWatchTimeoutSeconds,
      quietCloseDelayMs: QUIET_CLOSE_DELAY_MS,
      quietCloseMaxDelayMs: QUIET_CLOSE_MAX_DELAY_MS,
      ...opts,
    };
  }

  on(verb: Verb, cb: (ns: SlimNamespace) => void): void;
  on(verb: 'error', cb: (err?: unknown) => void): void;
  on(verb: Verb | 'error', cb: ((ns: SlimNamespace) => void) | ((err?: unknown) => void)): void {
    if (verb === 'error') this.#errorCallbacks.push(cb as (err?: unknown) => void);
    else this.#callbacks[verb].push(cb as (ns: SlimNamespace) => void);
  }

  /** The resourceVersion it would resume from ('' = relist first). */
  get resourceVersion(): string {
    return this.#resourceVersion;
  }

  /** Resolves when it stops: after stop(), or once it has reported an error. No-op while running. */
  start(): Promise<void> {
    if (this.#running === undefined) {
      const stop = new AbortController();
      this.#stop = stop;
      this.#running = this.#run(stop.signal).finally(() => {
        this.#running = undefined;
      });
    }
    return this.#running;
  }

  async stop(): Promise<void> {
    this.#stop?.abort(new Error('informer stopped'));
    // A failure of the run was start()'s to report.
    await this.#running?.catch(() => undefined);
  }

  async #run(stopped: AbortSignal): Promise<void> {
    let delayMs = 0;
    while (!stopped.aborted) {
      if (delayMs > 0) {
        // Rejects (AbortError) as soon as stop() aborts `stopped`: the run then ends.
        await delay(delayMs, undefined, { signal: stopped }).catch(() => undefined);
        if (stopped.aborted) return;
      }
      if (this.#resourceVersion === '') {
        try {
          await this.#list(stopped);
        } catch (e) {
          if (!stopped.aborted) this.#emitError(e);
          return;
        }
      }
      const end = await this.#watchOnce(stopped);
      if (stopped.aborted) return;
      if (isGone(end)) {
        // Our resourceVersion is too old: relist, at once unless the watch before did not deliver anything either.
        this.#resourceVersion = '';
        delayMs = quietCloseDelayMs(delayMs, end.events, this.#opts.quietCloseDelayMs, this.#opts.quietCloseMaxDelayMs);
      } else if (end.errorStatus !== undefined) {
        this.#emitError(
          new KubeApiError(`watch ${NAMESPACES_PATH} ERROR event`, end.errorStatus.code ?? 0, end.errorStatus),
        );
        return;
      } else if (end.err instanceof WatchIdleError) {
        delayMs = 0;
      } else if (end.err !== undefined) {
        this.#emitError(end.err);
        return;
      } else {
        delayMs = quietCloseDelayMs(delayMs, end.events, this.#opts.quietCloseDelayMs, this.#opts.quietCloseMaxDelayMs);
      }
    }
  }

  /** All pages; applies each page's items as it arrives, then deletes what the list no longer has. */
  async #list(stopped: AbortSignal): Promise<void> {
    const timeout = AbortSignal.timeout(this.#opts.listTimeoutMs);
    const signal = AbortSignal.any([stopped, timeout]);
    const seen = new Set<string>();
    let resourceVersion = '';
    let next: string | undefined;
    try {
      do {
        const page = (await this.#client.getJson(
          NAMESPACES_PATH,
          { labelSelector: ISOLATED_NAMESPACES_SELECTOR, limit: this.#opts.listPageSize, continue: next },
          signal,
        )) as NamespaceListPage;
        for (const item of page.items ?? []) {
          const ns = slimNamespace(item);
          if (ns.metadata.name === undefined) continue;
          seen.add(ns.metadata.name);
          this.#addOrUpdate(ns);
        }
        // Every page of a paged list carries the resourceVersion of the same snapshot.
        resourceVersion = page.metadata?.resourceVersion ?? '';
        next = page.metadata?.continue || undefined;
      } while (next !== undefined);
    } catch (e) {
      if (timeout.aborted && !stopped.aborted) {
        throw new Error(`listing namespaces took longer than ${Math.round(this.#opts.listTimeoutMs / 1000)} s`, {
          cause: e,
        });
      }
      throw e;
    }
    for (const [name, rv] of this.#known) {
      if (!seen.has(name)) this.#delete({ metadata: { name, resourceVersion: rv } });
    }
    this.#resourceVersion = resourceVersion;
  }

  #watchOnce(stopped: AbortSignal): Promise<WatchEnd> {
    return new Promise((resolve) => {
      let events = 0;
      let errorStatus: KubeStatus | undefined;
      this.#client.watch(
        NAMESPACES_PATH,
        {
          labelSelector: ISOLATED_NAMESPACES_SELECTOR,
          resourceVersion: this.#resourceVersion,
          allowWatchBookmarks: true,
          timeoutSeconds: this.#opts.watchTimeoutSeconds(),
        },
        {
          connected: () => this.#hooks.connected(),
          event: (type, object) => {
            if (type === 'ERROR') {
              // The server ends the stream after it; what happens next depends on the code.
              errorStatus = (typeof object === 'object' && object !== null ? object : {}) as KubeStatus;
              return;
            }
            events += 1;
            this.#onEvent(type, object);
          },
          closed: (err) => {
            this.#hooks.closed(err);
            resolve({ err, errorStatus, events });
          },
        },
        { signal: stopped, idleTimeoutMs: this.#opts.watchIdleTimeoutMs },
      );
    });
  }

  #onEvent(type: string, object: unknown): void {
    if (typeof object !== 'object' || object === null) return;
    const ns = slimNamespace(object as NamespaceLike);
    switch (type) {
      case 'ADDED':
      case 'MODIFIED':
        this.#addOrUpdate(ns);
        break;
      case 'DELETED':
        this.#delete(ns);
        break;
      case 'BOOKMARK':
        // Only its resourceVersion: where to resume from.
        break;
      default:
        return;
    }
    const rv = ns.metadata.resourceVersion;
    if (rv !== undefined && rv !== '') this.#resourceVersion = rv;
  }

  #addOrUpdate(ns: SlimNamespace): void {
    const name = ns.metadata.name;
    if (name === undefined) return;
    const rv = ns.metadata.resourceVersion ?? '';
    const known = this.#known.get(name);
    if (known !== undefined && known !== '' && known === rv) return;
    this.#known.set(name, rv);
    for (const cb of this.#callbacks[known === undefined ? 'add' : 'update']) cb(ns);
  }

  #delete(ns: SlimNamespace): void {
    const name = ns.metadata.name;
    if (name === undefined || !this.#known.delete(name)) return;
    for (const cb of this.#callbacks.delete) cb(ns);
  }

  #emitError(err: unknown): void {
    for (const cb of this.#errorCallbacks) cb(err);
  }
}

/** Capped exponential backoff with "equal jitter": a delay in [ceiling/2, ceiling]. `random` in [0, 1). */
export function backoffDelayMs(attempt: number, initialMs: number, maxMs: number, random: number): number {
  const ceiling = Math.min(maxMs, initialMs * 2 ** Math.min(attempt, 30));
  return Math.round(ceiling / 2 + (ceiling / 2) * random);
}

export interface InformerStatus {
  synced: boolean;
  /** Whether a watch request is connected right now. */
  connected: boolean;
  /** Milliseconds since the watch was last connected, or undefined while connected (or before the first sync). */
  staleForMs: number | undefined;
  lastError: string | undefined;
}

export type Readiness = { ready: true } | { ready: false; reason: string };

export interface WatcherOptions {
  /** A disconnected watch makes the replica unready once it has been down this long. */
  maxStalenessMs: number;
  backoffInitialMs?: number;
  backoffMaxMs?: number;
  logger?: LogSink;
  onError?: () => void;
  now?: () => number;
  random?: () => number;
}

export class NamespaceWatcher {
  readonly #informer: InformerLike<NamespaceLike>;
  readonly #opts: Required<Omit<WatcherOptions, 'logger' | 'onError'>> & Pick<WatcherOptions, 'logger' | 'onError'>;
  #started = false;
  #stopped = false;
  #synced = false;
  #connected = false;
  #disconnectedSince: number | undefined;
  #lastError: string | undefined;
  #attempt = 0;
  #restartTimer: NodeJS.Timeout | undefined;

  /** `makeInformer` receives the hooks its watch must call (NamespaceListWatch takes them). */
  constructor(
    makeInformer: (hooks: WatchHooks) => InformerLike<NamespaceLike>,
    sink: NamespaceSink,
    opts: WatcherOptions,
  ) {
    this.#opts = {
      backoffInitialMs: 1_000,
      backoffMaxMs: 30_000,
      now: Date.now,
      random: Math.random,
      ...opts,
    };
    this.#informer = makeInformer({ connected: () => this.#onConnected(), closed: () => this.#onClosed() });
    this.#informer.on('add', (ns) => sink.upsert(ns));
    this.#informer.on('update', (ns) => sink.upsert(ns));
    this.#informer.on('delete', (ns) => sink.remove(ns));
    this.#informer.on('error', (err) => this.#onError(err));
  }

  start(): void {
    if (this.#started) return;
    this.#started = true;
    void this.#run();
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    if (this.#restartTimer !== undefined) clearTimeout(this.#restartTimer);
    this.#restartTimer = undefined;
    await this.#informer.stop();
  }

  status(): InformerStatus {
    return {
      synced: this.#synced,
      connected: this.#connected,
      staleForMs:
        this.#synced && this.#disconnectedSince !== undefined ? this.#opts.now() - this.#disconnectedSince : undefined,
      lastError: this.#lastError,
    };
  }

  readiness(): Readiness {
    const s = this.status();
    if (!s.synced) {
      return { ready: false, reason: 'namespace informer has not completed its initial list and watch' };
    }
    if (s.staleForMs !== undefined && s.staleForMs > this.#opts.maxStalenessMs) {
      return {
        ready: false,
        reason: `namespace watch disconnected for ${Math.round(s.staleForMs / 1000)}s (limit ${Math.round(this.#opts.maxStalenessMs / 1000)}s); last error: ${s.lastError ?? 'none'}`,
      };
    }
    return { ready: true };
  }

  async #run(): Promise<void> {
    if (this.#stopped) return;
    try {
      await this.#informer.start();
    } catch (e) {
      // Thrown before any request was made (credentials, kubeconfig): same treatment as a watch error.
      this.#onError(e);
    }
  }

  #onConnected(): void {
    this.#connected = true;
    this.#disconnectedSince = undefined;
    this.#attempt = 0;
    if (!this.#synced) {
      this.#synced = true;
      this.#opts.logger?.info('namespace informer synced');
    }
  }

  #onClosed(): void {
    this.#connected = false;
    this.#disconnectedSince ??= this.#opts.now();
  }

  #onError(err: unknown): void {
    this.#connected = false;
    this.#disconnectedSince ??= this.#opts.now();
    this.#lastError = describeError(err, MAX_DETAIL);
    this.#opts.onError?.();
    if (this.#stopped || this.#restartTimer !== undefined) return;
    const delayMs = backoffDelayMs(
      this.#attempt,
      this.#opts.backoffInitialMs,
      this.#opts.backoffMaxMs,
      this.#opts.random(),
    );
    this.#attempt += 1;
    this.#opts.logger?.warn('namespace list/watch failed; restarting it', {
      error: this.#lastError,
      retryInMs: delayMs,
      attempt: this.#attempt,
    });
    this.#restartTimer = setTimeout(() => {
      this.#restartTimer = undefined;
      void this.#run();
    }, delayMs);
    this.#restartTimer.unref();
  }
}
