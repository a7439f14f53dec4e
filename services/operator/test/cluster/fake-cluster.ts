/**
 * In-memory ClusterPort with the API-server behaviour the reconciler depends on: uid and
 * resourceVersion on every write, 409 on AlreadyExists / stale resourceVersion / failed
 * preconditions, the immutable RuntimeClass handler, defaulting of admission-policy fields,
 * finalizer-gated deletion of instances, and label-selector lists. Every write is recorded,
 * so tests can assert that an up-to-date instance costs none.
 */

import {
  ApiError,
  type ClusterPort,
  type DeletePreconditions,
  type EventTarget,
  type InstanceEvent,
} from '../../src/cluster/port.js';
import type { InstanceKey, KindRef } from '../../src/desired/instance.js';
import type { NamespaceMergePatch, NamespaceMeta, NamespaceToCreate } from '../../src/desired/node-isolation.js';
import {
  type ManagedObject,
  type ManagedType,
  type MutatingPolicyApiVersion,
  type ObjectRef,
  refOf,
} from '../../src/desired/objects.js';
import { type SandboxInstanceMeta, sandboxInstanceMeta, tenantOf } from '../../src/desired/sandbox-peers.js';
import { classesForTenant, type RuntimeClassInfo, runtimeClassInfo } from '../../src/desired/sandbox-policy.js';
import type { ProbeAnswer } from '../../src/desired/settle.js';
import { WARM_POOL_SANDBOX_LABEL, type WarmSandboxLike } from '../../src/desired/stale-warm-sandboxes.js';

type SandboxMetadata = Parameters<typeof sandboxInstanceMeta>[1];

export type WriteOp =
  | 'setFinalizers'
  | 'createNamespace'
  | 'patchNamespace'
  | 'deleteNamespace'
  | 'createObject'
  | 'replaceObject'
  | 'deleteObject'
  | 'deleteSandbox';

export interface Write {
  op: WriteOp;
  target: string;
}

export interface RecordedEvent extends InstanceEvent {
  target: EventTarget;
}

interface StoredNamespace {
  name: string;
  uid: string;
  resourceVersion: string;
  labels: Record<string, string>;
  annotations: Record<string, string>;
  creationTimestamp: string;
}

/** Every object's creationTimestamp unless a test gives one: the same instant for all. */
export const FAKE_CREATION_TIMESTAMP = '2026-11-29T18:00:00Z';

type Json = Record<string, unknown>;

function clone<T>(v: T): T {
  return structuredClone(v);
}

function instanceId(k: { group: string; kind: string; namespace: string; name: string }): string {
  return `${k.group}/${k.kind}/${k.namespace}/${k.name}`;
}

function objectId(ref: { kind: string; name: string; namespace?: string }): string {
  return ref.namespace === undefined ? `${ref.kind}/${ref.name}` : `${ref.kind}/${ref.namespace}/${ref.name}`;
}

function matchesSelector(labels: Readonly<Record<string, string>> | undefined, selector: string): boolean {
  return selector
    .split(',')
    .filter((s) => s !== '')
    .every((term) => {
      const [k, v] = term.split('=') as [string, string];
      return labels?.[k] === v;
    });
}

/** What kube-apiserver does to admission policies on write: defaults, and empty lists omitted. */
function defaulted(obj: ManagedObject): ManagedObject {
  const out = clone(obj);
  const spec = out.spec as Json | undefined;
  if (spec === undefined) return out;
  for (const field of ['matchConstraints', 'matchResources']) {
    const m = spec[field] as Json | undefined;
    if (m === undefined) continue;
    m.matchPolicy ??= 'Equivalent';
    m.namespaceSelector ??= {};
    m.objectSelector ??= {};
    for (const rule of (m.resourceRules as Json[] | undefined) ?? []) rule.scope ??= '*';
    for (const key of ['resourceRules', 'excludeResourceRules']) {
      if (Array.isArray(m[key]) && (m[key] as unknown[]).length === 0) delete m[key];
    }
  }
  for (const key of ['matchConditions', 'variables', 'auditAnnotations']) {
    if (Array.isArray(spec[key]) && (spec[key] as unknown[]).length === 0) delete spec[key];
  }
  if (out.kind === 'ValidatingAdmissionPolicy' || out.kind === 'MutatingAdmissionPolicy') spec.failurePolicy ??= 'Fail';
  return out;
}

export class FakeCluster implements ClusterPort {
  readonly kinds: KindRef[] = [{ group: 'cloudark.io', version: 'v1', kind: 'Agent', plural: 'agents' }];
  readonly instances = new Map<string, Json>();
  readonly namespaces = new Map<string, StoredNamespace>();
  readonly objects = new Map<string, ManagedObject>();
  readonly events: RecordedEvent[] = [];
  readonly writes: Write[] = [];
  mutatingVersion: MutatingPolicyApiVersion | undefined = 'admissionregistration.k8s.io/v1';
  /** Fails the next call of `op` with this status. */
  private readonly faults = new Map<string, number>();
  private counter = 0;

  /* ---------- test helpers ---------- */

  failNext(op: WriteOp | 'recordEvent' | 'getInstance' | 'listWarmPoolSandboxes', statusCode: number): void {
    this.faults.set(op, statusCode);
  }

  writeCount(): number {
    return this.writes.length;
  }

  private nextRv(): string {
    this.counter += 1;
    return String(this.counter);
  }

  private newUid(): string {
    this.counter += 1;
    return `uid-${this.counter}`;
  }

  private fault(op: string): void {
    const status = this.faults.get(op);
    if (status !== undefined) {
      this.faults.delete(op);
      throw new ApiError(status, `injected ${status} on ${op}`);
    }
  }

  private write(op: WriteOp, target: string): void {
    this.fault(op);
    this.writes.push({ op, target });
  }

  /** Stores (or replaces) an instance as a user would `kubectl apply` it. */
  putInstance(obj: {
    name: string;
    namespace: string;
    annotations?: Record<string, string>;
    kind?: string;
    uid?: string;
    creationTimestamp?: string;
  }): InstanceKey {
    const kind = obj.kind ?? 'Agent';
    const id = instanceId({ group: 'cloudark.io', kind, namespace: obj.namespace, name: obj.name });
    const existing = this.instances.get(id);
    const existingMeta = (existing?.metadata ?? {}) as Json;
    const metadata: Json = {
      ...existingMeta,
      name: obj.name,
      namespace: obj.namespace,
      uid: obj.uid ?? existingMeta.uid ?? this.newUid(),
      resourceVersion: this.nextRv(),
      annotations: obj.annotations ?? {},
      creationTimestamp: obj.creationTimestamp ?? existingMeta.creationTimestamp ?? FAKE_CREATION_TIMESTAMP,
    };
    this.instances.set(id, { apiVersion: 'cloudark.io/v1', kind, metadata, spec: {} });
    if (kind !== 'Agent' && !this.kinds.some((k) => k.kind === kind)) {
      this.kinds.push({ group: 'cloudark.io', version: 'v1', kind, plural: `${kind.toLowerCase()}s` });
    }
    const ref = this.kinds.find((k) => k.kind === kind);
    if (ref === undefined) throw new Error('unreachable');
    return { ...ref, namespace: obj.namespace, name: obj.name };
  }

  instance(key: InstanceKey): Json | undefined {
    return this.instances.get(instanceId(key));
  }

  finalizersOf(key: InstanceKey): string[] {
    return ((this.instance(key)?.metadata as Json | undefined)?.finalizers as string[] | undefined) ?? [];
  }

  /** `kubectl delete`: marks for deletion while finalizers remain, else removes. */
  deleteInstance(key: InstanceKey): void {
    const obj = this.instance(key);
    if (obj === undefined) return;
    const meta = obj.metadata as Json;
    if (((meta.finalizers as string[] | undefined) ?? []).length === 0) this.instances.delete(instanceId(key));
    else {
      meta.deletionTimestamp = '2026-11-29T19:00:00Z';
      meta.resourceVersion = this.nextRv();
    }
  }

  /** What `kubectl patch --type=merge -p '{"metadata":{"finalizers":null}}'` on a deleting instance does. */
  forceRemoveFinalizers(key: InstanceKey): void {
    const obj = this.instance(key);
    if (obj === undefined) return;
    const meta = obj.metadata as Json;
    meta.finalizers = [];
    if (meta.deletionTimestamp !== undefined) this.instances.delete(instanceId(key));
  }

  putNamespace(
    name: string,
    labels: Record<string, string> = {},
    annotations: Record<string, string> = {},
    creationTimestamp = FAKE_CREATION_TIMESTAMP,
  ): void {
    this.namespaces.set(name, {
      name,
      uid: this.newUid(),
      resourceVersion: this.nextRv(),
      labels,
      annotations,
      creationTimestamp,
    });
  }

  /** A RuntimeClass the platform team created (not owned by the operator). */
  putRuntimeClass(
    name: string,
    handler: string,
    labels: Record<string, string> = {},
    annotations: Record<string, string> = {},
  ): void {
    this.objects.set(objectId({ kind: 'RuntimeClass', name }), {
      apiVersion: 'node.k8s.io/v1',
      kind: 'RuntimeClass',
      metadata: { name, uid: this.newUid(), resourceVersion: this.nextRv(), labels, annotations },
      handler,
    });
  }

  stored(kind: string, name: string, namespace?: string): ManagedObject | undefined {
    return this.objects.get(objectId(namespace === undefined ? { kind, name } : { kind, name, namespace }));
  }

  storedOfKind(kind: string): ManagedObject[] {
    return [...this.objects.values()].filter((o) => o.kind === kind);
  }

  /** A manual edit (kubectl edit): changes the object and bumps its resourceVersion. */
  edit(kind: string, name: string, change: (obj: ManagedObject) => void): void {
    const obj = this.stored(kind, name);
    if (obj === undefined) throw new Error(`no ${kind}/${name}`);
    change(obj);
    obj.metadata.resourceVersion = this.nextRv();
  }

  /* ---------- ClusterPort ---------- */

  async resolveKind(group: string, kind: string): Promise<KindRef | undefined> {
    return this.kinds.find((k) => k.group === group && k.kind === kind);
  }

  async getInstance(key: InstanceKey): Promise<unknown> {
    this.fault('getInstance');
    const obj = this.instance(key);
    return obj === undefined ? undefined : clone(obj);
  }

  async setInstanceFinalizers(key: InstanceKey, finalizers: readonly string[], resourceVersion: string): Promise<void> {
    this.write('setFinalizers', instanceId(key));
    const obj = this.instance(key);
    if (obj === undefined) throw new ApiError(404, 'instance not found');
    const meta = obj.metadata as Json;
    if (meta.resourceVersion !== resourceVersion) throw new ApiError(409, 'the object has been modified');
    meta.finalizers = [...finalizers];
    meta.resourceVersion = this.nextRv();
    if (meta.deletionTimestamp !== undefined && finalizers.length === 0) this.instances.delete(instanceId(key));
  }

  async recordEvent(target: EventTarget, event: InstanceEvent): Promise<void> {
    this.fault('recordEvent');
    this.events.push({ ...event, target });
  }

  async getNamespace(name: string): Promise<NamespaceMeta | undefined> {
    const ns = this.namespaces.get(name);
    return ns === undefined
      ? undefined
      : {
          name: ns.name,
          uid: ns.uid,
          resourceVersion: ns.resourceVersion,
          labels: { ...ns.labels },
          annotations: { ...ns.annotations },
          creationTimestamp: ns.creationTimestamp,
        };
  }

  async createNamespace(namespace: NamespaceToCreate): Promise<void> {
    this.write('createNamespace', namespace.metadata.name);
    if (this.namespaces.has(namespace.metadata.name))
      throw new ApiError(409, 'namespace already exists', 'AlreadyExists');
    this.putNamespace(namespace.metadata.name, { ...namespace.metadata.labels }, { ...namespace.metadata.annotations });
  }

  async patchNamespace(name: string, patch: NamespaceMergePatch, resourceVersion?: string): Promise<void> {
    this.write('patchNamespace', name);
    const ns = this.namespaces.get(name);
    if (ns === undefined) throw new ApiError(404, 'namespace not found');
    if (resourceVersion !== undefined && resourceVersion !== ns.resourceVersion) {
      throw new ApiError(409, 'the object has been modified');
    }
    for (const [field, changes] of [
      ['labels', patch.metadata.labels],
      ['annotations', patch.metadata.annotations],
    ] as const) {
      for (const [k, v] of Object.entries(changes ?? {})) {
        if (v === null) delete ns[field][k];
        else ns[field][k] = v;
      }
    }
    ns.resourceVersion = this.nextRv();
  }

  async deleteNamespace(name: string, preconditions: DeletePreconditions): Promise<void> {
    this.write('deleteNamespace', name);
    const ns = this.namespaces.get(name);
    if (ns === undefined) return;
    if (preconditions.uid !== undefined && preconditions.uid !== ns.uid)
      throw new ApiError(409, 'uid precondition failed');
    this.namespaces.delete(name);
  }

  private served(type: { apiVersion: string; kind: string }): void {
    if (type.kind.startsWith('Mutating') && type.apiVersion !== this.mutatingVersion) {
      throw new ApiError(404, `${type.apiVersion} ${type.kind} is not served`);
    }
  }

  async getObject(ref: ObjectRef): Promise<ManagedObject | undefined> {
    this.served(ref);
    const obj = this.objects.get(objectId(ref));
    return obj === undefined ? undefined : { ...clone(obj), apiVersion: ref.apiVersion };
  }

  async createObject(obj: ManagedObject): Promise<void> {
    this.write('createObject', objectId(refOf(obj)));
    this.served(obj);
    const id = objectId(refOf(obj));
    if (this.objects.has(id)) throw new ApiError(409, `${id} already exists`, 'AlreadyExists');
    const stored = defaulted(obj);
    stored.metadata = { ...stored.metadata, uid: this.newUid(), resourceVersion: this.nextRv() };
    this.objects.set(id, stored);
  }

  /** Probe answers for dryRunCreate, in order (default: the kind is not served). */
  probeAnswers: ProbeAnswer[] = [];
  readonly probes: Record<string, unknown>[] = [];

  async dryRunCreate(obj: Record<string, unknown>): Promise<ProbeAnswer> {
    this.probes.push(obj);
    return this.probeAnswers.shift() ?? { notServed: true };
  }

  async replaceObject(obj: ManagedObject): Promise<void> {
    this.write('replaceObject', objectId(refOf(obj)));
    this.served(obj);
    const id = objectId(refOf(obj));
    const current = this.objects.get(id);
    if (current === undefined) throw new ApiError(404, `${id} not found`);
    if (obj.metadata.resourceVersion !== current.metadata.resourceVersion)
      throw new ApiError(409, 'the object has been modified');
    if (obj.metadata.uid !== undefined && obj.metadata.uid !== current.metadata.uid)
      throw new ApiError(409, 'uid mismatch');
    if (obj.kind === 'RuntimeClass' && obj.handler !== current.handler) {
      throw new ApiError(422, 'RuntimeClass.handler: field is immutable');
    }
    const stored = defaulted(obj);
    stored.metadata = { ...stored.metadata, uid: current.metadata.uid, resourceVersion: this.nextRv() };
    this.objects.set(id, stored);
  }

  async deleteObject(ref: ObjectRef, preconditions: DeletePreconditions): Promise<void> {
    this.write('deleteObject', objectId(ref));
    this.served(ref);
    const current = this.objects.get(objectId(ref));
    if (current === undefined) return;
    if (preconditions.uid !== undefined && preconditions.uid !== current.metadata.uid)
      throw new ApiError(409, 'uid precondition');
    if (
      preconditions.resourceVersion !== undefined &&
      preconditions.resourceVersion !== current.metadata.resourceVersion
    ) {
      throw new ApiError(409, 'resourceVersion precondition');
    }
    this.objects.delete(objectId(ref));
  }

  async listObjects(type: ManagedType, labelSelector: string): Promise<ManagedObject[]> {
    this.served(type);
    return [...this.objects.values()]
      .filter((o) => o.kind === type.kind && matchesSelector(o.metadata.labels, labelSelector))
      .map((o) => ({ ...clone(o), apiVersion: type.apiVersion }));
  }

  /** Only the classes that can matter to `tenant`, as the operator's index answers (default platform namespace). */
  async listRuntimeClasses(tenant: string): Promise<readonly RuntimeClassInfo[]> {
    return classesForTenant(
      this.storedOfKind('RuntimeClass').flatMap((o) => runtimeClassInfo(o) ?? []),
      tenant,
    );
  }

  /** The default platform namespace's rule decides the tenant (no test of the fake uses another). */
  async listSandboxInstances(tenant: string): Promise<readonly SandboxInstanceMeta[]> {
    return [...this.instances.values()].flatMap((obj) => {
      const kind = String(obj.kind);
      const meta = sandboxInstanceMeta({ group: 'cloudark.io', kind }, obj.metadata as SandboxMetadata);
      return meta === undefined || tenantOf(meta) !== tenant ? [] : [meta];
    });
  }

  async servedMutatingPolicyVersion(): Promise<MutatingPolicyApiVersion | undefined> {
    return this.mutatingVersion;
  }

  /** Sandboxes by namespace, as the API server would list them (warm-pool label or not); undefined: no Sandbox API. */
  sandboxes: Map<string, WarmSandboxLike[]> | undefined = new Map();
  /** How many LISTs of warm-pool Sandboxes were made. */
  sandboxLists = 0;

  async listWarmPoolSandboxes(namespace: string): Promise<readonly WarmSandboxLike[] | undefined> {
    this.fault('listWarmPoolSandboxes');
    this.sandboxLists += 1;
    if (this.sandboxes === undefined) return undefined;
    return (this.sandboxes.get(namespace) ?? []).filter((sb) => {
      const labels = (sb.metadata as { labels?: Record<string, string> } | undefined)?.labels;
      return labels !== undefined && WARM_POOL_SANDBOX_LABEL in labels;
    });
  }

  async deleteSandbox(namespace: string, name: string, preconditions: DeletePreconditions): Promise<void> {
    this.write('deleteSandbox', `${namespace}/${name}`);
    const list = this.sandboxes?.get(namespace) ?? [];
    const at = list.findIndex((sb) => sb.metadata?.name === name);
    if (at < 0) return;
    const current = list[at];
    if (preconditions.uid !== undefined && current?.metadata?.uid !== preconditions.uid)
      throw new ApiError(409, 'Precondition failed: UID in precondition');
    if (
      preconditions.resourceVersion !== undefined &&
      current?.metadata?.resourceVersion !== preconditions.resourceVersion
    )
      throw new ApiError(409, 'Precondition failed: ResourceVersion in precondition');
    list.splice(at, 1);
  }
}
