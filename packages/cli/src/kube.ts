/**
 * The cluster side of `explain` and `check`: reads (and one server-side dry-run create) with the
 * user's kubeconfig. Thin: every decision is in explain.ts / check.ts.
 */
import {
  choosePlatformNamespace,
  DEFAULT_PLATFORM_NAMESPACE,
  discoverPlatformNamespace,
  type HandlerLevels,
  type InstanceIdentity,
  MANAGED_BY_LABEL,
  MANAGED_BY_VALUE,
  NODE_ISOLATION_PARAMS_API_VERSION,
  NODE_ISOLATION_PARAMS_KIND,
  NODE_ISOLATION_PARAMS_NAME,
  NODE_ISOLATION_WEBHOOK_NAME,
  OWNER_ANNOTATION,
  rfc3339Seconds,
  SHARED_SANDBOX_POLICY_COMPONENT,
} from '@kubeplus-isolation/spec';
import {
  ApiException,
  ApisApi,
  CoreV1Api,
  CustomObjectsApi,
  KubeConfig,
  type KubernetesObject,
  KubernetesObjectApi,
} from '@kubernetes/client-node';
import { type ExplainFacts, type InstanceFacts, type OwnedMeta, ownersOf } from './explain.js';

/** A failure to reach or read the cluster (exit status 3). */
export class ClusterError extends Error {}

/** The kubeconfig as kubectl finds it: `--kubeconfig`, else $KUBECONFIG, else ~/.kube/config, else in-cluster. */
export function loadKubeConfig(path: string | undefined, context: string | undefined): KubeConfig {
  const kc = new KubeConfig();
  try {
    if (path !== undefined) kc.loadFromFile(path);
    else kc.loadFromDefault();
    if (context !== undefined) kc.setCurrentContext(context);
  } catch (e) {
    throw new ClusterError(`cannot load the kubeconfig: ${(e as Error).message}`);
  }
  if (kc.getCurrentCluster() === null)
    throw new ClusterError('no cluster in the kubeconfig (set KUBECONFIG or --kubeconfig)');
  return kc;
}

export function statusOf(e: unknown): number | undefined {
  return e instanceof ApiException ? e.code : undefined;
}

/** The API server's message of a failed request (its Status), else the error's own. */
export function apiMessage(e: unknown): string {
  if (e instanceof ApiException) {
    const body = e.body as unknown;
    let parsed: unknown = body;
    if (typeof body === 'string') {
      try {
        parsed = JSON.parse(body);
      } catch {
        return `HTTP ${e.code}: ${body}`;
      }
    }
    const message = (parsed as { message?: unknown } | null)?.message;
    return typeof message === 'string' ? message : `HTTP ${e.code}`;
  }
  return (e as Error).message;
}

/** `true` when discovery does not know the kind (not served), as KubernetesObjectApi reports it. */
function notServed(e: unknown): boolean {
  return (
    statusOf(e) === 404 ||
    (!(e instanceof ApiException) && /Unrecognized API version and kind|not found|404/i.test(String(e)))
  );
}

/** The objects carrying an owner annotation, in order (what `withKind` keeps). */
function ownedOnly(list: KubernetesObject[] | undefined): KubernetesObject[] {
  return (list ?? []).filter((o) => o.metadata?.annotations?.[OWNER_ANNOTATION] !== undefined);
}

/** One of the shared sandbox policies: no owner annotation, the shared policies' component label. */
function isShared(o: KubernetesObject): boolean {
  return (
    o.metadata?.annotations?.[OWNER_ANNOTATION] === undefined &&
    o.metadata?.labels?.['app.kubernetes.io/component'] === SHARED_SANDBOX_POLICY_COMPONENT
  );
}

function ownedMeta(o: KubernetesObject): OwnedMeta {
  const owner = o.metadata?.annotations?.[OWNER_ANNOTATION];
  return owner === undefined ? { name: o.metadata?.name ?? '' } : { name: o.metadata?.name ?? '', owner };
}

async function guard<T>(what: string, f: () => Promise<T>): Promise<T> {
  try {
    return await f();
  } catch (e) {
    throw new ClusterError(`${what}: ${apiMessage(e)}`);
  }
}

/** Lists `kind` at the first served of `apiVersions`; undefined when none is served. */
async function listServed(
  objects: KubernetesObjectApi,
  apiVersions: readonly string[],
  kind: string,
  namespace?: string,
  labelSelector?: string,
): Promise<KubernetesObject[] | undefined> {
  for (const apiVersion of apiVersions) {
    try {
      const list = await objects.list(
        apiVersion,
        kind,
        namespace,
        undefined,
        undefined,
        undefined,
        undefined,
        labelSelector,
      );
      return list.items;
    } catch (e) {
      if (notServed(e)) continue;
      throw new ClusterError(`listing ${kind} (${apiVersion}): ${apiMessage(e)}`);
    }
  }
  return undefined;
}

const MANAGED = `${MANAGED_BY_LABEL}=${MANAGED_BY_VALUE}`;

function namespaceCreation(ns: KubernetesObject): { creationTimestamp?: string } {
  const created = ns.metadata?.creationTimestamp as unknown;
  if (created instanceof Date) return { creationTimestamp: created.toISOString() };
  return typeof created === 'string' ? { creationTimestamp: created } : {};
}
const MUTATING_POLICY_VERSIONS = ['admissionregistration.k8s.io/v1', 'admissionregistration.k8s.io/v1beta1'];

async function readInstance(
  kc: KubeConfig,
  objects: KubernetesObjectApi,
  id: InstanceIdentity,
): Promise<InstanceFacts> {
  try {
    const groups = await kc.makeApiClient(ApisApi).getAPIVersions();
    const group = groups.groups.find((g) => g.name === id.group);
    const version = group?.preferredVersion?.groupVersion ?? group?.versions[0]?.groupVersion;
    if (version === undefined) return { identity: id, readError: `API group ${id.group} is not served` };
    const o = await objects.read({
      apiVersion: version,
      kind: id.kind,
      metadata: { name: id.name, namespace: id.namespace },
    });
    const created = o.metadata?.creationTimestamp as unknown;
    const creationTimestamp =
      created instanceof Date ? created.toISOString() : typeof created === 'string' ? created : undefined;
    return {
      identity: id,
      annotations: { ...(o.metadata?.annotations ?? {}) },
      ...(creationTimestamp === undefined ? {} : { creationTimestamp }),
    };
  } catch (e) {
    return { identity: id, readError: statusOf(e) === 404 ? 'not found' : apiMessage(e) };
  }
}

/** Everything `explain` judges, read with `kc`. Throws ClusterError when the cluster cannot be read. */
export async function gatherFacts(
  kc: KubeConfig,
  namespace: string,
  platformNamespace: string,
  handlerLevels: HandlerLevels,
): Promise<ExplainFacts> {
  const core = kc.makeApiClient(CoreV1Api);
  const objects = KubernetesObjectApi.makeApiClient(kc);
  let nsObject: KubernetesObject | undefined;
  try {
    nsObject = await core.readNamespace({ name: namespace });
  } catch (e) {
    if (statusOf(e) !== 404) throw new ClusterError(`reading Namespace ${namespace}: ${apiMessage(e)}`);
  }
  if (nsObject === undefined) {
    const base = { namespace, platformNamespace: platformNamespace || DEFAULT_PLATFORM_NAMESPACE, handlerLevels };
    return { ...base, instances: [], runtimeClasses: [], policies: [], bindings: [], webhooks: [], pods: [] };
  }
  const [rcs, vaps, vapbs, maps, mapbs, mwcs, params, pods, sandboxes] = await Promise.all([
    listServed(objects, ['node.k8s.io/v1'], 'RuntimeClass'),
    listServed(objects, ['admissionregistration.k8s.io/v1'], 'ValidatingAdmissionPolicy', undefined, MANAGED),
    listServed(objects, ['admissionregistration.k8s.io/v1'], 'ValidatingAdmissionPolicyBinding', undefined, MANAGED),
    listServed(objects, MUTATING_POLICY_VERSIONS, 'MutatingAdmissionPolicy', undefined, MANAGED),
    listServed(objects, MUTATING_POLICY_VERSIONS, 'MutatingAdmissionPolicyBinding', undefined, MANAGED),
    listServed(objects, ['admissionregistration.k8s.io/v1'], 'MutatingWebhookConfiguration'),
    listServed(objects, [NODE_ISOLATION_PARAMS_API_VERSION], NODE_ISOLATION_PARAMS_KIND, namespace),
    guard(`listing the Pods of ${namespace}`, async () => (await core.listNamespacedPod({ namespace })).items),
    listServed(objects, ['agents.x-k8s.io/v1beta1', 'agents.x-k8s.io/v1alpha1'], 'Sandbox', namespace),
  ]);
  const runtimeClasses = (rcs ?? []).map((rc) => {
    const createdAt = rfc3339Seconds(rc.metadata?.creationTimestamp);
    return {
      ...ownedMeta(rc),
      handler: String((rc as { handler?: unknown }).handler ?? ''),
      ...(createdAt === undefined ? {} : { createdAt }),
    };
  });
  const withKind = (kind: string, list: KubernetesObject[] | undefined) =>
    ownedOnly(list).map((o) => ({ ...ownedMeta(o), kind }));
  const policies = [...withKind('ValidatingAdmissionPolicy', vaps), ...withKind('MutatingAdmissionPolicy', maps)];
  const bindingPolicy = (o: KubernetesObject): { policyName?: string } => {
    const name = (o as { spec?: { policyName?: unknown } }).spec?.policyName;
    return typeof name === 'string' ? { policyName: name } : {};
  };
  const bindings = [
    ...ownedOnly(vapbs).map((o) => ({
      ...ownedMeta(o),
      kind: 'ValidatingAdmissionPolicyBinding',
      ...bindingPolicy(o),
    })),
    ...ownedOnly(mapbs).map((o) => ({ ...ownedMeta(o), kind: 'MutatingAdmissionPolicyBinding', ...bindingPolicy(o) })),
  ];
  // The shared layout's policies: the operator's (managed-by), owned by no instance.
  const sharedPolicies = [
    ...(vaps ?? []).filter(isShared).map((o) => `ValidatingAdmissionPolicy/${o.metadata?.name ?? ''}`),
    ...(maps ?? []).filter(isShared).map((o) => `MutatingAdmissionPolicy/${o.metadata?.name ?? ''}`),
  ];
  const webhooks: ExplainFacts['webhooks'] = [];
  for (const c of mwcs ?? []) {
    const hooks = (c as { webhooks?: Array<{ name?: string; failurePolicy?: string }> }).webhooks ?? [];
    for (const h of hooks) {
      if (h.name === NODE_ISOLATION_WEBHOOK_NAME)
        webhooks.push({ configuration: c.metadata?.name ?? '', failurePolicy: h.failurePolicy ?? 'Fail' });
    }
  }
  // As the operator: the flag, else KubePlus's namespace from its webhook registration, else kubeplus.
  const platform = choosePlatformNamespace(
    platformNamespace,
    platformNamespace === '' ? discoverPlatformNamespace(mwcs ?? []) : undefined,
  ).namespace;
  const base = { namespace, platformNamespace: platform, handlerLevels };
  const owners = ownersOf(namespace, platform, nsObject.metadata?.annotations?.[OWNER_ANNOTATION], [
    ...runtimeClasses,
    ...policies,
  ]);
  const instances = await Promise.all(owners.map((id) => readInstance(kc, objects, id)));
  return {
    ...base,
    namespaceMeta: {
      labels: { ...(nsObject.metadata?.labels ?? {}) },
      annotations: { ...(nsObject.metadata?.annotations ?? {}) },
      ...namespaceCreation(nsObject),
    },
    instances,
    runtimeClasses,
    policies,
    bindings,
    sharedPolicies,
    webhooks,
    ...(params === undefined
      ? {}
      : { nodeIsolationParams: params.some((p) => p.metadata?.name === NODE_ISOLATION_PARAMS_NAME) }),
    pods: pods as unknown as ExplainFacts['pods'],
    ...(sandboxes === undefined ? {} : { sandboxes }),
  };
}

/** The kinds `check` can dry-run, by kind: the resource of a custom kind (Pods go through the core API). */
export const CHECKABLE_KINDS: Readonly<Record<string, string | null>> = {
  Pod: null,
  Sandbox: 'sandboxes',
  SandboxTemplate: 'sandboxtemplates',
};

/**
 * The texts of a `Warning` response header (`299 - "text"`, several joined by ', '): what an
 * advisory admission policy says.
 */
export function warningTexts(header: string | undefined): string[] {
  return [...(header ?? '').matchAll(/\d{3} \S+ "((?:[^"\\]|\\.)*)"/g)].map((m) =>
    (m[1] ?? '').replace(/\\(.)/g, '$1'),
  );
}

/**
 * `object` created with `dryRun=All` in `namespace`: what admission makes of it, and the warnings
 * it gave. Throws the API error as is.
 */
export async function dryRunCreate(
  kc: KubeConfig,
  object: KubernetesObject,
  namespace: string,
): Promise<{ object: unknown; warnings: string[] }> {
  const body = { ...object, metadata: { ...(object.metadata ?? {}), namespace } };
  const plural = CHECKABLE_KINDS[object.kind ?? ''];
  const res =
    plural === null || plural === undefined
      ? await kc.makeApiClient(CoreV1Api).createNamespacedPodWithHttpInfo({ namespace, body, dryRun: 'All' })
      : await kc.makeApiClient(CustomObjectsApi).createNamespacedCustomObjectWithHttpInfo({
          group: (object.apiVersion ?? '').split('/')[0] ?? '',
          version: (object.apiVersion ?? '').split('/')[1] ?? '',
          plural,
          namespace,
          body,
          dryRun: 'All',
        });
  return { object: res.data, warnings: warningTexts(res.headers.warning) };
}
