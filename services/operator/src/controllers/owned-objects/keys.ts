/**
 * Keys of the owned-objects controller (`apiVersion/Kind/name`): add/update of an object carrying
 * the operator's ownership markers, checked by `InstanceReconciler.cleanupOrphan`.
 */
import { MANAGED_BY_LABEL, MANAGED_BY_VALUE, OWNER_UID_LABEL } from '@kubeplus-isolation/spec';
import type { KubernetesObject } from '@kubernetes/client-node';
import type { ManagedKind } from '../../desired/objects.js';
import type { OwnedTarget } from '../instances/reconciler.js';

/** A kind of object the operator owns, at the API version its informer watches. */
export interface OwnedType {
  apiVersion: string;
  kind: ManagedKind | 'Namespace';
}

const OWNED_KINDS: ReadonlySet<string> = new Set<OwnedType['kind']>([
  'Namespace',
  'RuntimeClass',
  'ValidatingAdmissionPolicy',
  'ValidatingAdmissionPolicyBinding',
  'MutatingAdmissionPolicy',
  'MutatingAdmissionPolicyBinding',
]);

/**
 * Whether an object carries the operator's ownership markers: `app.kubernetes.io/managed-by:
 * kubeplus-isolation` on the objects it owns wholly; `kubeplus.io/owner-uid` on Namespaces (which
 * it may only have labelled, never created).
 */
export function isOwnedObject(type: OwnedType, obj: KubernetesObject): boolean {
  const labels = obj.metadata?.labels;
  if (type.kind === 'Namespace') return labels?.[OWNER_UID_LABEL] !== undefined;
  return labels?.[MANAGED_BY_LABEL] === MANAGED_BY_VALUE;
}

/** `apiVersion/Kind/name`; object names and kinds contain no `/`. */
export function encodeOwnedRef(ref: OwnedTarget): string {
  return `${ref.apiVersion}/${ref.kind}/${ref.name}`;
}

export function decodeOwnedRef(key: string): OwnedTarget | undefined {
  const parts = key.split('/');
  if (parts.length < 3) return undefined;
  const name = parts.at(-1) ?? '';
  const kind = parts.at(-2) ?? '';
  const apiVersion = parts.slice(0, -2).join('/');
  if (name === '' || apiVersion === '' || !OWNED_KINDS.has(kind)) return undefined;
  if (kind === 'Namespace') return apiVersion === 'v1' ? { apiVersion: 'v1', kind: 'Namespace', name } : undefined;
  return { apiVersion, kind: kind as ManagedKind, name };
}

/** The owned-objects key of an add/update of an owned object, `undefined` if it is not ours. */
export function ownedObjectKey(type: OwnedType, obj: KubernetesObject): string | undefined {
  const name = obj.metadata?.name;
  if (!name || !isOwnedObject(type, obj)) return undefined;
  return type.kind === 'Namespace'
    ? encodeOwnedRef({ apiVersion: 'v1', kind: 'Namespace', name })
    : encodeOwnedRef({ apiVersion: type.apiVersion, kind: type.kind, name });
}
