/**
 * The instance reconciler: level-triggered and idempotent, in the manner of controller-runtime's
 * Reconcile. Each call reads the instance and the state it owns, computes the desired state with
 * the pure functions of `desired/`, and writes only what differs. It keeps no state between
 * calls: everything it needs is in the cluster (the instance's annotations, the ownership markers
 * on what it owns), so a restarted or newly elected operator carries on where the last one stopped.
 *
 * It never writes the instance (desired/instance-writes.ts): no finalizer, annotation or status,
 * so isolation never waits on KubePlus's webhook. The one exception is taking off the finalizer an
 * earlier release added. node-sync.ts and sandbox-sync.ts write the two isolations. What an
 * instance owns once it is gone or being deleted is the owned-objects controller's
 * (owned-objects/orphan-cleanup.ts), the only path that deletes it.
 *
 * Errors propagate to the caller (the work queue), which retries; 409s keep `statusCode: 409`.
 */
import {
  DEFAULT_HANDLER_LEVELS,
  DEFAULT_LEVEL_HANDLERS,
  type HandlerLevels,
  parseSandboxIsolation,
  type RuntimeLevel,
  SANDBOX_ISOLATION_ANNOTATION,
} from '@kubeplus-isolation/spec';
import { listOwned, OPTIMISTIC, pruneOwned, settleAll } from '../../cluster/apply.js';
import type { ClusterPort } from '../../cluster/port.js';
import { EventReason } from '../../desired/event-reasons.js';
import {
  DEFAULT_PLATFORM_NAMESPACE,
  decideTenantNamespace,
  type Instance,
  type InstanceKey,
  instanceIdentity,
  parseInstance,
  type TenantNamespaceDecision,
  tenantNamespace,
} from '../../desired/instance.js';
import { planInstance } from '../../desired/instance-writes.js';
import { isNamespaceCreatedFor, type NamespaceMeta, planNamespaceCleanup } from '../../desired/node-isolation.js';
import { type ManagedType, type MutatingPolicyApiVersion, NODE_ISOLATION_PARAMS_TYPE } from '../../desired/objects.js';
import { isOwnedBy } from '../../desired/owner.js';
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
import { TenantRefusals } from './tenant-refusals.js';

export type { AnnotationName, ConflictKind, ReconcileLogger, ReconcilerHooks } from './sync-context.js';

export interface ReconcileResult {
  /** Reconcile again after this long even without a change (set after conflicts with other instances). */
  requeueAfterMs?: number;
}

export interface InstanceReconcilerOptions {
  port: ClusterPort;
  /** Namespace whose instances get a namespace of their own (default `kubeplus`). */
  platformNamespace?: string;
  /** kubeplus-isolation's own namespace (the release's, `--leader-election-namespace`): never isolated. */
  releaseNamespace?: string;
  /** Which instances the tenant-namespace guard refuses (one for all reconciles, like `conditionWarnings`). */
  tenantRefusals?: TenantRefusals;
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

/** The refusal's own entry in the condition-warnings memo (sandbox-sync keeps the instance's). */
function refusalMemoKey(instance: InstanceKey | Instance): string {
  return `${instanceIdentity(instance)}#tenant-namespace`;
}

function earliest(...delays: (number | undefined)[]): ReconcileResult {
  const defined = delays.filter((d): d is number => d !== undefined);
  return defined.length === 0 ? {} : { requeueAfterMs: Math.min(...defined) };
}

export class InstanceReconciler {
  private readonly ctx: SyncContext;
  private readonly platformNamespace: string;
  private readonly releaseNamespace: string | undefined;
  private readonly tenantRefusals: TenantRefusals;
  private readonly now: () => number;
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
    this.releaseNamespace = options.releaseNamespace;
    this.tenantRefusals = options.tenantRefusals ?? new TenantRefusals();
    this.now = options.now ?? Date.now;
    this.nodeIsolationParams = options.nodeIsolationParams ?? false;
    this.conditionWarnings = options.conditionWarnings ?? new ConditionWarnings();
    this.node = new NodeSync(this.ctx, this.nodeIsolationParams);
    this.sandbox = new SandboxSync(this.ctx, {
      platformNamespace: this.platformNamespace,
      handlerLevels: options.handlerLevels ?? DEFAULT_HANDLER_LEVELS,
      levelHandlers: options.levelHandlers ?? DEFAULT_LEVEL_HANDLERS,
      layout: options.sandboxPolicyLayout ?? 'per-instance',
      conditionWarnings: this.conditionWarnings,
      now: this.now,
    });
  }

  /** Brings everything one instance owns to what its annotations ask for. */
  async reconcile(key: InstanceKey): Promise<ReconcileResult> {
    const port = this.ctx.port;
    const raw = await port.getInstance(key);
    if (raw === undefined) {
      this.tenantRefusals.clear(instanceIdentity(key));
      return {}; // gone: orphan cleanup takes what it owned down
    }
    const parsed = parseInstance(raw, key.plural);
    if (!parsed.ok) {
      this.ctx.log.warn('ignoring a malformed instance', { key, errors: parsed.errors });
      return {};
    }
    const instance = parsed.value;
    const plan = planInstance(instance, asksForIsolation(instance));
    if (plan.removeLegacyFinalizer !== undefined) {
      // The only write to an instance left (desired/instance-writes.ts).
      await port.setInstanceFinalizers(key, plan.removeLegacyFinalizer, instance.resourceVersion);
      this.ctx.log.info('removed the finalizer of an earlier release', { key });
    }
    if (plan.isolation === 'none') {
      this.conditionWarnings.forget(instanceIdentity(instance));
      this.conditionWarnings.forget(refusalMemoKey(instance));
      this.tenantRefusals.clear(instanceIdentity(instance));
      return {}; // being deleted: orphan cleanup takes what it owns down
    }
    // Never asked for isolation (or all taken down already): exactly as without the operator.
    if (plan.isolation === 'prune' && !(await this.ownsAnything(instance))) return {};
    const { ownsNamespace: _, ...result } = await this.sync(instance);
    return result;
  }

  /**
   * Both isolation paths for a live instance. Says whether the operator created the tenant
   * namespace for it (it then stays until the instance is deleted). Orphan cleanup calls it for a
   * live instance that no longer asks for isolation, to take down what it left.
   */
  async sync(instance: Instance): Promise<ReconcileResult & { ownsNamespace: boolean }> {
    const { decision, namespace } = await this.decideTenant(instance);
    const id = instanceIdentity(instance);
    if (decision.decision === 'refuse') {
      this.tenantRefusals.set(id, decision.reason);
      await this.refuse(instance, decision);
      return { ownsNamespace: false };
    }
    this.tenantRefusals.clear(id);
    this.conditionWarnings.forget(refusalMemoKey(instance));
    if (decision.decision === 'invalid') {
      if (asksForIsolation(instance)) {
        this.ctx.warn(instance, EventReason.InvalidTenantNamespace, decision.errors.join('; '));
        return { ownsNamespace: false };
      }
      // Nothing namespace-side can be owned without a valid tenant namespace.
      await this.sandbox.syncSandbox(instance, undefined, undefined);
      return { ownsNamespace: false };
    }
    const tenant = decision.tenant;
    // What an older release claimed under another rule (e.g. the instance's own namespace while
    // the platform namespace was misconfigured) is released before the tenant is isolated.
    await this.releaseClaims(instance, tenant.name);
    const sandboxText = instance.annotations[SANDBOX_ISOLATION_ANNOTATION];
    const sandbox = sandboxText === undefined ? undefined : parseSandboxIsolation(sandboxText);
    // Independent: the namespace and the cluster-scoped sandbox objects are written concurrently.
    const [node, sandboxOutcome] = await settleAll([
      this.node.syncNode(instance, tenant, sandbox?.ok === true, namespace),
      this.sandbox.syncSandbox(instance, tenant, sandbox),
    ]);
    // After the namespace: the parameter lives in it (and a namespace created above exists now).
    const paramsRequeue = await this.node.syncNodeIsolationParams(instance, tenant, node.plan);
    return {
      ...earliest(node.requeueAfterMs, sandboxOutcome.requeueAfterMs, paramsRequeue),
      ownsNamespace: node.ownsNamespace,
    };
  }

  /**
   * `decideTenantNamespace` with what it needs: the namespace named after an instance in the
   * platform namespace is read only when its name alone does not refuse it (from the cache of
   * claimed namespaces, else the API server: a miss in that cache is no proof of absence, since
   * KubePlus creates the namespace before the instance exists). `namespace`: as read, when it
   * exists (the node path uses it instead of reading it again, and never tries to create it).
   */
  private async decideTenant(
    instance: Instance,
  ): Promise<{ decision: TenantNamespaceDecision; namespace?: NamespaceMeta }> {
    const facts = {
      instance,
      platformNamespace: this.platformNamespace,
      ...(this.releaseNamespace === undefined ? {} : { releaseNamespace: this.releaseNamespace }),
    };
    const byName = decideTenantNamespace({ ...facts, namespace: undefined });
    if (byName.decision !== 'isolate' || !byName.tenant.createdByOperator) return { decision: byName };
    const namespace = await this.ctx.port.getNamespace(byName.tenant.name);
    if (namespace === undefined) return { decision: byName };
    return { decision: decideTenantNamespace({ ...facts, namespace }), namespace };
  }

  /**
   * A refused tenant namespace: announce why (a standing condition, announced when it appears or
   * changes), take down what the instance owns elsewhere (its sandbox policies would bind that
   * namespace), and release what an older release claimed. Nothing is written to the namespace
   * unless it carries this instance's own keys.
   */
  private async refuse(
    instance: Instance,
    decision: Extract<TenantNamespaceDecision, { decision: 'refuse' }>,
  ): Promise<void> {
    if (asksForIsolation(instance)) {
      const warning = { reason: EventReason.TenantNamespaceRefused, message: decision.message };
      for (const w of this.conditionWarnings.toAnnounce(refusalMemoKey(instance), [warning], this.now())) {
        this.ctx.warn(instance, w.reason, w.message);
      }
    }
    await this.releaseClaims(instance, undefined);
    await this.sandbox.syncSandbox(instance, undefined, undefined);
    if (this.nodeIsolationParams) {
      const read = asksForIsolation(instance) ? {} : FRESH;
      await pruneOwned(this.ctx.port, instance, [NODE_ISOLATION_PARAMS_TYPE], [], read);
    }
  }

  /**
   * Removes this instance's isolation and ownership keys from every namespace it could have
   * claimed under either rule (its own namespace, the one named after it) that is not `keep`:
   * only where they are this instance's (`kubeplus.io/owner`), never on a namespace created for
   * it (that one is its tenant's, deleted with it). Claimed namespaces are in the namespace cache
   * (selected by the owner-uid label the operator writes), so a miss means nothing to release.
   */
  private async releaseClaims(instance: Instance, keep: string | undefined): Promise<void> {
    const names = new Set([instance.namespace, instance.name]);
    if (keep !== undefined) names.delete(keep);
    for (const name of names) {
      const ns = await this.ctx.port.getNamespace(name, OPTIMISTIC);
      if (ns === undefined || isNamespaceCreatedFor(ns, instance)) continue;
      const plan = planNamespaceCleanup(instance, ns);
      if (plan.action !== 'patch') continue;
      await this.ctx.port.patchNamespace(name, plan.patch, ns.resourceVersion);
      this.ctx.event(
        instance,
        'Normal',
        EventReason.TenantNamespaceReleased,
        `removed this instance's isolation keys from namespace ${name}, which is not its tenant namespace`,
      );
    }
  }

  /**
   * The shared layout's policies again, when one of them changed or went away (orphan cleanup):
   * they belong to no instance. A no-op with the per-instance layout.
   */
  reassertSharedPolicies(): Promise<void> {
    return this.sandbox.reassertSharedPolicies();
  }

  /**
   * Whether anything of this instance is left, from the caches only (an instance that never asked
   * for isolation costs no API request): an owned object, or the tenant namespace naming it as
   * owner. What the caches have not seen yet comes back through its add event (orphan cleanup).
   */
  private async ownsAnything(instance: Instance): Promise<boolean> {
    const port = this.ctx.port;
    const tenant = tenantNamespace(instance, this.platformNamespace);
    const [owned, namespace] = await settleAll([
      port.servedMutatingPolicyVersion().then((v) => listOwned(port, instance, this.ownedTypes(v))),
      tenant.ok ? port.getNamespace(tenant.value.name, { missIsAbsent: true }) : undefined,
    ]);
    return owned.length > 0 || (namespace !== undefined && isOwnedBy(namespace, instance));
  }

  /** Every type whose objects an instance may own (the NodeIsolation parameter with its engine). */
  private ownedTypes(mutatingVersion: MutatingPolicyApiVersion | undefined): ManagedType[] {
    const types = this.sandbox.sandboxTypes(mutatingVersion);
    return this.nodeIsolationParams ? [...types, NODE_ISOLATION_PARAMS_TYPE] : types;
  }
}
