/**
 * The webhook-certificates controller, composed: a cache of the MutatingWebhookConfigurations
 * labelled `isolation.kubeplus.io/certificates=operator` (its events are the keys; the
 * reconciler's requeue is the timer for renewals), the reconciler and its metrics. Runs on the
 * leader only, like every controller. setup.ts builds it unless `--webhook-certificates=false`.
 */
import type { Logger } from '@kubeplus-isolation/service';
import type { Registry } from 'prom-client';
import type { Clock } from '../../runtime/clock.js';
import type { ResourceInformer } from '../../runtime/informer.js';
import { informerKeySource } from '../../runtime/key-sources.js';
import type { ControllerOptions } from '../../runtime/manager.js';
import { registerWebhookCertificateMetrics } from './metrics.js';
import type { CertificatePolicy } from './policy.js';
import {
  type WebhookCertificatesPort,
  WebhookCertificatesReconciler,
  type WebhookConfigurationLike,
} from './reconciler.js';

export { WEBHOOK_CERTIFICATES_CONTROLLER } from './reconciler.js';
export { CERTIFICATES_SELECTOR } from './request.js';

export interface WebhookCertificatesControllerOptions {
  configurations: ResourceInformer<WebhookConfigurationLike>;
  port: WebhookCertificatesPort;
  policy: CertificatePolicy;
  registry: Registry;
  logger: Logger;
  clock: Clock;
}

export function createWebhookCertificatesController(options: WebhookCertificatesControllerOptions): ControllerOptions {
  const reconciler = new WebhookCertificatesReconciler({
    port: options.port,
    configurations: options.configurations,
    policy: options.policy,
    hooks: registerWebhookCertificateMetrics(options.registry),
    logger: options.logger,
    clock: options.clock,
  });
  return {
    reconciler,
    sources: [informerKeySource(options.configurations)],
    concurrency: 1,
  };
}
