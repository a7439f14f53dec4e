/**
 * The instance model: what the operator needs to know about a tenant "instance" custom resource
 * (any KubePlus Kind), read from the unstructured object the API server returns, plus the
 * tenant-namespace rule KubePlus follows.
 */
import type { ParseResult } from '@kubeplus-isolation/spec';

export {
  DEFAULT_PLATFORM_NAMESPACE,
  type InstanceIdentity,
  instanceIdentity,
  parseInstanceIdentity,
} from '@kubeplus-isolation/spec';

/** A served custom resource kind, as the informer watching it knows it. */
export interface KindRef {
  group: string;
  version: string;
  kind: string;
  /** Resource name in URLs, e.g. `agents`. */
  plural: string;
}

/** Work-queue key of one instance. */
export interface InstanceKey extends KindRef {
  namespace: string;
  name: string;
}

export interface Instance extends InstanceKey {
  apiVersion: string;
  uid: string;
  /** Needed for optimistic-concurrency writes of the finalizer list. */
  resourceVersion: string;
  annotations: Readonly<Record<string, string>>;
  finalizers: readonly string[];
  /** RFC 3339; set once deletion was requested. */
  deletionTimestamp?: string;
  /** RFC 3339, as the API server stamped it (the tenant-namespace guard compares it with the namespace's). */
  creationTimestamp?: string;
}

/** `apps/v1` → {group: 'apps', version: 'v1'}; `v1` → {group: '', version: 'v1'}. */
export function splitApiVersion(apiVersion: string): { group: string; version: string } {
  const slash = apiVersion.lastIndexOf('/');
  return slash < 0
    ? { group: '', version: apiVersion }
    : { group: apiVersion.slice(0, slash), version: apiVersion.slice(slash + 1) };
}

/** The inverse of splitApiVersion: {group: 'apps', version: 'v1'} → `apps/v1`; group '' → `v1`. */
export function apiVersionOf(k: { group: string; version: string }): string {
  return k.group === '' ? k.version : `${k.group}/${k.version}`;
}

/**
 * A work-queue key as one string, `group/version/kind/plural/namespace/name` (no part of a key
 * can contain '/'; the core group is empty), for queues keyed by strings.
 */
export function encodeInstanceKey(k: InstanceKey): string {
  return [k.group, k.version, k.kind, k.plural, k.namespace, k.name].join('/');
}

export function decodeInstanceKey(s: string): InstanceKey | undefined {
  const parts = s.split('/');
  if (parts.length !== 6 || parts.slice(1).some((p) => p === '')) return undefined;
  const [group, version, kind, plural, namespace, name] = parts as [string, string, string, string, string, string];
  return { group, version, kind, plural, namespace, name };
}

export function instanceKeyOf(i: Instance): InstanceKey {
  return { group: i.group, version: i.version, kind: i.kind, plural: i.plural, namespace: i.namespace, name: i.name };
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function nonEmptyString(v: unknown): v is string {
  return typeof v === 'string' && v !== '';
}

function timestamp(v: unknown): string | undefined {
  if (v instanceof Date) return Number.isNaN(v.getTime()) ? undefined : v.toISOString();
  return nonEmptyString(v) ? v : undefined;
}

/**
 * Reads an instance from an unstructured object. `plural` comes from the caller (the informer or
 * discovery), since objects do not carry it. Never throws; a malformed object gives the reasons.
 * Non-string annotation values and non-string finalizers (impossible from a real API server) are dropped.
 */
export function parseInstance(obj: unknown, plural: string): ParseResult<Instance> {
  if (!isRecord(obj)) return { ok: false, errors: ['instance must be an object'] };
  const errors: string[] = [];
  const { apiVersion, kind } = obj;
  const metadata = isRecord(obj.metadata) ? obj.metadata : {};
  if (!nonEmptyString(apiVersion)) errors.push('apiVersion must be a non-empty string');
  if (!nonEmptyString(kind)) errors.push('kind must be a non-empty string');
  if (!nonEmptyString(plural)) errors.push('plural must be a non-empty string');
  if (!nonEmptyString(metadata.name)) errors.push('metadata.name must be a non-empty string');
  if (!nonEmptyString(metadata.namespace)) errors.push('metadata.namespace must be set: instances are namespaced');
  if (!nonEmptyString(metadata.uid)) errors.push('metadata.uid must be a non-empty string');
  if (
    errors.length > 0 ||
    !nonEmptyString(apiVersion) ||
    !nonEmptyString(kind) ||
    !nonEmptyString(metadata.name) ||
    !nonEmptyString(metadata.namespace) ||
    !nonEmptyString(metadata.uid)
  ) {
    return { ok: false, errors };
  }
  const annotations: Record<string, string> = {};
  if (isRecord(metadata.annotations)) {
    for (const [k, v] of Object.entries(metadata.annotations)) if (typeof v === 'string') annotations[k] = v;
  }
  const finalizers = Array.isArray(metadata.finalizers)
    ? metadata.finalizers.filter((f): f is string => typeof f === 'string')
    : [];
  const { group, version } = splitApiVersion(apiVersion);
  const instance: Instance = {
    apiVersion,
    kind,
    group,
    version,
    plural,
    namespace: metadata.namespace,
    name: metadata.name,
    uid: metadata.uid,
    resourceVersion: typeof metadata.resourceVersion === 'string' ? metadata.resourceVersion : '',
    annotations,
    finalizers,
  };
  const deletionTimestamp = timestamp(metadata.deletionTimestamp);
  if (deletionTimestamp !== undefined) instance.deletionTimestamp = deletionTimestamp;
  const creationTimestamp = timestamp(metadata.creationTimestamp);
  if (creationTimestamp !== undefined) instance.creationTimestamp = creationTimestamp;
  return { ok: true, value: instance };
}

export {
  decideTenantNamespace,
  TENANT_NAMESPACE_REFUSALS,
  type TenantNamespace,
  type TenantNamespaceDecision,
  type TenantNamespaceRefusal,
  tenantNamespace,
} from '@kubeplus-isolation/spec';
