/** Pods and AdmissionReviews of a given size, as a chart would render them. */
import { randomUUID } from 'node:crypto';
import type { NodeIsolationSpec } from '@kubeplus-isolation/spec';

export interface PodShape {
  containers: number;
  /** Tolerations the Pod already carries (the chart's own). */
  tolerations: number;
}

function container(i: number): Record<string, unknown> {
  return {
    name: `c${i}`,
    image: `registry.example.com/team/app-${i}:1.2.3`,
    imagePullPolicy: 'IfNotPresent',
    args: ['--port=8080', `--instance=${i}`, '--log-level=info'],
    ports: [{ name: 'http', containerPort: 8080 + i, protocol: 'TCP' }],
    env: Array.from({ length: 5 }, (_, j) => ({ name: `ENV_${j}`, value: `value-${i}-${j}` })),
    resources: { requests: { cpu: '100m', memory: '128Mi' }, limits: { cpu: '500m', memory: '256Mi' } },
    volumeMounts: [{ name: 'config', mountPath: `/etc/app-${i}`, readOnly: true }],
    readinessProbe: { httpGet: { path: '/readyz', port: 8080 + i }, periodSeconds: 10 },
    securityContext: { allowPrivilegeEscalation: false, capabilities: { drop: ['ALL'] } },
  };
}

/** A Pod of the given shape in the form the API server sends it to a webhook (defaults applied). */
export function makePod(shape: PodShape, namespace = 'tenant'): Record<string, unknown> {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: {
      generateName: 'app-7d9f8b6c5-',
      namespace,
      labels: { app: 'app', 'pod-template-hash': '7d9f8b6c5' },
      ownerReferences: [
        { apiVersion: 'apps/v1', kind: 'ReplicaSet', name: 'app-7d9f8b6c5', uid: randomUUID(), controller: true },
      ],
    },
    spec: {
      containers: Array.from({ length: shape.containers }, (_, i) => container(i)),
      volumes: [{ name: 'config', configMap: { name: 'app-config' } }],
      restartPolicy: 'Always',
      terminationGracePeriodSeconds: 30,
      dnsPolicy: 'ClusterFirst',
      serviceAccountName: 'default',
      securityContext: { runAsNonRoot: true },
      schedulerName: 'default-scheduler',
      ...(shape.tolerations > 0 && {
        tolerations: Array.from({ length: shape.tolerations }, (_, i) => ({
          key: `example.com/taint-${i}`,
          operator: 'Equal',
          value: `v${i}`,
          effect: 'NoSchedule',
        })),
      }),
    },
  };
}

/** The seed's example mandate for `pool`. */
export function poolMandate(pool: string): NodeIsolationSpec {
  return {
    nodeSelector: { pool },
    tolerations: [{ key: 'dedicated', operator: 'Equal', value: pool, effect: 'NoSchedule' }],
  };
}

/** An admission.k8s.io/v1 AdmissionReview for a Pod CREATE, as the API server sends it. */
export function admissionReview(pod: Record<string, unknown>, namespace: string): Record<string, unknown> {
  return {
    apiVersion: 'admission.k8s.io/v1',
    kind: 'AdmissionReview',
    request: {
      uid: randomUUID(),
      kind: { group: '', version: 'v1', kind: 'Pod' },
      resource: { group: '', version: 'v1', resource: 'pods' },
      requestKind: { group: '', version: 'v1', kind: 'Pod' },
      requestResource: { group: '', version: 'v1', resource: 'pods' },
      name: '',
      namespace,
      operation: 'CREATE',
      userInfo: {
        username: 'system:serviceaccount:kube-system:replicaset-controller',
        uid: randomUUID(),
        groups: ['system:serviceaccounts', 'system:serviceaccounts:kube-system', 'system:authenticated'],
      },
      object: { ...pod, metadata: { ...(pod.metadata as object), namespace } },
      oldObject: null,
      dryRun: false,
      options: { apiVersion: 'meta.k8s.io/v1', kind: 'CreateOptions' },
    },
  };
}
