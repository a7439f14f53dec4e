/**
 * The webhook-certificates controller's Prometheus series. Labels: `certificate` ∈ {ca, serving}
 * (fixed here) and `webhook_configuration`, the name of a labelled configuration (one per
 * webhook the operator serves certificates for: the chart installs one).
 */
import { Counter, Gauge, type Registry } from 'prom-client';
import type { WebhookCertificatesHooks } from './reconciler.js';

export function registerWebhookCertificateMetrics(registry: Registry): WebhookCertificatesHooks {
  const registers = [registry];
  const issued = new Counter({
    name: 'kubeplus_operator_webhook_certificates_issued_total',
    help: 'Certificates the operator issued for webhook configurations labelled isolation.kubeplus.io/certificates=operator, by kind: ca (a signing or next CA) or serving.',
    labelNames: ['certificate'] as const,
    registers,
  });
  for (const certificate of ['ca', 'serving']) issued.inc({ certificate }, 0);
  const expiry = new Gauge({
    name: 'kubeplus_operator_webhook_certificate_expiry_timestamp_seconds',
    help: 'When the signing CA (certificate="ca") and the serving certificate (certificate="serving") the operator keeps for a webhook configuration expire, in seconds since the epoch.',
    labelNames: ['webhook_configuration', 'certificate'] as const,
    registers,
  });
  const invalid = new Gauge({
    name: 'kubeplus_operator_webhook_certificates_invalid_configuration',
    help: '1 for a webhook configuration labelled isolation.kubeplus.io/certificates=operator whose annotations do not say which Secret and names to use (nothing is issued for it).',
    labelNames: ['webhook_configuration'] as const,
    registers,
  });
  return {
    issued: (certificate) => issued.inc({ certificate }),
    expiries(webhook_configuration, state) {
      if (state?.signer === undefined) expiry.remove({ webhook_configuration, certificate: 'ca' });
      else expiry.set({ webhook_configuration, certificate: 'ca' }, state.signer.notAfter / 1000);
      if (state?.leaf === undefined) expiry.remove({ webhook_configuration, certificate: 'serving' });
      else expiry.set({ webhook_configuration, certificate: 'serving' }, state.leaf.notAfter / 1000);
    },
    invalidConfiguration(webhook_configuration, isInvalid) {
      if (isInvalid) invalid.set({ webhook_configuration }, 1);
      else invalid.remove({ webhook_configuration });
    },
  };
}
