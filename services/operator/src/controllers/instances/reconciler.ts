/**
 * The instance reconciler: level-triggered and idempotent, in the manner of controller-runtime's
 * Reconcile. Each call reads the instance and the state it owns, computes the desired state with
 * the pure functions of `desired/`, and writes only what differs. It keeps no state between
 * calls: everything it needs is in the cluster (labels, annotations, the finalizer), so a
 * restarted or newly elected operator carries on where the last one stopped.
 *
 * Errors propagate to the caller (the work queue), which retries; 409s keep `statusCode: 409`.
 */
import {
  DEFAULT_HANDLER_LEVELS,
  DEFAULT_LEVEL_HANDLERS,
  FINALIZER,
  type HandlerLevels,
  NODE_ISOLATION_ANNOTATION,
  type ParseResult,
  parseSandboxIsolation,
  type RuntimeLevel,
  runtimeClassName,
  SANDBOX_ISOLATION_ANNOTATION,
  type SandboxIsolationSpec,
} from '@kubeplus-isolation/spec';
import {
  type ApplyOutcome,
  applyObject,
  applyObjects,
  applySharedObject,
  deleteObjects,
  listOwned,
  OPTIMISTIC,
  preconditionsOf,
  pruneOwned,
  settleAll,
} from '../../cluster/apply.js';
import {
  ApiError,
  type ClusterPort,
  type EventTarget,
  type InstanceEvent,
  isAlreadyExists,
  type ReadOptions,
} from '../../cluster/port.js';
import { EventReason } from '../../desired/event-reasons.js';
import {
  DEFAULT_PLATFORM_NAMESPACE,
  type Instance,
  type InstanceIdentity,
  type InstanceKey,
  instanceIdentity,
  instanceKeyOf,
  parseInstance,
  type TenantNamespace,
  tenantNamespace,
} from '../../desired/instance.js';
import {
  desiredNodeIsolationParams,
  isNamespaceCreatedFor,
  type NodeIsolationPlan,
  planNamespaceCleanup,
  planNodeIsolation,
} from '../../desired/node-isolation.js';
import {
  formatRef,
  type ManagedObject,
  type ManagedType,
  type MutatingPolicyApiVersion,
  NODE_ISOLATION_PARAMS_TYPE,
  type ObjectRef,
  RUNTIME_CLASS_API_VERSION,
  refOf,
  sandboxManagedTypes,
} from '../../desired/objects.js';
import { isManaged, type MetaLike, ownerOf } from '../../desired/owner.js';
import { planSandboxIsolation, sandboxAppliedMessage } from '../../desired/sandbox-plan.js';
import type { SandboxPolicyLayout } from '../../desired/sandbox-policy.js';
import { isSharedPolicyName, sharedSandboxPolicies } from '../../desired/sandbox-shared-policy.js';
import { ConditionWarnings } from './condition-warnings.js';

export interface ReconcileResult {
  /** Reconcile again after this long even without a change (set after conflicts with other instances). */
  requeueAfterMs?: number;
}

export interface OrphanResult {
  /** The live owner of the object: enqueue it so its reconcile restores or prunes the object. */
  enqueue?: InstanceKey;
}

export interface NamespaceRef {
  apiVersion: 'v1';
  kind: 'Namespace';
  name: string;
}

/** An object carrying the operator's ownership markers, as an informer event names it. */
export type OwnedTarget = ObjectRef | NamespaceRef;

export type AnnotationName = 'node-isolation' | 'sandbox-isolation';
export type ConflictKind = 'RuntimeClass' | 'AdmissionPolicy' | 'Namespace';

/** Callbacks for metrics. Called synchronously; they must not throw. */
export interface ReconcilerHooks {
  invalidAnnotation?(annotation: AnnotationName, key: InstanceKey): void;
  /** Advisory mode on a cluster serving no MutatingAdmissionPolicy API. */
  mutatingPolicyUnavailable?(key: InstanceKey): void;
  conflict?(kind: ConflictKind, key: InstanceKey): void;
}

/** The subset of a (winston) logger the reconciler uses. */
export interface ReconcileLogger {
  debug(message: string, meta?: Record<string, unknown>): void;
  info(message: string, meta?: Record<string, unknown>): void;
  warn(message: string, meta?: Record<string, unknown>): void;
}

export interface InstanceReconcilerOptions {
  port: ClusterPort;
  /** Namespace whose instances get a namespace of their own (default `kubeplus`). */
  platformNamespace?: string;
  handlerLevels?: HandlerLevels;
  levelHandlers?: Readonly<Record<RuntimeLevel, string>>;
  /** Delay before retrying after a conflict with another instance (default 60 s). */
  conflictRequeueMs?: number;
  /**
   * What was announced of standing conditions (condition-warnings.ts). The operator makes a
   * reconciler per reconcile, so it passes one memo for all of them; default: a memo of its own.
   */
  conditionWarnings?: ConditionWarnings;
  /** The clock (tests). */
  now?: () => number;
  /**
   * Write the NodeIsolation parameter of the admission-policy engine into every namespace this
   * instance node-isolates (`--node-isolation-engine` admission-policy or both). Default false.
   */
  nodeIsolationParams?: boolean;
  /**
   * How sandbox isolation's admission policies are laid out (`--sandbox-policy-layout`):
   * `per-instance` (default) or `shared` (one parameterised policy for the cluster, a binding and
   * a SandboxIsolation parameter per instance; `desired/sandbox-shared-policy.ts`).
   */
  sandboxPolicyLayout?: SandboxPolicyLayout;
  hooks?: ReconcilerHooks;
  logger?: ReconcileLogger;
}

const NO_LOG: ReconcileLogger = { debug() {}, info() {}, warn() {} };
export const DEFAULT_CONFLICT_REQUEUE_MS = 60_000;

function earliest(...delays: (number | undefined)[]): ReconcileResult {
  const defined = delays.filter((d): d is number => d !== undefined);
  return defined.length === 0 ? {} : { requeueAfterMs: Math.min(...defined) };
}

function asksForIsolation(instance: Instance): boolean {
  return (
    instance.annotations[NODE_ISOLATION_ANNOTATION] !== undefined ||
    instance.annotations[SANDBOX_ISOLATION_ANNOTATION] !== undefined
  );
}

function eventTarget(i: Instance): EventTarget {
  return {
    apiVersion: i.apiVersion,
    kind: i.kind,
    namespace: i.namespace,
    name: i.name,
    uid: i.uid,
    resourceVersion: i.resourceVersion,
  };
}

interface NodeOutcome {
  requeueAfterMs?: number;
  /** The operator created the tenant namespace for this instance: its lifecycle follows the instance's. */
  ownsNamespace: boolean;
  /** What was decided for the namespace (the NodeIsolation parameter follows it). */
  plan: NodeIsolationPlan;
}

type Live = { state: 'live'; instance: Instance } | { state: 'gone' } | { state: 'unknown' };

const FRESH: ReadOptions = { fresh: true };

export class InstanceReconciler {
  private readonly port: ClusterPort;
  private readonly platformNamespace: string;
  private readonly handlerLevels: HandlerLevels;
  private readonly levelHandlers: Readonly<Record<RuntimeLevel, string>>;
  private readonly conflictRequeueMs: number;
  private readonly nodeIsolationParams: boolean;
  private readonly sandboxPolicyLayout: SandboxPolicyLayout;
  private readonly hooks: ReconcilerHooks;
  private readonly log: ReconcileLogger;
  private readonly conditionWarnings: ConditionWarnings;
  private readonly now: () => number;

  constructor(options: InstanceReconcilerOptions) {
    this.port = options.port;
    this.platformNamespace = options.platformNamespace ?? DEFAULT_PLATFORM_NAMESPACE;
    this.handlerLevels = options.handlerLevels ?? DEFAULT_HANDLER_LEVELS;
    this.levelHandlers = options.levelHandlers ?? DEFAULT_LEVEL_HANDLERS;
    this.conflictRequeueMs = options.conflictRequeueMs ?? DEFAULT_CONFLICT_REQUEUE_MS;
    this.nodeIsolationParams = options.nodeIsolationParams ?? false;
    this.sandboxPolicyLayout = options.sandboxPolicyLayout ?? 'per-instance';
    this.hooks = options.hooks ?? {};
    this.log = options.logger ?? NO_LOG;
    this.conditionWarnings = options.conditionWarnings ?? new ConditionWarnings();
    this.now = options.now ?? Date.now;
  }

  /** Brings everything one instance owns to what its annotations ask for. */
  async reconcile(key: InstanceKey): Promise<ReconcileResult> {
    const raw = await this.port.getInstance(key);
    if (raw === undefined) return {}; // gone: its finalizer already ran (or orphan cleanup takes over)
    const parsed = parseInstance(raw, key.plural);
    if (!parsed.ok) {
      this.log.warn('ignoring a malformed instance', { key, errors: parsed.errors });
      return {};
    }
    const instance = parsed.value;
    const hasFinalizer = instance.finalizers.includes(FINALIZER);
    if (instance.deletionTimestamp !== undefined) {
      this.conditionWarnings.forget(instanceIdentity(instance));
      if (hasFinalizer) await this.finalize(instance);
      return {};
    }
    const wanted = asksForIsolation(instance);
    if (!wanted && !hasFinalizer) return {}; // never asked for isolation: exactly as without the operator
    if (wanted && !hasFinalizer) {
      // First, so nothing is created that a deletion could leave behind.
      await this.port.setInstanceFinalizers(key, [...instance.finalizers, FINALIZER], instance.resourceVersion);
    }
    const { ownsNamespace, ...result } = await this.sync(instance);
    // No isolation asked for any more: the finalizer goes once nothing is owned (a namespace
    // created for the instance stays owned until the instance is deleted).
    if (!wanted && !ownsNamespace) await this.removeFinalizer(instance);
    return result;
  }

  /**
   * The instance an owned object names as its owner, resolved to a work-queue key; for delete
   * events of owned objects (so a manually deleted object is restored).
   */
  async ownerKeyOf(meta: MetaLike): Promise<InstanceKey | undefined> {
    const owner = ownerOf(meta);
    if (owner === undefined) return undefined;
    const kind = await this.port.resolveKind(owner.group, owner.kind);
    return kind === undefined ? undefined : { ...kind, namespace: owner.namespace, name: owner.name };
  }

  /**
   * For add/update events (and a start-up sweep) of objects carrying ownership markers: when the
   * owner still wants it, returns the owner to enqueue; when the owner is gone (its finalizer was
   * force-removed, or it was deleted while this operator could not act), removes the object —
   * a Namespace created for it is deleted, any other Namespace only loses the keys it wrote.
   */
  async cleanupOrphan(target: OwnedTarget): Promise<OrphanResult> {
    if (target.kind === 'Namespace') {
      const ns = await this.port.getNamespace(target.name);
      const owner = ns === undefined ? undefined : ownerOf(ns);
      if (ns === undefined || owner === undefined) return {};
      const live = await this.liveOwner(owner);
      if (live.state !== 'gone') return this.handleLiveOwner(live);
      const plan = planNamespaceCleanup(owner, ns);
      if (plan.action === 'delete') {
        this.log.info('deleting the namespace of a deleted instance', { namespace: ns.name, owner });
        await this.port.deleteNamespace(ns.name, plan.uid === undefined ? {} : { uid: plan.uid });
      } else if (plan.action === 'patch') {
        this.log.info('removing node isolation of a deleted instance', { namespace: ns.name, owner });
        await this.port.patchNamespace(ns.name, plan.patch, ns.resourceVersion);
      }
      return {};
    }
    const policyKind = target.kind === 'ValidatingAdmissionPolicy' || target.kind === 'MutatingAdmissionPolicy';
    if (policyKind && isSharedPolicyName(target.name)) {
      await this.reassertSharedPolicies();
      return {};
    }
    const obj = await this.port.getObject(target);
    const owner = obj === undefined ? undefined : ownerOf(obj.metadata);
    if (obj === undefined || owner === undefined || !isManaged(obj.metadata)) return {};
    const live = await this.liveOwner(owner);
    if (live.state !== 'gone') return this.handleLiveOwner(live);
    this.log.info('deleting an object of a deleted instance', { object: formatRef(target), owner });
    await this.port.deleteObject(target, preconditionsOf(obj));
    return {};
  }

  private async handleLiveOwner(live: Exclude<Live, { state: 'gone' }>): Promise<OrphanResult> {
    if (live.state === 'unknown') return {};
    const instance = live.instance;
    if (instance.finalizers.includes(FINALIZER) || asksForIsolation(instance)) {
      return { enqueue: instanceKeyOf(instance) };
    }
    // Alive, but neither asks for isolation nor carries the finalizer (force-removed): what it
    // owns is left over. Take it down without touching the instance.
    await this.sync(instance);
    return {};
  }

  /**
   * Whether the owner of an object still exists. A cached answer decides only "alive": "gone"
   * (which deletes the object) is confirmed by the API server.
   */
  private async liveOwner(owner: InstanceIdentity): Promise<Live> {
    const cached = await this.readOwner(owner, {});
    return cached.state === 'gone' ? this.readOwner(owner, FRESH) : cached;
  }

  private async readOwner(owner: InstanceIdentity, options: ReadOptions): Promise<Live> {
    const kind = await this.port.resolveKind(owner.group, owner.kind);
    if (kind === undefined) return { state: 'gone' }; // the Kind is not served: no instance of it exists
    const raw = await this.port.getInstance({ ...kind, namespace: owner.namespace, name: owner.name }, options);
    if (raw === undefined) return { state: 'gone' };
    const parsed = parseInstance(raw, kind.plural);
    if (!parsed.ok) {
      this.log.warn('owner instance is malformed; leaving its objects alone', { owner, errors: parsed.errors });
      return { state: 'unknown' };
    }
    const instance = parsed.value;
    // Being deleted without this operator's finalizer: nothing will come back for its objects.
    if (instance.deletionTimestamp !== undefined && !instance.finalizers.includes(FINALIZER)) return { state: 'gone' };
    return { state: 'live', instance };
  }

  /**
   * Deletion (§4): remove everything the instance owns, then let it go. Reads here are fresh:
   * an object a cache has not seen yet would outlive its owner once the finalizer is gone.
   */
  private async finalize(instance: Instance): Promise<void> {
    const mutatingVersion = await this.port.servedMutatingPolicyVersion();
    const tenant = tenantNamespace(instance, this.platformNamespace);
    const [owned, namespace] = await settleAll([
      listOwned(this.port, instance, this.ownedTypes(mutatingVersion), FRESH),
      tenant.ok ? this.port.getNamespace(tenant.value.name, FRESH) : undefined,
    ]);
    await deleteObjects(this.port, owned);
    if (tenant.ok) {
      const plan = planNamespaceCleanup(instance, namespace);
      if (plan.action === 'delete') {
        await this.port.deleteNamespace(tenant.value.name, plan.uid === undefined ? {} : { uid: plan.uid });
        this.event(instance, 'Normal', EventReason.NamespaceDeleted, `deleted namespace ${tenant.value.name}`);
      } else if (plan.action === 'patch') {
        await this.port.patchNamespace(tenant.value.name, plan.patch, namespace?.resourceVersion);
      }
    }
    await this.removeFinalizer(instance);
  }

  private async removeFinalizer(instance: Instance): Promise<void> {
    if (!instance.finalizers.includes(FINALIZER)) return;
    await this.port.setInstanceFinalizers(
      instanceKeyOf(instance),
      instance.finalizers.filter((f) => f !== FINALIZER),
      instance.resourceVersion,
    );
  }

  /**
   * Both isolation paths for a live instance. Says whether the operator created the tenant
   * namespace for it (its lifecycle then follows the instance, so the finalizer must stay); the
   * caller decides about the finalizer.
   */
  private async sync(instance: Instance): Promise<ReconcileResult & { ownsNamespace: boolean }> {
    const tenant = tenantNamespace(instance, this.platformNamespace);
    if (!tenant.ok) {
      if (asksForIsolation(instance)) {
        this.warn(instance, EventReason.InvalidTenantNamespace, tenant.errors.join('; '));
        return { ownsNamespace: false };
      }
      // Nothing namespace-side can be owned without a valid tenant namespace.
      await this.syncSandbox(instance, undefined, undefined);
      return { ownsNamespace: false };
    }
    const sandboxText = instance.annotations[SANDBOX_ISOLATION_ANNOTATION];
    const sandbox = sandboxText === undefined ? undefined : parseSandboxIsolation(sandboxText);
    // Independent: the namespace and the cluster-scoped sandbox objects are written concurrently.
    const [node, sandboxOutcome] = await settleAll([
      this.syncNode(instance, tenant.value, sandbox?.ok === true),
      this.syncSandbox(instance, tenant.value, sandbox),
    ]);
    // After the namespace: the parameter lives in it (and a namespace created above exists now).
    const paramsRequeue = this.nodeIsolationParams
      ? await this.syncNodeIsolationParams(instance, tenant.value, node.plan)
      : undefined;
    return {
      ...earliest(node.requeueAfterMs, sandboxOutcome.requeueAfterMs, paramsRequeue),
      ownsNamespace: node.ownsNamespace,
    };
  }

  /**
   * A namespace the operator would create is read optimistically (a cache miss is "absent"); if
   * it exists after all (unlabelled, or the cache was behind), the create's AlreadyExists leads
   * to one fresh read and a second decision.
   */
  private async syncNode(instance: Instance, tenant: TenantNamespace, sandboxValid: boolean): Promise<NodeOutcome> {
    if (!tenant.createdByOperator) return this.syncNodeFrom(instance, tenant, sandboxValid, {});
    try {
      return await this.syncNodeFrom(instance, tenant, sandboxValid, OPTIMISTIC);
    } catch (err) {
      if (!isAlreadyExists(err)) throw err;
      return this.syncNodeFrom(instance, tenant, sandboxValid, FRESH);
    }
  }

  private async syncNodeFrom(
    instance: Instance,
    tenant: TenantNamespace,
    sandboxValid: boolean,
    read: ReadOptions,
  ): Promise<NodeOutcome> {
    const namespace = await this.port.getNamespace(tenant.name, read);
    const ownsNamespace = namespace !== undefined && isNamespaceCreatedFor(namespace, instance);
    const plan = planNodeIsolation({ instance, tenant, namespace, namespaceWanted: sandboxValid });
    switch (plan.action) {
      case 'invalid':
        this.hooks.invalidAnnotation?.('node-isolation', instanceKeyOf(instance));
        this.warn(
          instance,
          EventReason.InvalidNodeIsolation,
          `${NODE_ISOLATION_ANNOTATION} is invalid, keeping the node isolation last applied: ${plan.errors.join('; ')}`,
        );
        return { ownsNamespace, plan };
      case 'create':
        await this.port.createNamespace(plan.namespace);
        this.event(
          instance,
          'Normal',
          EventReason.NamespaceCreated,
          instance.annotations[NODE_ISOLATION_ANNOTATION] === undefined
            ? `created namespace ${tenant.name}`
            : `created namespace ${tenant.name} with node isolation`,
        );
        return { ownsNamespace: true, plan };
      case 'conflict':
        this.hooks.conflict?.('Namespace', instanceKeyOf(instance));
        this.warn(
          instance,
          EventReason.NodeIsolationConflict,
          `namespace ${tenant.name} is node-isolated by ${plan.owner}; not taking it over (remove ${NODE_ISOLATION_ANNOTATION} from one of the two)`,
        );
        return { ownsNamespace, plan, requeueAfterMs: this.conflictRequeueMs };
      case 'patch':
        // The admission-policy engine's parameter goes in first: once the label is on, the
        // policy's binding selects the namespace, and a Pod admitted before its parameter exists
        // would go unpatched. (sync() writes it again afterwards: no change, no write.)
        if (this.nodeIsolationParams && plan.change === 'apply') {
          await this.syncNodeIsolationParams(instance, tenant, plan);
        }
        await this.port.patchNamespace(tenant.name, plan.patch, namespace?.resourceVersion);
        if (plan.change === 'apply') {
          this.event(instance, 'Normal', EventReason.NodeIsolationApplied, `namespace ${tenant.name} is node-isolated`);
        } else if (plan.change === 'remove') {
          this.event(
            instance,
            'Normal',
            EventReason.NodeIsolationRemoved,
            `removed node isolation of namespace ${tenant.name}`,
          );
        }
        return { ownsNamespace, plan };
      case 'absent':
      case 'unchanged':
        return { ownsNamespace, plan };
    }
  }

  /**
   * The admission-policy engine's NodeIsolation parameter in the tenant namespace, following the
   * namespace's node isolation (`desiredNodeIsolationParams`): written beside the label and the
   * resolved annotation, deleted with them, left alone while the annotation is invalid or another
   * instance isolates the namespace.
   */
  private async syncNodeIsolationParams(
    instance: Instance,
    tenant: TenantNamespace,
    plan: NodeIsolationPlan,
  ): Promise<number | undefined> {
    const desired = desiredNodeIsolationParams(instance, tenant, plan);
    if (desired === 'keep') return undefined;
    const applied = await applyObjects(this.port, desired, instance);
    const { changed, conflicted } = this.reportApplied(
      instance,
      applied,
      'Namespace',
      EventReason.NodeIsolationConflict,
    );
    const read = asksForIsolation(instance) ? {} : FRESH;
    const removed = await pruneOwned(this.port, instance, [NODE_ISOLATION_PARAMS_TYPE], desired, read);
    changed.push(...removed.map((r) => `deleted ${formatRef(r)}`));
    if (changed.length > 0)
      this.log.info('node-isolation parameter written', { instance: instanceIdentity(instance), changed });
    return conflicted ? this.conflictRequeueMs : undefined;
  }

  /**
   * What applying `applied` changed (`created Kind/name`, …, for an Event or the log); each object
   * held by someone else is a Warning `reason` on the instance and a `conflict` metric.
   */
  private reportApplied(
    instance: Instance,
    applied: readonly { desired: ManagedObject; outcome: ApplyOutcome }[],
    conflict: ConflictKind,
    reason: string,
  ): { changed: string[]; conflicted: boolean } {
    const changed: string[] = [];
    let conflicted = false;
    for (const { desired, outcome } of applied) {
      if (outcome.result === 'conflict') {
        conflicted = true;
        this.hooks.conflict?.(conflict, instanceKeyOf(instance));
        this.warn(
          instance,
          reason,
          `${formatRef(refOf(desired))} belongs to ${outcome.owner ?? 'someone else'}; not taking it over`,
        );
      } else if (outcome.result !== 'unchanged') {
        changed.push(`${outcome.result} ${formatRef(refOf(desired))}`);
      }
    }
    return { changed, conflicted };
  }

  /**
   * `parsed` undefined: the annotation is absent, so every sandbox object the instance owns
   * goes. Otherwise the pure plan (`desired/sandbox-plan.ts`) decides — an invalid annotation
   * changes nothing and is reported — and this only writes it.
   */
  private async syncSandbox(
    instance: Instance,
    tenant: TenantNamespace | undefined,
    parsed: ParseResult<SandboxIsolationSpec> | undefined,
  ): Promise<ReconcileResult> {
    const key = instanceKeyOf(instance);
    if (parsed === undefined || tenant === undefined) {
      this.conditionWarnings.forget(instanceIdentity(instance));
      const types = this.sandboxTypes(await this.port.servedMutatingPolicyVersion());
      // With no isolation asked for at all, the finalizer goes next if nothing is left: list fresh.
      const removed = await pruneOwned(this.port, instance, types, [], asksForIsolation(instance) ? {} : FRESH);
      if (removed.length > 0) {
        this.event(
          instance,
          'Normal',
          EventReason.SandboxIsolationRemoved,
          `deleted ${removed.map(formatRef).join(', ')}`,
        );
      }
      return {};
    }

    const mutatingVersion = await this.port.servedMutatingPolicyVersion();
    const rcRef: ObjectRef = {
      apiVersion: RUNTIME_CLASS_API_VERSION,
      kind: 'RuntimeClass',
      name: runtimeClassName(instance.name),
    };
    // Every RuntimeClass is cached: a miss means "absent" (a stale one ends in AlreadyExists, below).
    const [runtimeClasses, currentRc, sandboxInstances] = await settleAll([
      this.port.listRuntimeClasses(tenant.name),
      this.port.getObject(rcRef, OPTIMISTIC),
      this.port.listSandboxInstances(tenant.name),
    ]);
    const plan = planSandboxIsolation({
      instance,
      tenantNamespace: tenant.name,
      parsed,
      runtimeClasses,
      currentRuntimeClass: currentRc,
      sandboxInstances,
      platformNamespace: this.platformNamespace,
      handlerLevels: this.handlerLevels,
      levelHandlers: this.levelHandlers,
      mutatingPolicyApiVersion: mutatingVersion,
      layout: this.sandboxPolicyLayout,
    });
    if (plan.action === 'invalid') {
      this.hooks.invalidAnnotation?.('sandbox-isolation', key);
      for (const w of plan.warnings) this.warn(instance, w.reason, w.message);
      return {};
    }
    if (plan.runtimeClassConflict) this.hooks.conflict?.('RuntimeClass', key);
    if (plan.mutatingPolicyUnavailable) this.hooks.mutatingPolicyUnavailable?.(key);
    // Standing conditions: announced when they appear, not at every resync (condition-warnings.ts).
    for (const w of this.conditionWarnings.toAnnounce(instanceIdentity(instance), plan.warnings, this.now())) {
      this.warn(instance, w.reason, w.message);
    }
    let requeueAfterMs = plan.runtimeClassConflict ? this.conflictRequeueMs : undefined;

    const changed: string[] = [];
    // The RuntimeClass first and on its own: the allowed list assumed it is ours (or absent).
    const applied: Array<{ desired: ManagedObject; outcome: ApplyOutcome }> = [];
    if (plan.runtimeClass !== undefined) {
      const outcome = await applyObject(this.port, plan.runtimeClass, instance, { current: currentRc });
      if (outcome.result === 'conflict') {
        // It was taken after our (cached) read: the policy must be computed again with it.
        throw new ApiError(
          409,
          `RuntimeClass ${rcRef.name} is held by ${outcome.owner ?? 'someone else'}; reconciling again`,
        );
      }
      applied.push({ desired: plan.runtimeClass, outcome });
    }
    // Shared layout: the cluster's shared policies exist before any binding names them.
    await this.ensureSharedPolicies(plan.policy.shared);
    applied.push(...(await applyObjects(this.port, plan.rest, instance)));
    const outcome = this.reportApplied(instance, applied, 'AdmissionPolicy', EventReason.AdmissionPolicyConflict);
    changed.push(...outcome.changed);
    if (outcome.conflicted) requeueAfterMs = this.conflictRequeueMs;
    // Pruning comes only after every desired object was written: what it deletes — an object of
    // another mode, or one under a name of an earlier version (`policyName` before it carried the
    // instance's namespace) — governs the namespace until its replacement exists. While one of
    // them is held by someone else, nothing is pruned: the last applied policy stays in force.
    if (!outcome.conflicted) {
      const types = this.sandboxTypes(mutatingVersion);
      const removed = await pruneOwned(this.port, instance, types, plan.policy.objects);
      changed.push(...removed.map((r) => `deleted ${formatRef(r)}`));
    }
    if (changed.length > 0) {
      this.event(
        instance,
        'Normal',
        EventReason.SandboxIsolationApplied,
        sandboxAppliedMessage(plan.spec, plan.policy.objects.length, changed),
      );
    }
    return requeueAfterMs === undefined ? {} : { requeueAfterMs };
  }

  /**
   * Writes the shared layout's policies where they differ from what they must be. One held by
   * someone else (same name, not the operator's shared policy) stops the reconcile: binding an
   * instance to a policy the operator does not control would hand its tenant to that policy.
   */
  private async ensureSharedPolicies(shared: readonly ManagedObject[]): Promise<void> {
    const outcomes = await settleAll(shared.map((obj) => applySharedObject(this.port, obj)));
    outcomes.forEach((outcome, i) => {
      const ref = formatRef(refOf(shared[i] as ManagedObject));
      if (outcome.result === 'conflict') {
        throw new ApiError(
          409,
          `${ref} exists but is not kubeplus-isolation's shared sandbox policy; not binding to it`,
        );
      }
      if (outcome.result !== 'unchanged') this.log.info(`${outcome.result} the shared sandbox policy`, { object: ref });
    });
  }

  /**
   * The shared policies again, when one of them changed or went away (the owned-objects controller,
   * `cleanupOrphan`): they belong to no instance, so no instance's reconcile is due. Only with the
   * shared layout; a no-op when they are as they must be.
   */
  async reassertSharedPolicies(): Promise<void> {
    if (this.sandboxPolicyLayout !== 'shared') return;
    await this.ensureSharedPolicies(sharedSandboxPolicies(await this.port.servedMutatingPolicyVersion()));
  }

  private sandboxTypes(mutatingVersion: MutatingPolicyApiVersion | undefined): ManagedType[] {
    return sandboxManagedTypes(mutatingVersion, this.sandboxPolicyLayout === 'shared');
  }

  /** Every type whose objects an instance may own (the NodeIsolation parameter with its engine). */
  private ownedTypes(mutatingVersion: MutatingPolicyApiVersion | undefined): ManagedType[] {
    const types = this.sandboxTypes(mutatingVersion);
    return this.nodeIsolationParams ? [...types, NODE_ISOLATION_PARAMS_TYPE] : types;
  }

  private warn(instance: Instance, reason: string, message: string): void {
    this.event(instance, 'Warning', reason, message);
  }

  /**
   * Best effort and not awaited, like client-go's recorder: the reconcile does not wait for the
   * Event's write, and an Event that cannot be recorded is logged, never fails the reconcile.
   */
  private event(instance: Instance, type: InstanceEvent['type'], reason: string, message: string): void {
    const log = type === 'Warning' ? this.log.warn : this.log.info;
    log.call(this.log, message, { reason, instance: instanceIdentity(instance) });
    const failed = (err: unknown): void => {
      this.log.warn('could not record an event', { reason, error: err instanceof Error ? err.message : String(err) });
    };
    try {
      this.port.recordEvent(eventTarget(instance), { type, reason, message }).catch(failed);
    } catch (err) {
      failed(err);
    }
  }
}
