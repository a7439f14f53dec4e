/**
 * Informers: an in-memory cache of one resource kept current by list+watch, with event
 * handlers — thin wrappers over client-node's `ListWatch` (`makeInformer`).
 *
 * client-node's ListWatch reconnects on a clean watch close and re-lists on 410 Gone, but on
 * any other error (list failure, watch refused, connection reset) it emits `error` and stops
 * for good. `ResourceInformer` restarts it with exponential backoff (like client-go's
 * reflector), reports `hasSynced()` once the first list has completed (client-go's
 * `HasSynced`) and `isStale()` while the watch has been down longer than `staleAfterMs`, so
 * /readyz can tell a replica serving from an outdated cache. Handlers added late get the
 * cached objects replayed as adds, like client-go's `AddEventHandler`; a throwing handler is
 * logged and never breaks the cache. `lastFailure()` tells what is failing (e.g. HTTP 403: no
 * RBAC) until the next successful list+watch; `listener` hears of failures and recoveries.
 *
 * `DynamicInformers` manages informers for custom-resource kinds by group/version/resource at
 * runtime (one per instance kind, started when its CRD appears and stopped when it goes),
 * without a process restart; `bindCrdInformer` wires that to a CRD informer.
 */
import {
  ApiextensionsV1Api,
  CoreV1Api,
  CustomObjectsApi,
  type Informer,
  type KubeConfig,
  type KubernetesListObject,
  type KubernetesObject,
  makeInformer,
  NodeV1Api,
  type ObjectCache,
  type V1CustomResourceDefinition,
  type V1Namespace,
  type V1RuntimeClass,
} from '@kubernetes/client-node';
import { type Clock, systemClock } from './clock.js';
import { describeError, httpStatusOf } from './errors.js';
import { createSilentLogger, type Logger } from './log.js';

/** What `makeInformer` returns; tests supply an in-memory one. */
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

/** A list+watch cache of one resource, restarted with backoff whenever client-node gives up. */
export class ResourceInformer<T extends KubernetesObject> implements Lister<T>, SyncedInformer {
  readonly name: string;
  private readonly handlers = new Set<EventHandlers<T>>();
  private readonly clock: Clock;
  private readonly logger: Logger;
  private readonly initialBackoffMs: number;
  private readonly maxBackoffMs: number;
  private readonly staleAfterMs: number;
  private readonly failureLogLevel: (err: unknown) => 'warn' | 'debug';
  private readonly listener: InformerListener | undefined;
  private lastError: unknown;
  private readonly syncWaiters = new Set<(synced: boolean) => void>();
  private started = false;
  private stopped = false;
  private synced = false;
  private errorCount = 0;
  private consecutiveFailures = 0;
  private failingSince: number | undefined;
  private cancelRestart: (() => void) | undefined;

  constructor(
    private readonly source: InformerSource<T>,
    options: InformerOptions<T>,
  ) {
    this.name = options.name;
    this.clock = options.clock ?? systemClock;
    this.logger = (options.logger ?? createSilentLogger()).child({ informer: options.name });
    this.initialBackoffMs = options.initialBackoffMs ?? 800;
    this.maxBackoffMs = options.maxBackoffMs ?? 30_000;
    this.staleAfterMs = options.staleAfterMs ?? 60_000;
    this.failureLogLevel = options.failureLogLevel ?? (() => 'warn');
    this.listener = options.listener;
    // client-node's ListWatch stores the very object it hands to its callbacks, and this
    // informer's callbacks are registered first: transforming it here trims the cache itself.
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
    this.cancelRestart?.();
    this.cancelRestart = undefined;
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
    return this.failingSince !== undefined && this.clock.now() - this.failingSince >= this.staleAfterMs;
  }

  /** The failures since the last successful list+watch; undefined while it works (or has not failed yet). */
  lastFailure(): InformerFailure | undefined {
    if (this.failingSince === undefined) return undefined;
    return {
      status: httpStatusOf(this.lastError),
      error: describeError(this.lastError),
      failures: this.consecutiveFailures,
      since: this.failingSince,
    };
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
    this.consecutiveFailures = 0;
    const recovered = this.failingSince !== undefined;
    if (recovered) this.logger.info('informer recovered');
    this.failingSince = undefined;
    this.lastError = undefined;
    if (recovered) this.notify(() => this.listener?.recovered?.(this.name));
    if (!this.synced) {
      this.synced = true;
      this.logger.info('informer synced', { objects: this.source.list().length });
      for (const resolve of this.syncWaiters) resolve(true);
      this.syncWaiters.clear();
    }
  }

  private onError(err: unknown): void {
    // client-node reports the abort of its own watch request when stopped: not a failure.
    if (this.stopped) return;
    this.errorCount++;
    this.consecutiveFailures++;
    this.failingSince ??= this.clock.now();
    this.lastError = err;
    if (this.cancelRestart) return;
    const delay = Math.min(this.initialBackoffMs * 2 ** (this.consecutiveFailures - 1), this.maxBackoffMs);
    const fields = { error: describeError(err), retryInMs: delay, failures: this.consecutiveFailures };
    if (this.failureLogLevel(err) === 'debug') this.logger.debug('informer list/watch failed; restarting', fields);
    else this.logger.warn('informer list/watch failed; restarting', fields);
    this.cancelRestart = this.clock.schedule(delay, () => {
      this.cancelRestart = undefined;
      void this.connect();
    });
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

/** A custom resource kind's REST coordinates; `resource` is the plural. */
export interface GroupVersionResource {
  group: string;
  version: string;
  resource: string;
}

const DNS_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
const DNS_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;

/** Validates a GVR so it is safe to put in a URL path; throws a clear error otherwise. */
export function checkGvr(gvr: GroupVersionResource): GroupVersionResource {
  const ok =
    gvr.group.length <= 253 &&
    DNS_SUBDOMAIN.test(gvr.group) &&
    gvr.version.length <= 63 &&
    DNS_LABEL.test(gvr.version) &&
    gvr.resource.length <= 63 &&
    DNS_LABEL.test(gvr.resource);
  if (!ok) throw new Error(`invalid group/version/resource ${JSON.stringify(gvr)}`);
  return gvr;
}

export function gvrString({ group, version, resource }: GroupVersionResource): string {
  return `${group}/${version}/${resource}`;
}

/**
 * The GVR to watch for a CRD: its storage version if served, else its first served version.
 * `undefined` for a CRD with no served version or an unusable spec.
 */
export function crdGvr(crd: V1CustomResourceDefinition): GroupVersionResource | undefined {
  const spec = crd.spec as Partial<V1CustomResourceDefinition['spec']> | undefined;
  const versions = Array.isArray(spec?.versions) ? spec.versions : [];
  const served = versions.filter((v) => v?.served === true && typeof v.name === 'string');
  const version = served.find((v) => v.storage === true) ?? served[0];
  const plural = spec?.names?.plural;
  if (version === undefined || typeof spec?.group !== 'string' || typeof plural !== 'string') return undefined;
  const gvr = { group: spec.group, version: version.name, resource: plural };
  try {
    return checkGvr(gvr);
  } catch {
    return undefined;
  }
}

export interface DynamicEventHandlers<T> {
  add?(gvr: GroupVersionResource, obj: T): void;
  update?(gvr: GroupVersionResource, obj: T): void;
  delete?(gvr: GroupVersionResource, obj: T): void;
}

export interface DynamicInformersOptions<T extends KubernetesObject = KubernetesObject>
  extends Omit<InformerOptions<T>, 'name'> {
  /** Name of the whole set, for logs and /readyz. Default `custom-resources`. */
  name?: string;
}

/** Informers for custom-resource kinds, added and removed at runtime. */
export class DynamicInformers<T extends KubernetesObject = KubernetesObject> implements SyncedInformer {
  readonly name: string;
  private readonly informers = new Map<string, { gvr: GroupVersionResource; informer: ResourceInformer<T> }>();
  /** Registered handlers → how to unbind them from each informer they were bound to. */
  private readonly handlers = new Map<DynamicEventHandlers<T>, Map<string, () => void>>();
  private readonly logger: Logger;
  private started = false;
  private stopped = false;

  constructor(
    private readonly factory: (gvr: GroupVersionResource) => InformerSource<T>,
    private readonly options: DynamicInformersOptions<T> = {},
  ) {
    this.name = options.name ?? 'custom-resources';
    this.logger = options.logger ?? createSilentLogger();
  }

  /** Starts every informer added so far and every one added later. */
  start(): void {
    if (this.started || this.stopped) return;
    this.started = true;
    for (const { informer } of this.informers.values()) informer.start();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    const all = [...this.informers.values()];
    this.informers.clear();
    await Promise.all(all.map(({ informer }) => informer.stop()));
  }

  /** The informer for `gvr`, created (and started, if the set is started) if new. */
  ensure(gvr: GroupVersionResource): ResourceInformer<T> | undefined {
    if (this.stopped) return undefined;
    const key = gvrString(checkGvr(gvr));
    const existing = this.informers.get(key);
    if (existing) return existing.informer;
    const informer = new ResourceInformer<T>(this.factory(gvr), { ...this.options, name: key });
    this.informers.set(key, { gvr, informer });
    for (const handlers of this.handlers.keys()) this.bind(gvr, informer, handlers);
    this.logger.info('watching custom resource kind', { gvr: key });
    if (this.started) informer.start();
    return informer;
  }

  /** Stops and forgets the informer for `gvr` (its kind was removed). */
  async remove(gvr: GroupVersionResource): Promise<void> {
    const key = gvrString(gvr);
    const entry = this.informers.get(key);
    if (!entry) return;
    this.informers.delete(key);
    for (const unbinds of this.handlers.values()) {
      unbinds.get(key)?.();
      unbinds.delete(key);
    }
    this.logger.info('stopped watching custom resource kind', { gvr: key });
    await entry.informer.stop();
  }

  get(gvr: GroupVersionResource): ResourceInformer<T> | undefined {
    return this.informers.get(gvrString(gvr))?.informer;
  }

  kinds(): GroupVersionResource[] {
    return [...this.informers.values()].map(({ gvr }) => gvr);
  }

  /** Handlers for every current and future kind; cached objects of current kinds are replayed. */
  addEventHandler(handlers: DynamicEventHandlers<T>): () => void {
    if (this.handlers.has(handlers)) return () => this.removeHandler(handlers);
    this.handlers.set(handlers, new Map());
    for (const { gvr, informer } of this.informers.values()) this.bind(gvr, informer, handlers);
    return () => this.removeHandler(handlers);
  }

  /** All current kinds synced (vacuously true when there are none). */
  hasSynced(): boolean {
    for (const { informer } of this.informers.values()) if (!informer.hasSynced()) return false;
    return true;
  }

  isStale(): boolean {
    for (const { informer } of this.informers.values()) if (informer.isStale()) return true;
    return false;
  }

  async waitForSync(signal?: AbortSignal): Promise<boolean> {
    const results = await Promise.all([...this.informers.values()].map(({ informer }) => informer.waitForSync(signal)));
    return results.every(Boolean) && !signal?.aborted;
  }

  private removeHandler(handlers: DynamicEventHandlers<T>): void {
    const unbinds = this.handlers.get(handlers);
    if (!unbinds) return;
    this.handlers.delete(handlers);
    for (const unbind of unbinds.values()) unbind();
  }

  private bind(gvr: GroupVersionResource, informer: ResourceInformer<T>, handlers: DynamicEventHandlers<T>): void {
    const unbind = informer.addEventHandler({
      add: (obj) => handlers.add?.(gvr, obj),
      update: (obj) => handlers.update?.(gvr, obj),
      delete: (obj) => handlers.delete?.(gvr, obj),
    });
    this.handlers.get(handlers)?.set(gvrString(gvr), unbind);
  }
}

/**
 * Keeps `dynamic` in step with the CRDs in `crds`: a CRD that `select` maps to a GVR gets an
 * informer; a deleted CRD (or one whose GVR changed, or no longer selected) has it stopped.
 * Returns a function that unbinds.
 */
export function bindCrdInformer<T extends KubernetesObject>(
  crds: ResourceInformer<V1CustomResourceDefinition>,
  dynamic: DynamicInformers<T>,
  select: (crd: V1CustomResourceDefinition) => GroupVersionResource | undefined,
  logger: Logger = createSilentLogger(),
): () => void {
  const byCrd = new Map<string, GroupVersionResource>();
  const safeSelect = (crd: V1CustomResourceDefinition): GroupVersionResource | undefined => {
    try {
      return select(crd);
    } catch (err) {
      logger.warn('ignoring CRD: selector failed', { crd: crd.metadata?.name, error: describeError(err) });
      return undefined;
    }
  };
  const forget = (name: string): void => {
    const previous = byCrd.get(name);
    if (!previous) return;
    byCrd.delete(name);
    // Another CRD cannot serve the same group/resource, so the GVR is this CRD's alone.
    void dynamic.remove(previous);
  };
  const upsert = (crd: V1CustomResourceDefinition): void => {
    const name = crd.metadata?.name;
    if (!name) return;
    const gvr = safeSelect(crd);
    const previous = byCrd.get(name);
    if (previous && gvr && gvrString(previous) === gvrString(gvr)) return;
    forget(name);
    if (!gvr) return;
    try {
      dynamic.ensure(gvr);
      byCrd.set(name, gvr);
    } catch (err) {
      logger.warn('ignoring CRD with an unusable group/version/resource', { crd: name, error: describeError(err) });
    }
  };
  return crds.addEventHandler({
    add: upsert,
    update: upsert,
    delete: (crd) => {
      if (crd.metadata?.name) forget(crd.metadata.name);
    },
  });
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

// ---- Sources on a real cluster (thin: makeInformer + the matching list call) ----

/** Namespaces, optionally filtered by a label selector. */
export function namespaceSource(kc: KubeConfig, labelSelector?: string): InformerSource<V1Namespace> {
  const api = kc.makeApiClient(CoreV1Api);
  return makeInformer(kc, '/api/v1/namespaces', () => api.listNamespace({ labelSelector }), labelSelector);
}

export function runtimeClassSource(kc: KubeConfig, labelSelector?: string): InformerSource<V1RuntimeClass> {
  const api = kc.makeApiClient(NodeV1Api);
  return makeInformer(
    kc,
    '/apis/node.k8s.io/v1/runtimeclasses',
    () => api.listRuntimeClass({ labelSelector }),
    labelSelector,
  );
}

export function crdSource(kc: KubeConfig, labelSelector?: string): InformerSource<V1CustomResourceDefinition> {
  const api = kc.makeApiClient(ApiextensionsV1Api);
  return makeInformer(
    kc,
    '/apis/apiextensions.k8s.io/v1/customresourcedefinitions',
    () => api.listCustomResourceDefinition({ labelSelector }),
    labelSelector,
  );
}

/** Every object of a custom resource kind, across namespaces. */
export function customResourceSource(kc: KubeConfig, gvr: GroupVersionResource): InformerSource<KubernetesObject> {
  const { group, version, resource } = checkGvr(gvr);
  const api = kc.makeApiClient(CustomObjectsApi);
  return makeInformer(
    kc,
    `/apis/${group}/${version}/${resource}`,
    async () =>
      (await api.listClusterCustomObject({
        group,
        version,
        plural: resource,
      })) as KubernetesListObject<KubernetesObject>,
  );
}
