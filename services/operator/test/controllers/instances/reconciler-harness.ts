/**
 * What the InstanceReconciler tests share (reconciler.test.ts: the lifecycle; node-sync.test.ts;
 * sandbox-sync.test.ts): a FakeCluster made afresh by `freshCluster` (each file's beforeEach), the
 * annotations and names they use, and the metric hooks' calls.
 */
import type {
  AnnotationName,
  ConflictKind,
  InstanceReconcilerOptions,
} from '../../../src/controllers/instances/reconciler.js';
import { InstanceReconciler } from '../../../src/controllers/instances/reconciler.js';
import { OrphanCleanup, type OwnedTarget } from '../../../src/controllers/owned-objects/orphan-cleanup.js';
import type { InstanceKey } from '../../../src/desired/instance.js';
import { type ManagedKind, type ManagedObject, refOf } from '../../../src/desired/objects.js';
import { FakeCluster } from '../../cluster/fake-cluster.js';
import { agentPolicy } from '../../desired/helpers.js';

export const NODE = 'kubeplus.io/node-isolation';
export const SANDBOX = 'kubeplus.io/sandbox-isolation';
export const FINALIZER = 'isolation.kubeplus.io/cleanup';
export const NODE_SPEC = JSON.stringify({
  nodeSelector: { pool: 'team-a-pool' },
  tolerations: [{ key: 'dedicated', operator: 'Equal', value: 'team-a-pool', effect: 'NoSchedule' }],
});
export const RESOLVED =
  '{"nodeSelector":{"pool":"team-a-pool"},"tolerations":[{"key":"dedicated","operator":"Equal","value":"team-a-pool","effect":"NoSchedule"}]}';
export const KATA_ENFORCE = '{"minRuntimeClass": "kata", "enforce": true}';
export const KATA_ADVISORY = '{"minRuntimeClass": "kata", "enforce": false}';
export const INSTANCE = 'team-a-agent-instance';
export const RC = `kubeplus-sandbox-${INSTANCE}`;
/** team-a's instance's policy names (kubeplus-sandbox-team-a.<instance>-<hash>-<role>). */
export const POLICY = {
  enforce: agentPolicy('team-a', INSTANCE, 'enforce'),
  advisory: agentPolicy('team-a', INSTANCE, 'advisory'),
  default: agentPolicy('team-a', INSTANCE, 'default'),
} as const;

export let cluster: FakeCluster;
export let invalid: [AnnotationName, InstanceKey][];
export let unavailable: InstanceKey[];
export let conflicts: [ConflictKind, InstanceKey][];

export function reconciler(over: Partial<InstanceReconcilerOptions> = {}): InstanceReconciler {
  return new InstanceReconciler({
    port: cluster,
    hooks: {
      invalidAnnotation: (a, k) => invalid.push([a, k]),
      mutatingPolicyUnavailable: (k) => unavailable.push(k),
      conflict: (c, k) => conflicts.push([c, k]),
    },
    ...over,
  });
}

export function teamA(annotations: Record<string, string>): InstanceKey {
  return cluster.putInstance({ name: INSTANCE, namespace: 'team-a', annotations });
}

export function kindsInCluster(): string[] {
  return [...cluster.objects.values()].map((o) => `${o.kind}/${o.metadata.name}`).sort();
}

export function spec(kind: string, name: string): Record<string, unknown> {
  return (cluster.stored(kind, name)?.spec ?? {}) as Record<string, unknown>;
}

export function reasons(): string[] {
  return cluster.events.map((e) => e.reason);
}

/** The finalizer releases before issue 35 put on instances (now only removed). */
export function withLegacyFinalizer(key: InstanceKey, others: string[] = []): void {
  const meta = cluster.instance(key)?.metadata as Record<string, unknown> | undefined;
  if (meta === undefined) throw new Error('no such instance');
  meta.finalizers = [...others, FINALIZER];
}

/** The instance writes the operator made (finalizer changes: the only kind the port has). */
export function instanceWrites(): string[] {
  return cluster.writes.filter((w) => w.op === 'setFinalizers').map((w) => w.target);
}

/**
 * What the owned-objects controller does with every owned object the caches hold (its start-up
 * replay, an owner's delete event, the periodic pass): orphan cleanup, once each.
 */
export async function cleanUpOrphans(over: Partial<InstanceReconcilerOptions> = {}): Promise<void> {
  const orphans = new OrphanCleanup({ port: cluster, instances: reconciler(over) });
  const targets: OwnedTarget[] = [
    ...[...cluster.objects.values()].map(refOf),
    ...[...cluster.namespaces.keys()].map((name): OwnedTarget => ({ apiVersion: 'v1', kind: 'Namespace', name })),
  ];
  for (const target of targets) await orphans.cleanupOrphan(target);
}

/** A cluster with namespaces team-a and kubeplus, and no hook called yet. */
export function freshCluster(): void {
  cluster = new FakeCluster();
  cluster.putNamespace('team-a', { 'kubernetes.io/metadata.name': 'team-a' });
  cluster.putNamespace('kubeplus');
  invalid = [];
  unavailable = [];
  conflicts = [];
}

/** A policy or binding as an earlier version left it: the ownership markers of `owner`, any name. */
export function legacyObject(kind: ManagedKind, name: string, owner: string, uid = 'legacy-uid'): ManagedObject {
  const [, , namespace, instance] = owner.split('/');
  return {
    apiVersion: 'admissionregistration.k8s.io/v1',
    kind,
    metadata: {
      name,
      labels: {
        'app.kubernetes.io/managed-by': 'kubeplus-isolation',
        'kubeplus.io/owner-name': instance ?? '',
        'kubeplus.io/owner-namespace': namespace ?? '',
        'kubeplus.io/owner-uid': uid,
      },
      annotations: { 'kubeplus.io/owner': owner },
    },
    spec: kind === 'ValidatingAdmissionPolicyBinding' ? { policyName: name, validationActions: ['Deny'] } : {},
  };
}
