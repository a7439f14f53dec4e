/** The owned-objects controller's key source: add/update of an object carrying the operator's ownership markers. */
import type { KubernetesObject } from '@kubernetes/client-node';
import { isSharedPolicy } from '../../desired/sandbox-shared-policy.js';
import { type EventSource, emitKeys, type KeySource } from '../../runtime/key-sources.js';
import { type OwnedType, ownedObjectKey } from './keys.js';

/**
 * Add/update of an owned object → the object itself, for the orphan check. Delete of one of the
 * shared sandbox policies too: no instance owns them, so only this puts them back at once.
 */
export function ownedObjectSource(informer: EventSource<KubernetesObject>, type: OwnedType): KeySource {
  return {
    subscribe(enqueue) {
      const on = (obj: KubernetesObject): void => emitKeys(enqueue, ownedObjectKey(type, obj));
      const onDelete = (obj: KubernetesObject): void => {
        if (isSharedPolicy(obj.metadata?.labels)) on(obj);
      };
      return informer.addEventHandler({ add: on, update: on, delete: onDelete });
    },
  };
}
