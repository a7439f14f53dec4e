/**
 * HTTPS serving with a certificate that can change under a running server.
 *
 * Kubernetes updates a mounted Secret by writing a new timestamped directory and atomically
 * swapping the `..data` symlink the file names point through; cert-manager rotates the
 * Secret the same way. The reloader watches the directories holding the files (fs.watch; it
 * sees the swap as an event on the directory) and also stats the files periodically, since
 * inotify can miss events or be unavailable. A changed, valid pair goes live through
 * `server.setSecureContext`: new handshakes use it, open connections keep theirs, nothing
 * restarts. A broken pair (unreadable, not PEM, key not matching the certificate) is
 * reported and ignored; the previous pair keeps serving.
 */
import { X509Certificate } from 'node:crypto';
import { type FSWatcher, readFileSync, statSync, watch } from 'node:fs';
import type { RequestListener } from 'node:http';
import https from 'node:https';
import { dirname } from 'node:path';
import tls from 'node:tls';
import type { MessageClasses } from './http/express-messages.js';
import type { LogSink } from './log.js';

export const MIN_TLS_VERSION = 'TLSv1.2' as const;
/** Webhook calls are bounded by the registration's timeoutSeconds (at most 30 s). */
const REQUEST_TIMEOUT_MS = 30_000;
const HEADERS_TIMEOUT_MS = 10_000;
/**
 * Longer than the kube-apiserver's idle-connection timeout for webhook clients (90 s), so the
 * API server is the side that closes an idle connection. With Node's default of 5 s the server
 * could close a connection just as the API server sends a POST on it; a POST is not retried,
 * and under failurePolicy: Ignore that Pod would be admitted without isolation.
 */
export const KEEP_ALIVE_TIMEOUT_MS = 95_000;
const WATCH_DEBOUNCE_MS = 100;

export interface TlsFiles {
  certFile: string;
  keyFile: string;
}

export interface KeyPair {
  cert: Buffer;
  key: Buffer;
}

export interface CertificateInfo {
  fingerprint256: string;
  subject: string;
  notAfter: Date;
}

export function certificateInfo(cert: Buffer): CertificateInfo {
  const x = new X509Certificate(cert);
  return { fingerprint256: x.fingerprint256, subject: x.subject, notAfter: new Date(x.validTo) };
}

/** Reads and checks a pair; throws an Error naming the file and the problem. */
export function loadKeyPair(files: TlsFiles): KeyPair {
  let cert: Buffer;
  let key: Buffer;
  try {
    cert = readFileSync(files.certFile);
  } catch (e) {
    throw new Error(`cannot read certificate file ${files.certFile}: ${(e as Error).message}`);
  }
  try {
    key = readFileSync(files.keyFile);
  } catch (e) {
    throw new Error(`cannot read key file ${files.keyFile}: ${(e as Error).message}`);
  }
  try {
    certificateInfo(cert);
  } catch (e) {
    throw new Error(`${files.certFile} is not a PEM certificate: ${(e as Error).message}`);
  }
  try {
    tls.createSecureContext({ cert, key, minVersion: MIN_TLS_VERSION });
  } catch (e) {
    throw new Error(
      `certificate ${files.certFile} and key ${files.keyFile} do not form a valid pair: ${(e as Error).message}`,
    );
  }
  return { cert, key };
}

/**
 * The HTTPS server of `app`. `messages`: the request and response classes the server constructs
 * (http/express-messages.ts: express's prototypes from birth); node:http's own by default.
 */
export function createHttpsServer(app: RequestListener, pair: KeyPair, messages?: MessageClasses): https.Server {
  const server = https.createServer(
    { cert: pair.cert, key: pair.key, minVersion: MIN_TLS_VERSION, ...(messages ?? {}) },
    app,
  );
  server.requestTimeout = REQUEST_TIMEOUT_MS;
  server.headersTimeout = HEADERS_TIMEOUT_MS;
  server.keepAliveTimeout = KEEP_ALIVE_TIMEOUT_MS;
  return server;
}

export interface ReloaderOptions {
  /** Fallback stat interval; 0 disables polling (fs.watch only). */
  pollIntervalMs: number;
  /** Watch the files' directories for changes (default true); polling alone when false. */
  watchDirectories?: boolean;
  logger?: LogSink;
  onReload?: (result: 'success' | 'failure') => void;
  /** Called with the certificate in use: at start and after each successful reload. */
  onCertificate?: (info: CertificateInfo) => void;
}

/** Identity of a file's current content as far as stat can tell (follows symlinks). */
function fileSignature(path: string): string {
  try {
    const s = statSync(path);
    return `${s.dev}:${s.ino}:${s.size}:${s.mtimeMs}:${s.ctimeMs}`;
  } catch (e) {
    return `missing:${(e as NodeJS.ErrnoException).code ?? 'error'}`;
  }
}

export class CertificateReloader {
  readonly #server: tls.Server;
  readonly #files: TlsFiles;
  readonly #opts: ReloaderOptions;
  #current: KeyPair;
  #signature: string;
  /** Signature of a pair that failed to load: not retried (nor logged again) until the files change. */
  #failedSignature: string | undefined;
  #watchers: FSWatcher[] = [];
  #poll: NodeJS.Timeout | undefined;
  #debounce: NodeJS.Timeout | undefined;

  constructor(server: tls.Server, files: TlsFiles, initial: KeyPair, opts: ReloaderOptions) {
    this.#server = server;
    this.#files = files;
    this.#opts = opts;
    this.#current = initial;
    this.#signature = this.#currentSignature();
    opts.onCertificate?.(certificateInfo(initial.cert));
  }

  start(): void {
    const dirs =
      this.#opts.watchDirectories === false ? [] : [dirname(this.#files.certFile), dirname(this.#files.keyFile)];
    for (const dir of new Set(dirs)) {
      try {
        const w = watch(dir, () => this.#scheduleCheck());
        w.on('error', (e) => {
          this.#opts.logger?.warn('certificate directory watch failed; relying on polling', { dir, error: e.message });
          w.close();
        });
        this.#watchers.push(w);
      } catch (e) {
        this.#opts.logger?.warn('cannot watch certificate directory; relying on polling', {
          dir,
          error: (e as Error).message,
        });
      }
    }
    if (this.#opts.pollIntervalMs > 0) {
      this.#poll = setInterval(() => this.check(), this.#opts.pollIntervalMs);
      this.#poll.unref();
    }
  }

  stop(): void {
    for (const w of this.#watchers) w.close();
    this.#watchers = [];
    if (this.#poll !== undefined) clearInterval(this.#poll);
    if (this.#debounce !== undefined) clearTimeout(this.#debounce);
    this.#poll = undefined;
    this.#debounce = undefined;
  }

  /** Reloads if the files changed since the last load. Returns whether a new pair went live. */
  check(): boolean {
    const signature = this.#currentSignature();
    if (signature === this.#signature || signature === this.#failedSignature) return false;
    let pair: KeyPair;
    try {
      pair = loadKeyPair(this.#files);
    } catch (e) {
      this.#failedSignature = signature;
      this.#opts.onReload?.('failure');
      this.#opts.logger?.error('new TLS certificate/key rejected; still serving the previous pair', {
        error: (e as Error).message,
      });
      return false;
    }
    this.#signature = signature;
    this.#failedSignature = undefined;
    if (pair.cert.equals(this.#current.cert) && pair.key.equals(this.#current.key)) return false;
    this.#server.setSecureContext({ cert: pair.cert, key: pair.key, minVersion: MIN_TLS_VERSION });
    this.#current = pair;
    const info = certificateInfo(pair.cert);
    this.#opts.onReload?.('success');
    this.#opts.onCertificate?.(info);
    this.#opts.logger?.info('TLS certificate reloaded', {
      subject: info.subject,
      fingerprint256: info.fingerprint256,
      notAfter: info.notAfter.toISOString(),
    });
    return true;
  }

  #currentSignature(): string {
    return `${fileSignature(this.#files.certFile)}|${fileSignature(this.#files.keyFile)}`;
  }

  #scheduleCheck(): void {
    // A Secret update is several directory events in a row; check once they settle.
    if (this.#debounce !== undefined) clearTimeout(this.#debounce);
    this.#debounce = setTimeout(() => {
      this.#debounce = undefined;
      this.check();
    }, WATCH_DEBOUNCE_MS);
    this.#debounce.unref();
  }
}
