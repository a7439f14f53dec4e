/**
 * Which instances bound to a tenant namespace carry an isolation annotation the operator rejects,
 * for that namespace's compliance Report (issue 39: a bad annotation is accepted by the API server
 * and shown Healthy by GitOps tools; its Event expires, the Report stays while it is bad).
 *
 * - `invalidAnnotationsOf`: pure, one instance's rejected annotations with the operator's own
 *   parse errors (the same judges as the reconciler and `kubeplus-isolation validate`).
 * - `InvalidAnnotationIndex`: pure, instance key → tenant namespace → findings, updated one event
 *   at a time; `update` returns the namespaces whose findings changed.
 * - `invalidAnnotationChanges`: the key source that keeps the index from the instance informers'
 *   events and brings those namespaces' audits (and so their Reports) forward.
 */
import {
  NODE_ISOLATION_ANNOTATION,
  parseNodeIsolation,
  parseSandboxIsolation,
  SANDBOX_ISOLATION_ANNOTATION,
  tenantOf,
} from '@kubeplus-isolation/spec';
import type { KubernetesObject } from '@kubernetes/client-node';
import { DEFAULT_PLATFORM_NAMESPACE } from '../../desired/instance.js';
import type { GroupVersionResource } from '../../runtime/gvr.js';
import { emitKeys, type KeySource } from '../../runtime/key-sources.js';
import {
  type InvalidAnnotation,
  NODE_ISOLATION_POLICY,
  type ObjectRef,
  SANDBOX_ISOLATION_POLICY,
} from './openreport.js';
import type { InstanceEvents } from './report-sources.js';

const JUDGES = [
  { annotation: NODE_ISOLATION_ANNOTATION, policy: NODE_ISOLATION_POLICY, parse: parseNodeIsolation },
  { annotation: SANDBOX_ISOLATION_ANNOTATION, policy: SANDBOX_ISOLATION_POLICY, parse: parseSandboxIsolation },
] as const;

/** The instance's isolation annotations the operator rejects, in a fixed order (node, then sandbox). */
export function invalidAnnotationsOf(
  instance: ObjectRef,
  annotations: Readonly<Record<string, string>> | undefined,
): InvalidAnnotation[] {
  const found: InvalidAnnotation[] = [];
  for (const { annotation, policy, parse } of JUDGES) {
    const value = annotations?.[annotation];
    if (value === undefined) continue;
    const parsed = parse(value);
    if (!parsed.ok) found.push({ instance, annotation, policy, errors: parsed.errors });
  }
  return found;
}

export class InvalidAnnotationIndex {
  private readonly tenantOfInstance = new Map<string, string>();
  /** Tenant namespace → instance key → its findings (never empty). */
  private readonly byTenant = new Map<string, Map<string, readonly InvalidAnnotation[]>>();

  constructor(private readonly platformNamespace: string = DEFAULT_PLATFORM_NAMESPACE) {}

  /**
   * Records an instance as an event left it (`findings` [] or undefined: none, or deleted).
   * Returns the tenant namespaces whose findings changed: at most two.
   */
  update(instanceKey: string, instance: ObjectRef, findings: readonly InvalidAnnotation[] | undefined): string[] {
    const before = this.tenantOfInstance.get(instanceKey);
    const previous = before === undefined ? undefined : this.byTenant.get(before)?.get(instanceKey);
    const tenant =
      findings === undefined || findings.length === 0 || instance.namespace === undefined
        ? undefined
        : tenantOf({ namespace: instance.namespace, name: instance.name }, this.platformNamespace);
    if (before === tenant && JSON.stringify(previous) === JSON.stringify(tenant === undefined ? undefined : findings))
      return [];
    if (before !== undefined) {
      this.tenantOfInstance.delete(instanceKey);
      const bound = this.byTenant.get(before);
      bound?.delete(instanceKey);
      if (bound?.size === 0) this.byTenant.delete(before);
    }
    if (tenant !== undefined && findings !== undefined) {
      this.tenantOfInstance.set(instanceKey, tenant);
      const bound = this.byTenant.get(tenant) ?? new Map<string, readonly InvalidAnnotation[]>();
      bound.set(instanceKey, findings);
      this.byTenant.set(tenant, bound);
    }
    return [...new Set([before, tenant])].filter((t): t is string => t !== undefined);
  }

  /** The findings of the instances bound to `namespace`, by instance key. */
  inTenant(namespace: string): InvalidAnnotation[] {
    const bound = this.byTenant.get(namespace);
    if (bound === undefined) return [];
    return [...bound.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).flatMap(([, f]) => f);
  }

  /** Tenant namespaces with at least one invalid annotation. */
  tenants(): string[] {
    return [...this.byTenant.keys()];
  }

  clear(): void {
    this.tenantOfInstance.clear();
    this.byTenant.clear();
  }
}

/** Keeps `index` from the instance informers' events; emits the tenant namespaces whose findings changed. */
export function invalidAnnotationChanges(
  instances: InstanceEvents,
  kindOf: (gvr: GroupVersionResource) => string | undefined,
  index: InvalidAnnotationIndex,
): KeySource {
  return {
    subscribe(enqueue) {
      // A subscription replays every instance: start from nothing, so one deleted meanwhile is gone.
      index.clear();
      const on = (gvr: GroupVersionResource, obj: KubernetesObject, deleted: boolean): void => {
        const kind = kindOf(gvr) ?? obj.kind;
        const name = obj.metadata?.name;
        const namespace = obj.metadata?.namespace;
        if (!kind || !name || !namespace) return;
        const ref: ObjectRef = {
          apiVersion: gvr.group === '' ? gvr.version : `${gvr.group}/${gvr.version}`,
          kind,
          namespace,
          name,
          ...(obj.metadata?.uid === undefined ? {} : { uid: obj.metadata.uid }),
        };
        const findings = deleted ? undefined : invalidAnnotationsOf(ref, obj.metadata?.annotations);
        emitKeys(enqueue, index.update(`${gvr.group}/${kind}/${namespace}/${name}`, ref, findings));
      };
      return instances.addEventHandler({
        add: (gvr, obj) => on(gvr, obj, false),
        update: (gvr, obj) => on(gvr, obj, false),
        delete: (gvr, obj) => on(gvr, obj, true),
      });
    },
  };
}
