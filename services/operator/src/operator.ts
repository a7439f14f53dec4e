/**
 * The operator's composition root: informers, the instance reconciler, key sources, metrics,
 * the HTTP probes and leader election, composed on the controller runtime's Manager.
 *
 * Informers (every replica, leader or not, so a standby takes over with warm caches):
 *   CRDs → `bindCrdInformer` keeps one informer per instance Kind (labelled `registered-by:
 *   kubeplus`, or named by --instance-kinds), added and removed at run time; Namespaces with
 *   `kubeplus.io/owner-uid`; every RuntimeClass (also the reconciler's RuntimeClass list); the
 *   served admission-policy kinds labelled `app.kubernetes.io/managed-by=kubeplus-isolation`.
 *
 *   With the audit on (--audit-interval > 0): Namespaces labelled
 *   `kubeplus.io/node-isolation-enabled=true` (the webhook's namespaceSelector).
 *
 * Controllers (only while this replica holds the Lease):
 *   `instances`     ← instance events; owner of a deleted owned object; on a RuntimeClass change,
 *                     every sandbox-annotated instance for a platform class, only the owner for
 *                     a generated one; owners handed over by owned-objects;
 *   `owned-objects` ← add/update of owned objects → `cleanupOrphan` (see controllers/owned-objects/keys.ts);
 *   `node-isolation-audit` ← isolated-namespace events and a period → list the namespace's Pods,
 *                     report those lacking the mandated placement (audit/; never writes Pods);
 *                     with --reports, also every sandbox-isolated namespace each period and at
 *                     once when its sandbox policy or generated RuntimeClass changes, and write
 *                     the namespace's compliance Report from the same findings (compliance/).
 */

import type { AccessReviewer, Logger } from '@kubeplus-isolation/service';
import { formatDuration, MetricsAccessGuard, registerBuildInfo } from '@kubeplus-isolation/service';
import {
  type LastGoodMinimum,
  MANAGED_BY_LABEL,
  MANAGED_BY_VALUE,
  namespaceSandboxPolicy,
  OWNER_NAME_LABEL,
  OWNER_NAMESPACE_LABEL,
  OWNER_UID_LABEL,
  sandboxTenantNamespaces,
} from '@kubeplus-isolation/spec';
import type {
  KubernetesObject,
  V1CustomResourceDefinition,
  V1Namespace,
  V1RuntimeClass,
} from '@kubernetes/client-node';
import type { Express } from 'express';
import { CachedClusterPort, type ObjectCacheView, sameType } from './cluster/cached-cluster-port.js';
import type { ClusterPort, EventTarget, InstanceEvent } from './cluster/port.js';
import { type Config, writesNodeIsolationParams } from './config.js';
import {
  AUDIT_CONTROLLER,
  createNodeIsolationAudit,
  ISOLATED_NAMESPACE_SELECTOR,
  type PodLister,
  type PodWatchApi,
} from './controllers/audit/controller.js';
import { registerReportMetrics } from './controllers/compliance/report-metrics.js';
import { generatedRuntimeClassChanges, sandboxPolicyChanges } from './controllers/compliance/report-sources.js';
import { NamespaceReporter, type ReportStore, type SandboxLister } from './controllers/compliance/reporter.js';
import { ConditionWarnings } from './controllers/instances/condition-warnings.js';
import { INSTANCES_CONTROLLER, instancesReconciler } from './controllers/instances/controller.js';
import {
  cachedOwner,
  instanceSource,
  ownerOfDeletedSource,
  runtimeClassFanOut,
} from './controllers/instances/key-sources.js';
import { COUNTED_ANNOTATIONS, createWiringMetrics } from './controllers/instances/reconcile-metrics.js';
import { InstanceReconciler } from './controllers/instances/reconciler.js';
import {
  bindRuntimeClassIndex,
  lastGoodMinimumsFrom,
  RuntimeClassIndex,
} from './controllers/instances/runtime-class-index.js';
import { bindSandboxInstanceIndex, SandboxInstanceIndex } from './controllers/instances/sandbox-instance-index.js';
import { OWNED_OBJECTS_CONTROLLER, ownedObjectsReconciler } from './controllers/owned-objects/controller.js';
import { ownedObjectSource } from './controllers/owned-objects/key-sources.js';
import type { OwnedType } from './controllers/owned-objects/keys.js';
import {
  createWebhookCertificatesController,
  WEBHOOK_CERTIFICATES_CONTROLLER,
} from './controllers/webhook-certificates/controller.js';
import type {
  WebhookCertificatesPort,
  WebhookConfigurationLike,
} from './controllers/webhook-certificates/reconciler.js';
import type { InstanceIdentity } from './desired/instance.js';
import { RUNTIME_CLASS_API_VERSION } from './desired/objects.js';
import { countSandboxModes, mixedPolicyNamespaces, type SandboxInstanceMeta } from './desired/sandbox-peers.js';
import type { RuntimeClassInfo } from './desired/sandbox-policy.js';
import {
  countInstanceKinds,
  ForbiddenKindReporter,
  instanceKindsReadiness,
  instanceKindsSyncState,
} from './instance-kinds/kind-health.js';
import { crdLabelSelector, formatInstanceKinds, InstanceKindRegistry } from './instance-kinds/registry.js';
import type { ApiRequestObserver } from './kube/api-requests.js';
import {
  NODE_ISOLATION_PARAMS_RESOURCE,
  type PolicyApis,
  type PolicyResource,
  policyResources,
  SANDBOX_ISOLATION_PARAMS_RESOURCE,
} from './kube/discovery.js';
import { apiRequestMetrics } from './runtime/api-request-metrics.js';
import { type Clock, systemClock } from './runtime/clock.js';
import { bindCrdInformer, DynamicInformers } from './runtime/dynamic-informers.js';
import { EventRecorder, type EventSink, type InvolvedObject } from './runtime/event-recorder.js';
import type { GroupVersionResource } from './runtime/gvr.js';
import {
  createHttpApp,
  EventLoopMonitor,
  type HealthCheck,
  type RunningServer,
  startHttpServer,
} from './runtime/http-server.js';
import { type InformerSource, keepMetadataOnly, ResourceInformer, type SyncedInformer } from './runtime/informer.js';
import { KeyChannel, type KeySource } from './runtime/key-sources.js';
import { indexByLabels } from './runtime/label-index.js';
import { LeaderElector, type LeaseLock } from './runtime/leader-election.js';
import { Manager, type ManagerExit } from './runtime/manager.js';
import { metricsTls } from './runtime/metrics-tls.js';
import { createOperatorMetrics, type OperatorMetrics } from './runtime/runtime-metrics.js';

/** List+watch sources of every resource the operator caches (client-node's ListWatch, or fakes). */
export interface InformerSources {
  crds(labelSelector: string | undefined): InformerSource<V1CustomResourceDefinition>;
  namespaces(labelSelector: string): InformerSource<V1Namespace>;
  runtimeClasses(): InformerSource<V1RuntimeClass>;
  policies(type: PolicyResource, labelSelector: string): InformerSource<KubernetesObject>;
  instances(gvr: GroupVersionResource): InformerSource<KubernetesObject>;
}

/** What the ClusterPort is built with: the cached RuntimeClasses and instances, and the Event recorder. */
export interface ClusterPortOptions {
  /** The RuntimeClasses that can matter to tenant namespace `tenant` (the RuntimeClass cache's index). */
  runtimeClasses(tenant: string): readonly RuntimeClassInfo[];
  /** The sandbox-annotated instances bound to tenant namespace `tenant` (the instance caches' index). */
  sandboxInstances(tenant: string): readonly SandboxInstanceMeta[];
  recordEvent(target: EventTarget, event: InstanceEvent): Promise<void>;
}

export interface OperatorDeps {
  config: Config;
  logger: Logger;
  /** Reported as kubeplus_operator_build_info{version}. */
  version: string;
  /** This replica's Lease holder identity and Event reportingInstance. */
  identity: string;
  /** The admission-policy APIs the cluster serves (kube/discovery.ts). */
  policyApis: PolicyApis;
  sources: InformerSources;
  clusterPort(options: ClusterPortOptions): ClusterPort;
  eventSink: EventSink;
  /** The audit's Pod LIST; required unless `config.auditIntervalMs` is 0. */
  pods?: PodLister;
  /** The audit's watch of new Pods (controllers/audit/pod-admissions.ts); absent: no such watch. */
  podWatch?: PodWatchApi;
  /** The compliance reports' I/O; required when the audit and `config.reports` are on. */
  reports?: { store: ReportStore; sandboxes: SandboxLister };
  /** The operator's own Pod (Events about the operator itself); none: logged only. */
  self?: InvolvedObject | undefined;
  /** Required when `config.leaderElect`. */
  leaseLock: LeaseLock | undefined;
  /** The labelled webhook configurations and the API calls; required when `config.webhookCertificates`. */
  webhookCertificates?: {
    configurations: InformerSource<WebhookConfigurationLike>;
    port: WebhookCertificatesPort;
  };
  /** Secure metrics' TokenReview and SubjectAccessReview (kube/access-review.ts); required when `config.metricsSecure`. */
  accessReviewer?: AccessReviewer;
  /** Reports every API request to an observer (kube/api-requests.ts); absent: no API request metrics fed. */
  observeApiRequests?: (observer: ApiRequestObserver) => void;
  clock?: Clock;
  /** Leader-election retry jitter source (tests make it deterministic). */
  random?: () => number;
}

export interface Operator {
  readonly manager: Manager;
  readonly metrics: OperatorMetrics;
  readonly app: Express;
  readonly kinds: InstanceKindRegistry;
  /** The listening HTTP server, once `run` has started it. */
  server(): RunningServer | undefined;
  /**
   * Serves the probes and metrics, then runs the Manager until `signal` aborts ('shutdown') or
   * the Lease is lost ('leadership-lost'); everything is stopped when it resolves.
   */
  run(signal: AbortSignal): Promise<ManagerExit>;
}

export const NAMESPACE_SELECTOR = OWNER_UID_LABEL;
export const MANAGED_SELECTOR = `${MANAGED_BY_LABEL}=${MANAGED_BY_VALUE}`;
const INSTANCES_RESOURCE = 'instances';
const ISOLATED_NAMESPACES_RESOURCE = 'isolated-namespaces';

interface OwnedInformer {
  type: OwnedType;
  informer: ResourceInformer<KubernetesObject>;
}

/** The cached classes, each marked generated (ours, for some instance) or not (the platform's). */
export function createOperator(deps: OperatorDeps): Operator {
  const { config, logger, sources } = deps;
  if (config.leaderElect && deps.leaseLock === undefined)
    throw new Error('operator: leader election needs a lease lock');
  if (config.metricsSecure && deps.accessReviewer === undefined)
    throw new Error('operator: --metrics-secure needs an access reviewer (TokenReview and SubjectAccessReview)');
  const auditing = config.auditIntervalMs > 0;
  if (auditing && deps.pods === undefined) throw new Error('operator: the audit needs a Pod lister');
  const reporting = auditing && config.reports;
  if (reporting && deps.reports === undefined) throw new Error('operator: the reports need a Report store');
  const clock = deps.clock ?? systemClock;
  const informerOptions = { clock, logger };
  const policies = policyResources(deps.policyApis);
  // The admission-policy engine's per-namespace parameters: owned objects like the policies.
  const nodeIsolationParams = writesNodeIsolationParams(config.nodeIsolationEngine);
  // The shared sandbox policy layout's SandboxIsolation parameters: owned objects too.
  const sandboxParams = config.sandboxPolicyLayout === 'shared';
  const paramResources = [
    ...(nodeIsolationParams ? [NODE_ISOLATION_PARAMS_RESOURCE] : []),
    ...(sandboxParams ? [SANDBOX_ISOLATION_PARAMS_RESOURCE] : []),
  ];

  // ---- caches ----
  const kinds = new InstanceKindRegistry(config.instanceKinds);
  const crds = new ResourceInformer(sources.crds(crdLabelSelector(config.instanceKinds)), {
    ...informerOptions,
    name: 'customresourcedefinitions',
  });
  // A Kind the operator may not read is reported once, retried, and left out of readiness.
  const forbiddenKinds = new ForbiddenKindReporter(logger);
  const instances = new DynamicInformers<KubernetesObject>((gvr) => sources.instances(gvr), {
    ...informerOptions,
    name: INSTANCES_RESOURCE,
    // Only an instance's metadata is ever read (annotations, finalizers, uid, resourceVersion):
    // its spec and status, however large, are not kept.
    transform: keepMetadataOnly,
    failureLogLevel: forbiddenKinds.failureLogLevel,
    listener: forbiddenKinds.listener,
  });
  const kindInformers = (): ResourceInformer<KubernetesObject>[] =>
    instances.kinds().flatMap((gvr) => instances.get(gvr) ?? []);
  const namespaces = new ResourceInformer<KubernetesObject>(sources.namespaces(NAMESPACE_SELECTOR), {
    ...informerOptions,
    name: 'namespaces',
  });
  const runtimeClassSource = sources.runtimeClasses();
  const runtimeClasses = new ResourceInformer<KubernetesObject>(runtimeClassSource, {
    ...informerOptions,
    name: 'runtimeclasses',
  });
  const owned: OwnedInformer[] = [
    { type: { apiVersion: 'v1', kind: 'Namespace' }, informer: namespaces },
    { type: { apiVersion: RUNTIME_CLASS_API_VERSION, kind: 'RuntimeClass' }, informer: runtimeClasses },
    ...[...policies, ...paramResources].map((p) => ({
      type: { apiVersion: p.apiVersion, kind: p.kind },
      informer: new ResourceInformer<KubernetesObject>(sources.policies(p, MANAGED_SELECTOR), {
        ...informerOptions,
        name: p.resource,
      }),
    })),
  ];
  const isolatedNamespaces = auditing
    ? new ResourceInformer<KubernetesObject>(sources.namespaces(ISOLATED_NAMESPACE_SELECTOR), {
        ...informerOptions,
        name: ISOLATED_NAMESPACES_RESOURCE,
      })
    : undefined;
  // What the Manager waits for before campaigning. Instance Kinds come and go at run time and one
  // may stay forbidden: leadership never waits for them (their instances are reconciled as their
  // caches fill, the key sources stream every add); /readyz reports them (kind-health.ts).
  const mustSync: SyncedInformer[] = [
    crds,
    ...owned.map((o) => o.informer),
    ...(isolatedNamespaces ? [isolatedNamespaces] : []),
  ];
  // Started with the others but never waited for: issuing certificates must not hold up leadership.
  const webhookConfigurations =
    config.webhookCertificates && deps.webhookCertificates !== undefined
      ? new ResourceInformer<WebhookConfigurationLike>(deps.webhookCertificates.configurations, {
          ...informerOptions,
          name: 'mutatingwebhookconfigurations',
        })
      : undefined;
  const informers: SyncedInformer[] = [
    ...mustSync,
    instances,
    ...(webhookConfigurations ? [webhookConfigurations] : []),
  ];

  // ---- metrics ----
  const metrics = createOperatorMetrics({
    controllers: [
      INSTANCES_CONTROLLER,
      OWNED_OBJECTS_CONTROLLER,
      ...(auditing ? [AUDIT_CONTROLLER] : []),
      ...(webhookConfigurations ? [WEBHOOK_CERTIFICATES_CONTROLLER] : []),
    ],
    resources: informers.map((i) => i.name),
    annotations: COUNTED_ANNOTATIONS,
  });
  registerBuildInfo(metrics.registry, 'kubeplus_operator', deps.version);
  deps.observeApiRequests?.(apiRequestMetrics(metrics.registry, logger));
  for (const informer of mustSync) metrics.trackInformer(informer.name, informer);
  // kubeplus_operator_informer_synced{resource="instances"}: the Kinds it may read.
  metrics.trackInformer(instances.name, instanceKindsSyncState(kindInformers));
  const wiringMetrics = createWiringMetrics(metrics);
  wiringMetrics.trackInstanceKinds(() => countInstanceKinds(kindInformers()));
  // Every cached instance asking for sandbox isolation (several may bind policies to one
  // namespace), indexed by tenant namespace: a reconcile reads its peers in O(peers), never by
  // walking every cached instance (bound in `run`, from the instance informers' events).
  const instanceCaches = { instances, kinds, platformNamespace: config.platformNamespace };
  const sandboxIndex = new SandboxInstanceIndex(config.platformNamespace);
  const sandboxInstances = (): SandboxInstanceMeta[] => [...sandboxIndex.all()].map((i) => i.meta);
  const sandboxInstancesIn = (tenant: string): SandboxInstanceMeta[] =>
    sandboxIndex.inTenant(tenant).map((i) => i.meta);
  wiringMetrics.trackMixedPolicyNamespaces(() => mixedPolicyNamespaces(sandboxInstances(), config.platformNamespace));
  wiringMetrics.trackSandboxModes(() => countSandboxModes(sandboxInstances()));

  // ---- reconciler ----
  const recorder = new EventRecorder({
    sink: deps.eventSink,
    reportingInstance: deps.identity,
    clock,
    logger: logger.child({ component: 'events' }),
  });
  // The owned objects' caches, indexed by their owner's name and namespace labels: the list every
  // reconcile makes of its instance's objects (to prune) reads only those, not the whole cache.
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
  // Every RuntimeClass as the decisions read it, indexed by the tenant whose instance generated it:
  // a reconcile reads the platform's classes and its own tenant's, never the whole cache.
  const runtimeClassIndex = new RuntimeClassIndex(config.platformNamespace);
  bindRuntimeClassIndex(runtimeClassIndex, runtimeClasses);
  // Reads come from the caches above (a miss, or a fresh read, goes to the API server): an
  // up-to-date instance is reconciled without a single API request.
  const port = new CachedClusterPort(
    deps.clusterPort({
      runtimeClasses: (tenant) => runtimeClassIndex.forTenant(tenant),
      sandboxInstances: sandboxInstancesIn,
      recordEvent: (target, event) => recorder.event(target, event.type, event.reason, event.message),
    }),
    {
      instances: (kind) => instances.get({ group: kind.group, version: kind.version, resource: kind.plural }),
      namespaces: () => namespaces,
      objects: (type) => ownedViews.find((o) => sameType(type, o.type))?.view,
    },
  );
  const reconcileLogger = logger.child({ component: 'reconciler' });
  // One memo for every reconcile (a reconciler is made per call): standing conditions are
  // announced when they appear, not at every resync.
  const conditionWarnings = new ConditionWarnings();
  const reconcilerFor = (p: ClusterPort): InstanceReconciler =>
    new InstanceReconciler({
      conditionWarnings,
      port: p,
      platformNamespace: config.platformNamespace,
      handlerLevels: config.handlerLevels,
      levelHandlers: config.levelHandlers,
      nodeIsolationParams,
      sandboxPolicyLayout: config.sandboxPolicyLayout,
      hooks: wiringMetrics.hooks,
      logger: reconcileLogger,
    });

  // ---- manager, HTTP ----
  let server: RunningServer | undefined;
  const monitor = new EventLoopMonitor({ clock });
  const unbinds: Array<() => void> = [];
  const unbindAll = (): void => {
    for (const unbind of unbinds.splice(0)) unbind();
  };
  const lock = deps.leaseLock;
  const manager = new Manager({
    informers,
    mustSync,
    metrics,
    logger,
    clock,
    drainTimeoutMs: config.drainTimeoutMs,
    leaderElection:
      config.leaderElect && lock !== undefined
        ? (callbacks) =>
            new LeaderElector({
              lock,
              callbacks,
              identity: deps.identity,
              leaseDurationMs: config.leaseDurationMs,
              renewDeadlineMs: config.renewDeadlineMs,
              retryPeriodMs: config.retryPeriodMs,
              clock,
              random: deps.random,
              logger,
            })
        : undefined,
    // Closed after the informers have stopped.
    closers: [
      { name: 'crd-binding', close: async () => unbindAll() },
      { name: 'event-loop-monitor', close: async () => monitor.stop() },
      { name: 'http', close: async () => server?.close() },
    ],
  });
  // The Manager's readiness check, but per instance Kind: each one not synced is named, and a
  // forbidden one is named without failing it.
  const readiness: HealthCheck = {
    name: 'informers',
    check: () => instanceKindsReadiness(mustSync, kindInformers()),
  };
  const app = createHttpApp({
    registry: metrics.registry,
    liveness: [monitor.healthCheck()],
    readiness: [readiness],
    logger,
    metricsGuard:
      config.metricsSecure && deps.accessReviewer !== undefined
        ? new MetricsAccessGuard({ reviewer: deps.accessReviewer, logger })
        : undefined,
  });

  // ---- controllers ----
  const owners = new KeyChannel();
  const controllerDeps = { port, reconcilerFor, logger, clock };
  const instanceSources: KeySource[] = [
    instanceSource(instanceCaches),
    runtimeClassFanOut(runtimeClasses, sandboxIndex, instanceCaches),
    ...owned.map((o) => ownerOfDeletedSource(o.informer, o.type, kinds)),
    owners,
  ];
  manager.addController({
    reconciler: instancesReconciler(controllerDeps),
    sources: instanceSources,
    concurrency: config.concurrency,
  });
  manager.addController({
    reconciler: ownedObjectsReconciler(controllerDeps, owners),
    sources: owned.map((o) => ownedObjectSource(o.informer, o.type)),
    concurrency: config.concurrency,
  });
  if (isolatedNamespaces !== undefined && deps.pods !== undefined) {
    // The instance an isolated namespace's owner annotation names, from the instance caches:
    // Events go to an instance that exists and is watched, else only the metric and log report.
    const resolveOwner = (owner: InstanceIdentity): EventTarget | undefined => cachedOwner(instanceCaches, owner);
    const reportIo = reporting ? deps.reports : undefined;
    // An instance whose sandbox annotation is invalid still enforces its last good minimum, read
    // from its own generated RuntimeClass (the index's lookup).
    const lastGoodSandboxMinimum: LastGoodMinimum = lastGoodMinimumsFrom(
      runtimeClassIndex,
      config.levelHandlers,
      config.handlerLevels,
    );
    const reports =
      reportIo === undefined
        ? undefined
        : new NamespaceReporter({
            store: reportIo.store,
            sandboxes: reportIo.sandboxes,
            sandboxPolicy: (ns) =>
              namespaceSandboxPolicy(sandboxInstancesIn(ns), ns, config.platformNamespace, lastGoodSandboxMinimum),
            runtimeClasses: () => runtimeClassIndex.byName(),
            handlerLevels: config.handlerLevels,
            maxResults: config.reportMaxResults,
            self: deps.self,
            recordEvent: (target, type, reason, message) => recorder.event(target, type, reason, message),
            hooks: registerReportMetrics(metrics.registry),
            logger,
          });
    const audit = createNodeIsolationAudit({
      intervalMs: config.auditIntervalMs,
      namespaces: isolatedNamespaces,
      pods: deps.pods,
      podWatch: deps.podWatch,
      resolveOwner,
      recordEvent: (target, event) => recorder.event(target, event.type, event.reason, event.message),
      registry: metrics.registry,
      logger,
      clock,
      random: deps.random,
      reports,
      reportPods: config.reportMaxResults,
      // Every period also the sandbox-isolated namespaces, and those holding a Report (so a
      // namespace no longer isolated loses it); a new term first learns which hold one.
      extraKeys:
        reports === undefined
          ? undefined
          : () => [
              ...sandboxTenantNamespaces(sandboxInstances(), config.platformNamespace, lastGoodSandboxMinimum),
              ...reports.knownNamespaces(),
            ],
      onTermStart: reports === undefined ? undefined : () => void reports.discover(),
      // And at once when a namespace's sandbox policy or its generated RuntimeClass changes.
      extraSources:
        reports === undefined
          ? undefined
          : [
              sandboxPolicyChanges(instances, (g) => kinds.kindOf(g), config.platformNamespace),
              generatedRuntimeClassChanges(runtimeClasses, config.platformNamespace),
            ],
      namespaceMetricLimit: config.unisolatedNamespacesMetricLimit,
    });
    manager.addController(audit.controller);
  }
  if (webhookConfigurations !== undefined && deps.webhookCertificates !== undefined) {
    manager.addController(
      createWebhookCertificatesController({
        configurations: webhookConfigurations,
        port: deps.webhookCertificates.port,
        policy: {
          caValidityMs: config.webhookCaValidityMs,
          certValidityMs: config.webhookCertValidityMs,
          propagationDelayMs: config.webhookCertPropagationDelayMs,
        },
        registry: metrics.registry,
        logger,
        clock,
      }),
    );
  }

  return {
    manager,
    metrics,
    app,
    kinds,
    server: () => server,
    async run(signal) {
      // Instance informers follow the CRDs on every replica, from the first CRD event on.
      unbinds.push(
        bindSandboxInstanceIndex(sandboxIndex, instances, (g) => kinds.kindOf(g)),
        bindCrdInformer(crds, instances, (crd) => kinds.select(crd), logger),
        crds.addEventHandler({
          delete: (crd) => {
            const name = crd.metadata?.name;
            if (!name) return;
            const selected = kinds.get(name);
            if (selected) forbiddenKinds.forget(selected.gvr);
            kinds.forget(name);
          },
        }),
      );
      monitor.start();
      try {
        const files =
          config.metricsTlsCertFile !== undefined && config.metricsTlsKeyFile !== undefined
            ? { certFile: config.metricsTlsCertFile, keyFile: config.metricsTlsKeyFile }
            : undefined;
        const tls = config.metricsSecure ? await metricsTls({ files, logger }) : undefined;
        server = await startHttpServer(app, { port: config.metricsPort, host: config.bindAddress, tls });
      } catch (err) {
        monitor.stop();
        unbindAll();
        throw new Error(`cannot serve on port ${config.metricsPort}`, { cause: err });
      }
      logger.info('operator starting', {
        identity: deps.identity,
        httpPort: server.port,
        metrics: config.metricsSecure
          ? `https, token and access reviewed (${config.metricsTlsCertFile === undefined ? 'self-signed certificate' : config.metricsTlsCertFile})`
          : 'http, unauthenticated',
        platformNamespace: config.platformNamespace,
        instanceKinds: formatInstanceKinds(config.instanceKinds) || '(labelled CRDs only)',
        leaderElection: config.leaderElect
          ? `${config.leaderElectionNamespace}/${config.leaderElectionId}`
          : 'disabled',
        admissionPolicies: policies.map((p) => `${p.apiVersion}/${p.kind}`),
        auditInterval: auditing ? formatDuration(config.auditIntervalMs) : 'disabled',
        reports: reporting ? `on (at most ${config.reportMaxResults} results each)` : 'disabled',
      });
      return manager.run(signal);
    },
  };
}
