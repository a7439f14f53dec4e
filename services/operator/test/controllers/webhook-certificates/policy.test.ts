import { describe, expect, it } from '@jest/globals';
import type { CertInfo, LeafInfo } from '../../../src/controllers/webhook-certificates/pki.js';
import {
  type CertificatePolicy,
  isNoop,
  MAX_REQUEUE_MS,
  planCertificates,
  renewalTime,
} from '../../../src/controllers/webhook-certificates/policy.js';
import type { TlsState } from '../../../src/controllers/webhook-certificates/state.js';

const S = 1_000;
const POLICY: CertificatePolicy = { caValidityMs: 300 * S, certValidityMs: 60 * S, propagationDelayMs: 10 * S };
const NAMES = { dnsNames: ['hook.ns.svc'], ipAddresses: [] };

function ca(fingerprint: string, notBefore: number, notAfter: number): CertInfo {
  return { pem: `PEM ${fingerprint}\n`, fingerprint, notBefore, notAfter };
}

function leaf(
  issuer: string | undefined,
  notBefore: number,
  notAfter: number,
  extra: Partial<LeafInfo> = {},
): LeafInfo {
  return {
    pem: 'LEAF\n',
    fingerprint: `leaf-of-${issuer}`,
    notBefore,
    notAfter,
    dnsNames: ['hook.ns.svc'],
    ipAddresses: [],
    issuer,
    keyMatches: true,
    ...extra,
  };
}

/** A state without a next CA unless one is given. */
function tls(state: Pick<TlsState, 'cas' | 'signer' | 'leaf'> & Partial<TlsState>): TlsState {
  return { next: undefined, nextAddedAt: undefined, ...state };
}

/** CA A valid [0, 300 s], leaf by A valid [0, 60 s]; nothing else. */
function steady(): TlsState {
  const a = ca('A', 0, 300 * S);
  return tls({ cas: [a], signer: a, leaf: leaf('A', 0, 60 * S) });
}

/** Mid-rotation: A (valid [0, 300 s]) signs, B ([200, 500 s]) is the next CA, the leaf is A's. */
function rotating(nextAddedAt: number | undefined): TlsState {
  const a = ca('A', 0, 300 * S);
  const b = ca('B', 200 * S, 500 * S);
  return { cas: [a, b], signer: a, next: b, leaf: leaf('A', 190 * S, 250 * S), nextAddedAt };
}

describe('planCertificates', () => {
  it('bootstraps an empty Secret: a new CA signs a serving certificate at once', () => {
    const empty = tls({ cas: [], signer: undefined, leaf: undefined });
    const plan = planCertificates(empty, NAMES, POLICY, 1_000, new Set());
    expect(plan).toMatchObject({ signer: 'new', addNext: false, issueLeaf: true, keepCas: [] });
    expect(plan.reasons).toContain('no signing CA (ca.crt and ca.key missing or not a pair)');
  });

  it('changes nothing for an up-to-date pair and asks to look again when the certificate is due', () => {
    const state = steady();
    const plan = planCertificates(state, NAMES, POLICY, 10 * S, new Set(['A']));
    expect(isNoop(plan, state)).toBe(true);
    expect(plan.reasons).toEqual([]);
    expect(plan.requeueAfterMs).toBe(renewalTime(state.leaf as LeafInfo) - 10 * S); // 40 s - 10 s
  });

  it('renews the serving certificate with the same CA at 2/3 of its lifetime, keeping the bundle', () => {
    const plan = planCertificates(steady(), NAMES, POLICY, 40 * S, new Set(['A']));
    expect(plan).toMatchObject({ signer: 'keep', addNext: false, issueLeaf: true, keepCas: ['A'] });
    expect(plan.reasons).toEqual(['the serving certificate is past 2/3 of its lifetime']);
  });

  it('reissues at once a certificate for other names, with a foreign key, or signed by another CA', () => {
    const base = steady();
    const names = planCertificates(
      base,
      { dnsNames: ['other.ns.svc'], ipAddresses: [] },
      POLICY,
      1 * S,
      new Set(['A']),
    );
    expect(names.issueLeaf).toBe(true);
    const key = planCertificates(
      { ...base, leaf: leaf('A', 0, 60 * S, { keyMatches: false }) },
      NAMES,
      POLICY,
      S,
      new Set(['A']),
    );
    expect(key.reasons).toEqual(['tls.key is not the serving certificate’s key']);
    const foreign = planCertificates({ ...base, leaf: leaf('Z', 0, 60 * S) }, NAMES, POLICY, S, new Set(['A']));
    expect(foreign.reasons).toEqual(['the serving certificate is not signed by the signing CA']);
  });

  it('at 2/3 of the CA lifetime adds a next CA to the bundle but keeps signing with the current one', () => {
    const state = { ...steady(), leaf: leaf('A', 190 * S, 250 * S) };
    const plan = planCertificates(state, NAMES, POLICY, 200 * S, new Set(['A']));
    expect(plan).toMatchObject({ signer: 'keep', addNext: true, issueLeaf: false, keepCas: ['A'] });
    expect(plan.requeueAfterMs).toBe(POLICY.propagationDelayMs);
  });

  it('promotes the next CA only once the webhook configuration has trusted it for the propagation delay', () => {
    const state = rotating(200 * S);
    // Not yet in the caBundle: no promotion however long it waited.
    const untrusted = planCertificates(state, NAMES, POLICY, 260 * S, new Set(['A']));
    expect(untrusted.signer).toBe('keep');
    // In the caBundle, but for less than the delay: wait until it has been.
    const early = planCertificates(state, NAMES, POLICY, 205 * S, new Set(['A', 'B']));
    expect(early.signer).toBe('keep');
    expect(early.issueLeaf).toBe(false);
    expect(early.requeueAfterMs).toBe(5 * S);
    // Trusted for the delay: B signs; a certificate by B is issued; A stays trusted (the current certificate is A's).
    const due = planCertificates(state, NAMES, POLICY, 210 * S, new Set(['A', 'B']));
    expect(due).toMatchObject({ signer: 'promote-next', issueLeaf: true, keepCas: ['A', 'B'] });
  });

  it('keeps a retired CA until it expires, however long after the serving certificate moved off it', () => {
    const a = ca('A', 0, 300 * S);
    const b = ca('B', 200 * S, 500 * S);
    const moved = (leafFrom: number): TlsState =>
      tls({ cas: [a, b], signer: b, leaf: leaf('B', leafFrom, leafFrom + 60 * S) });
    // A webhook Pod may still serve A's last certificate: A stays, whether a propagation delay
    // (10 s) has passed since the move or many have.
    for (const now of [215, 230, 299]) {
      const state = moved(now >= 250 ? 260 * S : 210 * S); // the certificate renewed once in between
      const plan = planCertificates(state, NAMES, POLICY, now * S, new Set(['A', 'B']));
      expect({ now, keepCas: plan.keepCas, noop: isNoop(plan, state) }).toEqual({
        now,
        keepCas: ['A', 'B'],
        noop: true,
      });
    }
    // Looked at again when A expires (300 s), before the serving certificate is due (310 s).
    expect(planCertificates(moved(270 * S), NAMES, POLICY, 280 * S, new Set(['A', 'B'])).requeueAfterMs).toBe(20 * S);
    const expired = planCertificates(moved(270 * S), NAMES, POLICY, 300 * S, new Set(['A', 'B']));
    expect(expired.keepCas).toEqual(['B']);
    expect(expired.reasons).toEqual(['a CA expired and leaves the trust bundle (A)']);
  });

  it('keeps a live CA that signs nothing (seeded, or its key lost) and drops one removed from ca.crt', () => {
    const a = ca('A', 0, 300 * S);
    const b = ca('B', 0, 400 * S);
    const state = tls({ cas: [a, b], signer: b, leaf: leaf('B', 0, 60 * S) });
    expect(planCertificates(state, NAMES, POLICY, 10 * S, new Set(['A', 'B'])).keepCas).toEqual(['A', 'B']);
    // What ca.crt no longer holds is no longer in the plan's bundle, though the configuration still trusts it.
    const edited = planCertificates({ ...state, cas: [b] }, NAMES, POLICY, 10 * S, new Set(['A', 'B']));
    expect(edited.keepCas).toEqual(['B']);
  });

  it('drops an expired CA and replaces an expired signer, keeping live CAs that may still be served', () => {
    const a = ca('A', 0, 100 * S);
    const b = ca('B', 0, 400 * S);
    const state = tls({ cas: [a, b], signer: a, leaf: leaf('B', 0, 150 * S) });
    const plan = planCertificates(state, NAMES, POLICY, 120 * S, new Set(['A', 'B']));
    expect(plan).toMatchObject({ signer: 'new', issueLeaf: true, keepCas: ['B'] });
    expect(plan.reasons).toEqual([
      'the signing CA expired',
      'the serving certificate is not signed by the signing CA',
      'a CA expired and leaves the trust bundle (A)',
    ]);
  });

  it('never asks to wait longer than an hour (long timers overflow; clocks jump)', () => {
    const year = 365 * 24 * 3_600 * S;
    const a = ca('A', 0, 5 * year);
    const state = tls({ cas: [a], signer: a, leaf: leaf('A', 0, year) });
    expect(planCertificates(state, NAMES, POLICY, S, new Set(['A'])).requeueAfterMs).toBe(MAX_REQUEUE_MS);
  });

  it('a next CA without its start time is stamped (not a no-op), so its wait can end', () => {
    const state = rotating(undefined);
    const plan = planCertificates(state, NAMES, POLICY, 205 * S, new Set(['A', 'B']));
    expect(plan.signer).toBe('keep');
    expect(isNoop(plan, state)).toBe(false);
  });
});
