/** Test data shared by the webhook's tests: the seed's example, review builders, namespaces. */
import {
  NODE_ISOLATION_ENABLED_LABEL,
  NODE_ISOLATION_RESOLVED_ANNOTATION,
  type NodeIsolationSpec,
} from '@kubeplus-isolation/spec';

/** The design document's Agent example (team-a). */
export const TEAM_A: NodeIsolationSpec = {
  nodeSelector: { pool: 'team-a-pool' },
  tolerations: [{ key: 'dedicated', operator: 'Equal', value: 'team-a-pool', effect: 'NoSchedule' }],
};
export const TEAM_A_ANNOTATION = JSON.stringify(TEAM_A);

export function pod(
  spec: Record<string, unknown> = {},
  metadata: Record<string, unknown> = {},
): Record<string, unknown> {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name: 'web-0', namespace: 'team-a', ...metadata },
    spec: { containers: [{ name: 'app', image: 'nginx:1.27' }], ...spec },
  };
}

export interface ReviewOverrides {
  uid?: string;
  namespace?: string;
  operation?: string;
  kind?: Record<string, string>;
  resource?: Record<string, string>;
  subResource?: string;
  object?: unknown;
  dryRun?: boolean;
}

export const POD_KIND = { group: '', version: 'v1', kind: 'Pod' };
export const POD_RESOURCE = { group: '', version: 'v1', resource: 'pods' };

/** An AdmissionReview as the API server sends it for a Pod CREATE. */
export function review(o: ReviewOverrides = {}): Record<string, unknown> {
  const request: Record<string, unknown> = {
    uid: o.uid ?? '705ab4f5-6393-11e8-b7cc-42010a800002',
    kind: o.kind ?? POD_KIND,
    resource: o.resource ?? POD_RESOURCE,
    requestKind: o.kind ?? POD_KIND,
    requestResource: o.resource ?? POD_RESOURCE,
    namespace: o.namespace ?? 'team-a',
    operation: o.operation ?? 'CREATE',
    userInfo: { username: 'system:serviceaccount:kube-system:replicaset-controller' },
    object: 'object' in o ? o.object : pod(),
    oldObject: null,
    dryRun: o.dryRun ?? false,
    options: { apiVersion: 'meta.k8s.io/v1', kind: 'CreateOptions' },
  };
  if (o.subResource !== undefined) request.subResource = o.subResource;
  return { apiVersion: 'admission.k8s.io/v1', kind: 'AdmissionReview', request };
}

export function namespace(
  name: string,
  opts: { labeled?: boolean; annotation?: string; resourceVersion?: string } = {},
): {
  metadata: {
    name: string;
    labels: Record<string, string>;
    annotations: Record<string, string>;
    resourceVersion: string;
  };
} {
  const labels: Record<string, string> = { 'kubernetes.io/metadata.name': name };
  if (opts.labeled ?? true) labels[NODE_ISOLATION_ENABLED_LABEL] = 'true';
  const annotations: Record<string, string> = {};
  if (opts.annotation !== undefined) annotations[NODE_ISOLATION_RESOLVED_ANNOTATION] = opts.annotation;
  return { metadata: { name, labels, annotations, resourceVersion: opts.resourceVersion ?? '1' } };
}

export function decodePatch(b64: string): unknown {
  return JSON.parse(Buffer.from(b64, 'base64').toString('utf8'));
}
