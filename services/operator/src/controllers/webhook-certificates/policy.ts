/**
 * When the webhook's CA and serving certificate change. Pure: the Secret's state, what the
 * webhook configuration trusts, the wanted names, the settings and the time in; a plan out.
 *
 * The rule that keeps every admission verifiable (failurePolicy Ignore turns a TLS failure into
 * a Pod admitted without isolation): a certificate is only ever served while the API server
 * trusts its CA, and a CA is only removed from the trust bundle once nothing it signed is valid.
 * Hence, as Gatekeeper's and Kyverno's controllers do, but with overlap:
 *
 * 1. The serving certificate is renewed, by the same CA, at 2/3 of its lifetime (cert-manager's
 *    default), or at once when it is missing, broken, for other names, or not the signer's.
 * 2. At 2/3 of the CA's lifetime a NEXT CA joins the bundle (the webhook configuration trusts
 *    both); it signs nothing yet.
 * 3. Once the configuration has trusted the next CA for the propagation delay (every API server
 *    has it), the next CA becomes the signer and a serving certificate is issued by it.
 * 4. A retired CA stays in the bundle until it expires. The serving certificates it signed never
 *    outlive it, and a webhook Pod may serve one well after the Secret changed (the kubelet
 *    refreshes a mounted Secret at its sync period plus up to 50% jitter, later on a busy node):
 *    removing the CA a fixed delay after the move bets on that lag. Its key left the Secret when
 *    the next CA was promoted, so keeping it trusts nothing new. A CA removed from `ca.crt` by
 *    hand leaves the bundle at once.
 *
 * Lifetimes come from the certificates themselves, so a CA or certificate clamped short (a leaf
 * never outlives its CA) renews proportionally sooner, never in a loop.
 */
import type { CertInfo } from './pki.js';
import type { TlsState } from './state.js';

export interface CertificatePolicy {
  caValidityMs: number;
  certValidityMs: number;
  /** How long a change takes to reach every API server (caBundle) and every webhook Pod (Secret volume). */
  propagationDelayMs: number;
}

export interface WantedNames {
  dnsNames: readonly string[];
  ipAddresses: readonly string[];
}

export type SignerStep = 'keep' | 'new' | 'promote-next';

export interface CertificatePlan {
  /** keep: the current signer signs; new: a new CA signs at once; promote-next: the next CA signs. */
  signer: SignerStep;
  /** Generate the next CA (bundle now, signs after the propagation delay). */
  addNext: boolean;
  /** Issue a serving certificate with the (resulting) signer. */
  issueLeaf: boolean;
  /** Fingerprints of the current bundle's CAs that stay, in bundle order. */
  keepCas: string[];
  /** Why anything changes, for the log; empty when nothing does. */
  reasons: string[];
  /** When to look again (the next deadline), at least 1 s, at most 1 h. */
  requeueAfterMs: number;
}

export const MIN_REQUEUE_MS = 1_000;
/** Timers are re-armed at least hourly: a long setTimeout overflows, and a clock may jump. */
export const MAX_REQUEUE_MS = 3_600_000;

/** 2/3 of the way from notBefore to notAfter. */
export function renewalTime(cert: Pick<CertInfo, 'notBefore' | 'notAfter'>): number {
  return cert.notBefore + ((cert.notAfter - cert.notBefore) * 2) / 3;
}

/** Backdating of notBefore for clock skew: 5 minutes, or a tenth of a short validity. */
export function skewAllowance(validityMs: number): number {
  return Math.min(300_000, Math.floor(validityMs / 10));
}

function sameSet(a: readonly string[], b: readonly string[]): boolean {
  const x = new Set(a);
  const y = new Set(b);
  return x.size === y.size && [...x].every((v) => y.has(v));
}

export function planCertificates(
  state: TlsState,
  wanted: WantedNames,
  policy: CertificatePolicy,
  now: number,
  /** Fingerprints of the CAs every webhook entry's caBundle holds. */
  trusted: ReadonlySet<string>,
): CertificatePlan {
  const reasons: string[] = [];
  const deadlines: number[] = [];
  const live = (c: CertInfo | undefined): c is CertInfo => c !== undefined && c.notAfter > now;
  const delay = policy.propagationDelayMs;

  // ---- the signing CA ----
  let signer: SignerStep = 'keep';
  let addNext = false;
  const next = live(state.next) ? state.next : undefined;
  if (!live(state.signer)) {
    signer = 'new';
    reasons.push(state.signer ? 'the signing CA expired' : 'no signing CA (ca.crt and ca.key missing or not a pair)');
  } else if (next !== undefined) {
    const since = state.nextAddedAt ?? now;
    if (trusted.has(next.fingerprint) && now >= since + delay) {
      signer = 'promote-next';
      reasons.push('the next CA has been trusted for the propagation delay: it signs from now on');
    } else {
      deadlines.push(Math.max(since + delay, now + MIN_REQUEUE_MS));
    }
  } else if (now >= renewalTime(state.signer)) {
    addNext = true;
    reasons.push('the CA is past 2/3 of its lifetime: a next CA joins the trust bundle');
    deadlines.push(now + delay);
  } else {
    deadlines.push(renewalTime(state.signer));
  }
  const signerFingerprint =
    signer === 'keep' ? state.signer?.fingerprint : signer === 'promote-next' ? next?.fingerprint : undefined;

  // ---- the serving certificate ----
  const leaf = state.leaf;
  let leafReason: string | undefined;
  if (leaf === undefined) leafReason = 'no serving certificate';
  else if (!leaf.keyMatches) leafReason = 'tls.key is not the serving certificate’s key';
  else if (leaf.notAfter <= now) leafReason = 'the serving certificate expired';
  else if (signerFingerprint === undefined || leaf.issuer !== signerFingerprint)
    leafReason = 'the serving certificate is not signed by the signing CA';
  else if (!sameSet(leaf.dnsNames, wanted.dnsNames) || !sameSet(leaf.ipAddresses, wanted.ipAddresses))
    leafReason = 'the serving certificate names other hosts than the webhook configuration asks for';
  else if (now >= renewalTime(leaf)) leafReason = 'the serving certificate is past 2/3 of its lifetime';
  else deadlines.push(renewalTime(leaf));
  const issueLeaf = leafReason !== undefined;
  if (leafReason !== undefined) reasons.push(leafReason);

  // ---- the trust bundle ----
  // Every live CA of ca.crt stays (see 4. above); an expired one goes: nothing it signed is valid.
  const keepCas: string[] = [];
  for (const ca of state.cas) {
    if (ca.notAfter <= now) {
      reasons.push(`a CA expired and leaves the trust bundle (${ca.fingerprint})`);
      continue;
    }
    keepCas.push(ca.fingerprint);
    deadlines.push(ca.notAfter);
  }

  const soonest = Math.min(...deadlines, now + MAX_REQUEUE_MS);
  const requeueAfterMs = Math.min(MAX_REQUEUE_MS, Math.max(MIN_REQUEUE_MS, soonest - now));
  return { signer, addNext, issueLeaf, keepCas, reasons, requeueAfterMs };
}

/** A plan that changes nothing. */
export function isNoop(plan: CertificatePlan, state: TlsState): boolean {
  return (
    plan.signer === 'keep' &&
    !plan.addNext &&
    !plan.issueLeaf &&
    plan.keepCas.length === state.cas.length &&
    // A next CA without its start time gets one written (its wait starts then).
    (state.next === undefined || state.nextAddedAt !== undefined)
  );
}
