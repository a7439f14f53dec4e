/** Everything `createOperator` needs, on a real cluster (thin: client-node constructors only). Tests replace it with in-memory fakes (test/fake-world.ts). */
import { CoordinationV1Api, CoreV1Api, CustomObjectsApi, type KubeConfig } from '@kubernetes/client-node';
import type { Config } from '../config.js';
import { CERTIFICATES_SELECTOR } from '../controllers/webhook-certificates/request.js';
import type { OperatorDeps } from '../operator.js';
import { kubeAccessReviewer } from './access-review.js';
import type { ApiRequestObserver } from './api-requests.js';
import { KubeClusterPort } from './cluster-port.js';
import { checkSharedLayout, discoverPolicyApis } from './discovery.js';
import { coreV1EventSink } from './event-sink.js';
import { kubeExclusivePoolsPort } from './exclusive-pools-port.js';
import { kubeInformerSources, webhookConfigurationSource } from './informer-sources.js';
import { PooledKubeConfig } from './kubeconfig.js';
import { KubeLeaseLock } from './lease-lock.js';
import { kubePodLister } from './pod-lister.js';
import { kubePodWatch } from './pod-watch.js';
import { kubeReportStore, kubeSandboxLister } from './report-store.js';
import { operatorPod } from './self.js';
import { kubeWebhookCertificatesPort } from './webhook-certificates-port.js';

/** Everything `createOperator` needs, on the cluster `kc` reaches (asks discovery first). */
export async function kubeOperatorDeps(
  kc: KubeConfig,
  config: Config,
  identity: string,
): Promise<Omit<OperatorDeps, 'logger' | 'version'>> {
  const policyApis = await discoverPolicyApis(kc);
  if (config.sandboxPolicyLayout === 'shared') await checkSharedLayout(kc);
  // The Pod watch keeps its position on the leader's Lease (carried by its renewals).
  const leaseLock = config.leaderElect
    ? new KubeLeaseLock(kc.makeApiClient(CoordinationV1Api), config.leaderElectionNamespace, config.leaderElectionId)
    : undefined;
  return {
    config,
    identity,
    policyApis,
    sources: kubeInformerSources(kc),
    clusterPort: (options) => new KubeClusterPort(kc, options),
    eventSink: coreV1EventSink(kc.makeApiClient(CoreV1Api)),
    pods: kubePodLister(kc.makeApiClient(CoreV1Api)),
    podWatch: kubePodWatch(kc, leaseLock),
    webhookCertificates: config.webhookCertificates
      ? {
          configurations: webhookConfigurationSource(kc, CERTIFICATES_SELECTOR),
          port: kubeWebhookCertificatesPort(kc),
        }
      : undefined,
    exclusivePools: config.exclusivePools ? kubeExclusivePoolsPort(kc) : undefined,
    reports: {
      store: kubeReportStore(kc.makeApiClient(CustomObjectsApi)),
      sandboxes: kubeSandboxLister(kc.makeApiClient(CustomObjectsApi), kc.makeApiClient(CoreV1Api)),
    },
    self: operatorPod(process.env),
    // Secure metrics' TokenReviews and SubjectAccessReviews, with the operator's own credentials.
    accessReviewer: config.metricsSecure ? kubeAccessReviewer(kc) : undefined,
    ...(kc instanceof PooledKubeConfig
      ? { observeApiRequests: (o: ApiRequestObserver) => kc.observeApiRequests(o) }
      : {}),
    leaseLock,
  };
}
