/**
 * The `instances` controller sets itself up: the instance caches (instance-kinds/caches.ts) and
 * the caches of what it owns, the two indexes its reads and key sources use, the cache-backed
 * ClusterPort, the InstanceReconciler factory and the key sources. What it sets up that other
 * controllers use (the port, the indexes, the channel of owners to reconcile) it returns.
 */
import type { HandlerLevels, RuntimeLevel } from '@kubeplus-isolation/spec';
import { OWNER_NAME_LABEL, OWNER_NAMESPACE_LABEL } from '@kubeplus-isolation/spec';
import { CachedClusterPort, type ObjectCacheView, sameType } from '../../cluster/cached-cluster-port.js';
import type { ClusterPort, EventTarget } from '../../cluster/port.js';
import type { InstanceIdentity } from '../../desired/instance.js';
import { countSandboxModes, mixedPolicyNamespaces, type SandboxInstanceMeta } from '../../desired/sandbox-peers.js';
import type { SandboxPolicyLayout } from '../../desired/sandbox-policy.js';
import { type InstanceKindCaches, watchInstanceKinds } from '../../instance-kinds/caches.js';
import { countInstanceKinds } from '../../instance-kinds/kind-health.js';
import type { InstanceKindSelection } from '../../instance-kinds/registry.js';
import type { PolicyResource } from '../../kube/discovery.js';
import { KeyChannel } from '../../runtime/key-sources.js';
import { indexByLabels } from '../../runtime/label-index.js';
import type { ControllerOptions } from '../../runtime/manager.js';
import { type OwnedInformer, ownedObjectInformers, runtimeClassInformer } from '../owned-objects/caches.js';
import type { ReconcilerFactory } from '../reconcile-call.js';
import { type ClusterPortOptions, recordEvent, type SetupContext } from '../setup.js';
import { ConditionWarnings } from './condition-warnings.js';
import { INSTANCES_CONTROLLER, instancesReconciler } from './controller.js';
import { cachedOwner, instanceSource, ownerOfDeletedSource, runtimeClassFanOut } from './key-sources.js';
import { createWiringMetrics } from './reconcile-metrics.js';
import { InstanceReconciler } from './reconciler.js';
import { bindRuntimeClassIndex, RuntimeClassIndex } from './runtime-class-index.js';
import { bindSandboxInstanceIndex, SandboxInstanceIndex } from './sandbox-instance-index.js';
import { Settler } from './settle.js';
import { TenantRefusals } from './tenant-refusals.js';

export { INSTANCES_CONTROLLER };

export interface InstancesOptions {
  platformNamespace: string;
  /** kubeplus-isolation's own namespace (`--leader-election-namespace`): never isolated. */
  releaseNamespace?: string;
  instanceKinds: InstanceKindSelection;
  handlerLevels: HandlerLevels;
  levelHandlers: Readonly<Record<RuntimeLevel, string>>;
  /** Write the admission-policy engine's NodeIsolation parameter (`--node-isolation-engine`). */
  nodeIsolationParams: boolean;
  sandboxPolicyLayout: SandboxPolicyLayout;
  /** The owned kinds besides Namespaces and RuntimeClasses: served policy kinds, written parameter kinds. */
  ownedResources: readonly PolicyResource[];
  concurrency: number;
  /** The ClusterPort on the API server, given the caches' answers (kube/cluster-port.ts, or a fake). */
  clusterPort(options: ClusterPortOptions): ClusterPort;
}

export interface Instances {
  controller: ControllerOptions;
  caches: InstanceKindCaches;
  /** Reads from the caches (a miss, or a fresh read, goes to the API server); writes go through. */
  port: ClusterPort;
  reconcilerFor: ReconcilerFactory<InstanceReconciler>;
  /** Keys of instances to reconcile, from other controllers (owned-objects: a live owner). */
  owners: KeyChannel;
  /** Every RuntimeClass as the decisions read it, by the tenant whose instance generated it. */
  runtimeClassIndex: RuntimeClassIndex;
  /** Every cached instance asking for sandbox isolation, by tenant namespace. */
  sandboxIndex: SandboxInstanceIndex;
  /** The Event target of the instance an owner annotation names, if cached (else Events would go nowhere). */
  resolveOwner(owner: InstanceIdentity): EventTarget | undefined;
}

export function setupInstances(ctx: SetupContext, options: InstancesOptions): Instances {
  const { platformNamespace } = options;
  const caches = watchInstanceKinds(ctx, options.instanceKinds, platformNamespace);
  const owned = ownedObjectInformers(ctx, options.ownedResources);
  const runtimeClasses = runtimeClassInformer(ctx);
  // A reconcile reads the platform's classes and its own tenant's, never the whole cache.
  const runtimeClassIndex = new RuntimeClassIndex(platformNamespace);
  ctx.caches.bind(() => bindRuntimeClassIndex(runtimeClassIndex, runtimeClasses));
  // Several instances may bind policies to one namespace: a reconcile reads its peers in
  // O(peers), never by walking every cached instance.
  const sandboxIndex = new SandboxInstanceIndex(platformNamespace);
  ctx.caches.bind(() => bindSandboxInstanceIndex(sandboxIndex, caches.instances, (g) => caches.kinds.kindOf(g)));
  const sandboxInstances = (): SandboxInstanceMeta[] => [...sandboxIndex.all()].map((i) => i.meta);

  const wiringMetrics = createWiringMetrics(ctx.metrics);
  wiringMetrics.trackInstanceKinds(() => countInstanceKinds(caches.kindInformers()));
  wiringMetrics.trackMixedPolicyNamespaces(() => mixedPolicyNamespaces(sandboxInstances(), platformNamespace));
  wiringMetrics.trackSandboxModes(() => countSandboxModes(sandboxInstances()));
  const tenantRefusals = new TenantRefusals();
  wiringMetrics.trackTenantRefusals(() => tenantRefusals.counts());

  const port = cachedPort(ctx, options, { caches, owned, runtimeClassIndex, sandboxIndex });
  const reconcileLogger = ctx.logger.child({ component: 'reconciler' });
  // One memo for every reconcile (a reconciler is made per call): standing conditions are
  // announced when they appear, not at every resync.
  const conditionWarnings = new ConditionWarnings();
  const reconcilerFor = (p: ClusterPort): InstanceReconciler =>
    new InstanceReconciler({
      conditionWarnings,
      port: p,
      platformNamespace,
      ...(options.releaseNamespace === undefined ? {} : { releaseNamespace: options.releaseNamespace }),
      tenantRefusals,
      handlerLevels: options.handlerLevels,
      levelHandlers: options.levelHandlers,
      nodeIsolationParams: options.nodeIsolationParams,
      sandboxPolicyLayout: options.sandboxPolicyLayout,
      hooks: wiringMetrics.hooks,
      logger: reconcileLogger,
    });
  // Issue 35: after each successful reconcile, the tenant namespace is settled (the hold ends).
  const settler = new Settler({
    platformNamespace,
    ...(options.releaseNamespace === undefined ? {} : { releaseNamespace: options.releaseNamespace }),
    logger: reconcileLogger,
    onSettled: () => wiringMetrics.namespaceSettled(),
  });
  const owners = new KeyChannel();
  return {
    controller: {
      reconciler: instancesReconciler({
        port,
        reconcilerFor,
        logger: ctx.logger,
        clock: ctx.clock,
        settle: (p, key) => settler.settle(p, key),
      }),
      sources: [
        instanceSource(caches),
        runtimeClassFanOut(runtimeClasses, sandboxIndex, caches),
        ...owned.map((o) => ownerOfDeletedSource(o.informer, o.type, caches.kinds)),
        owners,
      ],
      concurrency: options.concurrency,
    },
    caches,
    port,
    reconcilerFor,
    owners,
    runtimeClassIndex,
    sandboxIndex,
    resolveOwner: (owner) => cachedOwner(caches, owner),
  };
}

/**
 * The ClusterPort whose reads come from the caches: an up-to-date instance is reconciled without
 * a single API request. The owned objects' caches are indexed by their owner's name and namespace
 * labels: the list every reconcile makes of its instance's objects (to prune) reads only those.
 */
function cachedPort(
  ctx: SetupContext,
  options: InstancesOptions,
  parts: {
    caches: InstanceKindCaches;
    owned: readonly OwnedInformer[];
    runtimeClassIndex: RuntimeClassIndex;
    sandboxIndex: SandboxInstanceIndex;
  },
): ClusterPort {
  const { caches, owned, runtimeClassIndex, sandboxIndex } = parts;
  const ownedViews = owned
    .filter((o) => o.type.kind !== 'Namespace')
    .map(({ type, informer }) => {
      const { index } = indexByLabels(informer, [OWNER_NAME_LABEL, OWNER_NAMESPACE_LABEL]);
      const view: ObjectCacheView = {
        get: (name, namespace) => informer.get(name, namespace),
        list: () => informer.list(),
        hasSynced: () => informer.hasSynced(),
        candidates: (terms) => index.candidates(terms),
      };
      return { type, view };
    });
  const namespaces = owned.find((o) => o.type.kind === 'Namespace')?.informer;
  return new CachedClusterPort(
    options.clusterPort({
      runtimeClasses: (tenant) => runtimeClassIndex.forTenant(tenant),
      sandboxInstances: (tenant) => sandboxIndex.inTenant(tenant).map((i) => i.meta),
      recordEvent: recordEvent(ctx),
    }),
    {
      instances: (kind) => caches.instances.get({ group: kind.group, version: kind.version, resource: kind.plural }),
      namespaces: () => namespaces,
      objects: (type) => ownedViews.find((o) => sameType(type, o.type))?.view,
    },
  );
}
