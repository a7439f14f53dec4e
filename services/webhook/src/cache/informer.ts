/**
 * One Namespace informer (list + watch of the isolated namespaces only) feeding the cache,
 * and the state readiness depends on:
 *
 * - synced: the initial list has been applied and a watch has connected once. Until then the
 *   cache may be empty, and a replica that took traffic would fail open on every Pod.
 * - stale: since when no watch is connected (watch ended, list/watch error). A gap of a
 *   moment happens at every routine reconnect; a long one means this replica misses updates.
 *
 * The loop itself is the one both services share (`ListWatchLoop` in @kubeplus-isolation/service:
 * resume from the last event's or bookmark's resourceVersion, relist on 410 Gone, reopen an idle
 * watch, wait before reopening a watch that keeps ending at once). NamespaceListWatch is its
 * transport over KubeClient: a paged list, then watches with bookmarks and a random
 * `timeoutSeconds`. A failure (a list or watch error, a network error) stops it with an `error`;
 * NamespaceWatcher then restarts it (`WatchRestarts`: capped exponential backoff with jitter), and
 * it resumes from the last resourceVersion (or relists).
 *
 * The objects it hands on are slim (`slimNamespace`: name, resourceVersion, our label and our
 * annotation; no managedFields, status, or anyone else's labels and annotations), and it keeps
 * only each namespace's name and resourceVersion (to tell adds from updates, skip unchanged
 * objects, and find what a relist no longer returns); the list is read in pages, so a (re)list
 * never holds more than one page of full objects.
 */
import {
  describeError,
  type ListerWatcher,
  ListWatchLoop,
  MAX_ERROR_DETAIL,
  systemWatchClock,
  type WatchClock,
  WatchRestarts,
  type WatchStatus,
  type WatchStream,
} from '@kubeplus-isolation/service';
import {
  NODE_ISOLATION_ENABLED_LABEL,
  NODE_ISOLATION_ENABLED_VALUE,
  NODE_ISOLATION_RESOLVED_ANNOTATION,
} from '@kubeplus-isolation/spec';

import { KubeApiError, type KubeClient } from '../kube/client.js';
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
/** Reconnect delay after a watch that ended cleanly without delivering anything (doubling, capped). */
const QUIET_CLOSE_DELAY_MS = 1_000;
const QUIET_CLOSE_MAX_DELAY_MS = 30_000;

/** A Namespace reduced to what the informer and the cache read. */
export interface SlimNamespace {
  metadata: {
    name?: string;
    resourceVersion?: string;
    /** Kept only by the hold's informer (hold/settle-cache.ts): the hold window is counted from it. */
    creationTimestamp?: string;
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
  /** A watch that received nothing this long is reopened from its resourceVersion (default: the shared loop's, 150 s). */
  watchIdleTimeoutMs?: number;
  /** `timeoutSeconds` of the next watch request. */
  watchTimeoutSeconds?: () => number;
  quietCloseDelayMs?: number;
  quietCloseMaxDelayMs?: number;
  /** Which namespaces it lists and watches (default ISOLATED_NAMESPACES_SELECTOR). */
  labelSelector?: string;
  /** What it keeps of each namespace (default `slimNamespace`). */
  slim?: (ns: NamespaceLike) => SlimNamespace;
}

interface NamespaceListPage {
  metadata?: { resourceVersion?: string; continue?: string };
  items?: NamespaceLike[];
}

type Verb = 'add' | 'update' | 'delete';

function randomWatchTimeoutSeconds(): number {
  return Math.floor(MIN_WATCH_TIMEOUT_SECONDS * (1 + Math.random()));
}

/**
 * List + watch of the labeled namespaces (see the top of this file), over KubeClient. Events:
 * `add`/`update`/`delete` with slim objects, `error` when it stopped on a failure.
 */
export class NamespaceListWatch implements InformerLike<SlimNamespace>, ListerWatcher {
  readonly #client: KubeClient;
  readonly #listPageSize: number;
  readonly #listTimeoutMs: number;
  readonly #watchTimeoutSeconds: () => number;
  readonly #labelSelector: string;
  readonly #slim: (ns: NamespaceLike) => SlimNamespace;
  readonly #loop: ListWatchLoop;
  readonly #callbacks: Record<Verb, Array<(ns: SlimNamespace) => void>> = { add: [], update: [], delete: [] };
  readonly #errorCallbacks: Array<(err?: unknown) => void> = [];
  /** name → resourceVersion of every namespace delivered and not deleted since. */
  readonly #known = new Map<string, string>();
  #running: Promise<void> | undefined;

  constructor(client: KubeClient, hooks: WatchHooks, opts: ListWatchOptions = {}) {
    this.#client = client;
    this.#listPageSize = opts.listPageSize ?? LIST_PAGE_SIZE;
    this.#listTimeoutMs = opts.listTimeoutMs ?? LIST_TIMEOUT_MS;
    this.#watchTimeoutSeconds = opts.watchTimeoutSeconds ?? randomWatchTimeoutSeconds;
    this.#labelSelector = opts.labelSelector ?? ISOLATED_NAMESPACES_SELECTOR;
    this.#slim = opts.slim ?? slimNamespace;
    this.#loop = new ListWatchLoop(this, {
      event: (type, object) => this.#onEvent(type, object),
      connected: () => hooks.connected(),
      closed: (err) => hooks.closed(err),
      ...(opts.watchIdleTimeoutMs !== undefined && { idleTimeoutMs: opts.watchIdleTimeoutMs }),
      quietCloseDelayMs: opts.quietCloseDelayMs ?? QUIET_CLOSE_DELAY_MS,
      quietCloseMaxDelayMs: opts.quietCloseMaxDelayMs ?? QUIET_CLOSE_MAX_DELAY_MS,
      statusError: (status: WatchStatus) =>
        new KubeApiError(`watch ${NAMESPACES_PATH} ERROR event`, status.code ?? 0, status),
    });
  }

  on(verb: Verb, cb: (ns: SlimNamespace) => void): void;
  on(verb: 'error', cb: (err?: unknown) => void): void;
  on(verb: Verb | 'error', cb: ((ns: SlimNamespace) => void) | ((err?: unknown) => void)): void {
    if (verb === 'error') this.#errorCallbacks.push(cb as (err?: unknown) => void);
    else this.#callbacks[verb].push(cb as (ns: SlimNamespace) => void);
  }

  /** The resourceVersion it would resume from ('' = relist first). */
  get resourceVersion(): string {
    return this.#loop.resourceVersion;
  }

  /** Resolves when it stops: after stop(), or once it has reported an error. No-op while running. */
  start(): Promise<void> {
    this.#running ??= this.#loop
      .start()
      .catch((e: unknown) => this.#emitError(e))
      .finally(() => {
        this.#running = undefined;
      });
    return this.#running;
  }

  async stop(): Promise<void> {
    await this.#loop.stop();
    await this.#running;
  }

  /** ListerWatcher: all pages; applies each page's items as it arrives, then deletes what the list no longer has. */
  async list(stopped: AbortSignal): Promise<string> {
    const timeout = AbortSignal.timeout(this.#listTimeoutMs);
    const signal = AbortSignal.any([stopped, timeout]);
    const seen = new Set<string>();
    let resourceVersion = '';
    let next: string | undefined;
    try {
      do {
        const page = (await this.#client.getJson(
          NAMESPACES_PATH,
          { labelSelector: this.#labelSelector, limit: this.#listPageSize, continue: next },
          signal,
        )) as NamespaceListPage;
        for (const item of page.items ?? []) {
          const ns = this.#slim(item);
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
        throw new Error(`listing namespaces took longer than ${Math.round(this.#listTimeoutMs / 1000)} s`, {
          cause: e,
        });
      }
      throw e;
    }
    for (const [name, rv] of this.#known) {
      if (!seen.has(name)) this.#delete({ metadata: { name, resourceVersion: rv } });
    }
    return resourceVersion;
  }

  /** ListerWatcher: one watch with bookmarks; the loop times it out when idle. */
  watch(resourceVersion: string, stream: WatchStream, signal: AbortSignal): void {
    this.#client.watch(
      NAMESPACES_PATH,
      {
        labelSelector: this.#labelSelector,
        resourceVersion,
        allowWatchBookmarks: true,
        timeoutSeconds: this.#watchTimeoutSeconds(),
      },
      stream,
      { signal },
    );
  }

  #onEvent(type: string, object: unknown): void {
    if (typeof object !== 'object' || object === null) return;
    switch (type) {
      case 'ADDED':
      case 'MODIFIED':
        this.#addOrUpdate(this.#slim(object as NamespaceLike));
        break;
      case 'DELETED':
        this.#delete(this.#slim(object as NamespaceLike));
        break;
      // BOOKMARK: only its resourceVersion (where to resume from), which the loop takes.
    }
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
  readonly #opts: WatcherOptions;
  /** Restarts after a failure, and since when the watch has been down (disconnected or failing). */
  readonly #restarts: WatchRestarts;
  #started = false;
  #stopped = false;
  #synced = false;
  #connected = false;
  #lastError: string | undefined;

  /** `makeInformer` receives the hooks its watch must call (NamespaceListWatch takes them). */
  constructor(
    makeInformer: (hooks: WatchHooks) => InformerLike<NamespaceLike>,
    sink: NamespaceSink,
    opts: WatcherOptions,
  ) {
    this.#opts = opts;
    const now = opts.now ?? Date.now;
    const clock: WatchClock = { now, schedule: systemWatchClock.schedule };
    this.#restarts = new WatchRestarts(() => void this.#run(), {
      initialMs: opts.backoffInitialMs ?? 1_000,
      maxMs: opts.backoffMaxMs ?? 30_000,
      jitter: true,
      clock,
      random: opts.random ?? Math.random,
    });
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
    this.#restarts.stop();
    await this.#informer.stop();
  }

  status(): InformerStatus {
    return {
      synced: this.#synced,
      connected: this.#connected,
      staleForMs: this.#synced ? this.#restarts.downForMs() : undefined,
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
    this.#restarts.up();
    if (!this.#synced) {
      this.#synced = true;
      this.#opts.logger?.info('namespace informer synced');
    }
  }

  #onClosed(): void {
    this.#connected = false;
    this.#restarts.down();
  }

  #onError(err: unknown): void {
    this.#connected = false;
    this.#lastError = describeError(err, MAX_ERROR_DETAIL);
    this.#opts.onError?.();
    const delayMs = this.#restarts.failed(err);
    if (delayMs === undefined) return;
    this.#opts.logger?.warn('namespace list/watch failed; restarting it', {
      error: this.#lastError,
      retryInMs: delayMs,
      attempt: this.#restarts.failures,
    });
  }
}
