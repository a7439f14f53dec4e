/**
 * What the certificate Secret holds, read into the facts the policy decides on. Deterministic:
 * parsing only, nothing is generated.
 *
 * The Secret (type Opaque; the chart renders it without data, the operator fills it):
 *
 * | key           | holds                                                                  |
 * |---------------|------------------------------------------------------------------------|
 * | `ca.crt`      | every CA the webhook configuration trusts (PEM bundle, oldest first)   |
 * | `ca.key`      | the key of the CA that signs serving certificates ("signer")           |
 * | `next-ca.key` | during a CA rotation only: the key of the CA that will sign next      |
 * | `tls.crt`     | the serving certificate the webhook Pods mount                         |
 * | `tls.key`     | its key                                                                |
 *
 * The Helm-generated Secret has the same `ca.crt`, `ca.key`, `tls.crt`, `tls.key`: the chart
 * seeds this Secret from it on an upgrade, and the operator carries on with the same CA.
 */
import {
  type CertInfo,
  certForKey,
  certInfo,
  type LeafInfo,
  leafInfo,
  parsePrivateKey,
  splitPemBundle,
} from './pki.js';

export const CA_CERT_KEY = 'ca.crt';
export const CA_KEY_KEY = 'ca.key';
export const NEXT_CA_KEY_KEY = 'next-ca.key';
export const TLS_CERT_KEY = 'tls.crt';
export const TLS_KEY_KEY = 'tls.key';

/** When the next CA joined the bundle (RFC 3339): it may sign once the propagation delay has passed. */
export const NEXT_CA_ADDED_AT_ANNOTATION = 'isolation.kubeplus.io/next-ca-added-at';

export interface TlsState {
  /** The bundle, in order, without duplicates; blocks that are not certificates are left out. */
  cas: CertInfo[];
  /** The CA `ca.key` belongs to. */
  signer: CertInfo | undefined;
  /** The CA `next-ca.key` belongs to, if it is not the signer. */
  next: CertInfo | undefined;
  leaf: LeafInfo | undefined;
  nextAddedAt: number | undefined;
}

function time(text: string | undefined): number | undefined {
  if (text === undefined) return undefined;
  const t = Date.parse(text);
  return Number.isNaN(t) ? undefined : t;
}

/** `data`: the Secret's values, decoded (UTF-8 PEM text). */
export function readTlsState(
  data: Readonly<Record<string, string>>,
  annotations: Readonly<Record<string, string>> = {},
): TlsState {
  const seen = new Set<string>();
  const caCerts = splitPemBundle(data[CA_CERT_KEY] ?? '').filter((c) => {
    if (seen.has(c.fingerprint256)) return false;
    seen.add(c.fingerprint256);
    return true;
  });
  const signerCert = certForKey(caCerts, parsePrivateKey(data[CA_KEY_KEY]));
  const nextCert = certForKey(caCerts, parsePrivateKey(data[NEXT_CA_KEY_KEY]));
  const leafCert = splitPemBundle(data[TLS_CERT_KEY] ?? '')[0];
  return {
    cas: caCerts.map(certInfo),
    signer: signerCert && certInfo(signerCert),
    next: nextCert && nextCert.fingerprint256 !== signerCert?.fingerprint256 ? certInfo(nextCert) : undefined,
    leaf: leafCert && leafInfo(leafCert, parsePrivateKey(data[TLS_KEY_KEY]), caCerts),
    nextAddedAt: time(annotations[NEXT_CA_ADDED_AT_ANNOTATION]),
  };
}

/** Fingerprints of the CAs in a caBundle (base64 of a PEM bundle, as the API carries it). */
export function bundleFingerprints(caBundle: string | undefined): Set<string> {
  if (!caBundle) return new Set();
  return new Set(splitPemBundle(Buffer.from(caBundle, 'base64').toString('utf8')).map((c) => c.fingerprint256));
}
