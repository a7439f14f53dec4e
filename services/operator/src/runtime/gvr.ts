/** Group/version/resource coordinates of a custom resource kind, validated before they go into a URL path. */
import type { V1CustomResourceDefinition } from '@kubernetes/client-node';

/** A custom resource kind's REST coordinates; `resource` is the plural. */
export interface GroupVersionResource {
  group: string;
  version: string;
  resource: string;
}

const DNS_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
const DNS_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;

/** Validates a GVR so it is safe to put in a URL path; throws a clear error otherwise. */
export function checkGvr(gvr: GroupVersionResource): GroupVersionResource {
  const ok =
    gvr.group.length <= 253 &&
    DNS_SUBDOMAIN.test(gvr.group) &&
    gvr.version.length <= 63 &&
    DNS_LABEL.test(gvr.version) &&
    gvr.resource.length <= 63 &&
    DNS_LABEL.test(gvr.resource);
  if (!ok) throw new Error(`invalid group/version/resource ${JSON.stringify(gvr)}`);
  return gvr;
}

export function gvrString({ group, version, resource }: GroupVersionResource): string {
  return `${group}/${version}/${resource}`;
}

/**
 * The GVR to watch for a CRD: its storage version if served, else its first served version.
 * `undefined` for a CRD with no served version or an unusable spec.
 */
export function crdGvr(crd: V1CustomResourceDefinition): GroupVersionResource | undefined {
  const spec = crd.spec as Partial<V1CustomResourceDefinition['spec']> | undefined;
  const versions = Array.isArray(spec?.versions) ? spec.versions : [];
  const served = versions.filter((v) => v?.served === true && typeof v.name === 'string');
  const version = served.find((v) => v.storage === true) ?? served[0];
  const plural = spec?.names?.plural;
  if (version === undefined || typeof spec?.group !== 'string' || typeof plural !== 'string') return undefined;
  const gvr = { group: spec.group, version: version.name, resource: plural };
  try {
    return checkGvr(gvr);
  } catch {
    return undefined;
  }
}
