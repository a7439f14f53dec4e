/**
 * Carries a plan out on the Secret's contents: generates the CAs and the serving certificate it
 * asks for and assembles the new data and annotations. Nothing is written here; the reconciler
 * writes the result once.
 */
import { type IssuedPair, issueCa, issueLeaf, type Validity } from './pki.js';
import { type CertificatePlan, type CertificatePolicy, skewAllowance, type WantedNames } from './policy.js';
import {
  CA_CERT_KEY,
  CA_KEY_KEY,
  NEXT_CA_ADDED_AT_ANNOTATION,
  NEXT_CA_KEY_KEY,
  TLS_CERT_KEY,
  TLS_KEY_KEY,
  type TlsState,
} from './state.js';

export interface SecretContents {
  /** Decoded values. */
  data: Record<string, string>;
  annotations: Record<string, string>;
}

/** What generates certificates (pki.ts; tests may count calls). */
export interface Issuer {
  ca(commonName: string, validity: Validity): Promise<IssuedPair>;
  leaf(
    ca: IssuedPair,
    request: { dnsNames: readonly string[]; ipAddresses: readonly string[]; validity: Validity },
  ): Promise<IssuedPair>;
}

export const pkiIssuer: Issuer = { ca: issueCa, leaf: issueLeaf };

export interface ExecuteInput {
  state: TlsState;
  current: SecretContents;
  plan: CertificatePlan;
  wanted: WantedNames;
  policy: CertificatePolicy;
  now: number;
  /** Subject of new CAs. */
  caCommonName: string;
  issuer?: Issuer;
}

function validity(now: number, validityMs: number, cap?: number): Validity {
  const notAfter = now + validityMs;
  return {
    notBefore: now - skewAllowance(validityMs),
    notAfter: cap === undefined ? notAfter : Math.min(notAfter, cap),
  };
}

export async function executePlan(input: ExecuteInput): Promise<SecretContents> {
  const { state, current, plan, wanted, policy, now } = input;
  const issuer = input.issuer ?? pkiIssuer;
  const data = { ...current.data };
  const annotations = { ...current.annotations };
  const stamp = new Date(now).toISOString();

  const bundle = state.cas.filter((ca) => plan.keepCas.includes(ca.fingerprint)).map((ca) => ca.pem);
  let signer: IssuedPair | undefined;
  let signerNotAfter: number | undefined;
  if (plan.signer === 'new') {
    signer = await issuer.ca(input.caCommonName, validity(now, policy.caValidityMs));
    bundle.push(signer.cert);
    signerNotAfter = now + policy.caValidityMs;
    delete data[NEXT_CA_KEY_KEY];
    delete annotations[NEXT_CA_ADDED_AT_ANNOTATION];
  } else if (plan.signer === 'promote-next' && state.next !== undefined) {
    signer = { cert: state.next.pem, key: current.data[NEXT_CA_KEY_KEY] ?? '' };
    signerNotAfter = state.next.notAfter;
    delete data[NEXT_CA_KEY_KEY];
    delete annotations[NEXT_CA_ADDED_AT_ANNOTATION];
  } else if (state.signer !== undefined) {
    signer = { cert: state.signer.pem, key: current.data[CA_KEY_KEY] ?? '' };
    signerNotAfter = state.signer.notAfter;
    if (state.next !== undefined && annotations[NEXT_CA_ADDED_AT_ANNOTATION] === undefined) {
      // A next CA whose start is unknown waits a whole delay from now.
      annotations[NEXT_CA_ADDED_AT_ANNOTATION] = stamp;
    }
  }
  if (signer === undefined) throw new Error('certificate plan without a signing CA');
  data[CA_KEY_KEY] = signer.key;

  if (plan.addNext) {
    const next = await issuer.ca(input.caCommonName, validity(now, policy.caValidityMs));
    bundle.push(next.cert);
    data[NEXT_CA_KEY_KEY] = next.key;
    annotations[NEXT_CA_ADDED_AT_ANNOTATION] = stamp;
  }
  data[CA_CERT_KEY] = bundle.join('');

  if (plan.issueLeaf) {
    const leaf = await issuer.leaf(signer, {
      dnsNames: wanted.dnsNames,
      ipAddresses: wanted.ipAddresses,
      validity: validity(now, policy.certValidityMs, signerNotAfter),
    });
    data[TLS_CERT_KEY] = leaf.cert;
    data[TLS_KEY_KEY] = leaf.key;
  }
  return { data, annotations };
}

/** The caBundle for the webhook configuration: the Secret's ca.crt, base64. */
export function caBundleOf(contents: SecretContents): string {
  return Buffer.from(contents.data[CA_CERT_KEY] ?? '', 'utf8').toString('base64');
}
