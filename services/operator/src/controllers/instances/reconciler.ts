/**
 * The instance reconciler: level-triggered and idempotent, in the manner of controller-runtime's
 * Reconcile. Each call reads the instance and the state it owns, computes the desired state with
 * the pure functions of `desired/`, and writes only what differs. It keeps no state between
 * calls: everything it needs is in the cluster (labels, annotations, the finalizer), so a
 * restarted or newly elected operator carries on where the last one stopped.
 *
 * This file is the finalizer lifecycle (add it first, finalize on deletion, remove it once nothing
 * is owned); node-sync.ts and sandbox-sync.ts write the two isolations. Objects whose owner is
 * gone are the owned-objects controller's (owned-objects/orphan-cleanup.ts).
 *
 * Errors propagate to the caller (the work queue), which retries; 409s keep `statusCode: 409`.
 */
import {
  DEFAULT_HANDLER_LEVELS,
  DEFAULT_LEVEL_HANDLERS,
  FINALIZER,
  type HandlerLevels,
  parseSandboxIsolation,
  type RuntimeLevel,
  SANDBOX_ISOLATION_ANNOTATION,
} from '@kubeplus-isolation/spec';
import { deleteObjects, listOwned, settleAll } from '../../cluster/apply.js';
import type { ClusterPort } from '../../cluster/port.js';
import { EventReason } from '../../desired/event-reasons.js';
import {
  DEFAULT_PLATFORM_NAMESPACE,
  type Instance,
  type InstanceKey,
  instanceIdentity,
  instanceKeyOf,
  parseInstance,
  tenantNamespace,
} from '../../desired/instance.js';
import { planNamespaceCleanup } from '../../desired/node-isolation.js';
import { type ManagedType, type MutatingPolicyApiVersion, NODE_ISOLATION_PARAMS_TYPE } from '../../desired/objects.js';
import type { SandboxPolicyLayout } from '../../desired/sandbox-policy.js';
import { ConditionWarnings } from './condition-warnings.js';
import { NodeSync } from './node-sync.js';
import { SandboxSync } from './sandbox-sync.js';
import {
  asksForIsolation,
  FRESH,
  NO_LOG,
  type ReconcileLogger,
  type ReconcilerHooks,
  SyncContext,
} from './sync-context.js';

export type { AnnotationName, ConflictKind, ReconcileLogger, ReconcilerHooks } from './sync-context.js';

export interface ReconcileResult {
  /** Reconcile again after this long even without a change (set after conflicts with other instances). */
  requeueAfterMs?: number;
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

export const DEFAULT_CONFLICT_REQUEUE_MS = 60_000;

function earliest(...delays: (number | undefined)[]): ReconcileResult {
  const defined = delays.filter((d): d is number => d !== undefined);
  return defined.length === 0 ? {} : { requeueAfterMs: Math.min(...defined) };
}

export class InstanceReconciler {
  private readonly ctx: SyncContext;
  private readonly platformNamespace: string;
  private readonly nodeIsolationParams: boolean;
  private readonly conditionWarnings: ConditionWarnings;
  private readonly node: NodeSync;
  private readonly sandbox: SandboxSync;

  constructor(options: InstanceReconcilerOptions) {
    this.ctx = new SyncContext(
      options.port,
      options.hooks ?? {},
      options.logger ?? NO_LOG,
      options.conflictRequeueMs ?? DEFAULT_CONFLICT_REQUEUE_MS,
    );
    this.platformNamespace = options.platformNamespace ?? DEFAULT_PLATFORM_NAMESPACE;
    this.nodeIsolationParams = options.nodeIsolationParams ?? false;
    this.conditionWarnings = options.conditionWarnings ?? new ConditionWarnings();
    this.node = new NodeSync(this.ctx, this.nodeIsolationParams);
    this.sandbox = new SandboxSync(this.ctx, {
      platformNamespace: this.platformNamespace,
      handlerLevels: options.handlerLevels ?? DEFAULT_HANDLER_LEVELS,
      levelHandlers: options.levelHandlers ?? DEFAULT_LEVEL_HANDLERS,
      layout: options.sandboxPolicyLayout ?? 'per-instance',
      conditionWarnings: this.conditionWarnings,
      now: options.now ?? Date.now,
    });
  }

  /** Brings everything one instance owns to what its annotations ask for. */
  async reconcile(key: InstanceKey): Promise<ReconcileResult> {
    const port = this.ctx.port;
    const raw = await port.getInstance(key);
    if (raw === undefined) return {}; // gone: its finalizer already ran (or orphan cleanup takes over)
    const parsed = parseInstance(raw, key.plural);
    if (!parsed.ok) {
      this.ctx.log.warn('ignoring a malformed instance', { key, errors: parsed.errors });
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
      await port.setInstanceFinalizers(key, [...instance.finalizers, FINALIZER], instance.resourceVersion);
    }
    const { ownsNamespace, ...result } = await this.sync(instance);
    // No isolation asked for any more: the finalizer goes once nothing is owned (a namespace
    // created for the instance stays owned until the instance is deleted).
    if (!wanted && !ownsNamespace) await this.removeFinalizer(instance);
    return result;
  }

  /**
   * Both isolation paths for a live instance, leaving its finalizer alone: the caller decides
   * about it. Says whether the operator created the tenant namespace for it (its lifecycle then
   * follows the instance, so the finalizer must stay). Orphan cleanup calls it for an instance
   * that neither asks for isolation nor carries the finalizer, to take down what it left.
   */
  async sync(instance: Instance): Promise<ReconcileResult & { ownsNamespace: boolean }> {
    const tenant = tenantNamespace(instance, this.platformNamespace);
    if (!tenant.ok) {
      if (asksForIsolation(instance)) {
        this.ctx.warn(instance, EventReason.InvalidTenantNamespace, tenant.errors.join('; '));
        return { ownsNamespace: false };
      }
      // Nothing namespace-side can be owned without a valid tenant namespace.
      await this.sandbox.syncSandbox(instance, undefined, undefined);
      return { ownsNamespace: false };
    }
    const sandboxText = instance.annotations[SANDBOX_ISOLATION_ANNOTATION];
    const sandbox = sandboxText === undefined ? undefined : parseSandboxIsolation(sandboxText);
    // Independent: the namespace and the cluster-scoped sandbox objects are written concurrently.
    const [node, sandboxOutcome] = await settleAll([
      this.node.syncNode(instance, tenant.value, sandbox?.ok === true),
      this.sandbox.syncSandbox(instance, tenant.value, sandbox),
    ]);
    // After the namespace: the parameter lives in it (and a namespace created above exists now).
    const paramsRequeue = await this.node.syncNodeIsolationParams(instance, tenant.value, node.plan);
    return {
      ...earliest(node.requeueAfterMs, sandboxOutcome.requeueAfterMs, paramsRequeue),
      ownsNamespace: node.ownsNamespace,
    };
  }

  /**
   * The shared layout's policies again, when one of them changed or went away (orphan cleanup):
   * they belong to no instance. A no-op with the per-instance layout.
   */
  reassertSharedPolicies(): Promise<void> {
    return this.sandbox.reassertSharedPolicies();
  }

  /**
   * Deletion (§4): remove everything the instance owns, then let it go. Reads here are fresh:
   * an object a cache has not seen yet would outlive its owner once the finalizer is gone.
   */
  private async finalize(instance: Instance): Promise<void> {
    const port = this.ctx.port;
    const mutatingVersion = await port.servedMutatingPolicyVersion();
    const tenant = tenantNamespace(instance, this.platformNamespace);
    const [owned, namespace] = await settleAll([
      listOwned(port, instance, this.ownedTypes(mutatingVersion), FRESH),
      tenant.ok ? port.getNamespace(tenant.value.name, FRESH) : undefined,
    ]);
    // The NodeIsolation parameter goes only after the namespace's label: while the label is on,
    // the engine's policy and the refusal policy (parameterNotFoundAction Deny) select the
    // namespace, and without its parameter a Pod would be admitted unpatched, or refused.
    const isParam = (o: (typeof owned)[number]): boolean => o.kind === NODE_ISOLATION_PARAMS_TYPE.kind;
    await deleteObjects(
      port,
      owned.filter((o) => !isParam(o)),
    );
    if (tenant.ok) {
      const plan = planNamespaceCleanup(instance, namespace);
      if (plan.action === 'delete') {
        await port.deleteNamespace(tenant.value.name, plan.uid === undefined ? {} : { uid: plan.uid });
        this.ctx.event(instance, 'Normal', EventReason.NamespaceDeleted, `deleted namespace ${tenant.value.name}`);
      } else if (plan.action === 'patch') {
        await port.patchNamespace(tenant.value.name, plan.patch, namespace?.resourceVersion);
      }
    }
    await deleteObjects(
      port,
      owned.filter((o) => isParam(o)),
    );
    await this.removeFinalizer(instance);
  }

  private async removeFinalizer(instance: Instance): Promise<void> {
    if (!instance.finalizers.includes(FINALIZER)) return;
    await this.ctx.port.setInstanceFinalizers(
      instanceKeyOf(instance),
      instance.finalizers.filter((f) => f !== FINALIZER),
      instance.resourceVersion,
    );
  }

  /** Every type whose objects an instance may own (the NodeIsolation parameter with its engine). */
  private ownedTypes(mutatingVersion: MutatingPolicyApiVersion | undefined): ManagedType[] {
    const types = this.sandbox.sandboxTypes(mutatingVersion);
    return this.nodeIsolationParams ? [...types, NODE_ISOLATION_PARAMS_TYPE] : types;
  }
}
