/**
 * X.509 for the webhook's certificates: reading what a Secret holds (node:crypto, which parses
 * but cannot issue) and issuing new CAs and serving certificates (@peculiar/x509 on WebCrypto).
 * Keys are ECDSA P-256 (what cert-manager and the chart's Helm mode use), PKCS#8 PEM.
 */
// @peculiar/x509 resolves its internals through tsyringe, which needs the Reflect metadata API;
// this side-effect import must stay before the x509 import.
import 'reflect-metadata';
import { createPrivateKey, type KeyObject, randomBytes, webcrypto, X509Certificate } from 'node:crypto';
import * as x509 from '@peculiar/x509';

x509.cryptoProvider.set(webcrypto);

const ALGORITHM = { name: 'ECDSA', namedCurve: 'P-256', hash: 'SHA-256' } as const;

/** A certificate as the policy sees it. Times in ms since the epoch. */
export interface CertInfo {
  pem: string;
  /** SHA-256 fingerprint, as node:crypto formats it (AA:BB:...). */
  fingerprint: string;
  notBefore: number;
  notAfter: number;
}

export interface LeafInfo extends CertInfo {
  dnsNames: string[];
  ipAddresses: string[];
  /** Fingerprint of the CA (among those given) that issued and signed it, if any. */
  issuer: string | undefined;
  /** tls.key is the private key of this certificate. */
  keyMatches: boolean;
}

const PEM_CERT = /-----BEGIN CERTIFICATE-----[\s\S]*?-----END CERTIFICATE-----/g;

/** Each certificate of a PEM bundle; anything that is not one is skipped. */
export function splitPemBundle(text: string): X509Certificate[] {
  const out: X509Certificate[] = [];
  for (const block of text.match(PEM_CERT) ?? []) {
    try {
      out.push(new X509Certificate(block));
    } catch {
      // Not a certificate after all: left out, like a PEM block of another type.
    }
  }
  return out;
}

export function certInfo(cert: X509Certificate): CertInfo {
  return {
    pem: `${cert.toString().trim()}\n`,
    fingerprint: cert.fingerprint256,
    notBefore: cert.validFromDate.getTime(),
    notAfter: cert.validToDate.getTime(),
  };
}

/** A PEM private key, or undefined when `text` is not one. */
export function parsePrivateKey(text: string | undefined): KeyObject | undefined {
  if (text === undefined || text.trim() === '') return undefined;
  try {
    return createPrivateKey(text);
  } catch {
    return undefined;
  }
}

/** `DNS:a, DNS:b, IP Address:10.0.0.1` (node:crypto's subjectAltName) → names and addresses. */
export function parseSubjectAltName(san: string | undefined): { dnsNames: string[]; ipAddresses: string[] } {
  const dnsNames: string[] = [];
  const ipAddresses: string[] = [];
  for (const part of (san ?? '').split(',').map((s) => s.trim())) {
    if (part.startsWith('DNS:')) dnsNames.push(part.slice(4));
    else if (part.startsWith('IP Address:')) ipAddresses.push(part.slice(11));
  }
  return { dnsNames, ipAddresses };
}

export function leafInfo(cert: X509Certificate, key: KeyObject | undefined, cas: readonly X509Certificate[]): LeafInfo {
  const issuer = cas.find((ca) => {
    try {
      return cert.checkIssued(ca) && cert.verify(ca.publicKey);
    } catch {
      return false;
    }
  });
  let keyMatches = false;
  try {
    keyMatches = key !== undefined && cert.checkPrivateKey(key);
  } catch {
    keyMatches = false;
  }
  return {
    ...certInfo(cert),
    ...parseSubjectAltName(cert.subjectAltName),
    issuer: issuer?.fingerprint256,
    keyMatches,
  };
}

/** The certificate among `certs` whose private key is `key`. */
export function certForKey(certs: readonly X509Certificate[], key: KeyObject | undefined): X509Certificate | undefined {
  if (key === undefined) return undefined;
  return certs.find((c) => {
    try {
      return c.checkPrivateKey(key);
    } catch {
      return false;
    }
  });
}

/** A certificate and its key, both PEM. */
export interface IssuedPair {
  cert: string;
  key: string;
}

export interface Validity {
  notBefore: number;
  notAfter: number;
}

function randomSerial(): string {
  const bytes = randomBytes(16);
  bytes[0] = (bytes[0] ?? 0) & 0x7f; // positive
  return bytes.toString('hex');
}

async function generateKeys(): Promise<webcrypto.CryptoKeyPair> {
  return (await webcrypto.subtle.generateKey(ALGORITHM, true, ['sign', 'verify'])) as webcrypto.CryptoKeyPair;
}

async function exportKey(key: webcrypto.CryptoKey): Promise<string> {
  const der = Buffer.from(await webcrypto.subtle.exportKey('pkcs8', key));
  return createPrivateKey({ key: der, format: 'der', type: 'pkcs8' }).export({
    format: 'pem',
    type: 'pkcs8',
  }) as string;
}

function escapeRdn(value: string): string {
  return value.replace(/([,+"\\<>;=])/g, '\\$1');
}

/** A self-signed CA (basicConstraints CA:true, pathlen 0; keyCertSign and cRLSign only). */
export async function issueCa(commonName: string, validity: Validity): Promise<IssuedPair> {
  const keys = await generateKeys();
  const cert = await x509.X509CertificateGenerator.createSelfSigned({
    serialNumber: randomSerial(),
    name: `CN=${escapeRdn(commonName)}`,
    notBefore: new Date(validity.notBefore),
    notAfter: new Date(validity.notAfter),
    signingAlgorithm: ALGORITHM,
    keys,
    extensions: [
      new x509.BasicConstraintsExtension(true, 0, true),
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.cRLSign, true),
      await x509.SubjectKeyIdentifierExtension.create(keys.publicKey),
    ],
  });
  return { cert: `${cert.toString('pem')}\n`, key: await exportKey(keys.privateKey) };
}

async function importSigningKey(pem: string): Promise<webcrypto.CryptoKey> {
  const der = createPrivateKey(pem).export({ format: 'der', type: 'pkcs8' });
  return webcrypto.subtle.importKey('pkcs8', der, ALGORITHM, false, ['sign']);
}

export interface LeafRequest {
  dnsNames: readonly string[];
  ipAddresses: readonly string[];
  validity: Validity;
}

/** A serving certificate (serverAuth) for `request`'s names, signed by `ca`. */
export async function issueLeaf(ca: IssuedPair, request: LeafRequest): Promise<IssuedPair> {
  const keys = await generateKeys();
  const issuer = new x509.X509Certificate(ca.cert);
  const names = [
    ...request.dnsNames.map((value) => ({ type: 'dns' as const, value })),
    ...request.ipAddresses.map((value) => ({ type: 'ip' as const, value })),
  ];
  const commonName = request.dnsNames[0] ?? request.ipAddresses[0] ?? 'webhook';
  const cert = await x509.X509CertificateGenerator.create({
    serialNumber: randomSerial(),
    subject: `CN=${escapeRdn(commonName)}`,
    issuer: issuer.subject,
    notBefore: new Date(request.validity.notBefore),
    notAfter: new Date(request.validity.notAfter),
    signingAlgorithm: ALGORITHM,
    publicKey: keys.publicKey,
    signingKey: await importSigningKey(ca.key),
    extensions: [
      new x509.BasicConstraintsExtension(false, undefined, true),
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.digitalSignature, true),
      new x509.ExtendedKeyUsageExtension([x509.ExtendedKeyUsage.serverAuth]),
      new x509.SubjectAlternativeNameExtension(names),
      await x509.AuthorityKeyIdentifierExtension.create(issuer, false),
    ],
  });
  return { cert: `${cert.toString('pem')}\n`, key: await exportKey(keys.privateKey) };
}
