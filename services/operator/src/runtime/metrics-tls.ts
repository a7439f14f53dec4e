/**
 * The serving certificate of the operator's HTTPS port (--metrics-secure), as controller-runtime's
 * metrics server gets one: a provided pair (--metrics-tls-cert-file/-key-file, e.g. a cert-manager
 * Secret), reloaded without restart when its files change; else a self-signed one made at start
 * (a throwaway CA and a serving certificate it signs, client-go's GenerateSelfSignedCertKey), which
 * a scraper can only skip verifying (the chart's ServiceMonitor says so).
 *
 * Issued with the webhook certificates' X.509 code (controllers/webhook-certificates/pki.ts:
 * @peculiar/x509, ECDSA P-256); a provided pair is checked the way node:tls will use it.
 */
import { statSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { hostname } from 'node:os';
import tls from 'node:tls';
import { describeError, type Logger } from '@kubeplus-isolation/service';
import { issueCa, issueLeaf } from '../controllers/webhook-certificates/pki.js';

export const MIN_TLS_VERSION = 'TLSv1.2' as const;
const HOUR_MS = 3_600_000;
/** A self-signed certificate's lifetime: the process restarts long before (a new one each start). */
const SELF_SIGNED_VALIDITY_MS = 365 * 24 * HOUR_MS;

/** A certificate (chain) and its private key, PEM. */
export interface KeyPair {
  cert: string;
  key: string;
}

export interface TlsFiles {
  certFile: string;
  keyFile: string;
}

/** Reads a pair and checks that node:tls accepts it; throws naming the file and the problem. */
export async function loadKeyPair(files: TlsFiles): Promise<KeyPair> {
  const read = async (path: string, what: string): Promise<string> => {
    try {
      return await readFile(path, 'utf8');
    } catch (err) {
      throw new Error(`cannot read the metrics ${what} file ${path}: ${describeError(err)}`);
    }
  };
  const pair = { cert: await read(files.certFile, 'certificate'), key: await read(files.keyFile, 'key') };
  try {
    tls.createSecureContext({ ...pair, minVersion: MIN_TLS_VERSION });
  } catch (err) {
    throw new Error(
      `the metrics certificate ${files.certFile} and key ${files.keyFile} are not a valid pair: ${describeError(err)}`,
    );
  }
  return pair;
}

/** A serving certificate for this host (its name, localhost, 127.0.0.1) signed by a CA made for it and forgotten. */
export async function selfSignedPair(now: number = Date.now()): Promise<KeyPair> {
  const validity = { notBefore: now - HOUR_MS, notAfter: now + SELF_SIGNED_VALIDITY_MS };
  const host = hostname();
  const ca = await issueCa(`kubeplus-isolation-operator-ca@${Math.floor(now / 1000)}`, validity);
  const dnsNames = [...new Set([host, 'localhost'].filter((h) => h !== ''))];
  const leaf = await issueLeaf(ca, { dnsNames, ipAddresses: ['127.0.0.1'], validity });
  return { cert: `${leaf.cert}${ca.cert}`, key: leaf.key };
}

/** What the HTTPS port serves, and how it follows a provided pair. */
export interface MetricsTls {
  readonly source: 'files' | 'self-signed';
  readonly pair: KeyPair;
  /** Keeps `server`'s certificate in step with the files (self-signed: nothing to do); returns the stop. */
  follow(server: tls.Server): () => void;
}

export interface MetricsTlsOptions {
  /** A provided pair; absent: self-signed. */
  files?: TlsFiles;
  /** How often the files are checked for a change (default 10 s). */
  reloadIntervalMs?: number;
  logger?: Logger;
}

function signature(path: string): string {
  try {
    const s = statSync(path);
    return `${s.dev}:${s.ino}:${s.size}:${s.mtimeMs}:${s.ctimeMs}`;
  } catch (err) {
    return `missing:${(err as NodeJS.ErrnoException).code ?? 'error'}`;
  }
}

/** The pair to serve: the files' (which must load now), or a self-signed one. */
export async function metricsTls(options: MetricsTlsOptions = {}): Promise<MetricsTls> {
  const { files, logger } = options;
  if (files === undefined) {
    return { source: 'self-signed', pair: await selfSignedPair(), follow: () => () => {} };
  }
  const initial = await loadKeyPair(files);
  const intervalMs = options.reloadIntervalMs ?? 10_000;
  return {
    source: 'files',
    pair: initial,
    follow(server) {
      const current = (): string => `${signature(files.certFile)}|${signature(files.keyFile)}`;
      let seen = current();
      let loading = false;
      const timer = setInterval(() => {
        const now = current();
        if (now === seen || loading) return;
        loading = true;
        loadKeyPair(files).then(
          (pair) => {
            loading = false;
            seen = now;
            server.setSecureContext({ ...pair, minVersion: MIN_TLS_VERSION });
            logger?.info('metrics TLS certificate reloaded', { certFile: files.certFile });
          },
          (err: unknown) => {
            loading = false;
            // Tried again only when the files change again (a Secret update is written at once).
            seen = now;
            logger?.error('new metrics TLS certificate/key rejected; still serving the previous pair', {
              error: describeError(err),
            });
          },
        );
      }, intervalMs);
      timer.unref();
      return () => clearInterval(timer);
    },
  };
}
