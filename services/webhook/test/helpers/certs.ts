/**
 * Test certificates from the openssl CLI (Node has no X.509 generator). Tests needing them
 * are skipped, with the reason in their name, where openssl is not installed.
 */
import { spawnSync } from 'node:child_process';
import { mkdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

export const OPENSSL_AVAILABLE = spawnSync('openssl', ['version'], { stdio: 'ignore' }).status === 0;
export const OPENSSL_SKIP_REASON = OPENSSL_AVAILABLE ? '' : ' [SKIPPED: openssl CLI not found on PATH]';

export interface GeneratedPair {
  certFile: string;
  keyFile: string;
  cert: Buffer;
  key: Buffer;
}

/** A self-signed P-256 certificate for 127.0.0.1/localhost, written into `dir`. */
export function generatePair(dir: string, commonName: string): GeneratedPair {
  mkdirSync(dir, { recursive: true });
  const certFile = join(dir, 'tls.crt');
  const keyFile = join(dir, 'tls.key');
  const r = spawnSync(
    'openssl',
    [
      'req',
      '-x509',
      '-newkey',
      'ec',
      '-pkeyopt',
      'ec_paramgen_curve:prime256v1',
      '-nodes',
      '-keyout',
      keyFile,
      '-out',
      certFile,
      '-days',
      '2',
      '-subj',
      `/CN=${commonName}`,
      '-addext',
      'subjectAltName=IP:127.0.0.1,DNS:localhost',
    ],
    { encoding: 'utf8' },
  );
  if (r.status !== 0) throw new Error(`openssl failed: ${r.stderr}`);
  return { certFile, keyFile, cert: readFileSync(certFile), key: readFileSync(keyFile) };
}
