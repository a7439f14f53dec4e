/**
 * Keys of the owned-objects controller (`apiVersion/Kind/name`, `apiVersion/Kind/namespace/name`
 * for the namespaced NodeIsolation parameter): add/update of an object carrying
 * the operator's ownership markers, checked by `OrphanCleanup.cleanupOrphan` (orphan-cleanup.ts).
 */
import {
  labelValue,
  MANAGED_BY_LABEL,
  MANAGED_BY_VALUE,
  OWNER_NAME_LABEL,
  OWNER_NAMESPACE_LABEL,
  OWNER_UID_LABEL,
} from '@kubeplus-isolation/spec';
import type { KubernetesObject } from '@kubernetes/client-node';
import type { InstanceIdentity } from '../../desired/instance.js';
import { type ManagedKind, NAMESPACED_KINDS } from '../../desired/objects.js';
import { isOwnedBy } from '../../desired/owner.js';
import type { OwnedTarget } from './orphan-cleanup.js';

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
  'NodeIsolation',
  'SandboxIsolation',
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

/**
 * `apiVersion/Kind/name`, or `apiVersion/Kind/namespace/name` for a namespaced kind; object
 * names, namespaces and kinds contain no `/` (an API version may: `group/version`).
 */
export function encodeOwnedRef(ref: OwnedTarget): string {
  const base = `${ref.apiVersion}/${ref.kind}`;
  const namespace = 'namespace' in ref ? ref.namespace : undefined;
  return namespace === undefined ? `${base}/${ref.name}` : `${base}/${namespace}/${ref.name}`;
}

export function decodeOwnedRef(key: string): OwnedTarget | undefined {
  const parts = key.split('/');
  // The kind is the last known kind with one (cluster-scoped) or two (namespaced) parts after it.
  const namespaced = parts.length >= 4 && NAMESPACED_KINDS.has(parts.at(-3) as ManagedKind);
  const at = parts.length - (namespaced ? 3 : 2);
  if (at < 1) return undefined;
  const kind = parts[at] ?? '';
  const rest = parts.slice(at + 1);
  const apiVersion = parts.slice(0, at).join('/');
  if (!OWNED_KINDS.has(kind) || apiVersion === '' || rest.some((p) => p === '')) return undefined;
  const name = rest.at(-1) ?? '';
  if (kind === 'Namespace') return apiVersion === 'v1' ? { apiVersion: 'v1', kind: 'Namespace', name } : undefined;
  if (!namespaced && NAMESPACED_KINDS.has(kind as ManagedKind)) return undefined;
  return namespaced
    ? { apiVersion, kind: kind as ManagedKind, namespace: rest[0] ?? '', name }
    : { apiVersion, kind: kind as ManagedKind, name };
}

/** The owned-objects key of an add/update of an owned object, `undefined` if it is not ours. */
export function ownedObjectKey(type: OwnedType, obj: KubernetesObject): string | undefined {
  const name = obj.metadata?.name;
  if (!name || !isOwnedObject(type, obj)) return undefined;
  if (type.kind === 'Namespace') return encodeOwnedRef({ apiVersion: 'v1', kind: 'Namespace', name });
  const namespace = obj.metadata?.namespace;
  if (!NAMESPACED_KINDS.has(type.kind)) return encodeOwnedRef({ apiVersion: type.apiVersion, kind: type.kind, name });
  return namespace ? encodeOwnedRef({ apiVersion: type.apiVersion, kind: type.kind, namespace, name }) : undefined;
}

/** The labels an owner index files owned objects under (the owner's name and namespace labels). */
export const OWNER_INDEX_LABELS: readonly string[] = [OWNER_NAME_LABEL, OWNER_NAMESPACE_LABEL];

/** The owner-index terms under which every object any incarnation of `owner` may own is filed. */
export function ownerIndexTerms(owner: InstanceIdentity): Array<[string, string]> {
  return [
    [OWNER_NAME_LABEL, labelValue(owner.name)],
    [OWNER_NAMESPACE_LABEL, labelValue(owner.namespace)],
  ];
}

/**
 * The owned-objects keys of what `owner` owns among `candidates` of one type (found by its index
 * terms; label values are shortened, so only the owner annotation decides): on its deletion, each
 * goes to orphan cleanup, which confirms the owner is gone and removes it.
 */
export function ownedKeysOf(
  owner: InstanceIdentity,
  type: OwnedType,
  candidates: readonly KubernetesObject[],
): string[] {
  const keys: string[] = [];
  for (const obj of candidates) {
    if (!isOwnedBy(obj.metadata ?? {}, owner)) continue;
    const key = ownedObjectKey(type, obj);
    if (key !== undefined) keys.push(key);
  }
  return keys;
}
