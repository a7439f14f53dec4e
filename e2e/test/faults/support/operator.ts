/**
 * What the operator fault suites share: an instance Kind of their own, operator replicas with
 * short leader-election timings, and an inventory of everything the operator owns for a set of
 * instances, compared against what each instance asks for.
 *
 * The protocol's keys (labels, annotations, finalizer) come from @kubeplus-isolation/spec, the
 * one definition the services and the chart tests share; object names are spelled out here.
 */
import {
  type Cluster,
  installCrds,
  instanceKindCrd,
  instancePolicyName,
  isApiStatus,
  type PolicyRole,
  type RunningOperator,
  startOperator,
  waitFor,
} from '@kubeplus-isolation/e2e';
import {
  MANAGED_BY_LABEL,
  MANAGED_BY_VALUE,
  NAMESPACE_CREATED_FOR_ANNOTATION,
  NODE_ISOLATION_ANNOTATION,
  NODE_ISOLATION_ENABLED_LABEL,
  NODE_ISOLATION_RESOLVED_ANNOTATION,
  OWNER_NAME_LABEL,
  OWNER_NAMESPACE_LABEL,
  OWNER_UID_LABEL,
  RUNTIME_CLASS_PREFIX,
  SANDBOX_ISOLATION_ANNOTATION,
} from '@kubeplus-isolation/spec';
import {
  AdmissionregistrationV1Api,
  ApiextensionsV1Api,
  CoordinationV1Api,
  CoreV1Api,
  CustomObjectsApi,
  type KubeConfig,
  type KubernetesObject,
  NodeV1Api,
  PatchStrategy,
  setHeaderOptions,
} from '@kubernetes/client-node';
import { mutatingPolicies, sharedClusterDefaults } from '../../support/operator.js';

export const mergePatch = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);

// ---- an instance Kind per suite -----------------------------------------------------------------

export interface InstanceKind {
  group: string;
  version: 'v1';
  plural: 'gadgets';
  kind: 'Gadget';
  crdName: string;
}

/** A namespaced instance Kind in its own API group (no `registered-by` label: named by --instance-kinds). */
export async function createInstanceKind(kc: KubeConfig, group: string): Promise<InstanceKind> {
  const kind: InstanceKind = { group, version: 'v1', plural: 'gadgets', kind: 'Gadget', crdName: `gadgets.${group}` };
  // The harness's instance-Kind CRD without its registered-by label.
  await installCrds(kc, [{ ...instanceKindCrd(kind), metadata: { name: kind.crdName } }], 30_000);
  return kind;
}

export async function deleteInstanceKind(kc: KubeConfig, kind: InstanceKind): Promise<void> {
  try {
    await kc.makeApiClient(ApiextensionsV1Api).deleteCustomResourceDefinition({ name: kind.crdName });
  } catch (error) {
    if (!isApiStatus(error, 404)) throw error;
  }
}

// ---- instances ----------------------------------------------------------------------------------

export type Level = 'runc' | 'runsc' | 'kata';

export interface InstanceSpec {
  name: string;
  /** Pool name of the node-isolation annotation (absent: no node isolation). */
  pool?: string;
  /** minRuntimeClass and enforce of the sandbox-isolation annotation (absent: no sandbox isolation). */
  sandbox?: { level: Level; enforce: boolean };
}

export function mandateOf(pool: string): { nodeSelector: Record<string, string>; tolerations: object[] } {
  return {
    nodeSelector: { pool },
    tolerations: [{ key: 'dedicated', operator: 'Equal', value: pool, effect: 'NoSchedule' }],
  };
}

export function instanceAnnotations(spec: InstanceSpec): Record<string, string> {
  const annotations: Record<string, string> = {};
  if (spec.pool !== undefined) annotations[NODE_ISOLATION_ANNOTATION] = JSON.stringify(mandateOf(spec.pool));
  if (spec.sandbox !== undefined) {
    annotations[SANDBOX_ISOLATION_ANNOTATION] = JSON.stringify({
      minRuntimeClass: spec.sandbox.level,
      enforce: spec.sandbox.enforce,
    });
  }
  return annotations;
}

export function instanceApi(kc: KubeConfig, kind: InstanceKind) {
  const custom = kc.makeApiClient(CustomObjectsApi);
  const ref = { group: kind.group, version: kind.version, plural: kind.plural };
  return {
    create: (namespace: string, spec: InstanceSpec) =>
      custom.createNamespacedCustomObject({
        ...ref,
        namespace,
        body: {
          apiVersion: `${kind.group}/${kind.version}`,
          kind: kind.kind,
          metadata: { name: spec.name, annotations: instanceAnnotations(spec) },
        },
      }),
    get: async (namespace: string, name: string): Promise<KubernetesObject | undefined> => {
      try {
        return (await custom.getNamespacedCustomObject({ ...ref, namespace, name })) as KubernetesObject;
      } catch (error) {
        if (isApiStatus(error, 404)) return undefined;
        throw error;
      }
    },
    list: async (namespace: string): Promise<KubernetesObject[]> =>
      ((await custom.listNamespacedCustomObject({ ...ref, namespace })) as { items: KubernetesObject[] }).items,
    annotate: (namespace: string, name: string, annotations: Record<string, string | null>) =>
      custom.patchNamespacedCustomObject({ ...ref, namespace, name, body: { metadata: { annotations } } }, mergePatch),
    delete: async (namespace: string, name: string): Promise<void> => {
      try {
        await custom.deleteNamespacedCustomObject({ ...ref, namespace, name });
      } catch (error) {
        if (!isApiStatus(error, 404)) throw error;
      }
    },
    /** Last resort in afterAll: lets a stuck instance go without the operator. */
    dropFinalizers: async (namespace: string, name: string): Promise<void> => {
      try {
        await custom.patchNamespacedCustomObject(
          { ...ref, namespace, name, body: { metadata: { finalizers: null } } },
          mergePatch,
        );
      } catch (error) {
        if (!isApiStatus(error, 404)) throw error;
      }
    },
  };
}

// ---- operator replicas --------------------------------------------------------------------------

export interface ReplicaOptions {
  name: string;
  identity: string;
  kubeconfigPath: string;
  kind: InstanceKind;
  platformNamespace: string;
  leaseNamespace: string;
  leaseName: string;
}

/**
 * One operator replica on the suite's Lease with the `failover` timings (a standby takes over at
 * most ~4.5 s after the leader's last renewal); resolves once /readyz is 200 (its caches synced),
 * leader or not.
 */
export function startReplica(cluster: Cluster, o: ReplicaOptions): Promise<RunningOperator> {
  return startOperator(cluster, {
    name: o.name,
    kubeconfigPath: o.kubeconfigPath,
    leaderElection: { namespace: o.leaseNamespace, id: o.leaseName, identity: o.identity, lease: 'failover' },
    args: [`--instance-kinds=${o.kind.group}`, `--platform-namespace=${o.platformNamespace}`, '--concurrency=2'],
  });
}

/** Waits until the Lease names `identity` as its holder; the timeout names the holder seen. */
export async function waitForLeader(
  kc: KubeConfig,
  namespace: string,
  lease: string,
  identity: string,
  timeoutMs: number,
  why: string,
): Promise<void> {
  const leases = kc.makeApiClient(CoordinationV1Api);
  await waitFor(
    `Lease ${namespace}/${lease} to be held by ${identity} (${why})`,
    async (observe) => {
      try {
        const l = await leases.readNamespacedLease({ name: lease, namespace });
        observe({
          holder: l.spec?.holderIdentity,
          renewTime: l.spec?.renewTime,
          transitions: l.spec?.leaseTransitions,
        });
        return l.spec?.holderIdentity === identity;
      } catch (error) {
        if (isApiStatus(error, 404)) return false;
        throw error;
      }
    },
    { timeoutMs, intervalMs: 200 },
  );
}

// ---- inventory: what the operator owns, per owner -----------------------------------------------

export interface OwnedObject {
  kind: string;
  name: string;
  owner: string;
  ownerNamespace: string;
  detail?: string;
}

/**
 * Every object the operator owns whose owner namespace is `ownerNamespace`: namespaces carrying
 * an owner uid, and the cluster-scoped RuntimeClasses and admission policies labelled managed-by.
 */
export async function ownedObjects(kc: KubeConfig, ownerNamespace: string): Promise<OwnedObject[]> {
  const selector = `${MANAGED_BY_LABEL}=${MANAGED_BY_VALUE},${OWNER_NAMESPACE_LABEL}=${ownerNamespace}`;
  const adm = kc.makeApiClient(AdmissionregistrationV1Api);
  const [namespaces, classes, vaps, vapbs, mutating] = await Promise.all([
    kc
      .makeApiClient(CoreV1Api)
      .listNamespace({ labelSelector: `${OWNER_NAMESPACE_LABEL}=${ownerNamespace},${OWNER_UID_LABEL}` }),
    kc.makeApiClient(NodeV1Api).listRuntimeClass({ labelSelector: selector }),
    adm.listValidatingAdmissionPolicy({ labelSelector: selector }),
    adm.listValidatingAdmissionPolicyBinding({ labelSelector: selector }),
    // At the version the cluster serves; none below 1.34 (the version matrix).
    mutatingPolicies(kc, selector),
  ]);
  const entry = (kind: string, o: KubernetesObject, detail?: string): OwnedObject => ({
    kind,
    name: o.metadata?.name ?? '',
    owner: o.metadata?.labels?.[OWNER_NAME_LABEL] ?? '',
    ownerNamespace: o.metadata?.labels?.[OWNER_NAMESPACE_LABEL] ?? '',
    ...(detail !== undefined && { detail }),
  });
  return [
    ...namespaces.items.map((o) =>
      entry(
        'Namespace',
        o,
        JSON.stringify({
          phase: o.status?.phase,
          enabled: o.metadata?.labels?.[NODE_ISOLATION_ENABLED_LABEL],
          resolved:
            o.metadata?.annotations?.[NODE_ISOLATION_RESOLVED_ANNOTATION] === undefined
              ? undefined
              : JSON.parse(o.metadata.annotations[NODE_ISOLATION_RESOLVED_ANNOTATION]),
          createdFor: o.metadata?.annotations?.[NAMESPACE_CREATED_FOR_ANNOTATION],
        }),
      ),
    ),
    ...classes.items.map((o) => entry('RuntimeClass', o, o.handler)),
    ...vaps.items.map((o) => entry('ValidatingAdmissionPolicy', o)),
    ...vapbs.items.map((o) => entry('ValidatingAdmissionPolicyBinding', o)),
    ...mutating.map((m) => entry(m.kind, m.o as KubernetesObject)),
  ];
}

const HANDLER: Record<Level, string> = { runc: 'runc', runsc: 'runsc', kata: 'kata' };

/**
 * Exactly what an instance created in the platform namespace must own: its namespace (named
 * after it, created for it, labeled, carrying the mandate), the RuntimeClass with the level's
 * handler, and the policies of its mode, each once.
 */
export function expectedObjects(spec: InstanceSpec, kind: InstanceKind, platformNamespace: string): OwnedObject[] {
  const base = { owner: spec.name, ownerNamespace: platformNamespace };
  const out: OwnedObject[] = [];
  if (spec.pool !== undefined) {
    out.push({
      kind: 'Namespace',
      name: spec.name,
      ...base,
      detail: JSON.stringify({
        phase: 'Active',
        enabled: 'true',
        resolved: mandateOf(spec.pool),
        createdFor: `${kind.group}/${kind.kind}/${platformNamespace}/${spec.name}`,
      }),
    });
  }
  if (spec.sandbox !== undefined) {
    const prefix = `${RUNTIME_CLASS_PREFIX}${spec.name}`;
    out.push({ kind: 'RuntimeClass', name: prefix, ...base, detail: HANDLER[spec.sandbox.level] });
    const policy = (role: PolicyRole): string =>
      instancePolicyName({ group: kind.group, kind: kind.kind, namespace: platformNamespace, name: spec.name }, role);
    const role = spec.sandbox.enforce ? 'enforce' : 'advisory';
    out.push({ kind: 'ValidatingAdmissionPolicy', name: policy(role), ...base });
    out.push({ kind: 'ValidatingAdmissionPolicyBinding', name: policy(role), ...base });
    // Advisory defaulting: where the cluster serves MutatingAdmissionPolicy (1.36+).
    if (!spec.sandbox.enforce && sharedClusterDefaults()) {
      out.push({ kind: 'MutatingAdmissionPolicy', name: policy('default'), ...base });
      out.push({ kind: 'MutatingAdmissionPolicyBinding', name: policy('default'), ...base });
    }
  }
  return out;
}

/** Stable order for comparing inventories. */
export function sortObjects(objects: readonly OwnedObject[]): OwnedObject[] {
  return [...objects].sort((a, b) => `${a.owner}/${a.kind}/${a.name}`.localeCompare(`${b.owner}/${b.kind}/${b.name}`));
}

/**
 * Deletes whatever the operator left for `ownerNamespace` (afterAll of a failed run): instances'
 * namespaces (unless already terminating), RuntimeClasses and policies. A passing run leaves
 * nothing, so this deletes nothing.
 */
export async function deleteLeftovers(kc: KubeConfig, ownerNamespace: string): Promise<string[]> {
  const left = (await ownedObjects(kc, ownerNamespace)).filter((o) => !o.detail?.includes('"Terminating"'));
  const adm = kc.makeApiClient(AdmissionregistrationV1Api);
  const core = kc.makeApiClient(CoreV1Api);
  const node = kc.makeApiClient(NodeV1Api);
  const del: Record<string, (name: string) => Promise<unknown>> = {
    Namespace: (name) => core.deleteNamespace({ name }),
    RuntimeClass: (name) => node.deleteRuntimeClass({ name }),
    ValidatingAdmissionPolicy: (name) => adm.deleteValidatingAdmissionPolicy({ name }),
    ValidatingAdmissionPolicyBinding: (name) => adm.deleteValidatingAdmissionPolicyBinding({ name }),
    MutatingAdmissionPolicy: (name) => adm.deleteMutatingAdmissionPolicy({ name }),
    MutatingAdmissionPolicyBinding: (name) => adm.deleteMutatingAdmissionPolicyBinding({ name }),
  };
  for (const o of left) {
    try {
      await del[o.kind]?.(o.name);
    } catch (error) {
      if (!isApiStatus(error, 404)) throw error;
    }
  }
  return left.map((o) => `${o.kind}/${o.name}`);
}
