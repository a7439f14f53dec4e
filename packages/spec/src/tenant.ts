/**
 * An instance's identity and KubePlus's tenant-namespace rule, shared by the operator and the
 * command-line tool, with the guard that keeps the operator off every namespace that is not the
 * tenant's (`decideTenantNamespace`).
 */
import { NAMESPACE_CREATED_FOR_ANNOTATION } from './keys.js';
import { tenantNamespaceForName } from './names.js';
import { FALLBACK_PLATFORM_NAMESPACE } from './platform-namespace.js';
import type { ParseResult } from './types.js';

/**
 * KubePlus's own namespace when nothing else names it (`--platform-namespace` unset and no KubePlus
 * webhook found: platform-namespace.ts). An instance created there gets a namespace of its own.
 */
export const DEFAULT_PLATFORM_NAMESPACE = FALLBACK_PLATFORM_NAMESPACE;

/** An instance's identity without version: what `kubeplus.io/owner` and `kubeplus.io/created-for` record. */
export interface InstanceIdentity {
  group: string;
  kind: string;
  namespace: string;
  name: string;
}

/** `group/Kind/namespace/name`: the exact identity written to `kubeplus.io/owner` and `kubeplus.io/created-for`. */
export function instanceIdentity(i: InstanceIdentity): string {
  return `${i.group}/${i.kind}/${i.namespace}/${i.name}`;
}

/** Inverse of `instanceIdentity`; undefined for anything that is not exactly four non-empty-where-required parts. */
export function parseInstanceIdentity(s: string): InstanceIdentity | undefined {
  const parts = s.split('/');
  if (parts.length !== 4) return undefined;
  const [group, kind, namespace, name] = parts as [string, string, string, string];
  if (kind === '' || namespace === '' || name === '') return undefined;
  return { group, kind, namespace, name };
}

/** The namespace an instance's workloads run in. */
export interface TenantNamespace {
  name: string;
  /** True when the operator creates it (and so may delete it) for this instance. */
  createdByOperator: boolean;
}

/**
 * KubePlus's rule: an instance created in the platform namespace gets a namespace named after
 * the instance, created by the operator; an instance anywhere else lives in its own namespace.
 */
export function tenantNamespace(
  instance: { namespace: string; name: string },
  platformNamespace: string = DEFAULT_PLATFORM_NAMESPACE,
): ParseResult<TenantNamespace> {
  if (instance.namespace !== platformNamespace)
    return { ok: true, value: { name: instance.namespace, createdByOperator: false } };
  const name = tenantNamespaceForName(instance.name);
  if (name === undefined) {
    return {
      ok: false,
      errors: [
        `instance ${JSON.stringify(instance.name)} is in the platform namespace ${JSON.stringify(platformNamespace)}, so it needs a namespace of its own named after it, but that name is not a valid namespace name (at most 63 lowercase letters, digits or '-', starting and ending with a letter or digit)`,
      ],
    };
  }
  return { ok: true, value: { name, createdByOperator: true } };
}

/**
 * The tenant namespace an instance (or the owner an object names) isolates; undefined when it has
 * none, or when its namespace would be one the operator never isolates whatever its state (a system
 * namespace or the platform namespace; `decideTenantNamespace` also knows the release's namespace
 * and the namespace's own markers).
 */
export function tenantOf(
  owner: Pick<InstanceIdentity, 'namespace' | 'name'>,
  platformNamespace: string = DEFAULT_PLATFORM_NAMESPACE,
): string | undefined {
  const tenant = tenantNamespace(owner, platformNamespace);
  if (!tenant.ok) return undefined;
  return refusalByName(tenant.value.name, platformNamespace, undefined) === undefined ? tenant.value.name : undefined;
}

// ---- the guard: never a namespace that is not the tenant's --------------------------------------

/** Why the operator refuses to isolate the namespace an instance names (a bounded metric label). */
export const TENANT_NAMESPACE_REFUSALS = [
  'system-namespace',
  'release-namespace',
  'platform-namespace',
  'not-created-for-instance',
] as const;
export type TenantNamespaceRefusal = (typeof TENANT_NAMESPACE_REFUSALS)[number];

/**
 * The annotation KubePlus puts on the namespace it installs an instance's chart into:
 * `<kind lowercased>-<instance>`. KubePlus writes the value with literal double quotes around it;
 * both forms are accepted.
 */
export const KUBEPLUS_RELEASE_NAME_ANNOTATION = 'meta.helm.sh/release-name';

/**
 * KubePlus creates the tenant namespace inside its mutating webhook's handling of the instance's
 * CREATE, whose timeout is 30 s: a namespace created for the instance is at most this much older
 * than the instance.
 */
export const KUBEPLUS_WEBHOOK_TIMEOUT_MS = 30_000;

/** `default` and every `kube-*` namespace: the cluster's own, never a tenant's. */
export function isSystemNamespace(name: string): boolean {
  return name === 'default' || name.startsWith('kube-');
}

/** The release name KubePlus gives an instance's chart: `<kind lowercased>-<instance>`. */
export function kubeplusReleaseName(instance: Pick<InstanceIdentity, 'kind' | 'name'>): string {
  return `${instance.kind.toLowerCase()}-${instance.name}`;
}

/** The parts of the candidate namespace the guard reads. */
export interface TenantNamespaceState {
  annotations?: Readonly<Record<string, string>>;
  /** RFC 3339, as the API server stamps it. */
  creationTimestamp?: string;
}

export interface TenantNamespaceFacts {
  instance: InstanceIdentity & {
    /** RFC 3339, as the API server stamps it. */
    creationTimestamp?: string;
  };
  platformNamespace: string;
  /** The namespace kubeplus-isolation itself runs in (the chart's release namespace); never isolated. */
  releaseNamespace?: string;
  /**
   * The namespace the instance names, as it is now; undefined when it does not exist. Read only
   * for an instance in the platform namespace (an instance elsewhere lives in its namespace).
   */
  namespace: TenantNamespaceState | undefined;
}

export type TenantNamespaceDecision =
  /** Isolate `tenant` (for an instance in the platform namespace: create it if absent). */
  | { decision: 'isolate'; tenant: TenantNamespace }
  /** The instance's name cannot name a namespace. */
  | { decision: 'invalid'; errors: string[] }
  /** `namespace` is not the tenant's: never label or annotate it. `message` says why and what to do. */
  | { decision: 'refuse'; namespace: string; reason: TenantNamespaceRefusal; message: string };

function refusalByName(
  name: string,
  platformNamespace: string,
  releaseNamespace: string | undefined,
): Exclude<TenantNamespaceRefusal, 'not-created-for-instance'> | undefined {
  if (isSystemNamespace(name)) return 'system-namespace';
  if (releaseNamespace !== undefined && name === releaseNamespace) return 'release-namespace';
  if (name === platformNamespace) return 'platform-namespace';
  return undefined;
}

const WHAT: Readonly<Record<Exclude<TenantNamespaceRefusal, 'not-created-for-instance'>, string>> = {
  'system-namespace': 'a system namespace (default, kube-*)',
  'release-namespace': "kubeplus-isolation's own namespace (its release's)",
  'platform-namespace': "KubePlus's own namespace (the platform namespace)",
};

function time(s: string | undefined): number | undefined {
  if (s === undefined) return undefined;
  const t = Date.parse(s);
  return Number.isNaN(t) ? undefined : t;
}

/**
 * Why an existing namespace named after an instance in the platform namespace was not created for
 * it; undefined when it was. Created for it: the operator's own `kubeplus.io/created-for` names
 * this instance, or KubePlus's release-name annotation names this instance's release AND the
 * namespace is no older than the instance minus KubePlus's webhook timeout (KubePlus stamps an
 * existing namespace of that name too, so the annotation alone does not say who created it).
 */
function notCreatedFor(facts: TenantNamespaceFacts, ns: TenantNamespaceState): string | undefined {
  const { instance } = facts;
  const id = instanceIdentity(instance);
  const createdFor = ns.annotations?.[NAMESPACE_CREATED_FOR_ANNOTATION];
  if (createdFor === id) return undefined;
  const release = ns.annotations?.[KUBEPLUS_RELEASE_NAME_ANNOTATION];
  const want = kubeplusReleaseName(instance);
  if (release === undefined || release.replace(/^"(.*)"$/, '$1') !== want) {
    const markers: string[] = [];
    if (createdFor !== undefined) markers.push(`${NAMESPACE_CREATED_FOR_ANNOTATION}=${createdFor}`);
    if (release !== undefined) markers.push(`${KUBEPLUS_RELEASE_NAME_ANNOTATION}=${release}`);
    return markers.length === 0
      ? `it carries neither ${NAMESPACE_CREATED_FOR_ANNOTATION}=${id} nor KubePlus's ${KUBEPLUS_RELEASE_NAME_ANNOTATION}=${want}`
      : `it was created for someone else (${markers.join(', ')}; this instance's would be ${NAMESPACE_CREATED_FOR_ANNOTATION}=${id} or ${KUBEPLUS_RELEASE_NAME_ANNOTATION}=${want})`;
  }
  const nsCreated = time(ns.creationTimestamp);
  const instanceCreated = time(instance.creationTimestamp);
  if (nsCreated === undefined || instanceCreated === undefined) {
    return `it carries ${KUBEPLUS_RELEASE_NAME_ANNOTATION}=${want}, but the creation time of the namespace or the instance is unknown, so it cannot be told apart from a namespace that existed before the instance`;
  }
  if (nsCreated < instanceCreated - KUBEPLUS_WEBHOOK_TIMEOUT_MS) {
    return `it carries ${KUBEPLUS_RELEASE_NAME_ANNOTATION}=${want}, but it was created at ${ns.creationTimestamp}, more than ${KUBEPLUS_WEBHOOK_TIMEOUT_MS / 1000}s before the instance (${instance.creationTimestamp}): it existed before, and KubePlus stamps an existing namespace of that name too`;
  }
  return undefined;
}

/**
 * The one decision about which namespace an instance isolates, and whether the operator may touch
 * it at all. The operator never labels or annotates:
 * - a system namespace (`default`, `kube-*`), the release's own namespace or the platform namespace,
 *   whether an instance lives in it or is named after it;
 * - for an instance in the platform namespace, a namespace named after it that exists and was not
 *   created for it (`notCreatedFor`): an instance name picked to match an existing namespace must
 *   not claim it.
 * An instance anywhere else lives in its own namespace and isolates it (the design documents'
 * `team-a`); an instance in the platform namespace whose namespace does not exist yet gets one
 * created by the operator.
 */
export function decideTenantNamespace(facts: TenantNamespaceFacts): TenantNamespaceDecision {
  const { instance, platformNamespace, releaseNamespace } = facts;
  const candidate = tenantNamespace(instance, platformNamespace);
  if (!candidate.ok) return { decision: 'invalid', errors: candidate.errors };
  const tenant = candidate.value;
  const inPlatform = tenant.createdByOperator;
  const byName = refusalByName(tenant.name, platformNamespace, releaseNamespace);
  if (byName !== undefined) {
    const message = inPlatform
      ? `instance ${instance.name} in the platform namespace ${platformNamespace} would isolate the namespace named after it, ${tenant.name}, but that is ${WHAT[byName]}: the operator never labels or annotates it. Delete this instance and create it under a name that is not a system, platform or kubeplus-isolation namespace`
      : `instance ${instance.name} lives in namespace ${tenant.name}, ${WHAT[byName]}: the operator never labels or annotates it. Create the instance in KubePlus's namespace ${platformNamespace} or in the tenant's own namespace`;
    return { decision: 'refuse', namespace: tenant.name, reason: byName, message };
  }
  if (inPlatform && facts.namespace !== undefined) {
    const why = notCreatedFor(facts, facts.namespace);
    if (why !== undefined) {
      return {
        decision: 'refuse',
        namespace: tenant.name,
        reason: 'not-created-for-instance',
        message: `instance ${instance.name} in the platform namespace ${platformNamespace} would isolate the namespace named after it, ${tenant.name}, but that namespace already exists and was not created for this instance: ${why}. The operator never claims it. Delete this instance and create it under a name no existing namespace has (or, if ${tenant.name} really is this tenant's, delete the instance, delete the namespace, and create the instance again)`,
      };
    }
  }
  return { decision: 'isolate', tenant };
}
