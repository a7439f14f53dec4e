/**
 * Orphan cleanup, the owned-objects controller's job and the only path that deletes what an
 * instance owned once it is gone: an object carrying the operator's ownership markers whose owner
 * instance is absent or being deleted is removed; one whose owner still wants it is handed to that
 * owner's reconcile, which restores or prunes it.
 *
 * Level-triggered, with no finalizer on the instance (desired/instance-writes.ts): every owned
 * object is checked when its cache sees it (so at every start, after any downtime), when its
 * owner is deleted (owned-objects/key-sources.ts), and by a periodic pass.
 *
 * Ownership is the owner's identity (group/Kind/namespace/name), not its uid: an instance deleted
 * and re-created under the same identity while no operator ran adopts what the first one left,
 * and its reconcile rewrites or prunes it to what the new instance asks (desired/owner.ts
 * `isOwnedBy`). Deleting it instead would take a namespace the new instance's release now runs in.
 */
import { preconditionsOf } from '../../cluster/apply.js';
import type { ClusterPort, ReadOptions } from '../../cluster/port.js';
import {
  type Instance,
  type InstanceIdentity,
  type InstanceKey,
  instanceKeyOf,
  parseInstance,
} from '../../desired/instance.js';
import { isOwnerGone } from '../../desired/instance-writes.js';
import { type NamespaceMeta, planNamespaceCleanup } from '../../desired/node-isolation.js';
import { formatRef, NODE_ISOLATION_PARAMS_TYPE, type ObjectRef } from '../../desired/objects.js';
import { isManaged, ownerOf } from '../../desired/owner.js';
import { isSharedPolicyName } from '../../desired/sandbox-shared-policy.js';
import type { InstanceReconciler } from '../instances/reconciler.js';
import { asksForIsolation, FRESH, NO_LOG, type ReconcileLogger } from '../instances/sync-context.js';

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

export interface OrphanCleanupOptions {
  port: ClusterPort;
  /** The instance reconciler on the same port: takes down what a live owner left, re-asserts the shared policies. */
  instances: Pick<InstanceReconciler, 'sync' | 'reassertSharedPolicies'>;
  logger?: ReconcileLogger;
}

type Live = { state: 'live'; instance: Instance } | { state: 'gone' } | { state: 'unknown' };

export class OrphanCleanup {
  private readonly port: ClusterPort;
  private readonly instances: OrphanCleanupOptions['instances'];
  private readonly log: ReconcileLogger;

  constructor(options: OrphanCleanupOptions) {
    this.port = options.port;
    this.instances = options.instances;
    this.log = options.logger ?? NO_LOG;
  }

  /**
   * For an object carrying ownership markers: when the owner still wants it, returns the owner to
   * enqueue; when the owner is gone or being deleted, removes the object — a Namespace created
   * for it is deleted, any other Namespace only loses the keys it wrote.
   */
  async cleanupOrphan(target: OwnedTarget): Promise<OrphanResult> {
    if (target.kind === 'Namespace') {
      const ns = await this.port.getNamespace(target.name);
      const owner = ns === undefined ? undefined : ownerOf(ns);
      if (ns === undefined || owner === undefined) return {};
      const live = await this.liveOwner(owner);
      if (live.state !== 'gone') return this.handleLiveOwner(live);
      await this.cleanupNamespace(owner, ns);
      return {};
    }
    const policyKind = target.kind === 'ValidatingAdmissionPolicy' || target.kind === 'MutatingAdmissionPolicy';
    if (policyKind && isSharedPolicyName(target.name)) {
      await this.instances.reassertSharedPolicies();
      return {};
    }
    const obj = await this.port.getObject(target);
    const owner = obj === undefined ? undefined : ownerOf(obj.metadata);
    if (obj === undefined || owner === undefined || !isManaged(obj.metadata)) return {};
    const live = await this.liveOwner(owner);
    if (live.state !== 'gone') return this.handleLiveOwner(live);
    if (target.kind === NODE_ISOLATION_PARAMS_TYPE.kind && target.namespace !== undefined) {
      // The parameter goes only after the namespace's isolation label: while the label is on, the
      // engine's policy and the refusal policy select the namespace, and without its parameter a
      // Pod would be admitted unpatched, or refused. A namespace created for the owner takes it along.
      const ns = await this.port.getNamespace(target.namespace);
      if (ns !== undefined && (await this.cleanupNamespace(owner, ns)) === 'delete') return {};
    }
    this.log.info('deleting an object of a deleted instance', { object: formatRef(target), owner });
    await this.port.deleteObject(target, preconditionsOf(obj));
    return {};
  }

  /** Takes the keys of a gone owner off `ns`, or deletes it if it was created for that owner. */
  private async cleanupNamespace(
    owner: InstanceIdentity,
    ns: NamespaceMeta,
  ): Promise<ReturnType<typeof planNamespaceCleanup>['action']> {
    const plan = planNamespaceCleanup(owner, ns);
    if (plan.action === 'delete') {
      this.log.info('deleting the namespace of a deleted instance', { namespace: ns.name, owner });
      await this.port.deleteNamespace(ns.name, plan.uid === undefined ? {} : { uid: plan.uid });
    } else if (plan.action === 'patch') {
      this.log.info('removing node isolation of a deleted instance', { namespace: ns.name, owner });
      await this.port.patchNamespace(ns.name, plan.patch, ns.resourceVersion);
    }
    return plan.action;
  }

  private async handleLiveOwner(live: Exclude<Live, { state: 'gone' }>): Promise<OrphanResult> {
    if (live.state === 'unknown') return {};
    const instance = live.instance;
    if (asksForIsolation(instance)) return { enqueue: instanceKeyOf(instance) };
    // Alive, but asks for no isolation: what it owns is left over. Take it down (never the instance).
    await this.instances.sync(instance);
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
    // Being deleted: nothing will come back for its objects (no finalizer of this operator holds it).
    if (isOwnerGone(instance)) return { state: 'gone' };
    return { state: 'live', instance };
  }
}
