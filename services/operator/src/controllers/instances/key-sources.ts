/**
 * Key sources of the two controllers: thin adapters from informer events to the pure mappings
 * of keys.ts. The Manager subscribes them only while this replica leads (replaying the caches
 * then), so a standby never enqueues anything.
 */

import type { KubernetesObject } from '@kubernetes/client-node';
import type { EventTarget } from '../../cluster/port.js';
import { apiVersionOf, type InstanceIdentity, type KindRef } from '../../desired/instance.js';
import type { DynamicInformers } from '../../runtime/dynamic-informers.js';
import type { GroupVersionResource } from '../../runtime/gvr.js';
import { type EventSource, emitKeys, type KeySource } from '../../runtime/key-sources.js';
import type { OwnedType } from '../owned-objects/keys.js';
import {
  deletedOwnedObjectOwnerKey,
  instanceEventKey,
  type RuntimeClassSnapshot,
  runtimeClassChangeKeys,
  runtimeClassSnapshot,
  SandboxTenantIndex,
} from './keys.js';
import type { SandboxInstanceLookup } from './sandbox-instance-index.js';

/** The Kinds the instance informers watch (InstanceKindRegistry). */
export interface KindIndex {
  kindOf(gvr: GroupVersionResource): string | undefined;
  lookup(group: string, kind: string): KindRef | undefined;
}

/** The instance informers, the Kinds they watch, and the rule mapping instances to tenant namespaces. */
export interface InstanceCaches {
  instances: DynamicInformers<KubernetesObject>;
  kinds: KindIndex;
  platformNamespace?: string;
}

/**
 * Every event of every instance informer → that instance, and the other sandbox-annotated
 * instances bound to the tenant namespace it binds (or bound before the event): their policies
 * and Warnings depend on it (`SandboxTenantIndex`).
 */
export function instanceSource({ instances, kinds, platformNamespace }: InstanceCaches): KeySource {
  return {
    subscribe(enqueue) {
      const tenants = new SandboxTenantIndex(platformNamespace);
      const on = (gvr: GroupVersionResource, obj: KubernetesObject, deleted: boolean): void => {
        const key = instanceEventKey(gvr, obj, (g) => kinds.kindOf(g));
        if (key === undefined) return;
        emitKeys(enqueue, [key, ...tenants.update(key, deleted ? undefined : obj)]);
      };
      return instances.addEventHandler({
        add: (gvr, obj) => on(gvr, obj, false),
        update: (gvr, obj) => on(gvr, obj, false),
        delete: (gvr, obj) => on(gvr, obj, true),
      });
    },
  };
}

/**
 * The Event target of the instance an owner annotation names, from the instance caches: only an
 * instance that exists and is watched (else Events would go nowhere).
 */
export function cachedOwner({ instances, kinds }: InstanceCaches, owner: InstanceIdentity): EventTarget | undefined {
  const kind = kinds.lookup(owner.group, owner.kind);
  if (kind === undefined) return undefined;
  const gvr = { group: kind.group, version: kind.version, resource: kind.plural };
  const uid = instances.get(gvr)?.get(owner.name, owner.namespace)?.metadata?.uid;
  if (uid === undefined) return undefined;
  return { apiVersion: apiVersionOf(kind), kind: owner.kind, namespace: owner.namespace, name: owner.name, uid };
}

/**
 * RuntimeClass add/update/delete → the instances whose sandbox policy it concerns
 * (`runtimeClassChangeKeys`): every sandbox-annotated instance for a platform class, the owner for
 * a generated one. Each subscription remembers how every class looked at its previous event (the
 * replay on subscribe fills it), since an update carries only the new object and a class gaining
 * or losing the ownership markers concerns every sandbox instance.
 */
export function runtimeClassFanOut(
  runtimeClasses: EventSource<KubernetesObject>,
  sandboxInstances: SandboxInstanceLookup,
  { kinds, platformNamespace }: Pick<InstanceCaches, 'kinds' | 'platformNamespace'>,
): KeySource {
  return {
    subscribe(enqueue) {
      const seen = new Map<string, RuntimeClassSnapshot>();
      const on = (obj: KubernetesObject, deleted: boolean): void => {
        const now = runtimeClassSnapshot(obj);
        if (now === undefined) return;
        const before = seen.get(now.name) ?? (deleted ? now : undefined);
        if (deleted) seen.delete(now.name);
        else seen.set(now.name, now);
        emitKeys(
          enqueue,
          runtimeClassChangeKeys(
            { before, after: deleted ? undefined : now },
            sandboxInstances,
            (g, k) => kinds.lookup(g, k),
            platformNamespace,
          ),
        );
      };
      return runtimeClasses.addEventHandler({
        add: (obj) => on(obj, false),
        update: (obj) => on(obj, false),
        delete: (obj) => on(obj, true),
      });
    },
  };
}

/** Delete of an owned object → its owner instance (drift restore). */
export function ownerOfDeletedSource(
  informer: EventSource<KubernetesObject>,
  type: OwnedType,
  kinds: KindIndex,
): KeySource {
  return {
    subscribe(enqueue) {
      return informer.addEventHandler({
        delete: (obj) =>
          emitKeys(
            enqueue,
            deletedOwnedObjectOwnerKey(type, obj, (g, k) => kinds.lookup(g, k)),
          ),
      });
    },
  };
}
