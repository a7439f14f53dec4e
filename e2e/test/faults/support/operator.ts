/**
 * What the operator fault suites share: an instance Kind of their own, operator replicas with
 * short leader-election timings, and an inventory of everything the operator owns for a set of
 * instances, compared against what each instance asks for.
 *
 * The protocol (labels, annotations, names) is spelled out literally here, as in the other
 * suites: a typo in the services' constants must fail these tests, not be mirrored by them.
 */
import {
  type Cluster,
  freePorts,
  installCrds,
  instanceKindCrd,
  instancePolicyName,
  isApiStatus,
  type PolicyRole,
  type RunningService,
  startOperator,
  waitFor,
} from '@kubeplus-isolation/e2e';
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

export const MANAGED_BY = 'app.kubernetes.io/managed-by';
export const MANAGED_BY_VALUE = 'kubeplus-isolation';
export const OWNER_NAME = 'kubeplus.io/owner-name';
export const OWNER_NAMESPACE = 'kubeplus.io/owner-namespace';
export const OWNER_UID = 'kubeplus.io/owner-uid';
export const CREATED_FOR = 'kubeplus.io/created-for';
export const ENABLED = 'kubeplus.io/node-isolation-enabled';
export const RESOLVED = 'kubeplus.io/node-isolation-resolved';
export const NODE_ISOLATION = 'kubeplus.io/node-isolation';
export const SANDBOX_ISOLATION = 'kubeplus.io/sandbox-isolation';
export const FINALIZER = 'isolation.kubeplus.io/cleanup';

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
  if (spec.pool !== undefined) annotations[NODE_ISOLATION] = JSON.stringify(mandateOf(spec.pool));
  if (spec.sandbox !== undefined) {
    annotations[SANDBOX_ISOLATION] = JSON.stringify({
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

export interface OperatorReplica {
  identity: string;
  service: RunningService;
  metricsPort: number;
}

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
 * Short leader election, valid for the operator's own checks (lease > renew deadline > 1.2 × retry;
 * shutdown > drain + renew deadline): a standby takes over at most ~4.5 s after the leader's last
 * renewal. The renew deadline stays at 3 s so a loaded 2-core machine does not lose the Lease.
 */
export const LEASE_FLAGS = [
  '--lease-duration=4s',
  '--renew-deadline=3s',
  '--retry-period=500ms',
  '--drain-timeout=1s',
  '--shutdown-timeout=5s',
] as const;

/** One operator replica; resolves once /readyz is 200 (its caches synced), leader or not. */
export async function startReplica(cluster: Cluster, o: ReplicaOptions): Promise<OperatorReplica> {
  const [metricsPort] = (await freePorts(1)) as [number];
  const service = await startOperator(cluster, {
    name: o.name,
    args: [
      `--kubeconfig=${o.kubeconfigPath}`,
      `--instance-kinds=${o.kind.group}`,
      `--platform-namespace=${o.platformNamespace}`,
      `--leader-election-namespace=${o.leaseNamespace}`,
      `--leader-election-id=${o.leaseName}`,
      `--leader-election-identity=${o.identity}`,
      ...LEASE_FLAGS,
      '--concurrency=2',
      `--metrics-port=${metricsPort}`,
      '--bind-address=127.0.0.1',
    ],
    readiness: { url: `http://127.0.0.1:${metricsPort}/readyz`, timeoutMs: 60_000 },
  });
  return { identity: o.identity, service, metricsPort };
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
  const selector = `${MANAGED_BY}=${MANAGED_BY_VALUE},${OWNER_NAMESPACE}=${ownerNamespace}`;
  const adm = kc.makeApiClient(AdmissionregistrationV1Api);
  const [namespaces, classes, vaps, vapbs, mutating] = await Promise.all([
    kc.makeApiClient(CoreV1Api).listNamespace({ labelSelector: `${OWNER_NAMESPACE}=${ownerNamespace},${OWNER_UID}` }),
    kc.makeApiClient(NodeV1Api).listRuntimeClass({ labelSelector: selector }),
    adm.listValidatingAdmissionPolicy({ labelSelector: selector }),
    adm.listValidatingAdmissionPolicyBinding({ labelSelector: selector }),
    // At the version the cluster serves; none below 1.34 (the version matrix).
    mutatingPolicies(kc, selector),
  ]);
  const entry = (kind: string, o: KubernetesObject, detail?: string): OwnedObject => ({
    kind,
    name: o.metadata?.name ?? '',
    owner: o.metadata?.labels?.[OWNER_NAME] ?? '',
    ownerNamespace: o.metadata?.labels?.[OWNER_NAMESPACE] ?? '',
    ...(detail !== undefined && { detail }),
  });
  return [
    ...namespaces.items.map((o) =>
      entry(
        'Namespace',
        o,
        JSON.stringify({
          phase: o.status?.phase,
          enabled: o.metadata?.labels?.[ENABLED],
          resolved:
            o.metadata?.annotations?.[RESOLVED] === undefined
              ? undefined
              : JSON.parse(o.metadata.annotations[RESOLVED]),
          createdFor: o.metadata?.annotations?.[CREATED_FOR],
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
    const prefix = `kubeplus-sandbox-${spec.name}`;
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
