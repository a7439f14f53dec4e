/** KubePlus's tenant-namespace rule, shared by the operator and the command-line tool. */
import { tenantNamespaceForName } from './names.js';
import type { ParseResult } from './types.js';

/** KubePlus's own namespace. An instance created there gets a namespace of its own. */
export const DEFAULT_PLATFORM_NAMESPACE = 'kubeplus';

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
