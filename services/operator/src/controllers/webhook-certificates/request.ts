/**
 * Which webhook configurations the operator issues certificates for, and for what: a
 * MutatingWebhookConfiguration labelled `isolation.kubeplus.io/certificates: operator` (the chart
 * does it in its default TLS mode) names, in annotations, the Secret to keep the certificates in
 * and the names the serving certificate must carry. Pure. The operator's RBAC decides which of
 * them it may actually write: the chart grants only its own webhook's configuration and Secret.
 */

import { isIP } from 'node:net';
import { isDns1123Label, isDns1123Subdomain } from '@kubeplus-isolation/spec';

export const CERTIFICATES_LABEL = 'isolation.kubeplus.io/certificates';
export const CERTIFICATES_LABEL_VALUE = 'operator';
export const CERTIFICATES_SELECTOR = `${CERTIFICATES_LABEL}=${CERTIFICATES_LABEL_VALUE}`;
export const SECRET_ANNOTATION = 'isolation.kubeplus.io/certificates-secret';
export const DNS_NAMES_ANNOTATION = 'isolation.kubeplus.io/certificates-dns-names';
export const IP_ADDRESSES_ANNOTATION = 'isolation.kubeplus.io/certificates-ip-addresses';

export interface CertificateRequest {
  webhookConfiguration: string;
  secret: { namespace: string; name: string };
  dnsNames: string[];
  ipAddresses: string[];
}

export type ParsedRequest = { ok: true; value: CertificateRequest } | { ok: false; errors: string[] };

interface ConfigurationLike {
  metadata?: { name?: string; labels?: Record<string, string>; annotations?: Record<string, string> } | undefined;
}

function list(text: string | undefined): string[] {
  return (text ?? '')
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s !== '');
}

/** A DNS name of a certificate: a subdomain, or one with a leading `*.` label. */
function isDnsName(name: string): boolean {
  return isDns1123Subdomain(name.startsWith('*.') ? name.slice(2) : name);
}

export function certificateRequest(config: ConfigurationLike): ParsedRequest {
  const meta = config.metadata ?? {};
  const errors: string[] = [];
  const name = meta.name ?? '';
  const annotations = meta.annotations ?? {};
  const ref = annotations[SECRET_ANNOTATION] ?? '';
  const [namespace = '', secretName = '', ...rest] = ref.split('/');
  if (rest.length > 0 || !isDns1123Label(namespace) || !isDns1123Subdomain(secretName)) {
    errors.push(`${SECRET_ANNOTATION} must be <namespace>/<name>, got ${JSON.stringify(ref)}`);
  }
  const dnsNames = list(annotations[DNS_NAMES_ANNOTATION]);
  const ipAddresses = list(annotations[IP_ADDRESSES_ANNOTATION]);
  const badNames = dnsNames.filter((n) => !isDnsName(n));
  const badIps = ipAddresses.filter((ip) => isIP(ip) === 0);
  if (dnsNames.length + ipAddresses.length === 0) {
    errors.push(`${DNS_NAMES_ANNOTATION} (or ${IP_ADDRESSES_ANNOTATION}) must name at least one host`);
  }
  if (badNames.length > 0) errors.push(`${DNS_NAMES_ANNOTATION}: not DNS names: ${badNames.join(', ')}`);
  if (badIps.length > 0) errors.push(`${IP_ADDRESSES_ANNOTATION}: not IP addresses: ${badIps.join(', ')}`);
  if (errors.length > 0) return { ok: false, errors };
  return {
    ok: true,
    value: { webhookConfiguration: name, secret: { namespace, name: secretName }, dnsNames, ipAddresses },
  };
}
