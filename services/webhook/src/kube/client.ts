/**
 * The webhook's HTTP client for the API server: JSON GETs and watch streams, over node:http(s)
 * with one keep-alive connection pool. Just what the informer and the live lookup need (see
 * cache/informer.ts and cache/namespace-reader.ts), and the JSON POSTs of secure metrics' reviews
 * (kube/access-review.ts: TokenReview and SubjectAccessReview, which the API server evaluates and
 * stores nowhere). It writes no object.
 *
 * It replaces @kubernetes/client-node at run time: loading client-node costs ~80 MiB of resident
 * memory (its KubeConfig module imports every generated API and model), more than the
 * webhook's whole budget. See README.md, "Memory".
 */
import http from 'node:http';
import https from 'node:https';
import type { KubeConnection } from './connection.js';

export type Query = Readonly<Record<string, string | number | boolean | undefined>>;

/** The fields of a metav1.Status the errors report. */
export interface KubeStatus {
  kind?: string;
  status?: string;
  message?: string;
  reason?: string;
  code?: number;
}

/** A non-2xx answer of the API server (or a watch ERROR event): status code, reason and the server's message. */
export class KubeApiError extends Error {
  readonly statusCode: number;
  readonly reason: string | undefined;

  constructor(what: string, statusCode: number, status: KubeStatus | undefined) {
    const reason = status?.reason;
    const detail = status?.message ?? reason ?? http.STATUS_CODES[statusCode] ?? 'error';
    super(`${what}: ${statusCode} ${detail}`);
    this.name = 'KubeApiError';
    this.statusCode = statusCode;
    this.reason = reason;
  }
}

export interface WatchHandlers {
  /** The server answered 200: events follow. */
  connected(): void;
  /** One event (`type`: ADDED, MODIFIED, DELETED, BOOKMARK, ERROR); a throw ends the watch with that error. */
  event(type: string, object: unknown): void;
  /**
   * Called exactly once: `undefined` when the server ended the stream cleanly; otherwise a
   * KubeApiError (non-200 answer), a network or parse error, or the signal's reason when it
   * aborted (the shared watch loop aborts a watch that stays idle: ListWatchLoop in
   * @kubeplus-isolation/service).
   */
  closed(err: Error | undefined): void;
}

export interface WatchOptions {
  /** Ends the watch (closed is called with the signal's reason). */
  signal?: AbortSignal;
}

const NETWORK_RETRY_CODES = new Set(['ECONNRESET', 'EPIPE']);

function parseStatus(text: string): KubeStatus | undefined {
  try {
    const v = JSON.parse(text) as unknown;
    return typeof v === 'object' && v !== null ? (v as KubeStatus) : undefined;
  } catch {
    return undefined;
  }
}

function abortReason(signal: AbortSignal): Error {
  const r: unknown = signal.reason;
  return r instanceof Error ? r : new Error(String(r ?? 'aborted'));
}

export class KubeClient {
  readonly #conn: KubeConnection;
  readonly #agent: http.Agent;
  readonly #transport: typeof http | typeof https;
  readonly #userAgent: string;

  constructor(conn: KubeConnection, opts: { userAgent?: string } = {}) {
    this.#conn = conn;
    this.#userAgent = opts.userAgent ?? 'kubeplus-node-isolation-webhook';
    if (conn.server.protocol === 'https:') {
      this.#transport = https;
      this.#agent = new https.Agent({
        keepAlive: true,
        ...(conn.ca !== undefined && { ca: conn.ca }),
        ...(conn.clientCert !== undefined && { cert: conn.clientCert.cert, key: conn.clientCert.key }),
        rejectUnauthorized: conn.verifyServer,
        ...(conn.tlsServerName !== undefined && { servername: conn.tlsServerName }),
      });
    } else {
      this.#transport = http;
      this.#agent = new http.Agent({ keepAlive: true });
    }
  }

  /** The server's base URL (for logs). */
  get server(): string {
    return this.#conn.server.href;
  }

  /**
   * GET `path` and parse the JSON answer. Rejects with a KubeApiError for a non-2xx status, with
   * the signal's reason once it aborts, or with the network error. A request that failed because
   * the server had just closed the pooled connection it reused is sent once more.
   */
  async getJson(path: string, query: Query, signal: AbortSignal): Promise<unknown> {
    return this.#retryOnce(() => this.#call('GET', path, query, undefined, signal), signal);
  }

  /**
   * POST `body` as JSON to `path` and parse the JSON answer, with getJson's errors. Only for
   * requests the API server evaluates without storing anything (TokenReview, SubjectAccessReview):
   * like a GET, one that met a just-closed pooled connection is sent once more.
   */
  async postJson(path: string, body: unknown, signal: AbortSignal): Promise<unknown> {
    const bytes = Buffer.from(JSON.stringify(body), 'utf8');
    return this.#retryOnce(() => this.#call('POST', path, {}, bytes, signal), signal);
  }

  async #retryOnce(send: () => Promise<unknown>, signal: AbortSignal): Promise<unknown> {
    try {
      return await send();
    } catch (e) {
      if (!(e instanceof RetryableError) || signal.aborted) throw e instanceof RetryableError ? e.cause : e;
      try {
        return await send();
      } catch (e2) {
        throw e2 instanceof RetryableError ? e2.cause : e2;
      }
    }
  }

  /** Opens a watch (`watch=true` is added to `query`); see WatchHandlers for what is called when. */
  watch(path: string, query: Query, handlers: WatchHandlers, opts: WatchOptions = {}): void {
    const what = `watch ${path}`;
    let done = false;
    let req: http.ClientRequest | undefined;
    const onAbort = (): void => finish(abortReason(opts.signal as AbortSignal), true);
    const finish = (err: Error | undefined, destroy = err !== undefined): void => {
      if (done) return;
      done = true;
      opts.signal?.removeEventListener('abort', onAbort);
      if (destroy) req?.destroy();
      handlers.closed(err);
    };
    if (opts.signal?.aborted) {
      finish(abortReason(opts.signal), false);
      return;
    }
    opts.signal?.addEventListener('abort', onAbort, { once: true });
    req = this.#request(path, { ...query, watch: true });
    req.on('error', (e) => finish(e));
    req.on('response', (res) => {
      if (res.statusCode !== 200) {
        this.#readText(res, (text) => {
          this.#noteStatus(res.statusCode ?? 0);
          finish(new KubeApiError(what, res.statusCode ?? 0, parseStatus(text)));
        });
        res.on('error', (e) => finish(e));
        res.on('close', () => finish(new Error(`${what}: connection closed before the answer was complete`)));
        return;
      }
      handlers.connected();
      res.setEncoding('utf8');
      let pending = '';
      const deliver = (line: string): boolean => {
        if (line.trim() === '') return true;
        let event: { type?: unknown; object?: unknown };
        try {
          event = JSON.parse(line) as { type?: unknown; object?: unknown };
        } catch {
          finish(new Error(`${what}: malformed event: ${line.slice(0, 100)}`));
          return false;
        }
        if (typeof event !== 'object' || event === null || typeof event.type !== 'string') {
          finish(new Error(`${what}: event without a type: ${line.slice(0, 100)}`));
          return false;
        }
        try {
          handlers.event(event.type, event.object);
        } catch (e) {
          finish(e instanceof Error ? e : new Error(String(e)));
          return false;
        }
        return !done;
      };
      res.on('data', (chunk: string) => {
        if (done) return;
        pending += chunk;
        let nl = pending.indexOf('\n');
        while (nl !== -1) {
          const line = pending.slice(0, nl);
          pending = pending.slice(nl + 1);
          if (!deliver(line)) return;
          nl = pending.indexOf('\n');
        }
      });
      res.on('end', () => {
        if (done) return;
        if (!deliver(pending)) return;
        finish(undefined);
      });
      res.on('error', (e) => finish(e));
      res.on('close', () => finish(new Error(`${what}: connection closed before the stream ended`)));
    });
    req.end();
  }

  /** Closes the pooled connections (open requests are cut). */
  close(): void {
    this.#agent.destroy();
  }

  #request(path: string, query: Query, method: 'GET' | 'POST' = 'GET', body?: Buffer): http.ClientRequest {
    const server = this.#conn.server;
    const params = new URLSearchParams();
    for (const [k, v] of Object.entries(query)) if (v !== undefined) params.set(k, String(v));
    const search = params.size > 0 ? `?${params}` : '';
    const headers: http.OutgoingHttpHeaders = { Accept: 'application/json', 'User-Agent': this.#userAgent };
    if (body !== undefined) {
      headers['Content-Type'] = 'application/json';
      headers['Content-Length'] = body.length;
    }
    const token = this.#conn.token?.token();
    if (token !== undefined) headers.Authorization = `Bearer ${token}`;
    return this.#transport.request({
      protocol: server.protocol,
      hostname: server.hostname.replace(/^\[(.*)\]$/, '$1'),
      port: server.port === '' ? undefined : Number(server.port),
      method,
      path: `${server.pathname.replace(/\/+$/, '')}${path}${search}`,
      headers,
      agent: this.#agent,
    });
  }

  #call(
    method: 'GET' | 'POST',
    path: string,
    query: Query,
    body: Buffer | undefined,
    signal: AbortSignal,
  ): Promise<unknown> {
    return new Promise((resolve, reject) => {
      if (signal.aborted) {
        reject(abortReason(signal));
        return;
      }
      const req = this.#request(path, query, method, body);
      let settled = false;
      const settle = (fn: () => void): void => {
        if (settled) return;
        settled = true;
        signal.removeEventListener('abort', onAbort);
        fn();
      };
      const onAbort = (): void =>
        settle(() => {
          req.destroy();
          reject(abortReason(signal));
        });
      signal.addEventListener('abort', onAbort, { once: true });
      req.on('error', (e: NodeJS.ErrnoException) =>
        settle(() => {
          // Written on a kept-alive connection the server had closed meanwhile: not the server's answer.
          const retry = req.reusedSocket && e.code !== undefined && NETWORK_RETRY_CODES.has(e.code);
          reject(retry ? new RetryableError(e) : e);
        }),
      );
      req.on('response', (res) => {
        this.#readText(res, (text) => {
          const code = res.statusCode ?? 0;
          if (code < 200 || code > 299) {
            this.#noteStatus(code);
            settle(() => reject(new KubeApiError(`${method} ${path}`, code, parseStatus(text))));
            return;
          }
          try {
            const value = JSON.parse(text) as unknown;
            settle(() => resolve(value));
          } catch {
            settle(() => reject(new Error(`${method} ${path}: the answer is not JSON`)));
          }
        });
        res.on('error', (e) => settle(() => reject(e)));
        res.on('close', () =>
          settle(() => reject(new Error(`${method} ${path}: connection closed before the answer was complete`))),
        );
      });
      req.end(body);
    });
  }

  #readText(res: http.IncomingMessage, done: (text: string) => void): void {
    const chunks: Buffer[] = [];
    res.on('data', (c: Buffer) => chunks.push(c));
    res.on('end', () => done(Buffer.concat(chunks).toString('utf8')));
  }

  /** A 401 may mean the token file was rotated since it was read: read it again next time. */
  #noteStatus(code: number): void {
    if (code === 401) this.#conn.token?.invalidate();
  }
}

class RetryableError extends Error {
  override readonly cause: Error;
  constructor(cause: Error) {
    super(cause.message);
    this.cause = cause;
  }
}
