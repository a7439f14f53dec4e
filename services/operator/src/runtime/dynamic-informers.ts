/**
 * `DynamicInformers` manages informers for custom-resource kinds by group/version/resource at
 * runtime (one per instance kind, started when its CRD appears and stopped when it goes),
 * without a process restart; `bindCrdInformer` wires that to a CRD informer.
 */

import { createSilentLogger, describeError, type Logger } from '@kubeplus-isolation/service';
import type { KubernetesObject, V1CustomResourceDefinition } from '@kubernetes/client-node';
import { checkGvr, type GroupVersionResource, gvrString } from './gvr.js';
import { type InformerOptions, type InformerSource, ResourceInformer, type SyncedInformer } from './informer.js';

export interface DynamicEventHandlers<T> {
  add?(gvr: GroupVersionResource, obj: T): void;
  update?(gvr: GroupVersionResource, obj: T): void;
  delete?(gvr: GroupVersionResource, obj: T): void;
  /**
   * The informer of `gvr` was stopped (its Kind is no longer watched): its objects leave the
   * caches without delete events, so a handler keeping state per object forgets them here.
   */
  removed?(gvr: GroupVersionResource): void;
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
    for (const [handlers, unbinds] of this.handlers) {
      unbinds.get(key)?.();
      unbinds.delete(key);
      handlers.removed?.(entry.gvr);
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
