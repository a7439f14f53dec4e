/**
 * ClusterPort on @kubernetes/client-node 2.0.1.
 *
 * Writes are plain create / update (PUT with resourceVersion) / JSON merge patch with field
 * manager `kubeplus-isolation-operator`, not server-side apply: the reconciler decides itself
 * whether anything differs (an up-to-date instance must cost no write at all), and a PUT of the
 * whole owned object removes fields other actors added, which SSA would keep. Optimistic
 * concurrency comes from resourceVersion / uid preconditions and surfaces as 409.
 */
import { hostname } from 'node:os';
import {
  ApisApi,
  CustomObjectsApi,
  type KubeConfig,
  type KubernetesListObject,
  type KubernetesObject,
  KubernetesObjectApi,
  PatchStrategy,
  type V1APIResource,
  type V1Namespace,
  type V1RuntimeClass,
} from '@kubernetes/client-node';
import {
  ApiError,
  type ClusterPort,
  type DeletePreconditions,
  type EventTarget,
  type InstanceEvent,
} from '../cluster/port.js';
import { SANDBOX_RESOURCES, type SandboxResource } from '../desired/agent-sandbox.js';
import { apiVersionOf, type InstanceKey, type KindRef } from '../desired/instance.js';
import {
  type NamespaceMergePatch,
  type NamespaceMeta,
  type NamespaceToCreate,
  namespaceMetaOf,
} from '../desired/node-isolation.js';
import {
  type ManagedObject,
  type ManagedType,
  MUTATING_POLICY_API_VERSIONS,
  type MutatingPolicyApiVersion,
  type ObjectRef,
  RUNTIME_CLASS_API_VERSION,
} from '../desired/objects.js';
import type { SandboxInstanceMeta } from '../desired/sandbox-peers.js';
import { type RuntimeClassInfo, runtimeClassInfo } from '../desired/sandbox-policy.js';
import type { ProbeAnswer } from '../desired/settle.js';
import { WARM_POOL_SANDBOX_LABEL, type WarmSandboxLike } from '../desired/stale-warm-sandboxes.js';

const SANDBOX = ((): SandboxResource => {
  const sandbox = SANDBOX_RESOURCES.find((r) => r.kind === 'Sandbox');
  if (sandbox === undefined) throw new Error('no Sandbox resource known');
  return sandbox;
})();

export const FIELD_MANAGER = 'kubeplus-isolation-operator';
export const EVENT_COMPONENT = 'kubeplus-isolation-operator';
const MAX_EVENT_MESSAGE = 1024;
const LIST_PAGE = 500;

export interface KubeClusterPortOptions {
  fieldManager?: string;
  /**
   * The RuntimeClasses that can matter to a tenant namespace, from the informer cache's index;
   * without it every call lists every class from the API server (a superset, which decides the same).
   */
  runtimeClasses?: (tenant: string) => readonly RuntimeClassInfo[];
  /**
   * The sandbox-annotated instances bound to a tenant namespace, from the instance caches' index.
   * Instances come in Kinds only the operator's CRD selection knows, so there is no API-server
   * fallback: without it, `listSandboxInstances` rejects.
   */
  sandboxInstances?: (tenant: string) => readonly SandboxInstanceMeta[];
  /** Delegate Events to the runtime's recorder (aggregation, rate limits); default: create core/v1 Events. */
  recordEvent?: (target: EventTarget, event: InstanceEvent) => Promise<void>;
  /** How long discovery answers (served kinds, MutatingAdmissionPolicy version) are reused. Default 60 s. */
  discoveryTtlMs?: number;
  now?: () => Date;
}

/** KubernetesObjectApi with its cached discovery lookup made public. */
class ObjectApi extends KubernetesObjectApi {
  static fromConfig(kc: KubeConfig): ObjectApi {
    const api = kc.makeApiClient(ObjectApi);
    api.setDefaultNamespace(kc);
    return api;
  }

  resourceFor(apiVersion: string, kind: string): Promise<V1APIResource | undefined> {
    return this.resource(apiVersion, kind);
  }
}

function statusOf(err: unknown): number {
  if (typeof err !== 'object' || err === null) return 0;
  const { code, statusCode } = err as { code?: unknown; statusCode?: unknown };
  if (typeof code === 'number') return code;
  return typeof statusCode === 'number' ? statusCode : 0;
}

/** The API server's Status (message, reason) from an ApiException body, if it carries one. */
function statusBody(err: unknown): { message?: string; reason?: string } {
  let body = typeof err === 'object' && err !== null ? (err as { body?: unknown }).body : undefined;
  if (typeof body === 'string') {
    try {
      body = JSON.parse(body);
    } catch {
      return {};
    }
  }
  if (typeof body !== 'object' || body === null) return {};
  const { message, reason } = body as { message?: unknown; reason?: unknown };
  const out: { message?: string; reason?: string } = {};
  if (typeof message === 'string') out.message = message;
  if (typeof reason === 'string') out.reason = reason;
  return out;
}

function toApiError(err: unknown, what: string): ApiError {
  if (err instanceof ApiError) return err;
  const status = statusOf(err);
  const body = statusBody(err);
  const detail = body.message ?? (err instanceof Error ? err.message.split('\n', 1)[0] : String(err));
  return new ApiError(status, `${what}: ${detail}`, body.reason);
}

async function call<T>(what: string, fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    throw toApiError(err, what);
  }
}

/** Reads resolve undefined on 404. */
async function read<T>(what: string, fn: () => Promise<T>): Promise<T | undefined> {
  try {
    return await fn();
  } catch (err) {
    if (statusOf(err) === 404) return undefined;
    throw toApiError(err, what);
  }
}

/** Deletes resolve on 404. */
async function remove(what: string, fn: () => Promise<unknown>): Promise<void> {
  try {
    await fn();
  } catch (err) {
    if (statusOf(err) !== 404) throw toApiError(err, what);
  }
}

function eventName(object: string, now: Date): string {
  const base = object.slice(0, 200).replace(/[^a-z0-9]+$/, '') || 'instance';
  const suffix = `${now.getTime().toString(16)}${Math.floor(Math.random() * 0x10000)
    .toString(16)
    .padStart(4, '0')}`;
  return `${base}.${suffix}`;
}

interface Cached<T> {
  value: T;
  at: number;
}

export class KubeClusterPort implements ClusterPort {
  private readonly objects: ObjectApi;
  private readonly custom: CustomObjectsApi;
  private readonly apis: ApisApi;
  private readonly fieldManager: string;
  private readonly options: KubeClusterPortOptions;
  private readonly ttlMs: number;
  private readonly now: () => Date;
  private readonly kinds = new Map<string, Cached<KindRef>>();
  private mutatingVersion: Cached<MutatingPolicyApiVersion | undefined> | undefined;
  private readonly reportingInstance = hostname();

  constructor(kc: KubeConfig, options: KubeClusterPortOptions = {}) {
    this.objects = ObjectApi.fromConfig(kc);
    this.custom = kc.makeApiClient(CustomObjectsApi);
    this.apis = kc.makeApiClient(ApisApi);
    this.fieldManager = options.fieldManager ?? FIELD_MANAGER;
    this.options = options;
    this.ttlMs = options.discoveryTtlMs ?? 60_000;
    this.now = options.now ?? (() => new Date());
  }

  private fresh<T>(c: Cached<T> | undefined): c is Cached<T> {
    return c !== undefined && this.now().getTime() - c.at < this.ttlMs;
  }

  async resolveKind(group: string, kind: string): Promise<KindRef | undefined> {
    const cacheKey = `${group}/${kind}`;
    const cached = this.kinds.get(cacheKey);
    if (this.fresh(cached)) return cached.value;
    const groups = await call('list API groups', () => this.apis.getAPIVersions());
    const entry = groups.groups.find((g) => g.name === group);
    let found: KindRef | undefined;
    if (entry !== undefined) {
      const preferred = entry.preferredVersion?.version;
      const versions = [
        ...(preferred === undefined ? [] : [preferred]),
        ...entry.versions.map((v) => v.version).filter((v) => v !== preferred),
      ];
      for (const version of versions) {
        const resource = await read(`discover ${group}/${version}`, () =>
          this.objects.resourceFor(apiVersionOf({ group, version }), kind),
        );
        if (resource !== undefined) {
          found = { group, version, kind, plural: resource.name };
          break;
        }
      }
    }
    // Only positive answers are cached: a Kind registered a moment ago must not look absent
    // (absence is what lets orphan cleanup delete an owner's objects).
    if (found !== undefined) this.kinds.set(cacheKey, { value: found, at: this.now().getTime() });
    return found;
  }

  getInstance(key: InstanceKey): Promise<unknown> {
    return read(`get ${key.kind} ${key.namespace}/${key.name}`, () =>
      this.objects.read({
        apiVersion: apiVersionOf(key),
        kind: key.kind,
        metadata: { name: key.name, namespace: key.namespace },
      }),
    );
  }

  async setInstanceFinalizers(key: InstanceKey, finalizers: readonly string[], resourceVersion: string): Promise<void> {
    // A merge patch carrying resourceVersion is rejected with 409 if the instance changed
    // meanwhile, so another controller's concurrent finalizer edit is never overwritten.
    await call(`set finalizers of ${key.kind} ${key.namespace}/${key.name}`, () =>
      this.objects.patch(
        {
          apiVersion: apiVersionOf(key),
          kind: key.kind,
          metadata: { name: key.name, namespace: key.namespace, finalizers: [...finalizers], resourceVersion },
        },
        undefined,
        undefined,
        this.fieldManager,
        undefined,
        PatchStrategy.MergePatch,
      ),
    );
  }

  async recordEvent(target: EventTarget, event: InstanceEvent): Promise<void> {
    if (this.options.recordEvent !== undefined) return this.options.recordEvent(target, event);
    const now = this.now();
    const message =
      event.message.length > MAX_EVENT_MESSAGE ? `${event.message.slice(0, MAX_EVENT_MESSAGE - 3)}...` : event.message;
    const involvedObject: Record<string, string> = {
      apiVersion: target.apiVersion,
      kind: target.kind,
      name: target.name,
      namespace: target.namespace,
      uid: target.uid,
    };
    if (target.resourceVersion !== undefined && target.resourceVersion !== '') {
      involvedObject.resourceVersion = target.resourceVersion;
    }
    const body: KubernetesObject & Record<string, unknown> = {
      apiVersion: 'v1',
      kind: 'Event',
      metadata: { name: eventName(target.name, now), namespace: target.namespace },
      involvedObject,
      type: event.type,
      reason: event.reason,
      message,
      source: { component: EVENT_COMPONENT },
      reportingComponent: EVENT_COMPONENT,
      reportingInstance: this.reportingInstance,
      firstTimestamp: now,
      lastTimestamp: now,
      count: 1,
    };
    await call(`record event ${event.reason}`, () => this.objects.create(body));
  }

  async getNamespace(name: string): Promise<NamespaceMeta | undefined> {
    const ns = await read(`get namespace ${name}`, () =>
      this.objects.read<V1Namespace>({ apiVersion: 'v1', kind: 'Namespace', metadata: { name } }),
    );
    if (ns === undefined) return undefined;
    return namespaceMetaOf(name, ns);
  }

  async createNamespace(namespace: NamespaceToCreate): Promise<void> {
    await call(`create namespace ${namespace.metadata.name}`, () =>
      this.objects.create(namespace, undefined, undefined, this.fieldManager),
    );
  }

  async patchNamespace(name: string, patch: NamespaceMergePatch, resourceVersion?: string): Promise<void> {
    // A resourceVersion in a merge patch is a precondition: 409 if the namespace changed since.
    const metadata =
      resourceVersion === undefined ? { name, ...patch.metadata } : { name, ...patch.metadata, resourceVersion };
    await call(`patch namespace ${name}`, () =>
      this.objects.patch(
        { apiVersion: 'v1', kind: 'Namespace', metadata } as KubernetesObject,
        undefined,
        undefined,
        this.fieldManager,
        undefined,
        PatchStrategy.MergePatch,
      ),
    );
  }

  async deleteNamespace(name: string, preconditions: DeletePreconditions): Promise<void> {
    await remove(`delete namespace ${name}`, () =>
      this.objects.delete(
        { apiVersion: 'v1', kind: 'Namespace', metadata: { name } },
        undefined,
        undefined,
        undefined,
        undefined,
        undefined,
        {
          preconditions,
        },
      ),
    );
  }

  getObject(ref: ObjectRef): Promise<ManagedObject | undefined> {
    return read(`get ${ref.kind} ${ref.name}`, async () => {
      const obj = await this.objects.read({ apiVersion: ref.apiVersion, kind: ref.kind, metadata: metaOf(ref) });
      return obj as unknown as ManagedObject;
    });
  }

  async createObject(obj: ManagedObject): Promise<void> {
    await call(`create ${obj.kind} ${obj.metadata.name}`, () =>
      this.objects.create(obj as KubernetesObject, undefined, undefined, this.fieldManager),
    );
  }

  async dryRunCreate(obj: Record<string, unknown>): Promise<ProbeAnswer> {
    try {
      const object = await this.objects.create(obj as KubernetesObject, undefined, 'All', this.fieldManager);
      return { allowed: true, object };
    } catch (err) {
      const status = statusOf(err);
      if (status === 404) return { notServed: true };
      if (status === 400 || status === 403 || status === 422) {
        const body = statusBody(err);
        return { allowed: false, code: status, message: body.message ?? String(err) };
      }
      throw toApiError(err, `dry-run create ${String(obj.kind)}`);
    }
  }

  async replaceObject(obj: ManagedObject): Promise<void> {
    await call(`update ${obj.kind} ${obj.metadata.name}`, () =>
      this.objects.replace(obj as KubernetesObject, undefined, undefined, this.fieldManager),
    );
  }

  async deleteObject(ref: ObjectRef, preconditions: DeletePreconditions): Promise<void> {
    await remove(`delete ${ref.kind} ${ref.name}`, () =>
      this.objects.delete(
        { apiVersion: ref.apiVersion, kind: ref.kind, metadata: metaOf(ref) },
        undefined,
        undefined,
        undefined,
        undefined,
        'Background',
        { preconditions },
      ),
    );
  }

  async listObjects(type: ManagedType, labelSelector: string): Promise<ManagedObject[]> {
    const out: ManagedObject[] = [];
    let continueToken: string | undefined;
    do {
      const token = continueToken;
      const page: KubernetesListObject<KubernetesObject> = await call(`list ${type.kind}`, () =>
        this.objects.list(
          type.apiVersion,
          type.kind,
          undefined,
          undefined,
          undefined,
          undefined,
          undefined,
          labelSelector,
          LIST_PAGE,
          token,
        ),
      );
      for (const item of page.items) {
        // List items carry no apiVersion/kind; the request's type is theirs.
        out.push({ ...(item as unknown as ManagedObject), apiVersion: type.apiVersion, kind: type.kind });
      }
      continueToken = page.metadata?._continue || undefined;
    } while (continueToken !== undefined);
    return out;
  }

  async listWarmPoolSandboxes(namespace: string): Promise<readonly WarmSandboxLike[] | undefined> {
    const { group, resource: plural, versions } = SANDBOX;
    for (const version of versions) {
      const out: WarmSandboxLike[] = [];
      let continueToken: string | undefined;
      try {
        do {
          const token = continueToken;
          const page = (await this.custom.listNamespacedCustomObject({
            group,
            version,
            namespace,
            plural,
            labelSelector: WARM_POOL_SANDBOX_LABEL,
            limit: LIST_PAGE,
            ...(token === undefined ? {} : { _continue: token }),
          })) as { items?: WarmSandboxLike[]; metadata?: { continue?: string } };
          out.push(...(page.items ?? []));
          continueToken = page.metadata?.continue || undefined;
        } while (continueToken !== undefined);
        return out;
      } catch (err) {
        // 404: this version is not served (or no Agent Sandbox CRD at all): try the next.
        if (statusOf(err) !== 404) throw toApiError(err, `list warm-pool Sandboxes in ${namespace}`);
      }
    }
    return undefined;
  }

  async deleteSandbox(namespace: string, name: string, preconditions: DeletePreconditions): Promise<void> {
    const { group, resource: plural, versions } = SANDBOX;
    // 404 at one version: not served there, or gone (then it is gone at every version).
    for (const version of versions) {
      try {
        await this.custom.deleteNamespacedCustomObject({
          group,
          version,
          namespace,
          plural,
          name,
          propagationPolicy: 'Background',
          body: { preconditions },
        });
        return;
      } catch (err) {
        if (statusOf(err) !== 404) throw toApiError(err, `delete Sandbox ${namespace}/${name}`);
      }
    }
  }

  async listRuntimeClasses(tenant: string): Promise<readonly RuntimeClassInfo[]> {
    if (this.options.runtimeClasses !== undefined) return this.options.runtimeClasses(tenant);
    const list = await call('list RuntimeClasses', () =>
      this.objects.list<V1RuntimeClass>(RUNTIME_CLASS_API_VERSION, 'RuntimeClass'),
    );
    return list.items.flatMap((rc) => runtimeClassInfo(rc) ?? []);
  }

  async listSandboxInstances(tenant: string): Promise<readonly SandboxInstanceMeta[]> {
    if (this.options.sandboxInstances === undefined)
      throw new ApiError(0, 'listing sandbox-isolated instances needs the instance caches (option sandboxInstances)');
    return this.options.sandboxInstances(tenant);
  }

  async servedMutatingPolicyVersion(): Promise<MutatingPolicyApiVersion | undefined> {
    if (this.fresh(this.mutatingVersion)) return this.mutatingVersion.value;
    let served: MutatingPolicyApiVersion | undefined;
    for (const apiVersion of MUTATING_POLICY_API_VERSIONS) {
      // 404: this group version is not served at all (beta APIs are off by default).
      const resource = await read(`discover ${apiVersion}`, () =>
        this.objects.resourceFor(apiVersion, 'MutatingAdmissionPolicy'),
      );
      if (resource !== undefined) {
        served = apiVersion;
        break;
      }
    }
    this.mutatingVersion = { value: served, at: this.now().getTime() };
    return served;
  }
}

/** The metadata naming `ref` (its namespace too, for a namespaced kind: never the client's default). */
function metaOf(ref: ObjectRef): { name: string; namespace?: string } {
  return ref.namespace === undefined ? { name: ref.name } : { name: ref.name, namespace: ref.namespace };
}
