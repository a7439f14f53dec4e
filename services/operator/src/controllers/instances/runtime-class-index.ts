/**
 * Every RuntimeClass as the sandbox decisions read it (`runtimeClassInfo`), indexed by name, by
 * the tenant namespace of the instance that generated it, and by that instance (its own class
 * `kubeplus-sandbox-<instance>`), kept up to date from the RuntimeClass informer's events.
 *
 * The questions asked of the classes are "which ones can matter to tenant namespace T" (the
 * platform's and T's own generated ones: `classesForTenant`, for a reconcile's allowed list),
 * "which class is named N" (a compliance report judging Sandboxes) and "what is instance I's own
 * class" (its last good minimum). Every tenant has a generated class, so answered from the whole
 * cache each costs O(tenants). Rebuilt once per change of the cache and then shared, that list
 * still cost O(tenants) per class created: the operator's CPU profile of 10,000 instances put a
 * third of its busy time in rebuilding it and walking it. Here each answer costs O(answer) (the
 * platform's classes, a handful, plus the tenant's own).
 */
import {
  DEFAULT_HANDLER_LEVELS,
  type HandlerLevels,
  instanceIdentity,
  type LastGoodMinimum,
  minimumOfOwnHandler,
  type RuntimeClassInfo,
  type RuntimeLevel,
  runtimeClassName,
} from '@kubeplus-isolation/spec';
import type { KubernetesObject } from '@kubernetes/client-node';
import { DEFAULT_PLATFORM_NAMESPACE, type InstanceIdentity } from '../../desired/instance.js';
import { tenantOf } from '../../desired/sandbox-peers.js';
import { runtimeClassInfo } from '../../desired/sandbox-policy.js';
import type { EventHandlers } from '../../runtime/informer.js';

/** What readers of the index need (the index itself, or a fake in tests). */
export interface RuntimeClassLookup {
  /** The classes that can matter to a sandbox policy of `tenant` (`classesForTenant`), in no particular order. */
  forTenant(tenant: string): readonly RuntimeClassInfo[];
  /** Every class, by name. */
  byName(): ReadonlyMap<string, RuntimeClassInfo>;
  /** The class generated for `instance` under its own name, when it exists. */
  ownClassOf(instance: InstanceIdentity): RuntimeClassInfo | undefined;
}

export class RuntimeClassIndex implements RuntimeClassLookup {
  private readonly infos = new Map<string, RuntimeClassInfo>();
  private readonly platform = new Map<string, RuntimeClassInfo>();
  private readonly byTenant = new Map<string, Map<string, RuntimeClassInfo>>();
  private readonly own = new Map<string, RuntimeClassInfo>();

  constructor(private readonly platformNamespace: string = DEFAULT_PLATFORM_NAMESPACE) {}

  /** Records class `name` as an event left it: `info` undefined once it is deleted (or unreadable). */
  set(name: string, info: RuntimeClassInfo | undefined): void {
    const previous = this.infos.get(name);
    if (previous !== undefined) this.file(name, previous, false);
    if (info === undefined) {
      this.infos.delete(name);
      return;
    }
    this.infos.set(name, info);
    this.file(name, info, true);
  }

  forTenant(tenant: string): readonly RuntimeClassInfo[] {
    const generated = this.byTenant.get(tenant);
    return generated === undefined ? [...this.platform.values()] : [...this.platform.values(), ...generated.values()];
  }

  byName(): ReadonlyMap<string, RuntimeClassInfo> {
    return this.infos;
  }

  ownClassOf(instance: InstanceIdentity): RuntimeClassInfo | undefined {
    return this.own.get(instanceIdentity(instance));
  }

  get size(): number {
    return this.infos.size;
  }

  /** Files `info` under its place (platform, its tenant, its owner's own class), or takes it out of there. */
  private file(name: string, info: RuntimeClassInfo, add: boolean): void {
    if (!info.generated) {
      if (add) this.platform.set(name, info);
      else this.platform.delete(name);
      return;
    }
    if (info.owner === undefined) return;
    const tenant = tenantOf(info.owner, this.platformNamespace);
    if (tenant !== undefined) {
      const bucket = this.byTenant.get(tenant) ?? new Map<string, RuntimeClassInfo>();
      if (add) bucket.set(name, info);
      else bucket.delete(name);
      if (bucket.size === 0) this.byTenant.delete(tenant);
      else this.byTenant.set(tenant, bucket);
    }
    if (name === runtimeClassName(info.owner.name)) {
      if (add) this.own.set(instanceIdentity(info.owner), info);
      else this.own.delete(instanceIdentity(info.owner));
    }
  }
}

/**
 * The last good minimum of an instance whose sandbox annotation is invalid, from its own generated
 * class (`lastGoodMinimums`' rule, answered by the index instead of a walk over every class).
 */
export function lastGoodMinimumsFrom(
  index: RuntimeClassLookup,
  levelHandlers: Readonly<Record<RuntimeLevel, string>>,
  handlerLevels: HandlerLevels = DEFAULT_HANDLER_LEVELS,
): LastGoodMinimum {
  return (instance) => {
    const own = index.ownClassOf(instance);
    return own === undefined ? undefined : minimumOfOwnHandler(own.handler, levelHandlers, handlerLevels);
  };
}

/** The RuntimeClass informer as the index reads it. */
export interface RuntimeClassEventSource {
  addEventHandler(handlers: EventHandlers<KubernetesObject>): () => void;
}

/** Keeps `index` in step with the RuntimeClass informer (its cached objects replayed first). Returns the unbind. */
export function bindRuntimeClassIndex(index: RuntimeClassIndex, informer: RuntimeClassEventSource): () => void {
  const on = (obj: KubernetesObject, deleted: boolean): void => {
    const name = obj.metadata?.name;
    if (name === undefined) return;
    index.set(name, deleted ? undefined : runtimeClassInfo(obj as Parameters<typeof runtimeClassInfo>[0]));
  };
  return informer.addEventHandler({
    add: (obj) => on(obj, false),
    update: (obj) => on(obj, false),
    delete: (obj) => on(obj, true),
  });
}
