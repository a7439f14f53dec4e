/**
 * Node isolation, as Namespace metadata: the `kubeplus.io/node-isolation-enabled` label (which
 * makes the webhook's namespaceSelector match) and the `kubeplus.io/node-isolation-resolved`
 * annotation (what the webhook applies). Pure: current state in, the one write to make out.
 *
 * Who may write them: on a Namespace the operator created for an instance, that instance; on
 * any other Namespace, the instance named by its `kubeplus.io/owner` annotation, or anyone when
 * none is named yet (the first instance to isolate it claims it). A second instance asking for
 * node isolation of a Namespace another instance isolates is a conflict, never a silent takeover.
 */
import {
  canonicalNodeIsolation,
  NAMESPACE_CREATED_FOR_ANNOTATION,
  NODE_ISOLATION_ANNOTATION,
  NODE_ISOLATION_ENABLED_LABEL,
  NODE_ISOLATION_ENABLED_VALUE,
  NODE_ISOLATION_RESOLVED_ANNOTATION,
  OWNER_ANNOTATION,
  OWNER_NAME_LABEL,
  OWNER_NAMESPACE_LABEL,
  OWNER_UID_LABEL,
  parseNodeIsolation,
} from '@kubeplus-isolation/spec';
import { type Instance, type InstanceIdentity, instanceIdentity, type TenantNamespace } from './instance.js';
import { type ManagedObject, NODE_ISOLATION_PARAMS_NAME, NODE_ISOLATION_PARAMS_TYPE } from './objects.js';
import { ownerAnnotations, ownerIdentityLabels, ownerLabels } from './owner.js';

/** The parts of a Namespace these decisions read. */
export interface NamespaceMeta {
  name: string;
  uid?: string;
  /** As read; a patch planned from this read carries it (409 if the namespace changed since). */
  resourceVersion?: string;
  labels?: Readonly<Record<string, string>>;
  annotations?: Readonly<Record<string, string>>;
  /** RFC 3339 (the tenant-namespace guard compares it with the instance's). */
  creationTimestamp?: string;
}

function stringMap(v: unknown): Record<string, string> | undefined {
  if (typeof v !== 'object' || v === null) return undefined;
  const out: Record<string, string> = {};
  for (const [k, val] of Object.entries(v)) if (typeof val === 'string') out[k] = val;
  return out;
}

/** A Namespace object (as read or cached) reduced to what these decisions read; string values only. */
export function namespaceMetaOf(
  name: string,
  ns: {
    metadata?: {
      uid?: unknown;
      resourceVersion?: unknown;
      labels?: unknown;
      annotations?: unknown;
      creationTimestamp?: unknown;
    };
  },
): NamespaceMeta {
  const meta: NamespaceMeta = { name };
  const { uid, resourceVersion, creationTimestamp } = ns.metadata ?? {};
  if (typeof uid === 'string') meta.uid = uid;
  // client-node turns it into a Date; a cache may keep the API server's string.
  if (creationTimestamp instanceof Date && !Number.isNaN(creationTimestamp.getTime()))
    meta.creationTimestamp = creationTimestamp.toISOString();
  else if (typeof creationTimestamp === 'string' && creationTimestamp !== '')
    meta.creationTimestamp = creationTimestamp;
  if (typeof resourceVersion === 'string') meta.resourceVersion = resourceVersion;
  const labels = stringMap(ns.metadata?.labels);
  const annotations = stringMap(ns.metadata?.annotations);
  if (labels !== undefined) meta.labels = labels;
  if (annotations !== undefined) meta.annotations = annotations;
  return meta;
}

/** RFC 7386 merge patch of Namespace metadata: a value sets a key, null removes it. */
export interface NamespaceMergePatch {
  metadata: {
    labels?: Record<string, string | null>;
    annotations?: Record<string, string | null>;
  };
}

/** A Namespace to create, complete with every label and annotation it must be born with. */
export interface NamespaceToCreate {
  apiVersion: 'v1';
  kind: 'Namespace';
  metadata: { name: string; labels: Record<string, string>; annotations: Record<string, string> };
}

export type NodeIsolationPlan =
  /** The annotation does not parse: the errors, and no write (the last good state stays). */
  | { action: 'invalid'; errors: string[] }
  /** Create the tenant namespace (already isolated when node isolation is asked for). */
  | { action: 'create'; namespace: NamespaceToCreate }
  /** The namespace does not exist and is not the operator's to create: nothing to do. */
  | { action: 'absent' }
  /** Another instance isolates this namespace: no write. `owner` is its identity. */
  | { action: 'conflict'; owner: string }
  | { action: 'patch'; patch: NamespaceMergePatch; change: NodeIsolationChange }
  | { action: 'unchanged' };

/** What a patch does, for events: set or change the isolation, remove it, or only fix ownership markers. */
export type NodeIsolationChange = 'apply' | 'remove' | 'ownership';

export interface NodeIsolationInput {
  instance: Instance;
  tenant: TenantNamespace;
  /** The tenant namespace as it is now; undefined when it does not exist. */
  namespace: NamespaceMeta | undefined;
  /**
   * Whether the tenant namespace is wanted even without node isolation (the instance asks for
   * sandbox isolation). Only matters when the operator creates the namespace.
   */
  namespaceWanted: boolean;
}

/** Whether the operator created `ns` for this instance (and so owns it and may delete it). */
export function isNamespaceCreatedFor(ns: NamespaceMeta, instance: InstanceIdentity): boolean {
  return ns.annotations?.[NAMESPACE_CREATED_FOR_ANNOTATION] === instanceIdentity(instance);
}

/** The tenant namespace the operator creates, isolated from its first moment when `resolved` is given. */
export function namespaceToCreate(instance: Instance, name: string, resolved: string | undefined): NamespaceToCreate {
  const labels = ownerLabels(instance);
  const annotations: Record<string, string> = {
    [NAMESPACE_CREATED_FOR_ANNOTATION]: instanceIdentity(instance),
    ...ownerAnnotations(instance),
  };
  if (resolved !== undefined) {
    labels[NODE_ISOLATION_ENABLED_LABEL] = NODE_ISOLATION_ENABLED_VALUE;
    annotations[NODE_ISOLATION_RESOLVED_ANNOTATION] = resolved;
  }
  return { apiVersion: 'v1', kind: 'Namespace', metadata: { name, labels, annotations } };
}

/** The desired value of every key this decision controls; null means "must be absent". */
interface DesiredKeys {
  labels: Record<string, string | null>;
  annotations: Record<string, string | null>;
}

function isolationKeys(resolved: string | null): DesiredKeys {
  return {
    labels: { [NODE_ISOLATION_ENABLED_LABEL]: resolved === null ? null : NODE_ISOLATION_ENABLED_VALUE },
    annotations: { [NODE_ISOLATION_RESOLVED_ANNOTATION]: resolved },
  };
}

/** Keys this instance adds to a Namespace it isolates but did not create, all set to null. */
function ownershipRemoval(): DesiredKeys {
  return {
    labels: { [OWNER_NAME_LABEL]: null, [OWNER_NAMESPACE_LABEL]: null, [OWNER_UID_LABEL]: null },
    annotations: { [OWNER_ANNOTATION]: null },
  };
}

function merge(a: DesiredKeys, b: DesiredKeys): DesiredKeys {
  return { labels: { ...a.labels, ...b.labels }, annotations: { ...a.annotations, ...b.annotations } };
}

/** Only the keys whose current value differs from the desired one. */
function diff(
  desired: Record<string, string | null>,
  current: Readonly<Record<string, string>> | undefined,
): Record<string, string | null> | undefined {
  const out: Record<string, string | null> = {};
  for (const [key, want] of Object.entries(desired)) {
    const have = current?.[key];
    if (want === null ? have !== undefined : have !== want) out[key] = want;
  }
  return Object.keys(out).length === 0 ? undefined : out;
}

/** The minimal merge patch taking `ns` to `desired`, or undefined when it is already there. */
export function minimalPatch(ns: NamespaceMeta, desired: DesiredKeys): NamespaceMergePatch | undefined {
  const labels = diff(desired.labels, ns.labels);
  const annotations = diff(desired.annotations, ns.annotations);
  if (labels === undefined && annotations === undefined) return undefined;
  const patch: NamespaceMergePatch = { metadata: {} };
  if (labels !== undefined) patch.metadata.labels = labels;
  if (annotations !== undefined) patch.metadata.annotations = annotations;
  return patch;
}

/**
 * Keys the instance wants on a namespace it owns (created for it) or isolates. `resolved` is the
 * canonical spec text, or null to remove isolation. `foreign`: another instance owns the
 * namespace's isolation; `none`: nothing of this instance's to remove.
 */
function desiredKeys(instance: Instance, ns: NamespaceMeta, resolved: string | null): DesiredKeys | 'foreign' | 'none' {
  const keys = isolationKeys(resolved);
  if (isNamespaceCreatedFor(ns, instance)) {
    // Ours entirely: ownership markers always hold (a re-created instance relabels its uid).
    Object.assign(keys.labels, ownerLabels(instance));
    Object.assign(keys.annotations, ownerAnnotations(instance));
    return keys;
  }
  const owner = ns.annotations?.[OWNER_ANNOTATION];
  const ours = owner === instanceIdentity(instance);
  if (owner !== undefined && !ours) return 'foreign';
  if (resolved === null) return ours ? merge(keys, ownershipRemoval()) : 'none'; // never remove what another hand wrote
  // Not created by the operator: record who isolates it, but do not claim `managed-by`
  // (Helm or another tool may manage this Namespace).
  Object.assign(keys.labels, ownerIdentityLabels(instance));
  Object.assign(keys.annotations, ownerAnnotations(instance));
  return keys;
}

/**
 * Decides the single write (if any) that brings the tenant namespace to what the instance's
 * `kubeplus.io/node-isolation` annotation asks for. An up-to-date namespace gives `unchanged`,
 * so a reconcile of an up-to-date instance issues no write.
 */
export function planNodeIsolation(input: NodeIsolationInput): NodeIsolationPlan {
  const { instance, tenant, namespace } = input;
  const text = instance.annotations[NODE_ISOLATION_ANNOTATION];
  let resolved: string | null = null;
  if (text !== undefined) {
    const parsed = parseNodeIsolation(text);
    if (!parsed.ok) return { action: 'invalid', errors: parsed.errors };
    resolved = canonicalNodeIsolation(parsed.value);
  }
  if (namespace === undefined) {
    const wanted = resolved !== null || input.namespaceWanted;
    if (!tenant.createdByOperator || !wanted) return { action: 'absent' };
    return { action: 'create', namespace: namespaceToCreate(instance, tenant.name, resolved ?? undefined) };
  }
  const keys = desiredKeys(instance, namespace, resolved);
  if (keys === 'foreign') {
    return resolved === null
      ? { action: 'unchanged' }
      : { action: 'conflict', owner: namespace.annotations?.[OWNER_ANNOTATION] ?? '' };
  }
  if (keys === 'none') return { action: 'unchanged' };
  const patch = minimalPatch(namespace, keys);
  if (patch === undefined) return { action: 'unchanged' };
  return { action: 'patch', patch, change: changeOf(patch, resolved) };
}

function changeOf(patch: NamespaceMergePatch, resolved: string | null): NodeIsolationChange {
  const touchesIsolation =
    patch.metadata.labels?.[NODE_ISOLATION_ENABLED_LABEL] !== undefined ||
    patch.metadata.annotations?.[NODE_ISOLATION_RESOLVED_ANNOTATION] !== undefined;
  if (!touchesIsolation) return 'ownership';
  return resolved === null ? 'remove' : 'apply';
}

export type NamespaceCleanupPlan =
  | { action: 'delete'; uid: string | undefined }
  | { action: 'patch'; patch: NamespaceMergePatch }
  | { action: 'none' };

/**
 * What deleting an instance does to its tenant namespace: a namespace the operator created for
 * it is deleted; on any other namespace only the isolation and ownership keys this instance
 * wrote are removed (keys another instance or a human wrote are left alone).
 */
export function planNamespaceCleanup(instance: InstanceIdentity, ns: NamespaceMeta | undefined): NamespaceCleanupPlan {
  if (ns === undefined) return { action: 'none' };
  if (isNamespaceCreatedFor(ns, instance)) return { action: 'delete', uid: ns.uid };
  if (ns.annotations?.[OWNER_ANNOTATION] !== instanceIdentity(instance)) return { action: 'none' };
  const patch = minimalPatch(ns, merge(isolationKeys(null), ownershipRemoval()));
  return patch === undefined ? { action: 'none' } : { action: 'patch', patch };
}

/**
 * What uninstalling kubeplus-isolation does to a Namespace the operator isolated or created: the
 * keys that make it isolated or tie it to an instance go (isolation label and resolved
 * annotation, ownership markers, `created-for`, so no later instance of the same name takes it
 * for its own), and the Namespace itself stays: its workloads are the tenant's. On a Namespace
 * the operator created, `app.kubernetes.io/managed-by: kubeplus-isolation` stays as a record of
 * where it came from (the tamper guard's operator confinement never lets the operator change
 * that label). Undefined when nothing to remove is on it.
 */
export function uninstallPatch(ns: NamespaceMeta): NamespaceMergePatch | undefined {
  const keys = merge(isolationKeys(null), ownershipRemoval());
  keys.annotations[NAMESPACE_CREATED_FOR_ANNOTATION] = null;
  return minimalPatch(ns, keys);
}

/**
 * The NodeIsolation parameter the admission-policy engine reads in the tenant namespace (one
 * MutatingAdmissionPolicy, its binding's paramRef taking `node-isolation` from the Pod's own
 * namespace): present, with the canonical spec, exactly while the namespace is node-isolated for
 * this instance — beside the label and the resolved annotation, written by the same reconcile.
 * `keep` leaves whatever is there: an invalid annotation keeps the last good state, and a
 * namespace another instance isolates is that instance's to parametrise.
 */
export function desiredNodeIsolationParams(
  instance: Instance,
  tenant: TenantNamespace,
  plan: NodeIsolationPlan,
): ManagedObject[] | 'keep' {
  if (plan.action === 'invalid' || plan.action === 'conflict') return 'keep';
  const text = instance.annotations[NODE_ISOLATION_ANNOTATION];
  if (text === undefined || plan.action === 'absent') return [];
  const parsed = parseNodeIsolation(text);
  if (!parsed.ok) return 'keep';
  return [
    {
      ...NODE_ISOLATION_PARAMS_TYPE,
      metadata: {
        name: NODE_ISOLATION_PARAMS_NAME,
        namespace: tenant.name,
        labels: ownerLabels(instance),
        annotations: ownerAnnotations(instance),
      },
      spec: JSON.parse(canonicalNodeIsolation(parsed.value)) as unknown,
    },
  ];
}
