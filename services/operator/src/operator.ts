/**
 * The operator's composition root: it assembles, nothing else. The flags decide which parts are
 * on (features.ts); each controller sets itself up from its folder (`controllers/<name>/setup.ts`:
 * informers asked of the cache registry, indexes, key sources, reconciler); this file hands them
 * the shared services, registers the controllers with the Manager, and serves probes and metrics.
 *
 * Caches (runtime/cache.ts) run on every replica, leader or not, so a standby takes over with warm
 * caches; controllers run only while this replica holds the Lease:
 *   `instances`     (controllers/instances/)     instance events, owned-object deletes, RuntimeClass changes;
 *   `owned-objects` (controllers/owned-objects/) owned-object adds/updates → orphan cleanup or the owner;
 *   `node-isolation-audit` (controllers/audit/, with --audit-interval > 0) isolated namespaces' Pods,
 *                   and with --reports the compliance Reports (controllers/compliance/);
 *   `webhook-certificates` (controllers/webhook-certificates/, with --webhook-certificates);
 *   `exclusive-pools` (controllers/exclusive-pools/, with --exclusive-pools) the one ExclusivePools parameter.
 */

import type { AccessReviewer, Logger } from '@kubeplus-isolation/service';
import { MetricsAccessGuard, registerBuildInfo } from '@kubeplus-isolation/service';
import type { Express } from 'express';
import type { ClusterPort } from './cluster/port.js';
import type { Config } from './config.js';
import type { PodLister, PodWatchApi } from './controllers/audit/controller.js';
import { setupAudit } from './controllers/audit/setup.js';
import type { ReportStore, SandboxLister } from './controllers/compliance/reporter.js';
import { setupCompliance } from './controllers/compliance/setup.js';
import type { ExclusivePoolsPort } from './controllers/exclusive-pools/reconciler.js';
import { setupExclusivePools } from './controllers/exclusive-pools/setup.js';
import { COUNTED_ANNOTATIONS } from './controllers/instances/reconcile-metrics.js';
import { setupInstances } from './controllers/instances/setup.js';
import { setupOwnedObjects } from './controllers/owned-objects/setup.js';
import type { ClusterPortOptions, InformerSources, SetupContext } from './controllers/setup.js';
import type {
  WebhookCertificatesPort,
  WebhookConfigurationLike,
} from './controllers/webhook-certificates/reconciler.js';
import { setupWebhookCertificates } from './controllers/webhook-certificates/setup.js';
import { describeFeatures, operatorFeatures } from './features.js';
import type { InstanceKindRegistry } from './instance-kinds/registry.js';
import type { ApiRequestObserver } from './kube/api-requests.js';
import type { PolicyApis } from './kube/discovery.js';
import { apiRequestMetrics } from './runtime/api-request-metrics.js';
import { Caches } from './runtime/cache.js';
import { type Clock, systemClock } from './runtime/clock.js';
import { EventRecorder, type EventSink, type InvolvedObject } from './runtime/event-recorder.js';
import { createHttpApp, EventLoopMonitor, type RunningServer, startHttpServer } from './runtime/http-server.js';
import type { InformerSource } from './runtime/informer.js';
import { LeaderElector, type LeaseLock } from './runtime/leader-election.js';
import { type ControllerOptions, Manager, type ManagerExit } from './runtime/manager.js';
import { metricsTls } from './runtime/metrics-tls.js';
import { createOperatorMetrics, type OperatorMetrics } from './runtime/runtime-metrics.js';

export type { ClusterPortOptions, InformerSources } from './controllers/setup.js';

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
  /** The ExclusivePools object's writes; required when `config.exclusivePools`. */
  exclusivePools?: ExclusivePoolsPort;
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

export function createOperator(deps: OperatorDeps): Operator {
  const { config, logger } = deps;
  const features = operatorFeatures(deps);
  const clock = deps.clock ?? systemClock;
  const metrics = createOperatorMetrics({ controllers: [], resources: [], annotations: COUNTED_ANNOTATIONS });
  registerBuildInfo(metrics.registry, 'kubeplus_operator', deps.version);
  deps.observeApiRequests?.(apiRequestMetrics(metrics.registry, logger));
  const caches = new Caches({ clock, logger, metrics });
  const recorder = new EventRecorder({
    sink: deps.eventSink,
    reportingInstance: deps.identity,
    clock,
    logger: logger.child({ component: 'events' }),
  });
  const ctx: SetupContext = { caches, sources: deps.sources, metrics, recorder, logger, clock, random: deps.random };

  // ---- controllers, each set up from its folder ----
  const instances = setupInstances(ctx, features.instances);
  const controllers: ControllerOptions[] = [
    instances.controller,
    setupOwnedObjects(ctx, features.ownedObjects, instances),
  ];
  const { audit } = features;
  if (audit !== undefined) {
    const reports = audit.reports && setupCompliance(ctx, audit.reports, features.instances, instances);
    controllers.push(setupAudit(ctx, audit, { resolveOwner: instances.resolveOwner, reports }));
  }
  if (features.webhookCertificates !== undefined) {
    controllers.push(setupWebhookCertificates(ctx, features.webhookCertificates));
  }
  if (features.exclusivePools !== undefined) {
    controllers.push(setupExclusivePools(ctx, features.exclusivePools, { resolveOwner: instances.resolveOwner }));
  }

  // ---- manager, HTTP ----
  let server: RunningServer | undefined;
  const monitor = new EventLoopMonitor({ clock });
  const election = features.leaderElection;
  const manager = new Manager({
    caches,
    metrics,
    logger,
    clock,
    drainTimeoutMs: config.drainTimeoutMs,
    leaderElection:
      election &&
      ((callbacks) =>
        new LeaderElector({ ...election, callbacks, identity: deps.identity, clock, random: deps.random, logger })),
    // Closed after the caches have stopped.
    closers: [
      { name: 'event-loop-monitor', close: async () => monitor.stop() },
      { name: 'http', close: async () => server?.close() },
    ],
  });
  metrics.declare({ controllers: controllers.map((c) => c.reconciler.name) });
  for (const controller of controllers) manager.addController(controller);
  const app = createHttpApp({
    registry: metrics.registry,
    liveness: [monitor.healthCheck()],
    // The caches' readiness, but per instance Kind: each one not synced is named, and a forbidden
    // one is named without failing it.
    readiness: [{ name: 'informers', check: () => instances.caches.readiness(caches.mustSync()) }],
    logger,
    metricsGuard:
      features.secureMetrics && new MetricsAccessGuard({ reviewer: features.secureMetrics.reviewer, logger }),
  });

  return {
    manager,
    metrics,
    app,
    kinds: instances.caches.kinds,
    server: () => server,
    async run(signal) {
      monitor.start();
      try {
        const secure = features.secureMetrics;
        const tls = secure ? await metricsTls({ files: secure.files, logger }) : undefined;
        server = await startHttpServer(app, { port: config.metricsPort, host: config.bindAddress, tls });
      } catch (err) {
        monitor.stop();
        throw new Error(`cannot serve on port ${config.metricsPort}`, { cause: err });
      }
      logger.info('operator starting', {
        identity: deps.identity,
        httpPort: server.port,
        ...describeFeatures(deps, features),
      });
      return manager.run(signal);
    },
  };
}
