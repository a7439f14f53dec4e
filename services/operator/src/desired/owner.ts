/**
 * Ownership markers of operator-owned objects. Cluster-scoped objects (RuntimeClass, admission
 * policies) and Namespaces cannot carry an ownerReference to a namespaced instance, so ownership
 * is recorded as labels (selectable) plus the exact identity in an annotation.
 */
import {
  labelValue,
  MANAGED_BY_LABEL,
  MANAGED_BY_VALUE,
  OWNER_ANNOTATION,
  OWNER_NAME_LABEL,
  OWNER_NAMESPACE_LABEL,
  OWNER_UID_LABEL,
} from '@kubeplus-isolation/spec';
import { type InstanceIdentity, instanceIdentity, parseInstanceIdentity } from './instance.js';

export interface OwnerFields extends InstanceIdentity {
  uid: string;
}

/** Labels and annotations as found on any object; values of other types are ignored by callers. */
export interface MetaLike {
  labels?: Readonly<Record<string, string>> | undefined;
  annotations?: Readonly<Record<string, string>> | undefined;
}

/** Owner name/namespace/uid labels, without managed-by (for Namespaces the operator did not create). */
export function ownerIdentityLabels(owner: OwnerFields): Record<string, string> {
  return {
    [OWNER_NAME_LABEL]: labelValue(owner.name),
    [OWNER_NAMESPACE_LABEL]: labelValue(owner.namespace),
    [OWNER_UID_LABEL]: labelValue(owner.uid),
  };
}

/** Every label an object wholly owned by the operator carries. */
export function ownerLabels(owner: OwnerFields): Record<string, string> {
  return { [MANAGED_BY_LABEL]: MANAGED_BY_VALUE, ...ownerIdentityLabels(owner) };
}

export function ownerAnnotations(owner: InstanceIdentity): Record<string, string> {
  return { [OWNER_ANNOTATION]: instanceIdentity(owner) };
}

/** Whether the object says the operator manages it. */
export function isManaged(meta: MetaLike): boolean {
  return meta.labels?.[MANAGED_BY_LABEL] === MANAGED_BY_VALUE;
}

/**
 * Whether a cluster-scoped object says kubeplus-isolation generated it for some instance: either
 * marker, `app.kubernetes.io/managed-by: kubeplus-isolation` or a `kubeplus.io/owner` annotation
 * (well-formed or not). Used to tell the RuntimeClasses the operator generates apart from the
 * platform's own; either marker is enough, so a class claiming to belong to an instance is never
 * taken for a platform class.
 */
export function carriesOwnershipMarkers(meta: MetaLike): boolean {
  return isManaged(meta) || meta.annotations?.[OWNER_ANNOTATION] !== undefined;
}

/** The instance an object's owner annotation names, if it names one well-formed. */
export function ownerOf(meta: MetaLike): InstanceIdentity | undefined {
  const value = meta.annotations?.[OWNER_ANNOTATION];
  return value === undefined ? undefined : parseInstanceIdentity(value);
}

/**
 * Whether `meta` belongs to `owner`: its owner annotation names exactly that instance. The uid
 * is deliberately not compared, so an instance re-created under the same identity adopts what a
 * previous incarnation left behind (and relabels it with its own uid) instead of fighting it.
 */
export function isOwnedBy(meta: MetaLike, owner: InstanceIdentity): boolean {
  return meta.annotations?.[OWNER_ANNOTATION] === instanceIdentity(owner);
}

/**
 * Label selector finding every object any incarnation of `owner` may own; callers filter the
 * result with `isOwnedBy` (label values are shortened, so they may collide across instances).
 */
export function ownerNameSelector(owner: InstanceIdentity): string {
  return `${OWNER_NAME_LABEL}=${labelValue(owner.name)},${OWNER_NAMESPACE_LABEL}=${labelValue(owner.namespace)}`;
}
