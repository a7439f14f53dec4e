/** Objects as the API server lists them, for the wiring tests. */
import type { KubernetesObject, V1CustomResourceDefinition } from '@kubernetes/client-node';

export interface CrdOptions {
  group?: string;
  kind?: string;
  plural?: string;
  labels?: Record<string, string>;
  scope?: 'Namespaced' | 'Cluster';
  versions?: Array<{ name: string; served: boolean; storage: boolean }>;
}

export function crd(o: CrdOptions = {}): V1CustomResourceDefinition {
  const group = o.group ?? 'cloudark.io';
  const plural = o.plural ?? 'agents';
  return {
    apiVersion: 'apiextensions.k8s.io/v1',
    kind: 'CustomResourceDefinition',
    metadata: { name: `${plural}.${group}`, labels: o.labels },
    spec: {
      group,
      scope: o.scope ?? 'Namespaced',
      names: { kind: o.kind ?? 'Agent', plural, singular: plural.slice(0, -1), listKind: `${o.kind ?? 'Agent'}List` },
      versions: (o.versions ?? [{ name: 'v1', served: true, storage: true }]).map((v) => ({
        ...v,
        schema: { openAPIV3Schema: { type: 'object' } },
      })),
    },
  };
}

/** A KubePlus instance (as an informer caches it: list items carry no kind). */
export function instance(
  name: string,
  namespace: string,
  annotations: Record<string, string> = {},
  extra: { uid?: string; kind?: string } = {},
): KubernetesObject {
  return {
    ...(extra.kind === undefined ? {} : { apiVersion: 'cloudark.io/v1', kind: extra.kind }),
    metadata: { name, namespace, uid: extra.uid ?? `uid-${namespace}-${name}`, resourceVersion: '1', annotations },
  };
}

/** The ownership markers the operator writes (desired/owner.ts), for `owner` = group/Kind/ns/name. */
export function ownedMeta(
  name: string,
  owner: string,
  managed = true,
): { name: string; labels: Record<string, string>; annotations: Record<string, string> } {
  const [, , namespace = '', ownerName = ''] = owner.split('/');
  return {
    name,
    labels: {
      ...(managed ? { 'app.kubernetes.io/managed-by': 'kubeplus-isolation' } : {}),
      'kubeplus.io/owner-name': ownerName,
      'kubeplus.io/owner-namespace': namespace,
      'kubeplus.io/owner-uid': `uid-${namespace}-${ownerName}`,
    },
    annotations: { 'kubeplus.io/owner': owner },
  };
}

export function runtimeClass(
  name: string,
  handler: string,
  meta: Partial<KubernetesObject['metadata']> = {},
): KubernetesObject & { handler: string } {
  return { apiVersion: 'node.k8s.io/v1', kind: 'RuntimeClass', metadata: { ...meta, name }, handler };
}
