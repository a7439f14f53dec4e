/**
 * A minimal kube-apiserver for Namespaces on 127.0.0.1, over HTTPS when given a certificate
 * (plain HTTP otherwise): list (with labelSelector, and limit/continue pages), watch (streamed
 * events pushed by the test, bookmarks, ERROR events), get; bearer-token authentication when
 * given a token. Enough for the webhook's informer and live lookup (src/kube/client.ts).
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export interface FakeNamespace {
  metadata: {
    name: string;
    labels?: Record<string, string>;
    annotations?: Record<string, string>;
    resourceVersion?: string;
    [field: string]: unknown;
  };
  [field: string]: unknown;
}

export interface FakeApiServerOptions {
  /** Serve HTTPS with this certificate (its kubeconfig then names it as the CA). */
  tls?: { cert: Buffer; key: Buffer };
  /** Require `Authorization: Bearer <token>` (401 otherwise); the kubeconfig carries it. */
  token?: string;
}

export class FakeApiServer {
  readonly namespaces = new Map<string, FakeNamespace>();
  readonly requests: string[] = [];
  /** The Authorization header of each request, in order ('' when absent). */
  readonly authorizations: string[] = [];
  /** The bearer token accepted (changeable: a rotated token). */
  token: string | undefined;
  /** Status to answer list requests with (to simulate an unavailable API server). */
  listStatus = 200;
  /** Delay before answering GET of a single namespace. */
  getDelayMs = 0;
  /** Answer the next watch with 410 Gone (resourceVersion too old), as an ERROR event, and end it. */
  goneOnNextWatch = false;
  /** Answer the next watch with an ERROR event carrying this Status code, and end it. */
  errorEventOnNextWatch: number | undefined;
  /** Status to answer watch requests with (200: stream). */
  watchStatus = 200;
  #rv = 100;
  #watchers = new Set<http.ServerResponse>();
  readonly #tempDirs: string[] = [];
  #timers = new Set<NodeJS.Timeout>();
  readonly #tls: FakeApiServerOptions['tls'];
  readonly #server: http.Server;

  constructor(opts: FakeApiServerOptions = {}) {
    this.#tls = opts.tls;
    this.token = opts.token;
    const handler = (req: http.IncomingMessage, res: http.ServerResponse): void => this.#handle(req, res);
    this.#server =
      opts.tls === undefined
        ? http.createServer(handler)
        : https.createServer({ cert: opts.tls.cert, key: opts.tls.key }, handler);
  }

  async start(): Promise<void> {
    await new Promise<void>((resolve) => this.#server.listen(0, '127.0.0.1', resolve));
  }

  get url(): string {
    const scheme = this.#tls === undefined ? 'http' : 'https';
    return `${scheme}://127.0.0.1:${(this.#server.address() as AddressInfo).port}`;
  }

  /** A kubeconfig file (YAML) pointing at this server: its certificate as the CA, its token. */
  kubeconfig(): string {
    const dir = mkdtempSync(join(tmpdir(), 'fake-apiserver-'));
    this.#tempDirs.push(dir); // removed by stop()
    const path = join(dir, 'kubeconfig');
    const ca = this.#tls === undefined ? '' : `    certificate-authority-data: ${this.#tls.cert.toString('base64')}\n`;
    const user = this.token === undefined ? '{}' : `\n    token: ${this.token}`;
    writeFileSync(
      path,
      [
        'apiVersion: v1',
        'kind: Config',
        'clusters:',
        '- name: fake',
        '  cluster:',
        `    server: ${this.url}`,
        `${ca}users:`,
        '- name: fake',
        `  user: ${user}`,
        'contexts:',
        '- name: fake',
        '  context: {cluster: fake, user: fake}',
        'current-context: fake',
        '',
      ].join('\n'),
    );
    return path;
  }

  /** Sends a BOOKMARK with the current resourceVersion to every open watch. */
  bookmark(): string {
    const rv = String(this.#rv);
    for (const w of this.#watchers) {
      w.write(
        `${JSON.stringify({ type: 'BOOKMARK', object: { kind: 'Namespace', apiVersion: 'v1', metadata: { resourceVersion: rv } } })}\n`,
      );
    }
    return rv;
  }

  /** The current resourceVersion. */
  get resourceVersion(): string {
    return String(this.#rv);
  }

  /**
   * Stores a namespace and sends the watch event a real API server would send for it
   * (`announce: false` holds the event back, as a lagging watch would).
   */
  /** Removes a namespace, sending the DELETED event (`announce: false` holds it back). */
  delete(name: string, opts: { announce?: boolean } = {}): void {
    const ns = this.namespaces.get(name);
    if (ns === undefined) return;
    this.namespaces.delete(name);
    ++this.#rv;
    if (opts.announce ?? true) this.#broadcast('DELETED', ns);
  }

  /** Ends every open watch, as an API server does at its watch timeout. */
  endWatches(): void {
    for (const w of this.#watchers) w.end();
  }

  put(ns: FakeNamespace, opts: { announce?: boolean } = {}): void {
    const existed = this.namespaces.has(ns.metadata.name);
    const stored = { ...ns, metadata: { ...ns.metadata, resourceVersion: String(++this.#rv) } };
    this.namespaces.set(ns.metadata.name, stored);
    if (opts.announce ?? true) this.#broadcast(existed ? 'MODIFIED' : 'ADDED', stored);
  }

  get watcherCount(): number {
    return this.#watchers.size;
  }

  async stop(): Promise<void> {
    for (const dir of this.#tempDirs.splice(0)) rmSync(dir, { recursive: true, force: true });
    for (const t of this.#timers) clearTimeout(t);
    for (const w of this.#watchers) w.end();
    this.#server.closeAllConnections();
    await new Promise<void>((resolve) => this.#server.close(() => resolve()));
  }

  #broadcast(type: string, object: FakeNamespace): void {
    for (const w of this.#watchers) w.write(`${JSON.stringify({ type, object })}\n`);
  }

  #matches(ns: FakeNamespace, selector: string | null): boolean {
    if (selector === null || selector === '') return true;
    return selector.split(',').every((term) => {
      const [k, v] = term.split('=');
      return k !== undefined && ns.metadata.labels?.[k] === v;
    });
  }

  #status(res: http.ServerResponse, code: number, reason: string, message: string): void {
    res.writeHead(code, { 'Content-Type': 'application/json' });
    res.end(JSON.stringify({ kind: 'Status', apiVersion: 'v1', status: 'Failure', reason, message, code }));
  }

  #handle(req: http.IncomingMessage, res: http.ServerResponse): void {
    const url = new URL(req.url ?? '/', 'http://x');
    this.requests.push(`${req.method} ${url.pathname}${url.search}`);
    this.authorizations.push(req.headers.authorization ?? '');
    if (this.token !== undefined && req.headers.authorization !== `Bearer ${this.token}`) {
      this.#status(res, 401, 'Unauthorized', 'Unauthorized');
      return;
    }
    const selector = url.searchParams.get('labelSelector');
    if (url.pathname === '/api/v1/namespaces' && url.searchParams.get('watch') === 'true') {
      if (this.watchStatus !== 200) {
        this.#status(
          res,
          this.watchStatus,
          this.watchStatus === 410 ? 'Expired' : 'InternalError',
          `watch answered ${this.watchStatus} by the test`,
        );
        return;
      }
      res.writeHead(200, { 'Content-Type': 'application/json' });
      const errorCode = this.goneOnNextWatch ? 410 : this.errorEventOnNextWatch;
      if (errorCode !== undefined) {
        this.goneOnNextWatch = false;
        this.errorEventOnNextWatch = undefined;
        const reason = errorCode === 410 ? 'Expired' : 'InternalError';
        const status = {
          kind: 'Status',
          apiVersion: 'v1',
          status: 'Failure',
          reason,
          message: `code ${errorCode}`,
          code: errorCode,
        };
        res.end(`${JSON.stringify({ type: 'ERROR', object: status })}\n`);
        return;
      }
      res.flushHeaders();
      this.#watchers.add(res);
      res.on('close', () => this.#watchers.delete(res));
      return;
    }
    if (url.pathname === '/api/v1/namespaces') {
      if (this.listStatus !== 200) {
        this.#status(res, this.listStatus, 'InternalError', `list answered ${this.listStatus} by the test`);
        return;
      }
      const all = [...this.namespaces.values()].filter((ns) => this.#matches(ns, selector));
      // Pages: `continue` is the offset of the next item (a real server's token is opaque).
      const limit = Number(url.searchParams.get('limit') ?? 0);
      const offset = Number(url.searchParams.get('continue') ?? 0);
      const items = limit > 0 ? all.slice(offset, offset + limit) : all;
      const more = limit > 0 && offset + limit < all.length;
      res.writeHead(200, { 'Content-Type': 'application/json' });
      res.end(
        JSON.stringify({
          kind: 'NamespaceList',
          apiVersion: 'v1',
          metadata: { resourceVersion: String(this.#rv), ...(more && { continue: String(offset + limit) }) },
          items,
        }),
      );
      return;
    }
    const m = /^\/api\/v1\/namespaces\/([^/]+)$/.exec(url.pathname);
    if (m?.[1] !== undefined) {
      const name = decodeURIComponent(m[1]);
      const ns = this.namespaces.get(name);
      const timer = setTimeout(() => {
        this.#timers.delete(timer);
        if (ns === undefined) {
          this.#status(res, 404, 'NotFound', `namespaces "${name}" not found`);
        } else {
          res.writeHead(200, { 'Content-Type': 'application/json' });
          res.end(JSON.stringify({ kind: 'Namespace', apiVersion: 'v1', ...ns }));
        }
      }, this.getDelayMs);
      this.#timers.add(timer);
      return;
    }
    res.writeHead(404);
    res.end();
  }
}
