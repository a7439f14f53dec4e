/**
 * The caches the Manager starts, as a registry the controllers' setups ask for informers
 * (controller-runtime's cache behind `mgr.GetCache()`): the same resource and label selector
 * asked twice give the same informer, so controllers watching one resource share one watch.
 *
 * Every cache is started before the Manager campaigns and stopped after its controllers; the
 * `mustSync` ones are waited for first (cert-manager's mustSync) and make up readiness. With
 * `metrics`, each cache is reported as `kubeplus_operator_informer_synced{resource=<name>}`.
 * `bind` registers handlers between caches (an index, informers following CRDs): bound when the
 * caches start, unbound once they have stopped.
 */

import { createSilentLogger, describeError, type Logger } from '@kubeplus-isolation/service';
import type { KubernetesObject } from '@kubernetes/client-node';
import type { Clock } from './clock.js';
import {
  type InformerOptions,
  type InformerSource,
  informersReady,
  ResourceInformer,
  type SyncedInformer,
} from './informer.js';
import type { OperatorMetrics } from './runtime-metrics.js';

/** An informer a setup asks for. */
export interface InformerRequest<T extends KubernetesObject> extends Omit<InformerOptions<T>, 'clock' | 'logger'> {
  /** What is listed and watched (`apiVersion/plural`): with `labelSelector`, the informer's identity. */
  resource: string;
  labelSelector?: string | undefined;
  /** Makes its list+watch source; called once, by the first request. */
  source(): InformerSource<T>;
  /** Leadership waits for its first list, and readiness for it. Default true. */
  mustSync?: boolean;
}

export interface CacheEntryOptions {
  /** Leadership waits for its first list, and readiness for it. Default true. */
  mustSync?: boolean | undefined;
  /** What kubeplus_operator_informer_synced reports for it. Default: the cache itself. */
  synced?: { hasSynced(): boolean; isStale(): boolean };
}

export interface CachesOptions {
  clock?: Clock;
  logger?: Logger;
  metrics?: OperatorMetrics;
}

interface Entry {
  cache: SyncedInformer;
  mustSync: boolean;
}

export class Caches {
  private readonly entries: Entry[] = [];
  private readonly informers = new Map<string, ResourceInformer<KubernetesObject>>();
  private readonly bindings: Array<() => () => void> = [];
  private unbinds: Array<() => void> = [];
  private readonly logger: Logger;

  constructor(private readonly options: CachesOptions = {}) {
    this.logger = options.logger ?? createSilentLogger();
  }

  /** The informer of `request`'s resource and selector: made on the first request, shared after. */
  informer<T extends KubernetesObject>(request: InformerRequest<T>): ResourceInformer<T> {
    const { resource, labelSelector, source, mustSync, ...informerOptions } = request;
    const identity = `${resource}?${labelSelector ?? ''}`;
    const existing = this.informers.get(identity);
    if (existing !== undefined) {
      if (existing.name !== request.name) {
        throw new Error(`caches: ${identity} is cached as ${existing.name}, asked for as ${request.name}`);
      }
      const entry = this.entries.find((e) => e.cache === existing);
      if (entry !== undefined) entry.mustSync ||= mustSync ?? true;
      return existing as unknown as ResourceInformer<T>;
    }
    const informer = new ResourceInformer<T>(source(), {
      ...informerOptions,
      clock: this.options.clock,
      logger: this.options.logger,
    });
    this.informers.set(identity, informer as unknown as ResourceInformer<KubernetesObject>);
    return this.add(informer, { mustSync });
  }

  /** A cache made elsewhere (e.g. DynamicInformers), started and stopped with the others. Names are unique. */
  add<C extends SyncedInformer>(cache: C, options: CacheEntryOptions = {}): C {
    if (this.entries.some((e) => e.cache.name === cache.name)) throw new Error(`caches: duplicate ${cache.name}`);
    this.entries.push({ cache, mustSync: options.mustSync ?? true });
    this.options.metrics?.declare({ resources: [cache.name] });
    this.options.metrics?.trackInformer(cache.name, options.synced ?? cache);
    return cache;
  }

  /** `bind()` runs when the caches start (before any event); what it returns, once they have stopped. */
  bind(bind: () => () => void): void {
    this.bindings.push(bind);
  }

  all(): readonly SyncedInformer[] {
    return this.entries.map((e) => e.cache);
  }

  mustSync(): readonly SyncedInformer[] {
    return this.entries.filter((e) => e.mustSync).map((e) => e.cache);
  }

  /** /readyz over the must-sync caches: each synced and none stale. */
  readiness(): { ok: boolean; message: string } {
    return informersReady(this.mustSync());
  }

  start(): void {
    for (const bind of this.bindings) this.unbinds.push(bind());
    for (const { cache } of this.entries) cache.start();
  }

  /** Resolves once every must-sync cache has synced, or `signal` aborted. */
  async waitForSync(signal: AbortSignal): Promise<void> {
    await Promise.all(this.mustSync().map((cache) => cache.waitForSync(signal)));
  }

  async stop(): Promise<void> {
    await Promise.all(
      this.entries.map(({ cache }) =>
        cache.stop().catch((err: unknown) => this.logger.warn('informer stop failed', { error: describeError(err) })),
      ),
    );
    for (const unbind of this.unbinds.splice(0)) unbind();
  }
}
