/**
 * Test certificates generated in process with @peculiar/x509 (Node has no X.509 generator of its
 * own; e2e/src/harness/pki.ts uses the same library), so the suites needing them always run.
 */
// @peculiar/x509 resolves its internals through tsyringe, which needs the Reflect metadata API;
// this side-effect import must stay before the x509 import.
import 'reflect-metadata';
import { createPrivateKey, randomBytes, webcrypto } from 'node:crypto';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import * as x509 from '@peculiar/x509';

x509.cryptoProvider.set(webcrypto);

/** ECDSA P-256 with SHA-256, as the openssl command these tests used before (prime256v1). */
const ALGORITHM = { name: 'ECDSA', namedCurve: 'P-256', hash: 'SHA-256' } as const;
const HOUR_MS = 60 * 60 * 1000;
const VALIDITY_DAYS = 2;

export interface GeneratedPair {
  certFile: string;
  keyFile: string;
  cert: Buffer;
  key: Buffer;
}

function randomSerial(): string {
  const bytes = randomBytes(16);
  bytes[0] = (bytes[0] ?? 0) & 0x7f; // positive
  return bytes.toString('hex');
}

/**
 * A self-signed P-256 certificate for 127.0.0.1/localhost, written into `dir` as `tls.crt` and
 * `tls.key` (PKCS#8 PEM). Self-signed, it is its own CA: a client trusts it with `ca: pair.cert`,
 * and a server verifies a client presenting it the same way. Hence CA:true with keyCertSign, plus
 * digitalSignature (ECDHE-ECDSA handshakes) and both serverAuth and clientAuth.
 */
export async function generatePair(dir: string, commonName: string): Promise<GeneratedPair> {
  const keys = (await webcrypto.subtle.generateKey(ALGORITHM, true, ['sign', 'verify'])) as webcrypto.CryptoKeyPair;
  const now = Date.now();
  const certificate = await x509.X509CertificateGenerator.createSelfSigned({
    serialNumber: randomSerial(),
    name: `CN=${commonName.replace(/([,+"\\<>;=])/g, '\\$1')}`,
    // Backdated an hour so a slightly skewed clock never sees a not-yet-valid certificate.
    notBefore: new Date(now - HOUR_MS),
    notAfter: new Date(now + VALIDITY_DAYS * 24 * HOUR_MS),
    signingAlgorithm: ALGORITHM,
    keys,
    extensions: [
      new x509.BasicConstraintsExtension(true, undefined, true),
      new x509.KeyUsagesExtension(
        x509.KeyUsageFlags.digitalSignature | x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.cRLSign,
        true,
      ),
      new x509.ExtendedKeyUsageExtension([x509.ExtendedKeyUsage.serverAuth, x509.ExtendedKeyUsage.clientAuth]),
      new x509.SubjectAlternativeNameExtension([
        { type: 'ip', value: '127.0.0.1' },
        { type: 'dns', value: 'localhost' },
      ]),
      await x509.SubjectKeyIdentifierExtension.create(keys.publicKey),
      await x509.AuthorityKeyIdentifierExtension.create(keys.publicKey),
    ],
  });
  const pkcs8 = Buffer.from(await webcrypto.subtle.exportKey('pkcs8', keys.privateKey));
  const cert = Buffer.from(`${certificate.toString('pem')}\n`);
  const key = Buffer.from(
    createPrivateKey({ key: pkcs8, format: 'der', type: 'pkcs8' }).export({ format: 'pem', type: 'pkcs8' }),
  );
  mkdirSync(dir, { recursive: true });
  const certFile = join(dir, 'tls.crt');
  const keyFile = join(dir, 'tls.key');
  writeFileSync(certFile, cert);
  writeFileSync(keyFile, key, { mode: 0o600 });
  return { certFile, keyFile, cert, key };
}
