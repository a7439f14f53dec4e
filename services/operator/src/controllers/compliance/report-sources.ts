/**
 * What makes a tenant namespace's Report due before the next audit period: key sources the audit
 * controller gets with the reports on (the period still audits every such namespace; these only
 * bring the audit forward, so a Report follows a change in seconds, not up to --audit-interval).
 *
 * - `sandboxPolicyChanges`: the sandbox isolation in force in a namespace changed (an instance
 *   bound to it asks for sandbox isolation, stops asking, or changes its minimum or mode; the
 *   strictest of them is the namespace's, `namespaceSandboxPolicy`). A namespace's first Report,
 *   the Sandboxes left weaker than a raised minimum, and a Report to drop come at once.
 * - `generatedRuntimeClassChanges`: a RuntimeClass generated for an instance appeared, went, or
 *   changed handler. Sandboxes are judged by their class's handler, and the operator recreates
 *   `kubeplus-sandbox-<instance>` when the minimum changes: the audit the policy change brought
 *   forward may have judged the old handler; this one judges the new. A platform RuntimeClass
 *   changing (rare, and never the operator's doing) waits for the period.
 *
 * An annotation turned invalid leaves the index, so its namespace is audited once more; the audit
 * judges by the last good minimum (`lastGoodMinimums`), so the findings stay as they were, and the
 * Report gains an `error` result naming the instance and its annotation's errors
 * (invalid-annotations.ts, whose key source brings that audit forward for node isolation too).
 *
 * Both keep only what they need to tell a change (per instance its tenant and annotation, per
 * namespace a fingerprint of its policy; per generated class its handler) and replay on
 * subscribe, like every key source: a new leadership term audits each such namespace once.
 */

import { namespaceSandboxPolicy } from '@kubeplus-isolation/spec';
import type { KubernetesObject } from '@kubernetes/client-node';
import { DEFAULT_PLATFORM_NAMESPACE } from '../../desired/instance.js';
import { ownerOf } from '../../desired/owner.js';
import { type SandboxInstanceMeta, sandboxInstanceMeta, tenantOf } from '../../desired/sandbox-peers.js';
import type { DynamicEventHandlers } from '../../runtime/dynamic-informers.js';
import type { GroupVersionResource } from '../../runtime/gvr.js';
import { type EventSource, emitKeys, type KeySource } from '../../runtime/key-sources.js';

/**
 * The sandbox policy of every tenant namespace, kept up to date one instance at a time. Pure:
 * `update` records an instance as an event left it and returns the namespaces whose policy
 * changed (at most two: the one it binds and the one it bound).
 */
export class SandboxPolicyIndex {
  /** Instance key → the tenant namespace it binds. */
  private readonly tenantOfInstance = new Map<string, string>();
  /** Tenant namespace → the instances bound to it. */
  private readonly byTenant = new Map<string, Map<string, SandboxInstanceMeta>>();
  private readonly fingerprints = new Map<string, string>();

  constructor(private readonly platformNamespace: string = DEFAULT_PLATFORM_NAMESPACE) {}

  /** `meta`: the instance's sandbox annotation, undefined when it has none or was deleted. */
  update(instanceKey: string, meta: SandboxInstanceMeta | undefined): string[] {
    const before = this.tenantOfInstance.get(instanceKey);
    const tenant = meta === undefined ? undefined : tenantOf(meta, this.platformNamespace);
    if (before !== undefined) {
      this.tenantOfInstance.delete(instanceKey);
      this.byTenant.get(before)?.delete(instanceKey);
    }
    if (meta !== undefined && tenant !== undefined) {
      this.tenantOfInstance.set(instanceKey, tenant);
      const bound = this.byTenant.get(tenant) ?? new Map<string, SandboxInstanceMeta>();
      bound.set(instanceKey, meta);
      this.byTenant.set(tenant, bound);
    }
    const changed: string[] = [];
    for (const t of new Set([before, tenant])) {
      if (t === undefined) continue;
      const bound = this.byTenant.get(t);
      if (bound?.size === 0) this.byTenant.delete(t);
      const policy =
        bound === undefined ? undefined : namespaceSandboxPolicy(bound.values(), t, this.platformNamespace);
      const fingerprint = policy === undefined ? undefined : `${policy.minimum}/${policy.enforce}`;
      if (fingerprint === this.fingerprints.get(t)) continue;
      if (fingerprint === undefined) this.fingerprints.delete(t);
      else this.fingerprints.set(t, fingerprint);
      changed.push(t);
    }
    return changed;
  }
}

/** The instance informers' events, as `DynamicInformers` delivers them. */
export interface InstanceEvents {
  addEventHandler(handlers: DynamicEventHandlers<KubernetesObject>): () => void;
}

/** The tenant namespaces whose sandbox policy an instance event changed. */
export function sandboxPolicyChanges(
  instances: InstanceEvents,
  kindOf: (gvr: GroupVersionResource) => string | undefined,
  platformNamespace: string = DEFAULT_PLATFORM_NAMESPACE,
): KeySource {
  return {
    subscribe(enqueue) {
      const index = new SandboxPolicyIndex(platformNamespace);
      const on = (gvr: GroupVersionResource, obj: KubernetesObject, deleted: boolean): void => {
        const kind = kindOf(gvr) ?? obj.kind;
        const name = obj.metadata?.name;
        const namespace = obj.metadata?.namespace;
        if (!kind || !name || !namespace) return;
        const key = `${gvr.group}/${kind}/${namespace}/${name}`;
        const meta = deleted ? undefined : sandboxInstanceMeta({ group: gvr.group, kind }, obj.metadata);
        emitKeys(enqueue, index.update(key, meta));
      };
      return instances.addEventHandler({
        add: (gvr, obj) => on(gvr, obj, false),
        update: (gvr, obj) => on(gvr, obj, false),
        delete: (gvr, obj) => on(gvr, obj, true),
      });
    },
  };
}

/** The tenant namespace of the instance a RuntimeClass was generated for, when its handler changed. */
export function generatedRuntimeClassChanges(
  runtimeClasses: EventSource<KubernetesObject>,
  platformNamespace: string = DEFAULT_PLATFORM_NAMESPACE,
): KeySource {
  return {
    subscribe(enqueue) {
      const handlers = new Map<string, string | undefined>();
      const on = (obj: KubernetesObject, deleted: boolean): void => {
        const name = obj.metadata?.name;
        const owner = ownerOf({ annotations: obj.metadata?.annotations });
        if (!name || owner === undefined) return;
        const handler = (obj as { handler?: string }).handler;
        if (deleted) handlers.delete(name);
        else if (handlers.has(name) && handlers.get(name) === handler) return;
        else handlers.set(name, handler);
        emitKeys(enqueue, tenantOf(owner, platformNamespace));
      };
      return runtimeClasses.addEventHandler({
        add: (obj) => on(obj, false),
        update: (obj) => on(obj, false),
        delete: (obj) => on(obj, true),
      });
    },
  };
}
