/**
 * Helpers for the operator suites (e2e/test/operator*.test.ts): the `Agent` instance Kind as
 * KubePlus registers it, and reads of the objects the operator owns. The suites' setup (cluster,
 * CRD, Lease namespace, operator) is `operatorSuite` (operator-suite.ts); the operator process is
 * the harness's `startOperator`.
 *
 * The protocol's keys (annotations, labels) come from @kubeplus-isolation/spec, the one
 * definition the operator, the webhook and the chart tests share; object names are spelled out here.
 */
import { instanceKindCrd, instancePolicyName, isApiStatus, type PolicyRole, waitFor } from '@kubeplus-isolation/e2e';
import {
  MANAGED_BY_LABEL,
  MANAGED_BY_VALUE,
  NODE_ISOLATION_ENABLED_LABEL,
  NODE_ISOLATION_RESOLVED_ANNOTATION,
  OWNER_ANNOTATION,
  OWNER_NAME_LABEL,
  OWNER_NAMESPACE_LABEL,
  RUNTIME_CLASS_PREFIX,
} from '@kubeplus-isolation/spec';
import {
  AdmissionregistrationV1Api,
  AdmissionregistrationV1beta1Api,
  ApiException,
  ApiextensionsV1Api,
  CoreV1Api,
  CustomObjectsApi,
  type KubeConfig,
  NodeV1Api,
  PatchStrategy,
  setHeaderOptions,
  type V1Namespace,
} from '@kubernetes/client-node';
import { POLICY_ENGINE_SERVED } from './versions.js';

export const mergePatch = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);

// ---- object names --------------------------------------------------------------------------
export const runtimeClassName = (instance: string): string => `${RUNTIME_CLASS_PREFIX}${instance}`;
/** The admission policy (and binding) name of the Agent `namespace/instance` (harness `instancePolicyName`). */
export const policyName = (namespace: string, instance: string, role: PolicyRole): string =>
  instancePolicyName({ group: AGENT.group, kind: AGENT.kind, namespace, name: instance }, role);

// ---- the Agent instance Kind ----------------------------------------------------------------
export const AGENT = { group: 'cloudark.io', version: 'v1', plural: 'agents', kind: 'Agent' } as const;
export const AGENT_CRD = `${AGENT.plural}.${AGENT.group}`;

/** The operator's work-queue key of an Agent, as its `reconciled` log lines carry it. */
export const agentKey = (namespace: string, name: string): string =>
  `${AGENT.group}/${AGENT.version}/${AGENT.kind}/${AGENT.plural}/${namespace}/${name}`;

export interface AgentObject {
  apiVersion: string;
  kind: string;
  metadata: {
    name: string;
    namespace: string;
    uid: string;
    resourceVersion: string;
    labels?: Record<string, string>;
    annotations?: Record<string, string>;
    finalizers?: string[];
    deletionTimestamp?: string;
  };
}

/**
 * Creates the `agents.cloudark.io` CRD (namespaced, `registered-by: kubeplus`, permissive schema)
 * unless it is there already (another operator suite may have left it, or be deleting it: then
 * this waits for it to go and creates it again). Waits until it is Established.
 */
export async function ensureAgentCrd(kc: KubeConfig): Promise<void> {
  const ext = kc.makeApiClient(ApiextensionsV1Api);
  await waitFor(
    `CRD ${AGENT_CRD} to exist (created here, or a terminating one gone first) and be Established`,
    async (observe) => {
      try {
        const crd = await ext.readCustomResourceDefinition({ name: AGENT_CRD });
        const established = crd.status?.conditions?.find((c) => c.type === 'Established')?.status === 'True';
        observe({ deletionTimestamp: crd.metadata?.deletionTimestamp, established });
        return crd.metadata?.deletionTimestamp === undefined && established;
      } catch (error) {
        if (!isApiStatus(error, 404)) throw error;
      }
      try {
        await ext.createCustomResourceDefinition({ body: instanceKindCrd(AGENT) });
      } catch (error) {
        if (!isApiStatus(error, 409)) throw error;
      }
      return false;
    },
    { timeoutMs: 60_000, intervalMs: 250 },
  );
}

/**
 * Removes every Agent left (deleted while the suite's operator still runs, waiting until it has
 * cleaned up what each owned; one not gone within 30 s — e.g. a test left a finalizer on it — has
 * its finalizers stripped so cleanup cannot hang), then the CRD, and waits until the CRD is gone.
 */
export async function deleteAgentsAndCrd(kc: KubeConfig): Promise<void> {
  const custom = kc.makeApiClient(CustomObjectsApi);
  let items: AgentObject[] = [];
  try {
    items = ((await custom.listClusterCustomObject({ ...AGENT })) as { items: AgentObject[] }).items;
  } catch (error) {
    if (!isApiStatus(error, 404)) throw error;
  }
  await Promise.all(
    items.map(async (a) => {
      try {
        await deleteAgent(kc, a.metadata.namespace, a.metadata.name);
      } catch {
        await custom
          .patchNamespacedCustomObject(
            {
              ...AGENT,
              namespace: a.metadata.namespace,
              name: a.metadata.name,
              body: { metadata: { finalizers: null } },
            },
            mergePatch,
          )
          .catch((error: unknown) => {
            if (!isApiStatus(error, 404)) throw error;
          });
      }
    }),
  );
  const ext = kc.makeApiClient(ApiextensionsV1Api);
  try {
    await ext.deleteCustomResourceDefinition({ name: AGENT_CRD });
  } catch (error) {
    if (isApiStatus(error, 404)) return;
    throw error;
  }
  await waitFor(
    `CRD ${AGENT_CRD} to be deleted`,
    async () => {
      try {
        await ext.readCustomResourceDefinition({ name: AGENT_CRD });
        return false;
      } catch (error) {
        if (isApiStatus(error, 404)) return true;
        throw error;
      }
    },
    { timeoutMs: 60_000, intervalMs: 250 },
  );
}

export async function createAgent(
  kc: KubeConfig,
  namespace: string,
  name: string,
  annotations: Record<string, string> = {},
  labels: Record<string, string> = {},
): Promise<AgentObject> {
  return (await kc.makeApiClient(CustomObjectsApi).createNamespacedCustomObject({
    ...AGENT,
    namespace,
    body: {
      apiVersion: `${AGENT.group}/${AGENT.version}`,
      kind: AGENT.kind,
      metadata: { name, annotations, labels },
      // The seed's example spec: the operator never reads it.
      spec: {
        mcpServer: { name: 'shared-k8sgpt-mcp', namespace: 'platform-mcp' },
        modelConfigRef: 'default-model-config',
      },
    },
  })) as AgentObject;
}

export async function getAgent(kc: KubeConfig, namespace: string, name: string): Promise<AgentObject | undefined> {
  try {
    return (await kc
      .makeApiClient(CustomObjectsApi)
      .getNamespacedCustomObject({ ...AGENT, namespace, name })) as AgentObject;
  } catch (error) {
    if (isApiStatus(error, 404)) return undefined;
    throw error;
  }
}

/** Merge patch of the Agent's metadata (`null` removes a key). */
export async function patchAgent(
  kc: KubeConfig,
  namespace: string,
  name: string,
  metadata: { annotations?: Record<string, string | null>; labels?: Record<string, string | null> },
): Promise<AgentObject> {
  return (await kc
    .makeApiClient(CustomObjectsApi)
    .patchNamespacedCustomObject({ ...AGENT, namespace, name, body: { metadata } }, mergePatch)) as AgentObject;
}

/**
 * Deletes the Agent, waits until it is gone, then until the operator's orphan cleanup has deleted
 * every RuntimeClass and admission policy/binding it owned (the operator adds no finalizer: the
 * instance goes at once, its cleanup follows).
 */
export async function deleteAgent(kc: KubeConfig, namespace: string, name: string, timeoutMs = 30_000): Promise<void> {
  try {
    await kc.makeApiClient(CustomObjectsApi).deleteNamespacedCustomObject({ ...AGENT, namespace, name });
  } catch (error) {
    if (isApiStatus(error, 404)) return;
    throw error;
  }
  await waitAgentGone(kc, namespace, name, timeoutMs);
  await waitFor(
    `the operator to delete what Agent ${namespace}/${name} owned`,
    async (observe) => {
      const left = await ownedObjects(kc, { namespace, name });
      observe(left.map((o) => `${o.kind}/${o.name}`));
      return left.length === 0;
    },
    { timeoutMs, intervalMs: 250 },
  );
}

export async function waitAgentGone(
  kc: KubeConfig,
  namespace: string,
  name: string,
  timeoutMs = 30_000,
): Promise<void> {
  await waitFor(
    `Agent ${namespace}/${name} to be gone`,
    async (observe) => {
      const agent = await getAgent(kc, namespace, name);
      observe(agent?.metadata);
      return agent === undefined;
    },
    { timeoutMs, intervalMs: 250 },
  );
}

// ---- the operator process --------------------------------------------------------------------

// ---- what the operator owns ------------------------------------------------------------------

export interface OwnedObject {
  kind: string;
  /** group/version it was listed at (MutatingAdmissionPolicies: the version the cluster serves). */
  apiVersion: string;
  name: string;
  uid: string;
  resourceVersion: string;
  // biome-ignore lint/suspicious/noExplicitAny: the raw object, for assertions on any field
  raw: any;
}

/** An instance by name (unique in the suite) or, where names repeat across namespaces, by namespace and name. */
export type InstanceRef = string | { namespace: string; name: string };

/**
 * Every RuntimeClass and admission policy/binding labelled as owned by `instance` (name label, and
 * namespace label when given), sorted by kind and name. The operator lists its objects by the same labels.
 */
export async function ownedObjects(kc: KubeConfig, instance: InstanceRef): Promise<OwnedObject[]> {
  const labelSelector =
    typeof instance === 'string'
      ? `${MANAGED_BY_LABEL}=${MANAGED_BY_VALUE},${OWNER_NAME_LABEL}=${instance}`
      : `${MANAGED_BY_LABEL}=${MANAGED_BY_VALUE},${OWNER_NAME_LABEL}=${instance.name},${OWNER_NAMESPACE_LABEL}=${instance.namespace}`;
  const adm = kc.makeApiClient(AdmissionregistrationV1Api);
  const lists = await Promise.all([
    kc
      .makeApiClient(NodeV1Api)
      .listRuntimeClass({ labelSelector })
      .then((l) => l.items.map((o) => ({ kind: 'RuntimeClass', o }))),
    adm
      .listValidatingAdmissionPolicy({ labelSelector })
      .then((l) => l.items.map((o) => ({ kind: 'ValidatingAdmissionPolicy', o }))),
    adm
      .listValidatingAdmissionPolicyBinding({ labelSelector })
      .then((l) => l.items.map((o) => ({ kind: 'ValidatingAdmissionPolicyBinding', o }))),
    mutatingPolicies(kc, labelSelector),
  ]);
  return lists
    .flat()
    .map(({ kind, o, apiVersion }: Listed) => ({
      kind,
      apiVersion: apiVersion ?? (kind === 'RuntimeClass' ? 'node.k8s.io/v1' : 'admissionregistration.k8s.io/v1'),
      name: o.metadata?.name ?? '',
      uid: o.metadata?.uid ?? '',
      resourceVersion: o.metadata?.resourceVersion ?? '',
      raw: o,
    }))
    .sort((a, b) => `${a.kind}/${a.name}`.localeCompare(`${b.kind}/${b.name}`));
}

/** An object as listed: its kind, the object, and the version it was listed at. */
export interface Listed {
  kind: string;
  o: { metadata?: { name?: string; uid?: string; resourceVersion?: string } };
  apiVersion?: string;
}

/**
 * The MutatingAdmissionPolicies and bindings labelled `labelSelector`, at the version the cluster
 * serves (v1 from 1.36, v1beta1 on 1.34-1.35 when enabled), none where it serves neither.
 */
export async function mutatingPolicies(kc: KubeConfig, labelSelector: string): Promise<Listed[]> {
  const tagged = (apiVersion: string, kind: string, items: Listed['o'][]): Listed[] =>
    items.map((o) => ({ kind, o, apiVersion }));
  const v1 = kc.makeApiClient(AdmissionregistrationV1Api);
  const beta = kc.makeApiClient(AdmissionregistrationV1beta1Api);
  for (const [apiVersion, list] of [
    [
      'admissionregistration.k8s.io/v1',
      async () => [
        ...tagged(
          'admissionregistration.k8s.io/v1',
          'MutatingAdmissionPolicy',
          (await v1.listMutatingAdmissionPolicy({ labelSelector })).items,
        ),
        ...tagged(
          'admissionregistration.k8s.io/v1',
          'MutatingAdmissionPolicyBinding',
          (await v1.listMutatingAdmissionPolicyBinding({ labelSelector })).items,
        ),
      ],
    ],
    [
      'admissionregistration.k8s.io/v1beta1',
      async () => [
        ...tagged(
          'admissionregistration.k8s.io/v1beta1',
          'MutatingAdmissionPolicy',
          (await beta.listMutatingAdmissionPolicy({ labelSelector })).items,
        ),
        ...tagged(
          'admissionregistration.k8s.io/v1beta1',
          'MutatingAdmissionPolicyBinding',
          (await beta.listMutatingAdmissionPolicyBinding({ labelSelector })).items,
        ),
      ],
    ],
  ] as const) {
    try {
      return await list();
    } catch (error) {
      if (!isApiStatus(error, 404))
        throw new Error(`listing ${apiVersion} MutatingAdmissionPolicies`, { cause: error });
    }
  }
  return [];
}

/** `Kind/name` of each object, for comparing object sets. */
export const kindNames = (objects: readonly OwnedObject[]): string[] => objects.map((o) => `${o.kind}/${o.name}`);

/**
 * The object set of sandbox isolation of the Agent `namespace/instance`, as `Kind/name`, sorted
 * like ownedObjects; `runtimeClass: false` when its RuntimeClass name is another instance's.
 */
export function expectedSandboxObjects(
  namespace: string,
  instance: string,
  enforce: boolean,
  opts: { runtimeClass?: boolean; mutatingPolicy?: boolean } = {},
): string[] {
  const defaults = opts.mutatingPolicy ?? sharedClusterDefaults();
  const rc = opts.runtimeClass === false ? [] : [`RuntimeClass/${runtimeClassName(instance)}`];
  // Advisory mode defaults with a MutatingAdmissionPolicy only where the cluster serves one.
  const defaulting = !defaults
    ? []
    : [
        `MutatingAdmissionPolicy/${policyName(namespace, instance, 'default')}`,
        `MutatingAdmissionPolicyBinding/${policyName(namespace, instance, 'default')}`,
      ];
  const names = enforce
    ? [
        ...rc,
        `ValidatingAdmissionPolicy/${policyName(namespace, instance, 'enforce')}`,
        `ValidatingAdmissionPolicyBinding/${policyName(namespace, instance, 'enforce')}`,
      ]
    : [
        ...defaulting,
        ...rc,
        `ValidatingAdmissionPolicy/${policyName(namespace, instance, 'advisory')}`,
        `ValidatingAdmissionPolicyBinding/${policyName(namespace, instance, 'advisory')}`,
      ];
  return names.sort((a, b) => a.localeCompare(b));
}

/**
 * Whether the run's shared control plane serves MutatingAdmissionPolicy by default (v1, Kubernetes
 * 1.36+), so advisory mode defaults with one; on an older minor of the version matrix the operator
 * falls back to warning only (kubernetes-versions.test.ts proves the fallback).
 */
export function sharedClusterDefaults(): boolean {
  return POLICY_ENGINE_SERVED;
}

/** Waits until the instance owns exactly `expected` (Kind/name) and `extra` holds; returns them. */
export function waitForOwned(
  kc: KubeConfig,
  instance: InstanceRef,
  expected: readonly string[],
  extra: (objects: OwnedObject[]) => boolean = () => true,
  timeoutMs = 30_000,
): Promise<OwnedObject[]> {
  return waitFor(
    `instance ${typeof instance === 'string' ? instance : `${instance.namespace}/${instance.name}`} to own exactly [${expected.join(', ')}]`,
    async (observe) => {
      const objects = await ownedObjects(kc, instance);
      observe(objects.map((o) => ({ object: `${o.kind}/${o.name}`, handler: o.raw.handler })));
      const names = kindNames(objects);
      return names.length === expected.length && names.every((n, i) => n === expected[i]) && extra(objects)
        ? objects
        : undefined;
    },
    { timeoutMs, intervalMs: 250 },
  );
}

/**
 * Waits until `expected` are owned and the API server's type checker has recorded its verdict on
 * every ValidatingAdmissionPolicy (status.observedGeneration = generation). That status write
 * bumps the policy's resourceVersion; only after it are resourceVersions a record of the
 * operator's writes alone.
 */
export function waitForSettled(
  kc: KubeConfig,
  instance: InstanceRef,
  expected: readonly string[],
): Promise<OwnedObject[]> {
  return waitForOwned(kc, instance, expected, (objects) =>
    objects
      .filter((o) => o.kind === 'ValidatingAdmissionPolicy')
      .every((o) => o.raw.status?.observedGeneration === o.raw.metadata?.generation),
  );
}

// ---- namespaces and events -------------------------------------------------------------------

export async function readNamespace(kc: KubeConfig, name: string): Promise<V1Namespace | undefined> {
  try {
    return await kc.makeApiClient(CoreV1Api).readNamespace({ name });
  } catch (error) {
    if (isApiStatus(error, 404)) return undefined;
    throw error;
  }
}

/** The keys the node-isolation path controls on a namespace, for comparisons and messages. */
export function isolationKeys(ns: V1Namespace | undefined): Record<string, string | undefined> {
  return {
    label: ns?.metadata?.labels?.[NODE_ISOLATION_ENABLED_LABEL],
    resolved: ns?.metadata?.annotations?.[NODE_ISOLATION_RESOLVED_ANNOTATION],
    owner: ns?.metadata?.annotations?.[OWNER_ANNOTATION],
    ownerName: ns?.metadata?.labels?.[OWNER_NAME_LABEL],
  };
}

export function waitForNamespace(
  kc: KubeConfig,
  name: string,
  description: string,
  predicate: (ns: V1Namespace | undefined) => boolean,
  timeoutMs = 30_000,
): Promise<V1Namespace | undefined> {
  return waitFor(
    `namespace ${name} ${description}`,
    async (observe) => {
      const ns = await readNamespace(kc, name);
      observe({ ...isolationKeys(ns), phase: ns?.status?.phase, exists: ns !== undefined });
      return predicate(ns) ? { ns } : undefined;
    },
    { timeoutMs, intervalMs: 250 },
  ).then((r) => r.ns);
}

/** Waits for a core/v1 Event on the instance with this reason; returns it. */
export function waitForEvent(
  kc: KubeConfig,
  namespace: string,
  instance: string,
  reason: string,
  predicate: (message: string) => boolean = () => true,
  timeoutMs = 30_000,
): Promise<{ type: string; message: string; count: number }> {
  const core = kc.makeApiClient(CoreV1Api);
  return waitFor(
    `a ${reason} Event on Agent ${namespace}/${instance}`,
    async (observe) => {
      const events = await core.listNamespacedEvent({
        namespace,
        fieldSelector: `involvedObject.name=${instance},involvedObject.kind=${AGENT.kind}`,
      });
      observe(events.items.map((e) => `${e.type} ${e.reason}: ${e.message}`));
      const hit = events.items.find((e) => e.reason === reason && predicate(e.message ?? ''));
      return hit && { type: hit.type ?? '', message: hit.message ?? '', count: hit.count ?? 1 };
    },
    { timeoutMs, intervalMs: 250 },
  );
}

/** The Status message of a failed API call. */
export function statusMessage(error: unknown): string {
  if (!(error instanceof ApiException)) return String(error);
  const body = error.body as unknown;
  try {
    const parsed = (typeof body === 'string' ? JSON.parse(body) : body) as { message?: string };
    return parsed.message ?? String(body);
  } catch {
    return String(body);
  }
}
