/**
 * Node isolation of one live instance's tenant namespace: the label and resolved annotation the
 * webhook reads (`desired/node-isolation.ts` plans them), a namespace created for an instance in
 * the platform namespace, and, with the admission-policy engine, the NodeIsolation parameter
 * beside them.
 */
import { NODE_ISOLATION_ANNOTATION } from '@kubeplus-isolation/spec';
import { applyObjects, OPTIMISTIC, pruneOwned } from '../../cluster/apply.js';
import { isAlreadyExists, type ReadOptions } from '../../cluster/port.js';
import { EventReason } from '../../desired/event-reasons.js';
import { type Instance, instanceIdentity, instanceKeyOf, type TenantNamespace } from '../../desired/instance.js';
import {
  desiredNodeIsolationParams,
  isNamespaceCreatedFor,
  type NamespaceMeta,
  type NodeIsolationPlan,
  planNodeIsolation,
} from '../../desired/node-isolation.js';
import { formatRef, NODE_ISOLATION_PARAMS_TYPE } from '../../desired/objects.js';
import { asksForIsolation, FRESH, type SyncContext } from './sync-context.js';

export interface NodeOutcome {
  requeueAfterMs?: number;
  /** The operator created the tenant namespace for this instance: its lifecycle follows the instance's. */
  ownsNamespace: boolean;
  /** What was decided for the namespace (the NodeIsolation parameter follows it). */
  plan: NodeIsolationPlan;
}

export class NodeSync {
  constructor(
    private readonly ctx: SyncContext,
    /** Write the admission-policy engine's NodeIsolation parameter (`--node-isolation-engine`). */
    private readonly nodeIsolationParams: boolean,
  ) {}

  /**
   * A namespace the operator would create is read optimistically (a cache miss is "absent"); if
   * it exists after all (unlabelled, or the cache was behind), the create's AlreadyExists leads
   * to one fresh read and a second decision.
   */
  async syncNode(
    instance: Instance,
    tenant: TenantNamespace,
    sandboxValid: boolean,
    /** The tenant namespace as the caller read it just now (`decideTenantNamespace` did): not read again, never created. */
    known?: NamespaceMeta,
  ): Promise<NodeOutcome> {
    if (known !== undefined) return this.syncNodeFrom(instance, tenant, sandboxValid, {}, known);
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
    known?: NamespaceMeta,
  ): Promise<NodeOutcome> {
    const { port, hooks } = this.ctx;
    const namespace = known ?? (await port.getNamespace(tenant.name, read));
    const ownsNamespace = namespace !== undefined && isNamespaceCreatedFor(namespace, instance);
    const plan = planNodeIsolation({ instance, tenant, namespace, namespaceWanted: sandboxValid });
    switch (plan.action) {
      case 'invalid':
        hooks.invalidAnnotation?.('node-isolation', instanceKeyOf(instance));
        this.ctx.warn(
          instance,
          EventReason.InvalidNodeIsolation,
          `${NODE_ISOLATION_ANNOTATION} is invalid, keeping the node isolation last applied: ${plan.errors.join('; ')}`,
        );
        return { ownsNamespace, plan };
      case 'create':
        await port.createNamespace(plan.namespace);
        this.ctx.event(
          instance,
          'Normal',
          EventReason.NamespaceCreated,
          instance.annotations[NODE_ISOLATION_ANNOTATION] === undefined
            ? `created namespace ${tenant.name}`
            : `created namespace ${tenant.name} with node isolation`,
        );
        return { ownsNamespace: true, plan };
      case 'conflict':
        hooks.conflict?.('Namespace', instanceKeyOf(instance));
        this.ctx.warn(
          instance,
          EventReason.NodeIsolationConflict,
          `namespace ${tenant.name} is node-isolated by ${plan.owner}; not taking it over (remove ${NODE_ISOLATION_ANNOTATION} from one of the two)`,
        );
        return { ownsNamespace, plan, requeueAfterMs: this.ctx.conflictRequeueMs };
      case 'patch':
        // The admission-policy engine's parameter goes in first: once the label is on, the
        // policy's binding selects the namespace, and a Pod admitted before its parameter exists
        // would go unpatched. (sync() writes it again afterwards: no change, no write.)
        if (this.nodeIsolationParams && plan.change === 'apply') {
          await this.syncNodeIsolationParams(instance, tenant, plan);
        }
        await port.patchNamespace(tenant.name, plan.patch, namespace?.resourceVersion);
        if (plan.change === 'apply') {
          this.ctx.event(
            instance,
            'Normal',
            EventReason.NodeIsolationApplied,
            `namespace ${tenant.name} is node-isolated`,
          );
        } else if (plan.change === 'remove') {
          this.ctx.event(
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
   * instance isolates the namespace. Only with the engine; returns the conflict requeue, if any.
   */
  async syncNodeIsolationParams(
    instance: Instance,
    tenant: TenantNamespace,
    plan: NodeIsolationPlan,
  ): Promise<number | undefined> {
    if (!this.nodeIsolationParams) return undefined;
    const desired = desiredNodeIsolationParams(instance, tenant, plan);
    if (desired === 'keep') return undefined;
    const applied = await applyObjects(this.ctx.port, desired, instance);
    const { changed, conflicted } = this.ctx.reportApplied(
      instance,
      applied,
      'Namespace',
      EventReason.NodeIsolationConflict,
    );
    const read = asksForIsolation(instance) ? {} : FRESH;
    const removed = await pruneOwned(this.ctx.port, instance, [NODE_ISOLATION_PARAMS_TYPE], desired, read);
    changed.push(...removed.map((r) => `deleted ${formatRef(r)}`));
    if (changed.length > 0)
      this.ctx.log.info('node-isolation parameter written', { instance: instanceIdentity(instance), changed });
    return conflicted ? this.ctx.conflictRequeueMs : undefined;
  }
}
