/**
 * ClusterPort: every read and write the reconcilers make, and nothing else. The reconcilers are
 * written against it; `KubeClusterPort` implements it on @kubernetes/client-node and the unit
 * tests use an in-memory fake.
 *
 * Contract of every implementation:
 * - a read of something absent resolves `undefined` (never throws 404);
 * - deleting something already gone resolves (deletes are idempotent);
 * - every other failure rejects with an `ApiError` carrying the HTTP `statusCode`
 *   (409 for AlreadyExists, a stale resourceVersion or a failed precondition), so the work
 *   queue can tell a conflict (retry now) from other errors (retry with backoff);
 * - a read without `{ fresh: true }` may be answered from an informer cache (`cached-cluster-port.ts`):
 *   possibly stale, but never "absent" for an object the cache has not seen (a miss goes to the
 *   API server). Every write based on a read carries its resourceVersion or uid, so a stale read
 *   costs a 409 and a retry, never a wrong write. `{ fresh: true }` asks the API server, for
 *   decisions that act on absence (removing the finalizer, deleting an orphan's objects).
 */

import type { InstanceKey, KindRef } from '../desired/instance.js';
import type { NamespaceMergePatch, NamespaceMeta, NamespaceToCreate } from '../desired/node-isolation.js';
import type { ManagedObject, ManagedType, MutatingPolicyApiVersion, ObjectRef } from '../desired/objects.js';
import type { SandboxInstanceMeta } from '../desired/sandbox-peers.js';
import type { RuntimeClassInfo } from '../desired/sandbox-policy.js';
import type { ProbeAnswer } from '../desired/settle.js';
import type { WarmSandboxLike } from '../desired/stale-warm-sandboxes.js';
import { isConflict } from '../runtime/errors.js';

/**
 * A failed API call, normalized: `statusCode` is the HTTP status (0 when there was no response),
 * which runtime/errors.ts `httpStatusOf` / `isConflict` read like any client's error.
 */
export class ApiError extends Error {
  override readonly name = 'ApiError';
  constructor(
    readonly statusCode: number,
    message: string,
    readonly reason?: string,
  ) {
    super(message);
  }
}

/** A create refused because the name is taken (409, reason AlreadyExists). */
export function isAlreadyExists(err: unknown): boolean {
  return isConflict(err) && (err as { reason?: unknown }).reason === 'AlreadyExists';
}

/** What an Event on an instance says. */
export interface InstanceEvent {
  type: 'Normal' | 'Warning';
  /** UpperCamelCase, e.g. `InvalidSandboxIsolation`. */
  reason: string;
  message: string;
}

/** The object an Event is about. */
export interface EventTarget {
  apiVersion: string;
  kind: string;
  namespace: string;
  name: string;
  uid: string;
  resourceVersion?: string;
}

/** How current a read must be. */
export interface ReadOptions {
  /** Read from the API server, not from a cache. */
  fresh?: boolean;
  /**
   * The caller creates what is absent and handles a 409 AlreadyExists by reading fresh
   * (`isAlreadyExists`), so a cache miss may be answered "absent" without asking the API
   * server: a new object then costs its create only. Without a cache, the API server is asked.
   */
  missIsAbsent?: boolean;
}

/** Delete only this exact object (uid) and, when given, only at this resourceVersion. */
export interface DeletePreconditions {
  uid?: string;
  resourceVersion?: string;
}

export interface ClusterPort {
  /* Instances (any KubePlus Kind) */

  /** Served version and plural of an instance Kind; undefined when the cluster does not serve it. */
  resolveKind(group: string, kind: string): Promise<KindRef | undefined>;
  /** The instance as unstructured JSON, or undefined when it does not exist. */
  getInstance(key: InstanceKey, options?: ReadOptions): Promise<unknown>;
  /** Sets the instance's finalizer list, failing with 409 if it changed since `resourceVersion`. */
  setInstanceFinalizers(key: InstanceKey, finalizers: readonly string[], resourceVersion: string): Promise<void>;
  /** Records an Event on the instance. Best effort: callers do not let a failure here fail a reconcile. */
  recordEvent(target: EventTarget, event: InstanceEvent): Promise<void>;

  /* Namespaces */

  getNamespace(name: string, options?: ReadOptions): Promise<NamespaceMeta | undefined>;
  createNamespace(namespace: NamespaceToCreate): Promise<void>;
  /**
   * RFC 7386 merge patch of labels/annotations; with `resourceVersion`, it fails with 409 if the
   * namespace changed since it was read at that version.
   */
  patchNamespace(name: string, patch: NamespaceMergePatch, resourceVersion?: string): Promise<void>;
  deleteNamespace(name: string, preconditions: DeletePreconditions): Promise<void>;

  /* Operator-owned cluster-scoped objects (RuntimeClass, admission policies and bindings) */

  getObject(ref: ObjectRef, options?: ReadOptions): Promise<ManagedObject | undefined>;
  createObject(obj: ManagedObject): Promise<void>;
  /** Full update (PUT); `obj.metadata.resourceVersion` makes it fail with 409 if the object changed. */
  replaceObject(obj: ManagedObject): Promise<void>;
  deleteObject(ref: ObjectRef, preconditions: DeletePreconditions): Promise<void>;
  /**
   * Objects of one type matching a label selector (`k=v,k2=v2`). From a cache, only objects
   * labelled `app.kubernetes.io/managed-by=kubeplus-isolation` are listed (what the caches hold).
   */
  listObjects(type: ManagedType, labelSelector: string, options?: ReadOptions): Promise<ManagedObject[]>;

  /* Cluster facts */

  /**
   * The RuntimeClasses that can matter to a sandbox policy of tenant namespace `tenant`: at least
   * the platform's and those generated for that namespace's instances (`classesForTenant`), any
   * superset deciding the same; preferably from the informer cache's index.
   */
  listRuntimeClasses(tenant: string): Promise<readonly RuntimeClassInfo[]>;
  /**
   * The instances, of any watched Kind and namespace, carrying `kubeplus.io/sandbox-isolation`
   * (valid or not) whose policies bind tenant namespace `tenant`, from the instance caches'
   * index (O(answer), not O(instances)): several instances may bind policies to one tenant
   * namespace, and each one's policy depends on the others' (`desired/sandbox-peers.ts`).
   */
  listSandboxInstances(tenant: string): Promise<readonly SandboxInstanceMeta[]>;
  /** The MutatingAdmissionPolicy API version served (v1 preferred), or undefined when none is. */
  servedMutatingPolicyVersion(): Promise<MutatingPolicyApiVersion | undefined>;
  /**
   * A server-side dry run (`dryRun=All`) of creating `obj`: the whole admission chain runs and
   * nothing is stored. Proves an admission policy in effect (desired/settle.ts). Refusals (403,
   * 422, 400) are answers; 404 is "not served"; anything else rejects.
   */
  dryRunCreate(obj: Record<string, unknown>): Promise<ProbeAnswer>;

  /* Agent Sandbox objects (desired/stale-warm-sandboxes.ts) */

  /**
   * The Sandboxes of `namespace` labelled `agents.x-k8s.io/warm-pool-sandbox` (a pool's, not yet
   * claimed), from the API server (a consistent LIST), at the first Agent Sandbox version it
   * serves; undefined when it serves none.
   */
  listWarmPoolSandboxes(namespace: string): Promise<readonly WarmSandboxLike[] | undefined>;
  /** Deletes Sandbox `namespace/name` (only that uid, at that resourceVersion when given); gone already resolves. */
  deleteSandbox(namespace: string, name: string, preconditions: DeletePreconditions): Promise<void>;
}
