// @peculiar/x509 resolves its internals through tsyringe, which needs the Reflect metadata API;
// this side-effect import must stay before the x509 import.
import 'reflect-metadata';
import { createPrivateKey, generateKeyPair as generateKeyPairCb, randomBytes, webcrypto } from 'node:crypto';
import { isIP } from 'node:net';
import { promisify } from 'node:util';
import * as x509 from '@peculiar/x509';

x509.cryptoProvider.set(webcrypto);

type CryptoKey = webcrypto.CryptoKey;
type CryptoKeyPair = webcrypto.CryptoKeyPair;

const generateKeyPair = promisify(generateKeyPairCb);

/** ECDSA P-256 with SHA-256: accepted by every Go TLS stack involved, and fast to generate. */
const ALGORITHM = { name: 'ECDSA', namedCurve: 'P-256', hash: 'SHA-256' } as const;
const DAY_MS = 24 * 60 * 60 * 1000;

export interface CertAndKey {
  certPem: string;
  /** PKCS#8 PEM ("BEGIN PRIVATE KEY"). */
  keyPem: string;
}

export type CertUsage = 'server' | 'client';

export interface IssueOptions {
  commonName: string;
  /** Subject O= entries: Kubernetes reads them as the user's groups. */
  organizations?: readonly string[];
  /** DNS names and IP addresses for the subjectAltName (servers). */
  hosts?: readonly string[];
  usages: readonly CertUsage[];
  validityDays?: number;
}

function randomSerial(): string {
  const bytes = randomBytes(16);
  bytes[0] = (bytes[0] ?? 0) & 0x7f; // positive
  return bytes.toString('hex');
}

function escapeRdn(value: string): string {
  return value.replace(/([,+"\\<>;=])/g, '\\$1');
}

function subjectName(commonName: string, organizations: readonly string[] = []): string {
  return [`CN=${escapeRdn(commonName)}`, ...organizations.map((o) => `O=${escapeRdn(o)}`)].join(', ');
}

async function newKeys(): Promise<CryptoKeyPair> {
  return (await webcrypto.subtle.generateKey(ALGORITHM, true, ['sign', 'verify'])) as CryptoKeyPair;
}

async function privateKeyPem(key: CryptoKey): Promise<string> {
  const der = Buffer.from(await webcrypto.subtle.exportKey('pkcs8', key));
  return createPrivateKey({ key: der, format: 'der', type: 'pkcs8' })
    .export({ format: 'pem', type: 'pkcs8' })
    .toString();
}

function validity(days: number): { notBefore: Date; notAfter: Date } {
  const now = Date.now();
  // Backdated an hour so a slightly skewed clock never sees a not-yet-valid certificate.
  return { notBefore: new Date(now - 60 * 60 * 1000), notAfter: new Date(now + days * DAY_MS) };
}

/** Splits hosts into subjectAltName entries: IP literals become iPAddress, the rest dNSName. */
export function subjectAltNames(hosts: readonly string[]): x509.JsonGeneralName[] {
  return hosts.map((host) => (isIP(host) ? { type: 'ip', value: host } : { type: 'dns', value: host }));
}

/** An in-memory certificate authority for one test cluster. */
export class CertificateAuthority {
  private constructor(
    private readonly cert: x509.X509Certificate,
    private readonly keys: CryptoKeyPair,
    readonly certPem: string,
    readonly keyPem: string,
  ) {}

  static async create(commonName: string, validityDays = 30): Promise<CertificateAuthority> {
    const keys = await newKeys();
    const cert = await x509.X509CertificateGenerator.createSelfSigned({
      serialNumber: randomSerial(),
      name: subjectName(commonName),
      ...validity(validityDays),
      signingAlgorithm: ALGORITHM,
      keys,
      extensions: [
        new x509.BasicConstraintsExtension(true, 0, true),
        new x509.KeyUsagesExtension(x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.cRLSign, true),
        await x509.SubjectKeyIdentifierExtension.create(keys.publicKey),
      ],
    });
    return new CertificateAuthority(cert, keys, cert.toString('pem'), await privateKeyPem(keys.privateKey));
  }

  /** Re-creates a CA from its PEM files, e.g. in a test suite attaching to a running cluster. */
  static async fromPem({ certPem, keyPem }: CertAndKey): Promise<CertificateAuthority> {
    const cert = new x509.X509Certificate(certPem);
    const der = createPrivateKey(keyPem).export({ format: 'der', type: 'pkcs8' });
    const privateKey = await webcrypto.subtle.importKey('pkcs8', der, ALGORITHM, true, ['sign']);
    const publicKey = await cert.publicKey.export(ALGORITHM, ['verify']);
    return new CertificateAuthority(cert, { privateKey, publicKey }, certPem, keyPem);
  }

  async issue(opts: IssueOptions): Promise<CertAndKey> {
    if (opts.usages.length === 0) throw new Error(`certificate for ${opts.commonName}: no usage given`);
    const hosts = opts.hosts ?? [];
    if (opts.usages.includes('server') && hosts.length === 0) {
      throw new Error(`serving certificate for ${opts.commonName}: at least one host (DNS name or IP) is required`);
    }
    const keys = await newKeys();
    const extendedUsages = opts.usages.map((u) =>
      u === 'server' ? x509.ExtendedKeyUsage.serverAuth : x509.ExtendedKeyUsage.clientAuth,
    );
    const extensions: x509.Extension[] = [
      new x509.BasicConstraintsExtension(false, undefined, true),
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.digitalSignature, true),
      new x509.ExtendedKeyUsageExtension(extendedUsages),
      await x509.AuthorityKeyIdentifierExtension.create(this.cert),
    ];
    if (hosts.length > 0) extensions.push(new x509.SubjectAlternativeNameExtension(subjectAltNames(hosts)));
    const cert = await x509.X509CertificateGenerator.create({
      serialNumber: randomSerial(),
      subject: subjectName(opts.commonName, opts.organizations),
      issuer: this.cert.subject,
      ...validity(opts.validityDays ?? 30),
      signingAlgorithm: ALGORITHM,
      publicKey: keys.publicKey,
      signingKey: this.keys.privateKey,
      extensions,
    });
    return { certPem: cert.toString('pem'), keyPem: await privateKeyPem(keys.privateKey) };
  }

  /** A TLS serving certificate for `hosts` (CN = first host). */
  issueServingCert(hosts: readonly string[]): Promise<CertAndKey> {
    return this.issue({ commonName: hosts[0] ?? 'server', hosts, usages: ['server'] });
  }

  /** A client certificate authenticating as `user` in `groups` (Kubernetes x509 authn). */
  issueClientCert(user: string, groups: readonly string[] = []): Promise<CertAndKey> {
    return this.issue({ commonName: user, organizations: groups, usages: ['client'] });
  }
}

/** RSA-2048 key pair for signing (and verifying) service-account tokens, as PEM. */
export async function generateServiceAccountKeyPair(): Promise<{ privateKeyPem: string; publicKeyPem: string }> {
  const { privateKey, publicKey } = await generateKeyPair('rsa', {
    modulusLength: 2048,
    privateKeyEncoding: { format: 'pem', type: 'pkcs8' },
    publicKeyEncoding: { format: 'pem', type: 'spki' },
  });
  return { privateKeyPem: privateKey, publicKeyPem: publicKey };
}
