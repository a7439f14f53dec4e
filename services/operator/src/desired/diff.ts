/**
 * Current-versus-desired comparison of owned objects, loop-proof against API-server defaulting.
 *
 * `satisfies(desired, current)` holds when every value the operator sets is present and equal.
 * Fields the server adds (defaults such as `matchPolicy`, `scope`, `objectSelector: {}`) never
 * count as differences, so writing the desired object once always converges: no reconcile loop
 * of writes, whatever a Kubernetes version defaults. Two rules make the comparison strict where
 * it matters for security:
 * - an empty array or object in the desired state asserts emptiness: a selector, exclusion or
 *   match condition someone adds to an owned policy is drift, and is reverted;
 * - a top-level body field present on the object but not desired (e.g. `scheduling` added to
 *   an owned RuntimeClass) is drift too.
 */
import type { ManagedKind, ManagedObject } from './objects.js';

type Json = Record<string, unknown>;

function isObject(v: unknown): v is Json {
  return typeof v === 'object' && v !== null && !Array.isArray(v) && !(v instanceof Date);
}

/** undefined, null, [] and {} (recursively) are all "nothing". */
export function isEmptyValue(v: unknown): boolean {
  if (v === undefined || v === null) return true;
  if (Array.isArray(v)) return v.length === 0;
  if (isObject(v)) return Object.values(v).every(isEmptyValue);
  return false;
}

export function satisfies(desired: unknown, current: unknown): boolean {
  if (desired === undefined) return true;
  if (Array.isArray(desired)) {
    if (desired.length === 0) return isEmptyValue(current);
    return (
      Array.isArray(current) && current.length === desired.length && desired.every((d, i) => satisfies(d, current[i]))
    );
  }
  if (isObject(desired)) {
    const keys = Object.keys(desired).filter((k) => desired[k] !== undefined);
    if (keys.length === 0) return isEmptyValue(current);
    return isObject(current) && keys.every((k) => satisfies(desired[k], current[k]));
  }
  return desired === current;
}

const NON_BODY = new Set(['apiVersion', 'kind', 'metadata', 'status']);

/** Fields the API server refuses to change: a difference there means delete and create. */
const IMMUTABLE_FIELDS: Readonly<Partial<Record<ManagedKind, readonly string[]>>> = {
  RuntimeClass: ['handler'],
};

/** Every key of `wanted` is in `have` with the same value (other keys belong to others). */
function containsAll(
  wanted: Readonly<Record<string, string>> | undefined,
  have: Readonly<Record<string, string>> | undefined,
): boolean {
  return Object.entries(wanted ?? {}).every(([k, v]) => have?.[k] === v);
}

export type UpdateKind = 'none' | 'update' | 'recreate';

/** What it takes to bring `current` to `desired`: nothing, an update, or delete-and-create. */
export function updateKind(desired: ManagedObject, current: ManagedObject): UpdateKind {
  for (const field of IMMUTABLE_FIELDS[desired.kind] ?? []) {
    if (!satisfies(desired[field], current[field])) return 'recreate';
  }
  if (
    !containsAll(desired.metadata.labels, current.metadata.labels) ||
    !containsAll(desired.metadata.annotations, current.metadata.annotations)
  ) {
    return 'update';
  }
  for (const [field, value] of Object.entries(desired)) {
    if (!NON_BODY.has(field) && !satisfies(value, current[field])) return 'update';
  }
  for (const [field, value] of Object.entries(current)) {
    if (!NON_BODY.has(field) && !(field in desired) && !isEmptyValue(value)) return 'update';
  }
  return 'none';
}

/**
 * The full object to PUT: the desired body (replacing whatever body is there), the desired
 * labels and annotations merged over foreign ones, and the current identity, resourceVersion
 * (optimistic concurrency: a concurrent change gives 409), finalizers and ownerReferences.
 */
export function updatedObject(desired: ManagedObject, current: ManagedObject): ManagedObject {
  const metadata: ManagedObject['metadata'] = {
    name: desired.metadata.name,
    labels: { ...current.metadata.labels, ...desired.metadata.labels },
    annotations: { ...current.metadata.annotations, ...desired.metadata.annotations },
  };
  if (desired.metadata.namespace !== undefined) metadata.namespace = desired.metadata.namespace;
  if (current.metadata.uid !== undefined) metadata.uid = current.metadata.uid;
  if (current.metadata.resourceVersion !== undefined) metadata.resourceVersion = current.metadata.resourceVersion;
  if (current.metadata.finalizers !== undefined) metadata.finalizers = current.metadata.finalizers;
  if (current.metadata.ownerReferences !== undefined) metadata.ownerReferences = current.metadata.ownerReferences;
  return { ...desired, metadata };
}
