/**
 * A minimal kube-apiserver for Namespaces over plain HTTP on 127.0.0.1: list (with
 * labelSelector, and limit/continue pages), watch (streamed events pushed by the test), get.
 * Enough for client-node's ListWatch and CoreV1Api.readNamespace.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import http from 'node:http';
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

export class FakeApiServer {
  readonly namespaces = new Map<string, FakeNamespace>();
  readonly requests: string[] = [];
  /** Status to answer list requests with (to simulate an unavailable API server). */
  listStatus = 200;
  /** Delay before answering GET of a single namespace. */
  getDelayMs = 0;
  /** Answer the next watch with 410 Gone (resourceVersion too old), as an ERROR event, and end it. */
  goneOnNextWatch = false;
  #rv = 100;
  #watchers = new Set<http.ServerResponse>();
  #timers = new Set<NodeJS.Timeout>();
  #server = http.createServer((req, res) => this.#handle(req, res));

  async start(): Promise<void> {
    await new Promise<void>((resolve) => this.#server.listen(0, '127.0.0.1', resolve));
  }

  get url(): string {
    return `http://127.0.0.1:${(this.#server.address() as AddressInfo).port}`;
  }

  /** A kubeconfig file pointing at this server. */
  kubeconfig(): string {
    const dir = mkdtempSync(join(tmpdir(), 'fake-apiserver-'));
    const path = join(dir, 'kubeconfig');
    writeFileSync(
      path,
      JSON.stringify({
        apiVersion: 'v1',
        kind: 'Config',
        clusters: [{ name: 'fake', cluster: { server: this.url, 'insecure-skip-tls-verify': true } }],
        users: [{ name: 'fake', user: {} }],
        contexts: [{ name: 'fake', context: { cluster: 'fake', user: 'fake' } }],
        'current-context': 'fake',
      }),
    );
    return path;
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

  #handle(req: http.IncomingMessage, res: http.ServerResponse): void {
    const url = new URL(req.url ?? '/', 'http://x');
    this.requests.push(`${req.method} ${url.pathname}${url.search}`);
    const selector = url.searchParams.get('labelSelector');
    if (url.pathname === '/api/v1/namespaces' && url.searchParams.get('watch') === 'true') {
      res.writeHead(200, { 'Content-Type': 'application/json' });
      if (this.goneOnNextWatch) {
        this.goneOnNextWatch = false;
        const status = { kind: 'Status', apiVersion: 'v1', status: 'Failure', reason: 'Expired', code: 410 };
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
        res.writeHead(this.listStatus, { 'Content-Type': 'application/json' });
        res.end(JSON.stringify({ kind: 'Status', apiVersion: 'v1', status: 'Failure', code: this.listStatus }));
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
      const ns = this.namespaces.get(decodeURIComponent(m[1]));
      const timer = setTimeout(() => {
        this.#timers.delete(timer);
        if (ns === undefined) {
          res.writeHead(404, { 'Content-Type': 'application/json' });
          res.end(
            JSON.stringify({ kind: 'Status', apiVersion: 'v1', status: 'Failure', reason: 'NotFound', code: 404 }),
          );
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
