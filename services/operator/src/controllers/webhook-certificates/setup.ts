/**
 * The webhook-certificates controller sets itself up, when on (`--webhook-certificates`:
 * `WebhookCertificatesFeature` present): the cache of the labelled MutatingWebhookConfigurations
 * (started with the others but never waited for: issuing certificates must not hold up
 * leadership) and the controller over it (controller.ts).
 */
import type { InformerSource } from '../../runtime/informer.js';
import type { ControllerOptions } from '../../runtime/manager.js';
import type { SetupContext } from '../setup.js';
import {
  CERTIFICATES_SELECTOR,
  createWebhookCertificatesController,
  WEBHOOK_CERTIFICATES_CONTROLLER,
} from './controller.js';
import type { CertificatePolicy } from './policy.js';
import type { WebhookCertificatesPort, WebhookConfigurationLike } from './reconciler.js';

export { WEBHOOK_CERTIFICATES_CONTROLLER };

export interface WebhookCertificatesFeature {
  /** The MutatingWebhookConfigurations labelled CERTIFICATES_SELECTOR. */
  configurations: InformerSource<WebhookConfigurationLike>;
  port: WebhookCertificatesPort;
  policy: CertificatePolicy;
}

export function setupWebhookCertificates(ctx: SetupContext, feature: WebhookCertificatesFeature): ControllerOptions {
  const configurations = ctx.caches.informer({
    name: 'mutatingwebhookconfigurations',
    resource: 'admissionregistration.k8s.io/v1/mutatingwebhookconfigurations',
    labelSelector: CERTIFICATES_SELECTOR,
    source: () => feature.configurations,
    mustSync: false,
  });
  return createWebhookCertificatesController({
    configurations,
    port: feature.port,
    policy: feature.policy,
    registry: ctx.metrics.registry,
    logger: ctx.logger,
    clock: ctx.clock,
  });
}
