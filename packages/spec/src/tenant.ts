/** An instance's identity and KubePlus's tenant-namespace rule, shared by the operator and the command-line tool. */
import { tenantNamespaceForName } from './names.js';
import type { ParseResult } from './types.js';

/** KubePlus's own namespace. An instance created there gets a namespace of its own. */
export const DEFAULT_PLATFORM_NAMESPACE = 'kubeplus';

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

/** The tenant namespace an instance (or the owner an object names) isolates; undefined when it has none. */
export function tenantOf(
  owner: Pick<InstanceIdentity, 'namespace' | 'name'>,
  platformNamespace: string = DEFAULT_PLATFORM_NAMESPACE,
): string | undefined {
  const tenant = tenantNamespace(owner, platformNamespace);
  return tenant.ok ? tenant.value.name : undefined;
}
