/**
 * One Namespace informer (list + watch of the isolated namespaces only) feeding the cache,
 * and the state readiness depends on:
 *
 * - synced: the initial list has been applied and a watch has connected once. Until then the
 *   cache may be empty, and a replica that took traffic would fail open on every Pod.
 * - stale: since when no watch is connected (watch ended, list/watch error). A gap of a
 *   moment happens at every routine reconnect; a long one means this replica misses updates.
 *
 * client-node's ListWatch reconnects by itself after a clean close, a client-side timeout or
 * 410 Gone, but gives up on any other error: then this watcher restarts it with capped
 * exponential backoff and jitter. It resumes from the last resourceVersion (or relists).
 *
 * ListWatch keeps its own copy of every object it has seen. The objects it gets here are slim
 * (`slimNamespace`: name, resourceVersion, our label and our annotation; no managedFields,
 * status, or anyone else's labels and annotations), so that copy costs a few hundred bytes per
 * namespace whatever else the namespaces carry; and the list is read in pages, so a (re)list
 * never holds more than one page of full objects.
 */
import {
  NODE_ISOLATION_ENABLED_LABEL,
  NODE_ISOLATION_ENABLED_VALUE,
  NODE_ISOLATION_RESOLVED_ANNOTATION,
} from '@kubeplus-isolation/spec';
import {
  CoreV1Api,
  type KubeConfig,
  type KubernetesListObject,
  ListWatch,
  type V1Namespace,
  Watch,
} from '@kubernetes/client-node';
import { describeError } from '../errors.js';
import type { LogSink } from '../log.js';
import { abortOptions } from './kube-api.js';
import type { NamespaceLike } from './namespace-cache.js';

/** Only namespaces the operator labeled: the informer never holds the rest of the cluster. */
export const ISOLATED_NAMESPACES_SELECTOR = `${NODE_ISOLATION_ENABLED_LABEL}=${NODE_ISOLATION_ENABLED_VALUE}`;
const NAMESPACES_PATH = '/api/v1/namespaces';
/** Bound on the informer's (re)list, all pages; a hung list would otherwise hold the informer unsynced forever. */
const LIST_TIMEOUT_MS = 60_000;
/** Namespaces per list page: what a (re)list holds as full objects at a time. */
export const LIST_PAGE_SIZE = 500;

/** A Namespace reduced to what ListWatch and the cache read. */
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

type WatchCallback = (phase: string, apiObj: unknown, watchObj?: unknown) => void;

/** Slims the objects of ADDED/MODIFIED/DELETED events; ERROR (a Status) and BOOKMARK pass as they are. */
function slimEvents(callback: WatchCallback): WatchCallback {
  return (phase, apiObj) => {
    const object =
      (phase === 'ADDED' || phase === 'MODIFIED' || phase === 'DELETED') &&
      typeof apiObj === 'object' &&
      apiObj !== null
        ? slimNamespace(apiObj as NamespaceLike)
        : apiObj;
    callback(phase, object);
  };
}

/** What the watcher needs of an informer: client-node's `Informer<V1Namespace>` fits. */
export interface InformerLike<T> {
  on(verb: 'add' | 'update' | 'delete', cb: (obj: T) => void): void;
  on(verb: 'error', cb: (err?: unknown) => void): void;
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

/** A client-node Watch that reports when each watch request connects and when it ends, and slims the objects it delivers. */
class ObservedWatch extends Watch {
  readonly #hooks: WatchHooks;

  constructor(kc: KubeConfig, hooks: WatchHooks) {
    super(kc);
    this.#hooks = hooks;
  }

  override async watch(
    path: string,
    queryParams: Record<string, string | number | boolean | undefined>,
    callback: WatchCallback,
    done: (err: unknown) => void,
  ): Promise<AbortController> {
    let ended = false;
    const controller = await super.watch(path, queryParams, slimEvents(callback), (err: unknown) => {
      ended = true;
      this.#hooks.closed(err);
      done(err);
    });
    // super.watch resolves once the response arrived; `done` already ran if it was an error.
    if (!ended) this.#hooks.connected();
    return controller;
  }
}

/** The real informer: list (paged) + watch of labeled namespaces, slim objects, list bounded by LIST_TIMEOUT_MS. */
export function createNamespaceInformer(kc: KubeConfig, hooks: WatchHooks): InformerLike<SlimNamespace> {
  const core = kc.makeApiClient(CoreV1Api);
  const list = async (): Promise<KubernetesListObject<SlimNamespace>> => {
    const options = abortOptions(AbortSignal.timeout(LIST_TIMEOUT_MS));
    const items: SlimNamespace[] = [];
    let resourceVersion: string | undefined;
    let next: string | undefined;
    do {
      const page = await core.listNamespace(
        { labelSelector: ISOLATED_NAMESPACES_SELECTOR, limit: LIST_PAGE_SIZE, _continue: next },
        options,
      );
      for (const ns of page.items) items.push(slimNamespace(ns as V1Namespace & NamespaceLike));
      // Every page of a paged list carries the resourceVersion of the same snapshot.
      resourceVersion = page.metadata?.resourceVersion;
      next = page.metadata?._continue || undefined;
    } while (next !== undefined);
    return { metadata: { resourceVersion }, items };
  };
  return new ListWatch<SlimNamespace>(
    NAMESPACES_PATH,
    new ObservedWatch(kc, hooks),
    list,
    false,
    ISOLATED_NAMESPACES_SELECTOR,
  );
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

  /** `makeInformer` receives the hooks its watch must call (see createNamespaceInformer). */
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
    this.#lastError = describeError(err);
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
