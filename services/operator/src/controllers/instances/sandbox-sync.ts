/**
 * Sandbox isolation of one live instance: its generated RuntimeClass and the admission policies
 * and bindings that hold its tenant's Agent Sandbox objects to a minimum runtime. The pure plan
 * (`desired/sandbox-plan.ts`) decides; this writes it, the RuntimeClass first, then prunes what
 * no longer belongs. With the shared layout, also the cluster's shared policies.
 */
import {
  type HandlerLevels,
  type ParseResult,
  type RuntimeLevel,
  runtimeClassName,
  SANDBOX_ISOLATION_PARAMS_KIND,
  type SandboxIsolationSpec,
} from '@kubeplus-isolation/spec';
import {
  type ApplyOutcome,
  applyObject,
  applyObjects,
  applySharedObject,
  OPTIMISTIC,
  pruneOwned,
  settleAll,
} from '../../cluster/apply.js';
import { ApiError } from '../../cluster/port.js';
import { updateKind } from '../../desired/diff.js';
import { EventReason } from '../../desired/event-reasons.js';
import { type Instance, instanceIdentity, instanceKeyOf, type TenantNamespace } from '../../desired/instance.js';
import {
  formatRef,
  type ManagedObject,
  type ManagedType,
  type MutatingPolicyApiVersion,
  type ObjectRef,
  RUNTIME_CLASS_API_VERSION,
  refOf,
  sandboxManagedTypes,
} from '../../desired/objects.js';
import { isOwnedBy } from '../../desired/owner.js';
import { planSandboxIsolation, sandboxAppliedMessage } from '../../desired/sandbox-plan.js';
import type { SandboxPolicyLayout } from '../../desired/sandbox-policy.js';
import { sharedSandboxPolicies } from '../../desired/sandbox-shared-policy.js';
import {
  type StaleWarmSandbox,
  staleWarmSandboxes,
  staleWarmSandboxesMessage,
} from '../../desired/stale-warm-sandboxes.js';
import type { ConditionWarnings } from './condition-warnings.js';
import type { SyncContext } from './sync-context.js';

export interface SandboxSyncOptions {
  platformNamespace: string;
  handlerLevels: HandlerLevels;
  levelHandlers: Readonly<Record<RuntimeLevel, string>>;
  layout: SandboxPolicyLayout;
  /** What was announced of standing conditions (condition-warnings.ts). */
  conditionWarnings: ConditionWarnings;
  now: () => number;
}

/** The objects carrying the class times the policies judge hand-outs by: the parameter (shared), the policy (per instance). */
function carriesClassTimes(obj: ManagedObject): boolean {
  return obj.kind === SANDBOX_ISOLATION_PARAMS_KIND || obj.kind === 'ValidatingAdmissionPolicy';
}

export class SandboxSync {
  /** Per instance: the tenant and class times its warm pools were last swept for (`deleteStaleWarmSandboxes`). */
  private readonly sweptFor = new Map<string, string>();

  constructor(
    private readonly ctx: SyncContext,
    private readonly options: SandboxSyncOptions,
  ) {}

  /**
   * `parsed` undefined: the annotation is absent, so every sandbox object the instance owns
   * goes. Otherwise the pure plan (`desired/sandbox-plan.ts`) decides — an invalid annotation
   * changes nothing and is reported — and this only writes it.
   */
  async syncSandbox(
    instance: Instance,
    tenant: TenantNamespace | undefined,
    parsed: ParseResult<SandboxIsolationSpec> | undefined,
  ): Promise<{ requeueAfterMs?: number }> {
    const { port, hooks, conflictRequeueMs } = this.ctx;
    const key = instanceKeyOf(instance);
    if (parsed === undefined || tenant === undefined) {
      this.options.conditionWarnings.forget(instanceIdentity(instance));
      this.sweptFor.delete(instanceIdentity(instance));
      const types = this.sandboxTypes(await port.servedMutatingPolicyVersion());
      // From the caches: an object they have not seen yet is pruned through its add event (orphan cleanup).
      const removed = await pruneOwned(port, instance, types, []);
      if (removed.length > 0) {
        this.ctx.event(
          instance,
          'Normal',
          EventReason.SandboxIsolationRemoved,
          `deleted ${removed.map(formatRef).join(', ')}`,
        );
      }
      return {};
    }

    const mutatingVersion = await port.servedMutatingPolicyVersion();
    const rcRef: ObjectRef = {
      apiVersion: RUNTIME_CLASS_API_VERSION,
      kind: 'RuntimeClass',
      name: runtimeClassName(instance.name),
    };
    // Every RuntimeClass is cached: a miss means "absent" (a stale one ends in AlreadyExists, below).
    const [runtimeClasses, currentRc, sandboxInstances] = await settleAll([
      port.listRuntimeClasses(tenant.name),
      port.getObject(rcRef, OPTIMISTIC),
      port.listSandboxInstances(tenant.name),
    ]);
    const plan = planSandboxIsolation({
      instance,
      tenantNamespace: tenant.name,
      parsed,
      runtimeClasses,
      currentRuntimeClass: currentRc,
      sandboxInstances,
      platformNamespace: this.options.platformNamespace,
      handlerLevels: this.options.handlerLevels,
      levelHandlers: this.options.levelHandlers,
      mutatingPolicyApiVersion: mutatingVersion,
      layout: this.options.layout,
    });
    if (plan.action === 'invalid') {
      hooks.invalidAnnotation?.('sandbox-isolation', key);
      for (const w of plan.warnings) this.ctx.warn(instance, w.reason, w.message);
      return {};
    }
    if (plan.runtimeClassConflict) hooks.conflict?.('RuntimeClass', key);
    if (plan.mutatingPolicyUnavailable) hooks.mutatingPolicyUnavailable?.(key);
    if (plan.platformRuntimeClassUnusable !== undefined)
      hooks.platformRuntimeClassUnusable?.(plan.platformRuntimeClassUnusable, key);
    // Standing conditions: announced when they appear, not at every resync (condition-warnings.ts).
    const announce = this.options.conditionWarnings.toAnnounce(
      instanceIdentity(instance),
      plan.warnings,
      this.options.now(),
    );
    for (const w of announce) this.ctx.warn(instance, w.reason, w.message);
    let requeueAfterMs = plan.runtimeClassConflict ? conflictRequeueMs : undefined;

    const changed: string[] = [];
    // The RuntimeClass first and on its own: the allowed list assumed it is ours (or absent).
    const applied: Array<{ desired: ManagedObject; outcome: ApplyOutcome }> = [];
    if (
      plan.runtimeClass !== undefined &&
      currentRc !== undefined &&
      isOwnedBy(currentRc.metadata, instance) &&
      updateKind(plan.runtimeClass, currentRc) === 'recreate'
    ) {
      // Its handler changes: delete and create. Before that, the objects that tell the policies
      // when each class got its handler learn that the own class's time is not known any more
      // (`class-since.ts`): from the delete on, nothing started under the old handler is handed
      // out on the old class's time. The time of the new class follows with its informer event.
      applied.push(...(await applyObjects(port, plan.rest.filter(carriesClassTimes), instance)));
    }
    if (plan.runtimeClass !== undefined) {
      const outcome = await applyObject(port, plan.runtimeClass, instance, { current: currentRc });
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
    applied.push(...(await applyObjects(port, plan.rest, instance)));
    const outcome = this.ctx.reportApplied(instance, applied, 'AdmissionPolicy', EventReason.AdmissionPolicyConflict);
    changed.push(...outcome.changed);
    if (outcome.conflicted) requeueAfterMs = conflictRequeueMs;
    // Pruning comes only after every desired object was written: what it deletes — an object of
    // another mode, or one under a name of an earlier version (`policyName` before it carried the
    // instance's namespace) — governs the namespace until its replacement exists. While one of
    // them is held by someone else, nothing is pruned: the last applied policy stays in force.
    if (!outcome.conflicted) {
      const types = this.sandboxTypes(mutatingVersion);
      const removed = await pruneOwned(port, instance, types, plan.policy.objects);
      changed.push(...removed.map((r) => `deleted ${formatRef(r)}`));
    }
    if (changed.length > 0) {
      this.ctx.event(
        instance,
        'Normal',
        EventReason.SandboxIsolationApplied,
        sandboxAppliedMessage(plan.spec, plan.policy.objects.length, changed),
      );
    }
    await this.deleteStaleWarmSandboxes(instance, tenant.name, plan.spec, plan.policy.allowedRuntimeClassesSince);
    return requeueAfterMs === undefined ? {} : { requeueAfterMs };
  }

  /**
   * Deletes the tenant namespace's warm-pool Sandboxes created before their class got its current
   * handler (desired/stale-warm-sandboxes.ts): the policies never hand them out, and a claim would
   * retry one forever. Enforce mode only (advisory hand-outs are only warned about, and the
   * Report names them). One LIST per change of the class times this instance's policy carries
   * (remembered per instance), not per reconcile: a Sandbox created after a time is never stale
   * for it. A failure leaves nothing remembered, so the reconcile's retry lists again.
   */
  private async deleteStaleWarmSandboxes(
    instance: Instance,
    tenant: string,
    spec: SandboxIsolationSpec,
    since: Readonly<Record<string, string>>,
  ): Promise<void> {
    const id = instanceIdentity(instance);
    if (!spec.enforce || spec.minRuntimeClass === 'runc' || Object.values(since).every((t) => t === '')) {
      this.sweptFor.delete(id);
      return;
    }
    const facts = `${tenant}\n${JSON.stringify(since)}`;
    if (this.sweptFor.get(id) === facts) return;
    const { port } = this.ctx;
    const stale = staleWarmSandboxes((await port.listWarmPoolSandboxes(tenant)) ?? [], since);
    const deleted: StaleWarmSandbox[] = [];
    for (const sandbox of stale) {
      // Only that object (uid): one of the same name made since is the pool's fresh one.
      await port.deleteSandbox(tenant, sandbox.name, { uid: sandbox.uid });
      deleted.push(sandbox);
    }
    if (deleted.length > 0) {
      this.ctx.hooks.staleWarmSandboxesDeleted?.(deleted.length);
      this.ctx.event(
        instance,
        'Normal',
        EventReason.StaleWarmSandboxDeleted,
        staleWarmSandboxesMessage(tenant, deleted),
      );
    }
    this.sweptFor.set(id, facts);
  }

  /**
   * The shared policies again, when one of them changed or went away (the owned-objects
   * controller's orphan cleanup): they belong to no instance, so no instance's reconcile is due.
   * Only with the shared layout; a no-op when they are as they must be.
   */
  async reassertSharedPolicies(): Promise<void> {
    if (this.options.layout !== 'shared') return;
    await this.ensureSharedPolicies(sharedSandboxPolicies(await this.ctx.port.servedMutatingPolicyVersion()));
  }

  /** The types of the sandbox objects an instance may own under this layout. */
  sandboxTypes(mutatingVersion: MutatingPolicyApiVersion | undefined): ManagedType[] {
    return sandboxManagedTypes(mutatingVersion, this.options.layout === 'shared');
  }

  /**
   * Writes the shared layout's policies where they differ from what they must be. One held by
   * someone else (same name, not the operator's shared policy) stops the reconcile: binding an
   * instance to a policy the operator does not control would hand its tenant to that policy.
   */
  private async ensureSharedPolicies(shared: readonly ManagedObject[]): Promise<void> {
    const outcomes = await settleAll(shared.map((obj) => applySharedObject(this.ctx.port, obj)));
    outcomes.forEach((outcome, i) => {
      const ref = formatRef(refOf(shared[i] as ManagedObject));
      if (outcome.result === 'conflict') {
        throw new ApiError(
          409,
          `${ref} exists but is not kubeplus-isolation's shared sandbox policy; not binding to it`,
        );
      }
      if (outcome.result !== 'unchanged')
        this.ctx.log.info(`${outcome.result} the shared sandbox policy`, { object: ref });
    });
  }
}
