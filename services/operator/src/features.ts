/**
 * Which of the operator's parts are on, from its flags and the I/O it was given: a part is on
 * exactly when its group is present, holding everything it needs (controller-runtime's main,
 * deciding which controllers to set up). The only place flags switch parts on or off; a part
 * switched on without its I/O is refused here, at start.
 */
import { type AccessReviewer, formatDuration } from '@kubeplus-isolation/service';
import { DEFAULT_PLATFORM_NAMESPACE, SYSTEM_NAMESPACES } from '@kubeplus-isolation/spec';
import { writesNodeIsolationParams } from './config.js';
import type { AuditFeature } from './controllers/audit/setup.js';
import type { ReportsFeature } from './controllers/compliance/setup.js';
import type { ExclusivePoolsFeature } from './controllers/exclusive-pools/setup.js';
import type { InstancesOptions } from './controllers/instances/setup.js';
import type { OwnedObjectsOptions } from './controllers/owned-objects/setup.js';
import type { WebhookCertificatesFeature } from './controllers/webhook-certificates/setup.js';
import { formatInstanceKinds } from './instance-kinds/registry.js';
import {
  NODE_ISOLATION_PARAMS_RESOURCE,
  policyResources,
  SANDBOX_ISOLATION_PARAMS_RESOURCE,
} from './kube/discovery.js';
import type { OperatorDeps } from './operator.js';
import type { LeaderElectionOptions } from './runtime/leader-election.js';

export interface Features {
  instances: InstancesOptions;
  ownedObjects: OwnedObjectsOptions;
  /** `--audit-interval` > 0; with `reports`, `--reports` too. */
  audit?: AuditFeature & { reports?: ReportsFeature | undefined };
  /** `--webhook-certificates`. */
  webhookCertificates?: WebhookCertificatesFeature;
  /** `--exclusive-pools`. */
  exclusivePools?: ExclusivePoolsFeature;
  /** `--metrics-secure`: HTTPS (a certificate from these files, else self-signed); /metrics reviewed. */
  secureMetrics?: { reviewer: AccessReviewer; files: { certFile: string; keyFile: string } | undefined };
  /** `--leader-elect`: the Lease and its timing. */
  leaderElection?: Pick<LeaderElectionOptions, 'lock' | 'leaseDurationMs' | 'renewDeadlineMs' | 'retryPeriodMs'>;
}

export function operatorFeatures(deps: OperatorDeps): Features {
  const { config } = deps;
  if (config.leaderElect && deps.leaseLock === undefined)
    throw new Error('operator: leader election needs a lease lock');
  if (config.metricsSecure && deps.accessReviewer === undefined)
    throw new Error('operator: --metrics-secure needs an access reviewer (TokenReview and SubjectAccessReview)');
  if (config.exclusivePools && deps.exclusivePools === undefined)
    throw new Error('operator: --exclusive-pools needs the ExclusivePools writer');
  const auditing = config.auditIntervalMs > 0;
  if (auditing && deps.pods === undefined) throw new Error('operator: the audit needs a Pod lister');
  const reporting = auditing && config.reports;
  if (reporting && deps.reports === undefined) throw new Error('operator: the reports need a Report store');
  // The admission-policy engine's per-namespace parameters and the shared sandbox policy layout's
  // SandboxIsolation parameters are owned objects like the policies.
  const nodeIsolationParams = writesNodeIsolationParams(config.nodeIsolationEngine, config.nodeIsolationRefusal);
  const ownedResources = [
    ...policyResources(deps.policyApis),
    ...(nodeIsolationParams ? [NODE_ISOLATION_PARAMS_RESOURCE] : []),
    ...(config.sandboxPolicyLayout === 'shared' ? [SANDBOX_ISOLATION_PARAMS_RESOURCE] : []),
  ];
  const pods = deps.pods;
  const reports = reporting ? deps.reports : undefined;
  const webhookCertificates = config.webhookCertificates ? deps.webhookCertificates : undefined;
  return {
    instances: {
      // main.ts resolves an empty flag (kube/platform-namespace.ts) before this; the fallback only
      // keeps an unresolved one from ever meaning "no platform namespace".
      platformNamespace: config.platformNamespace || DEFAULT_PLATFORM_NAMESPACE,
      releaseNamespace: config.leaderElectionNamespace,
      instanceKinds: config.instanceKinds,
      handlerLevels: config.handlerLevels,
      levelHandlers: config.levelHandlers,
      nodeIsolationParams,
      sandboxPolicyLayout: config.sandboxPolicyLayout,
      ownedResources,
      concurrency: config.concurrency,
      clusterPort: deps.clusterPort,
    },
    ownedObjects: { ownedResources, concurrency: config.concurrency },
    ...(auditing && pods !== undefined
      ? {
          audit: {
            intervalMs: config.auditIntervalMs,
            pods,
            podWatch: deps.podWatch,
            namespaceMetricLimit: config.unisolatedNamespacesMetricLimit,
            exemptNamespaces: [...SYSTEM_NAMESPACES, config.leaderElectionNamespace, ...config.poolExemptNamespaces],
            reports: reports && { ...reports, maxResults: config.reportMaxResults, self: deps.self },
          },
        }
      : {}),
    ...(webhookCertificates === undefined
      ? {}
      : {
          webhookCertificates: {
            ...webhookCertificates,
            policy: {
              caValidityMs: config.webhookCaValidityMs,
              certValidityMs: config.webhookCertValidityMs,
              propagationDelayMs: config.webhookCertPropagationDelayMs,
            },
          },
        }),
    ...(config.exclusivePools && deps.exclusivePools !== undefined
      ? { exclusivePools: { port: deps.exclusivePools } }
      : {}),
    ...(config.metricsSecure && deps.accessReviewer !== undefined
      ? {
          secureMetrics: {
            reviewer: deps.accessReviewer,
            files:
              config.metricsTlsCertFile !== undefined && config.metricsTlsKeyFile !== undefined
                ? { certFile: config.metricsTlsCertFile, keyFile: config.metricsTlsKeyFile }
                : undefined,
          },
        }
      : {}),
    ...(config.leaderElect && deps.leaseLock !== undefined
      ? {
          leaderElection: {
            lock: deps.leaseLock,
            leaseDurationMs: config.leaseDurationMs,
            renewDeadlineMs: config.renewDeadlineMs,
            retryPeriodMs: config.retryPeriodMs,
          },
        }
      : {}),
  };
}

/** The `operator starting` line's account of the configuration. */
export function describeFeatures({ config, policyApis }: OperatorDeps, features: Features): Record<string, unknown> {
  return {
    metrics: config.metricsSecure
      ? `https, token and access reviewed (${config.metricsTlsCertFile === undefined ? 'self-signed certificate' : config.metricsTlsCertFile})`
      : 'http, unauthenticated',
    platformNamespace: config.platformNamespace,
    instanceKinds: formatInstanceKinds(config.instanceKinds) || '(labelled CRDs only)',
    leaderElection: config.leaderElect ? `${config.leaderElectionNamespace}/${config.leaderElectionId}` : 'disabled',
    admissionPolicies: policyResources(policyApis).map((p) => `${p.apiVersion}/${p.kind}`),
    auditInterval: features.audit ? formatDuration(features.audit.intervalMs) : 'disabled',
    reports: features.audit?.reports ? `on (at most ${features.audit.reports.maxResults} results each)` : 'disabled',
    exclusivePools: features.exclusivePools ? 'on' : 'disabled',
  };
}
