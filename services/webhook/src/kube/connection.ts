/**
 * Where the API server is and how to authenticate to it: the in-cluster service account, or a
 * kubeconfig file for local and test runs. Only what the webhook needs of client-go's rules:
 *
 * - in-cluster: `https://$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT`, the service
 *   account's `ca.crt`, and its `token`, re-read at most every minute (bound service-account
 *   tokens are rotated by the kubelet, hourly by default), as client-go does;
 * - kubeconfig: the current context's cluster (`server`, `certificate-authority(-data)`,
 *   `insecure-skip-tls-verify`, `tls-server-name`) and user (`token`, `tokenFile` (re-read like
 *   the service-account token), `client-certificate(-data)`, `client-key(-data)`). Relative paths
 *   are relative to the kubeconfig file, as in client-go. `exec` and `auth-provider` plugins,
 *   basic auth, impersonation and proxies are refused at start-up: the webhook is meant to run
 *   in the cluster with its service account.
 */
import { readFileSync } from 'node:fs';
import { dirname, isAbsolute, resolve } from 'node:path';

export const SERVICE_ACCOUNT_DIR = '/var/run/secrets/kubernetes.io/serviceaccount';
/** How long a token read from a file is used before the file is read again (client-go: 1 minute). */
export const TOKEN_REREAD_MS = 60_000;

/** A bearer token that may change while the process runs. */
export interface TokenSource {
  /** The token to send now. Never throws once constructed (a failed re-read keeps the last token). */
  token(): string;
  /** Read again at the next token() (after a 401: the token may have been rotated). */
  invalidate(): void;
}

export interface KubeConnection {
  /** The API server's base URL (http or https; any path prefix kept, no trailing slash). */
  server: URL;
  /** PEM CA bundle to verify the server with; undefined: Node's default CAs. */
  ca: Buffer | undefined;
  /** false only for `insecure-skip-tls-verify: true`. */
  verifyServer: boolean;
  /** Name to verify the server certificate against (and SNI) instead of the URL's host. */
  tlsServerName: string | undefined;
  /** Client certificate and key (PEM), or undefined. */
  clientCert: { cert: Buffer; key: Buffer } | undefined;
  /** Bearer token, or undefined (client certificate only, or no authentication). */
  token: TokenSource | undefined;
  /** Where this came from, for the startup log (never a secret). */
  describe: string;
}

export class StaticToken implements TokenSource {
  readonly #value: string;
  constructor(value: string) {
    this.#value = value;
  }
  token(): string {
    return this.#value;
  }
  invalidate(): void {}
}

export interface FileTokenOptions {
  rereadMs?: number;
  now?: () => number;
  /** A re-read failed; the previous token stays in use. */
  onReadError?: (err: unknown) => void;
}

/** A token file (service-account token, kubeconfig `tokenFile`): read now, again after `rereadMs`, kept on a failed re-read. */
export class FileToken implements TokenSource {
  readonly #path: string;
  readonly #rereadMs: number;
  readonly #now: () => number;
  readonly #onReadError: ((err: unknown) => void) | undefined;
  #value: string;
  #readAt: number;

  /** Throws when the file cannot be read or is empty: nothing to authenticate with. */
  constructor(path: string, opts: FileTokenOptions = {}) {
    this.#path = path;
    this.#rereadMs = opts.rereadMs ?? TOKEN_REREAD_MS;
    this.#now = opts.now ?? Date.now;
    this.#onReadError = opts.onReadError;
    this.#value = this.#read();
    this.#readAt = this.#now();
  }

  token(): string {
    if (this.#now() - this.#readAt >= this.#rereadMs) {
      // Also on failure: retry after the period, not on every request.
      this.#readAt = this.#now();
      try {
        this.#value = this.#read();
      } catch (e) {
        this.#onReadError?.(e);
      }
    }
    return this.#value;
  }

  invalidate(): void {
    this.#readAt = Number.NEGATIVE_INFINITY;
  }

  #read(): string {
    const value = readFileSync(this.#path, 'utf8').trim();
    if (value === '') throw new Error(`token file ${this.#path} is empty`);
    return value;
  }
}

export interface LoadOptions {
  /** Service-account directory (tests). */
  serviceAccountDir?: string;
  /** Token re-read failures (logged by main.ts). */
  onTokenReadError?: (err: unknown) => void;
}

/** `http(s)://host:port` with IPv6 literals bracketed, as client-go's InClusterConfig builds it. */
function hostPortUrl(scheme: string, host: string, port: string): URL {
  return new URL(`${scheme}://${host.includes(':') ? `[${host}]` : host}:${port}`);
}

/** The in-cluster service account (client-go's InClusterConfig). */
export function inClusterConnection(
  env: Readonly<Record<string, string | undefined>>,
  opts: LoadOptions = {},
): KubeConnection {
  const host = env.KUBERNETES_SERVICE_HOST;
  const port = env.KUBERNETES_SERVICE_PORT;
  if (host === undefined || host === '' || port === undefined || port === '') {
    throw new Error(
      'not running in a cluster (KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT must both be set): pass --kubeconfig',
    );
  }
  const dir = opts.serviceAccountDir ?? SERVICE_ACCOUNT_DIR;
  const caFile = `${dir}/ca.crt`;
  return {
    server: hostPortUrl('https', host, port),
    ca: readFile(caFile, 'the service account CA'),
    verifyServer: true,
    tlsServerName: undefined,
    clientCert: undefined,
    token: new FileToken(`${dir}/token`, { onReadError: opts.onTokenReadError }),
    describe: `in-cluster service account (${dir})`,
  };
}

function readFile(path: string, what: string): Buffer {
  try {
    return readFileSync(path);
  } catch (e) {
    throw new Error(`cannot read ${what} ${path}: ${(e as Error).message}`);
  }
}

type Entry = Record<string, unknown>;

function isEntry(v: unknown): v is Entry {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** The named entry of a kubeconfig list (`clusters`, `users`, `contexts`), its inner object. */
function named(doc: Entry, list: string, field: string, name: string): Entry {
  const entries = doc[list];
  const found = Array.isArray(entries) ? entries.find((e) => isEntry(e) && e.name === name) : undefined;
  if (found === undefined) throw new Error(`${list} has no entry named ${JSON.stringify(name)}`);
  const inner = (found as Entry)[field];
  if (inner === undefined || inner === null) return {};
  if (!isEntry(inner)) throw new Error(`${list}[${JSON.stringify(name)}].${field} is not a mapping`);
  return inner;
}

function str(obj: Entry, key: string, where: string): string | undefined {
  const v = obj[key];
  if (v === undefined || v === null || v === '') return undefined;
  if (typeof v !== 'string') throw new Error(`${where}.${key} must be a string`);
  return v;
}

function base64(value: string, what: string): Buffer {
  const b = Buffer.from(value, 'base64');
  if (b.length === 0) throw new Error(`${what} is not base64`);
  return b;
}

/** User fields the webhook refuses, and why. */
const UNSUPPORTED_USER_FIELDS: Record<string, string> = {
  exec: 'exec credential plugins are not supported',
  'auth-provider': 'auth-provider plugins are not supported',
  username: 'basic authentication is not supported',
  password: 'basic authentication is not supported',
  as: 'impersonation is not supported',
  'as-uid': 'impersonation is not supported',
  'as-groups': 'impersonation is not supported',
  'as-user-extra': 'impersonation is not supported',
};

const SUPPORTED =
  'use a token, tokenFile or client certificate user (the webhook is meant to run in the cluster with its service account)';

/**
 * The current context of a parsed kubeconfig document. `baseDir` resolves relative file paths.
 * Pure but for reading the files the kubeconfig names.
 */
export function connectionFromKubeconfig(doc: unknown, baseDir: string, opts: LoadOptions = {}): KubeConnection {
  if (!isEntry(doc)) throw new Error('not a kubeconfig: the document is not a mapping');
  const contextName = str(doc, 'current-context', 'kubeconfig');
  if (contextName === undefined) throw new Error('no current-context');
  const context = named(doc, 'contexts', 'context', contextName);
  const clusterName = str(context, 'cluster', `context ${contextName}`);
  if (clusterName === undefined) throw new Error(`context ${JSON.stringify(contextName)} names no cluster`);
  const cluster = named(doc, 'clusters', 'cluster', clusterName);
  const where = `cluster ${JSON.stringify(clusterName)}`;
  const file = (path: string): string => (isAbsolute(path) ? path : resolve(baseDir, path));

  const serverText = str(cluster, 'server', where);
  if (serverText === undefined) throw new Error(`${where} has no server`);
  let server: URL;
  try {
    server = new URL(serverText);
  } catch {
    throw new Error(`${where}: server ${JSON.stringify(serverText)} is not a URL`);
  }
  if (server.protocol !== 'https:' && server.protocol !== 'http:') {
    throw new Error(`${where}: server ${JSON.stringify(serverText)} is neither https nor http`);
  }
  server.pathname = server.pathname.replace(/\/+$/, '');
  if (str(cluster, 'proxy-url', where) !== undefined) throw new Error(`${where}: proxy-url is not supported`);
  const insecure = cluster['insecure-skip-tls-verify'];
  if (insecure !== undefined && typeof insecure !== 'boolean') {
    throw new Error(`${where}.insecure-skip-tls-verify must be true or false`);
  }
  const caData = str(cluster, 'certificate-authority-data', where);
  const caFile = str(cluster, 'certificate-authority', where);
  const ca =
    caData !== undefined
      ? base64(caData, `${where}.certificate-authority-data`)
      : caFile !== undefined
        ? readFile(file(caFile), `${where}'s certificate-authority`)
        : undefined;

  const userName = str(context, 'user', `context ${contextName}`);
  const user = userName === undefined ? {} : named(doc, 'users', 'user', userName);
  const who = `user ${JSON.stringify(userName ?? '')}`;
  for (const [field, why] of Object.entries(UNSUPPORTED_USER_FIELDS)) {
    if (user[field] !== undefined && user[field] !== null) throw new Error(`${who}: ${why}; ${SUPPORTED}`);
  }
  const pem = (dataKey: string, fileKey: string): Buffer | undefined => {
    const data = str(user, dataKey, who);
    if (data !== undefined) return base64(data, `${who}.${dataKey}`);
    const path = str(user, fileKey, who);
    return path === undefined ? undefined : readFile(file(path), `${who}'s ${fileKey}`);
  };
  const cert = pem('client-certificate-data', 'client-certificate');
  const key = pem('client-key-data', 'client-key');
  if ((cert === undefined) !== (key === undefined)) {
    throw new Error(`${who}: a client certificate needs both the certificate and the key`);
  }
  const tokenValue = str(user, 'token', who);
  const tokenFile = str(user, 'tokenFile', who);
  const token =
    tokenValue !== undefined
      ? new StaticToken(tokenValue)
      : tokenFile !== undefined
        ? new FileToken(file(tokenFile), { onReadError: opts.onTokenReadError })
        : undefined;

  return {
    server,
    ca,
    verifyServer: insecure !== true,
    tlsServerName: str(cluster, 'tls-server-name', where),
    clientCert: cert !== undefined && key !== undefined ? { cert, key } : undefined,
    token,
    describe: `kubeconfig context ${contextName} (cluster ${clusterName}, user ${userName ?? 'none'})`,
  };
}

/** A kubeconfig file: YAML (or JSON), its current context. js-yaml is loaded only here, so only when a kubeconfig is used. */
export async function kubeconfigConnection(path: string, opts: LoadOptions = {}): Promise<KubeConnection> {
  const text = readFile(path, 'kubeconfig').toString('utf8');
  const { load } = await import('js-yaml');
  let doc: unknown;
  try {
    doc = load(text);
  } catch (e) {
    throw new Error(`kubeconfig ${path} is not valid YAML: ${(e as Error).message}`);
  }
  try {
    return connectionFromKubeconfig(doc, dirname(resolve(path)), opts);
  } catch (e) {
    throw new Error(`kubeconfig ${path}: ${(e as Error).message}`);
  }
}

/** `--kubeconfig` when given, else the in-cluster service account. */
export function loadConnection(
  kubeconfig: string | undefined,
  env: Readonly<Record<string, string | undefined>>,
  opts: LoadOptions = {},
): Promise<KubeConnection> {
  if (kubeconfig !== undefined) return kubeconfigConnection(kubeconfig, opts);
  return Promise.resolve().then(() => inClusterConnection(env, opts));
}
