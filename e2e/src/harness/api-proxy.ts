import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from 'node:http';
import { request as httpsRequest, createServer as httpsServer, type Server } from 'node:https';
import { join } from 'node:path';
import type { Cluster } from './cluster.js';
import { writeKubeconfig } from './kubeconfig.js';
import type { CertAndKey } from './pki.js';

/**
 * A recording, gating HTTPS reverse proxy in front of the API server, for ONE client (e.g. the
 * webhook, started with `kubeconfigPath: proxy.kubeconfigPath`). It lets a test
 *
 * - see every request the client made (method and path with query), e.g. to prove that the
 *   webhook made no API call while admitting Pods, and
 * - hold back the bodies of chosen responses (a watch stream's events, a list result) while
 *   letting everything else through, e.g. to make "the informer has not seen this namespace
 *   yet" a certainty instead of a race.
 *
 * The proxy terminates TLS with a certificate from the cluster CA and forwards with its own client
 * certificate (`upstreamUser`, default an admin in system:masters); the client's own credentials
 * are dropped. Response headers are always forwarded at once, so a held watch still counts as
 * connected for its client.
 */

export interface ProxiedRequest {
  readonly seq: number;
  readonly method: string;
  /** Path with query, as the client sent it. */
  readonly url: string;
  readonly path: string;
  readonly query: URLSearchParams;
  readonly watch: boolean;
  readonly at: Date;
}

export interface ApiProxyOptions {
  /** Identity the proxy presents to the API server (default kubeplus-e2e-proxy in system:masters). */
  upstreamUser?: { name: string; groups: readonly string[] };
  /** Kubeconfig file name in the cluster dir (default api-proxy-<port>.kubeconfig). */
  kubeconfigName?: string;
}

export interface Hold {
  /** Delivers everything held back by this hold (in order) and lets later data through. Idempotent. */
  release(): void;
  /** What this hold is delaying right now: each request with undelivered response data, and that data. */
  held(): { request: ProxiedRequest; data: string }[];
}

export interface ApiProxy {
  /** https://127.0.0.1:<port> */
  readonly url: string;
  /** A kubeconfig for this proxy (trusts the cluster CA; its token is ignored by the proxy). */
  readonly kubeconfigPath: string;
  /** Every request so far, oldest first; with `since`, only those after that sequence number. */
  requests(since?: number): ProxiedRequest[];
  /** Sequence number of the latest request (0 before the first): a mark for `requests(mark)`. */
  mark(): number;
  /** Holds back the response bodies of requests matching `match` (already open ones included). */
  hold(match: (req: ProxiedRequest) => boolean): Hold;
  /**
   * Forwards each later request matching `match` only `ms` after it came (e.g. a slowed operator:
   * every write late by 5 s). Returns a function that ends the delay for requests to come.
   */
  delay(match: (req: ProxiedRequest) => boolean, ms: number): () => void;
  close(): Promise<void>;
}

// Hop-by-hop headers (RFC 9110 §7.6.1) are not forwarded.
const HOP_BY_HOP = ['connection', 'keep-alive', 'proxy-connection', 'transfer-encoding', 'upgrade', 'te', 'trailer'];

function forwardable(headers: IncomingHttpHeaders, drop: readonly string[] = []): IncomingHttpHeaders {
  const out: IncomingHttpHeaders = {};
  for (const [k, v] of Object.entries(headers)) {
    if (!HOP_BY_HOP.includes(k) && !drop.includes(k)) out[k] = v;
  }
  return out;
}

/** One proxied response: data flows to the client unless a matching hold is active, then it queues. */
class Stream {
  readonly queue: (Buffer | null)[] = []; // null: end of the response
  constructor(
    readonly req: ProxiedRequest,
    readonly res: ServerResponse,
  ) {}
}

export async function startApiProxy(cluster: Cluster, opts: ApiProxyOptions = {}): Promise<ApiProxy> {
  const upstream = new URL(cluster.server);
  const user = opts.upstreamUser ?? { name: 'kubeplus-e2e-proxy', groups: ['system:masters'] };
  const [serving, client] = (await Promise.all([
    cluster.issueServingCert(['127.0.0.1', 'localhost']),
    cluster.issueClientCert(user.name, user.groups),
  ])) as [CertAndKey, CertAndKey];
  const log: ProxiedRequest[] = [];
  const streams = new Set<Stream>();
  const holds = new Set<(req: ProxiedRequest) => boolean>();
  const delays = new Set<{ match: (req: ProxiedRequest) => boolean; ms: number }>();
  const isHeld = (req: ProxiedRequest): boolean => [...holds].some((match) => match(req));

  const deliver = (s: Stream, chunk: Buffer | null): void => {
    if (chunk === null) {
      s.res.end();
      streams.delete(s);
    } else {
      s.res.write(chunk);
    }
  };
  const push = (s: Stream, chunk: Buffer | null): void => {
    if (s.queue.length > 0 || isHeld(s.req)) s.queue.push(chunk);
    else deliver(s, chunk);
  };
  const drain = (): void => {
    for (const s of [...streams]) {
      if (isHeld(s.req)) continue;
      while (s.queue.length > 0) deliver(s, s.queue.shift() as Buffer | null);
    }
  };

  let seq = 0;
  const handle = (req: IncomingMessage, res: ServerResponse): void => {
    const url = req.url ?? '/';
    const parsed = new URL(url, 'https://proxy.invalid');
    const entry: ProxiedRequest = {
      seq: ++seq,
      method: req.method ?? 'GET',
      url,
      path: parsed.pathname,
      query: parsed.searchParams,
      watch: ['true', '1'].includes(parsed.searchParams.get('watch') ?? ''),
      at: new Date(),
    };
    log.push(entry);
    const delayMs = Math.max(0, ...[...delays].filter((d) => d.match(entry)).map((d) => d.ms));
    if (delayMs > 0) {
      req.pause();
      setTimeout(() => forward(req, res, url, entry), delayMs);
      return;
    }
    forward(req, res, url, entry);
  };

  const forward = (req: IncomingMessage, res: ServerResponse, url: string, entry: ProxiedRequest): void => {
    const out = httpsRequest(
      {
        host: upstream.hostname,
        port: upstream.port,
        method: entry.method,
        path: url,
        headers: { ...forwardable(req.headers, ['authorization', 'host']), host: upstream.host },
        ca: cluster.caPem,
        cert: client.certPem,
        key: client.keyPem,
        agent: false,
      },
      (up) => {
        res.writeHead(up.statusCode ?? 502, forwardable(up.headers));
        res.flushHeaders();
        const s = new Stream(entry, res);
        streams.add(s);
        up.on('data', (chunk: Buffer) => push(s, chunk));
        up.on('end', () => push(s, null));
        up.on('error', () => {
          streams.delete(s);
          res.destroy();
        });
        res.on('close', () => {
          streams.delete(s);
          up.destroy();
        });
      },
    );
    out.on('error', (error) => {
      if (!res.headersSent) res.writeHead(502, { 'content-type': 'text/plain' });
      res.end(`api proxy: upstream request failed: ${error.message}`);
    });
    req.pipe(out);
  };

  const server: Server = httpsServer({ cert: serving.certPem, key: serving.keyPem }, handle);
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const address = server.address();
  if (address === null || typeof address === 'string') throw new Error('api proxy: no listening port');
  const url = `https://127.0.0.1:${address.port}`;
  const kubeconfigPath = writeKubeconfig(
    join(cluster.dir, opts.kubeconfigName ?? `api-proxy-${address.port}.kubeconfig`),
    {
      server: url,
      caPem: cluster.caPem,
      user: 'via-api-proxy',
      // The proxy ignores client credentials; client-node wants some.
      credentials: { token: 'ignored-by-the-e2e-api-proxy' },
    },
  );

  return {
    url,
    kubeconfigPath,
    requests: (since = 0) => log.filter((r) => r.seq > since),
    mark: () => seq,
    delay(match, ms) {
      const rule = { match, ms };
      delays.add(rule);
      return () => {
        delays.delete(rule);
      };
    },
    hold(match) {
      holds.add(match);
      return {
        release() {
          if (holds.delete(match)) drain();
        },
        held: () =>
          [...streams]
            .filter((s) => s.queue.length > 0 && match(s.req))
            .map((s) => ({
              request: s.req,
              data: Buffer.concat(s.queue.filter((c): c is Buffer => c !== null)).toString('utf8'),
            })),
      };
    },
    async close() {
      holds.clear();
      drain();
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      server.closeAllConnections();
      await closed;
    },
  };
}
