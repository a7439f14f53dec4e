/** KubeClient against HTTPS servers started here (real sockets and TLS): GET, errors, abort, watch streams. */
import { mkdtempSync, writeFileSync } from 'node:fs';
import type http from 'node:http';
import https from 'node:https';
import type { AddressInfo, Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TLSSocket } from 'node:tls';
import { afterEach, beforeAll, describe, expect, it, jest } from '@jest/globals';
import { KubeApiError, KubeClient } from '../../src/kube/client.js';
import { FileToken, type KubeConnection, StaticToken } from '../../src/kube/connection.js';
import { type GeneratedPair, generatePair } from '../helpers/certs.js';
import { eventually } from '../helpers/https-client.js';

// Real sockets on a shared 2-core machine: generous per-test bounds.
jest.setTimeout(30_000);

type Handler = (req: http.IncomingMessage, res: http.ServerResponse) => void;

interface TestServer {
  url: string;
  /** TLS connections accepted. */
  connections: () => number;
  close: () => Promise<void>;
}

const servers: TestServer[] = [];
const clients: KubeClient[] = [];

afterEach(async () => {
  for (const c of clients.splice(0)) c.close();
  await Promise.all(servers.splice(0).map((s) => s.close()));
});

async function serve(pair: GeneratedPair, handler: Handler, extra: https.ServerOptions = {}): Promise<TestServer> {
  const server = https.createServer({ cert: pair.cert, key: pair.key, ...extra }, handler);
  let connections = 0;
  server.on('secureConnection', () => {
    connections += 1;
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const s: TestServer = {
    url: `https://127.0.0.1:${(server.address() as AddressInfo).port}`,
    connections: () => connections,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
  servers.push(s);
  return s;
}

function connect(url: string, over: Partial<KubeConnection> = {}): KubeClient {
  const client = new KubeClient({
    server: new URL(url),
    ca: undefined,
    verifyServer: true,
    tlsServerName: undefined,
    clientCert: undefined,
    token: undefined,
    describe: 'test',
    ...over,
  });
  clients.push(client);
  return client;
}

function json(res: http.ServerResponse, code: number, body: unknown): void {
  res.writeHead(code, { 'Content-Type': 'application/json' });
  res.end(JSON.stringify(body));
}

const status = (code: number, reason: string, message: string) => ({
  kind: 'Status',
  apiVersion: 'v1',
  status: 'Failure',
  reason,
  message,
  code,
});

const signal = (): AbortSignal => AbortSignal.timeout(10_000);

interface WatchRecord {
  connected: number;
  events: Array<{ type: string; object: unknown }>;
  closed: Promise<Error | undefined>;
}

function watch(client: KubeClient, opts: { signal?: AbortSignal; throwOn?: string } = {}) {
  let connected = 0;
  const events: WatchRecord['events'] = [];
  let closes = 0;
  const closed = new Promise<Error | undefined>((resolve) => {
    client.watch(
      '/api/v1/namespaces',
      { labelSelector: 'a=b', resourceVersion: '7' },
      {
        connected: () => {
          connected += 1;
        },
        event: (type, object) => {
          if (type === opts.throwOn) throw new Error(`handler failed on ${type}`);
          events.push({ type, object });
        },
        closed: (err) => {
          closes += 1;
          resolve(err);
        },
      },
      { ...(opts.signal !== undefined && { signal: opts.signal }) },
    );
  });
  return { connected: () => connected, events, closed, closes: () => closes };
}

describe('KubeClient over HTTPS', () => {
  let pair: GeneratedPair;
  let other: GeneratedPair;
  let clientPair: GeneratedPair;

  beforeAll(async () => {
    const dir = mkdtempSync(join(tmpdir(), 'webhook-client-'));
    pair = await generatePair(join(dir, 'server'), 'apiserver');
    other = await generatePair(join(dir, 'other'), 'someone-else');
    clientPair = await generatePair(join(dir, 'client'), 'kubeplus-webhook');
  });

  describe('getJson', () => {
    it('sends the path (after the server prefix), query, token and Accept; parses the answer; one kept-alive connection', async () => {
      const seen: Array<{ url?: string; auth?: string; accept?: string; agent?: string }> = [];
      const s = await serve(pair, (req, res) => {
        seen.push({
          url: req.url,
          auth: req.headers.authorization,
          accept: req.headers.accept,
          agent: req.headers['user-agent'],
        });
        json(res, 200, { kind: 'Namespace', metadata: { name: 'team-a' } });
      });
      const client = connect(`${s.url}/prefix`, { ca: pair.cert, token: new StaticToken('t0k3n') });
      for (let i = 0; i < 5; i++) {
        const got = await client.getJson(
          '/api/v1/namespaces',
          { labelSelector: 'kubeplus.io/x=true', limit: 500, continue: undefined },
          signal(),
        );
        expect(got).toEqual({ kind: 'Namespace', metadata: { name: 'team-a' } });
      }
      expect(seen[0]).toEqual({
        url: '/prefix/api/v1/namespaces?labelSelector=kubeplus.io%2Fx%3Dtrue&limit=500',
        auth: 'Bearer t0k3n',
        accept: 'application/json',
        agent: 'kubeplus-node-isolation-webhook',
      });
      expect(s.connections()).toBe(1);
    });

    it('verifies the server against the CA (and tls-server-name); insecure-skip-tls-verify skips it', async () => {
      const s = await serve(pair, (_req, res) => json(res, 200, {}));
      await expect(connect(s.url, { ca: other.cert }).getJson('/x', {}, signal())).rejects.toThrow(
        /self-signed certificate|unable to verify|certificate/i,
      );
      await expect(connect(s.url).getJson('/x', {}, signal())).rejects.toThrow(/certificate/i);
      expect(await connect(s.url, { ca: pair.cert, tlsServerName: 'localhost' }).getJson('/x', {}, signal())).toEqual(
        {},
      );
      await expect(
        connect(s.url, { ca: pair.cert, tlsServerName: 'apiserver.example' }).getJson('/x', {}, signal()),
      ).rejects.toThrow(/apiserver\.example/);
      expect(await connect(s.url, { verifyServer: false }).getJson('/x', {}, signal())).toEqual({});
    });

    it('presents the client certificate', async () => {
      const s = await serve(
        pair,
        (req, res) => {
          const socket = req.socket as TLSSocket;
          json(res, 200, { authorized: socket.authorized, cn: socket.getPeerCertificate().subject?.CN });
        },
        { requestCert: true, rejectUnauthorized: false, ca: clientPair.cert },
      );
      const client = connect(s.url, { ca: pair.cert, clientCert: { cert: clientPair.cert, key: clientPair.key } });
      expect(await client.getJson('/x', {}, signal())).toEqual({ authorized: true, cn: 'kubeplus-webhook' });
      expect(await connect(s.url, { ca: pair.cert }).getJson('/x', {}, signal())).toEqual({ authorized: false });
    });

    it.each([
      [401, 'Unauthorized', 'Unauthorized'],
      [403, 'Forbidden', 'namespaces is forbidden: User "x" cannot list resource "namespaces"'],
      [500, 'InternalError', 'etcdserver: request timed out'],
      [404, 'NotFound', 'namespaces "ghost" not found'],
    ])(
      'a %d answer rejects with a KubeApiError carrying the code and the server message',
      async (code, reason, message) => {
        const s = await serve(pair, (_req, res) => json(res, code, status(code, reason, message)));
        const err = await connect(s.url, { ca: pair.cert })
          .getJson('/api/v1/namespaces/ghost', {}, signal())
          .catch((e: unknown) => e);
        expect(err).toBeInstanceOf(KubeApiError);
        expect(err).toMatchObject({ statusCode: code, reason });
        expect((err as Error).message).toBe(`GET /api/v1/namespaces/ghost: ${code} ${message}`);
      },
    );

    it('a non-Status error body still names the code; a 2xx that is not JSON rejects', async () => {
      let body = 'upstream connect error';
      let code = 503;
      const s = await serve(pair, (_req, res) => {
        res.writeHead(code);
        res.end(body);
      });
      const client = connect(s.url, { ca: pair.cert });
      await expect(client.getJson('/x', {}, signal())).rejects.toThrow('GET /x: 503 Service Unavailable');
      body = '<html>';
      code = 200;
      await expect(client.getJson('/x', {}, signal())).rejects.toThrow('GET /x: the answer is not JSON');
    });

    it('after a 401, reads the token file again at once (a rotated token) instead of waiting for the period', async () => {
      const dir = mkdtempSync(join(tmpdir(), 'webhook-token-'));
      const tokenFile = join(dir, 'token');
      writeFileSync(tokenFile, 'old');
      let accepted = 'old';
      const auths: string[] = [];
      const s = await serve(pair, (req, res) => {
        auths.push(req.headers.authorization ?? '');
        if (req.headers.authorization === `Bearer ${accepted}`) json(res, 200, { ok: true });
        else json(res, 401, status(401, 'Unauthorized', 'Unauthorized'));
      });
      const client = connect(s.url, { ca: pair.cert, token: new FileToken(tokenFile) });
      expect(await client.getJson('/x', {}, signal())).toEqual({ ok: true });
      writeFileSync(tokenFile, 'new');
      accepted = 'new';
      await expect(client.getJson('/x', {}, signal())).rejects.toMatchObject({ statusCode: 401 });
      expect(await client.getJson('/x', {}, signal())).toEqual({ ok: true });
      expect(auths).toEqual(['Bearer old', 'Bearer old', 'Bearer new']);
    });

    it('aborts the request when the signal fires, rejecting with its reason', async () => {
      let serverSawClose = false;
      const s = await serve(pair, (req) => {
        req.socket.on('close', () => {
          serverSawClose = true;
        });
      });
      const controller = new AbortController();
      const pending = connect(s.url, { ca: pair.cert }).getJson('/slow', {}, controller.signal);
      await eventually(async () => s.connections() === 1, 'the request');
      controller.abort(new Error('deadline passed'));
      await expect(pending).rejects.toThrow('deadline passed');
      await eventually(async () => serverSawClose, 'the server to see the connection closed');
      const aborted = AbortSignal.abort(new Error('already over'));
      await expect(connect(s.url, { ca: pair.cert }).getJson('/x', {}, aborted)).rejects.toThrow('already over');
    });

    it('sends a request once more when the kept-alive connection it reused was closed by the server, never otherwise', async () => {
      const used = new WeakSet<Socket>();
      let requests = 0;
      let killFresh = false;
      const s = await serve(pair, (req, res) => {
        requests += 1;
        if (used.has(req.socket) || killFresh) {
          // As if the server had closed the idle connection just as the request was written.
          req.socket.destroy();
          return;
        }
        used.add(req.socket);
        json(res, 200, { n: requests });
      });
      const client = connect(s.url, { ca: pair.cert });
      expect(await client.getJson('/x', {}, signal())).toEqual({ n: 1 });
      expect(await client.getJson('/x', {}, signal())).toEqual({ n: 3 });
      expect(requests).toBe(3);
      expect(s.connections()).toBe(2);
      killFresh = true;
      const fresh = connect(s.url, { ca: pair.cert });
      await expect(fresh.getJson('/x', {}, signal())).rejects.toMatchObject({ code: 'ECONNRESET' });
      expect(requests).toBe(4);
    });
  });

  describe('postJson', () => {
    it('POSTs the body as JSON with the token, on the kept-alive pool, and parses the answer', async () => {
      const seen: Array<{
        method?: string;
        url?: string;
        type?: string;
        length?: string;
        auth?: string;
        body: string;
      }> = [];
      const s = await serve(pair, (req, res) => {
        let body = '';
        req.on('data', (c: Buffer) => {
          body += c.toString();
        });
        req.on('end', () => {
          seen.push({
            method: req.method,
            url: req.url,
            type: req.headers['content-type'],
            length: req.headers['content-length'],
            auth: req.headers.authorization,
            body,
          });
          if (req.method !== 'POST') json(res, 200, { kind: 'Namespace' });
          else json(res, 201, { ...(JSON.parse(body) as object), status: { authenticated: true } });
        });
      });
      const client = connect(`${s.url}/prefix`, { ca: pair.cert, token: new StaticToken('t0k3n') });
      const review = { apiVersion: 'authentication.k8s.io/v1', kind: 'TokenReview', spec: { token: 'sc\u00e9rapé' } };
      expect(await client.postJson('/apis/authentication.k8s.io/v1/tokenreviews', review, signal())).toEqual({
        ...review,
        status: { authenticated: true },
      });
      expect(await client.getJson('/api/v1/namespaces/a', {}, signal())).toEqual({ kind: 'Namespace' });
      const text = JSON.stringify(review);
      expect(seen[0]).toEqual({
        method: 'POST',
        url: '/prefix/apis/authentication.k8s.io/v1/tokenreviews',
        type: 'application/json',
        length: String(Buffer.byteLength(text)),
        auth: 'Bearer t0k3n',
        body: text,
      });
      expect(seen[1]?.method).toBe('GET');
      expect(seen[1]?.type).toBeUndefined();
      expect(s.connections()).toBe(1);
    });

    it('a non-2xx answer is a KubeApiError naming POST and the path', async () => {
      const s = await serve(pair, (req, res) => {
        req.resume();
        req.on('end', () => json(res, 403, status(403, 'Forbidden', 'cannot create tokenreviews')));
      });
      const client = connect(s.url, { ca: pair.cert });
      const err = await client.postJson('/apis/authentication.k8s.io/v1/tokenreviews', {}, signal()).catch((e) => e);
      expect(err).toBeInstanceOf(KubeApiError);
      expect(err).toMatchObject({
        statusCode: 403,
        reason: 'Forbidden',
        message: 'POST /apis/authentication.k8s.io/v1/tokenreviews: 403 cannot create tokenreviews',
      });
    });

    it('is sent once more, body and all, when the kept-alive connection it reused was closed by the server', async () => {
      const used = new WeakSet<Socket>();
      const bodies: string[] = [];
      const s = await serve(pair, (req, res) => {
        if (used.has(req.socket)) {
          req.socket.destroy();
          return;
        }
        used.add(req.socket);
        let body = '';
        req.on('data', (c: Buffer) => {
          body += c.toString();
        });
        req.on('end', () => {
          bodies.push(body);
          json(res, 201, { n: bodies.length });
        });
      });
      const client = connect(s.url, { ca: pair.cert });
      expect(await client.postJson('/r', { a: 1 }, signal())).toEqual({ n: 1 });
      expect(await client.postJson('/r', { a: 2 }, signal())).toEqual({ n: 2 });
      expect(bodies).toEqual(['{"a":1}', '{"a":2}']);
      expect(s.connections()).toBe(2);
    });
  });

  describe('watch', () => {
    it('adds watch=true, reports the connection, delivers events split across and packed into chunks, ends cleanly', async () => {
      let url = '';
      const s = await serve(pair, (req, res) => {
        url = req.url ?? '';
        res.writeHead(200, { 'Content-Type': 'application/json' });
        const e1 = JSON.stringify({ type: 'ADDED', object: { metadata: { name: 'a', resourceVersion: '8' } } });
        const e2 = JSON.stringify({ type: 'BOOKMARK', object: { metadata: { resourceVersion: '9' } } });
        const e3 = JSON.stringify({ type: 'DELETED', object: { metadata: { name: 'é', resourceVersion: '10' } } });
        const all = Buffer.from(`${e1}\n${e2}\n${e3}\n`);
        const cut = all.indexOf(Buffer.from('é')) + 1; // inside the two bytes of a UTF-8 character
        res.write(all.subarray(0, 10));
        setTimeout(() => res.write(all.subarray(10, cut)), 20);
        setTimeout(() => res.end(all.subarray(cut)), 40);
      });
      const w = watch(connect(s.url, { ca: pair.cert }));
      expect(await w.closed).toBeUndefined();
      expect(url).toBe('/api/v1/namespaces?labelSelector=a%3Db&resourceVersion=7&watch=true');
      expect(w.connected()).toBe(1);
      expect(w.events).toEqual([
        { type: 'ADDED', object: { metadata: { name: 'a', resourceVersion: '8' } } },
        { type: 'BOOKMARK', object: { metadata: { resourceVersion: '9' } } },
        { type: 'DELETED', object: { metadata: { name: 'é', resourceVersion: '10' } } },
      ]);
      expect(w.closes()).toBe(1);
    });

    it('a non-200 answer (410 Gone) ends it with a KubeApiError, without connecting', async () => {
      const s = await serve(pair, (_req, res) => json(res, 410, status(410, 'Expired', 'too old resource version: 7')));
      const w = watch(connect(s.url, { ca: pair.cert }));
      const err = await w.closed;
      expect(err).toBeInstanceOf(KubeApiError);
      expect(err).toMatchObject({
        statusCode: 410,
        message: 'watch /api/v1/namespaces: 410 too old resource version: 7',
      });
      expect(w.connected()).toBe(0);
    });

    it('a malformed line, a premature close and a throwing handler each end it with an error', async () => {
      let mode = 'malformed';
      const s = await serve(pair, (req, res) => {
        res.writeHead(200, { 'Content-Type': 'application/json' });
        if (mode === 'malformed') res.end('{"type":"ADDED","object":{\n');
        else if (mode === 'cut') {
          res.write(`${JSON.stringify({ type: 'ADDED', object: { metadata: { name: 'a' } } })}\n`);
          setTimeout(() => req.socket.destroy(), 50);
        } else res.end(`${JSON.stringify({ type: 'MODIFIED', object: {} })}\n`);
      });
      const client = connect(s.url, { ca: pair.cert });
      expect((await watch(client).closed)?.message).toMatch(/malformed event/);
      mode = 'cut';
      const cut = watch(client);
      expect((await cut.closed)?.message).toMatch(/closed before the stream ended|aborted|ECONNRESET/);
      expect(cut.events).toHaveLength(1);
      mode = 'throw';
      expect((await watch(client, { throwOn: 'MODIFIED' }).closed)?.message).toBe('handler failed on MODIFIED');
    });

    it('the signal ends it: closed with the reason, the connection cut', async () => {
      let serverSawClose = false;
      const s = await serve(pair, (req, res) => {
        res.writeHead(200, { 'Content-Type': 'application/json' });
        res.flushHeaders();
        req.socket.on('close', () => {
          serverSawClose = true;
        });
      });
      const controller = new AbortController();
      const w = watch(connect(s.url, { ca: pair.cert }), { signal: controller.signal });
      await eventually(async () => w.connected() === 1, 'the watch');
      controller.abort(new Error('informer stopped'));
      expect((await w.closed)?.message).toBe('informer stopped');
      await eventually(async () => serverSawClose, 'the server to see the connection closed');
      expect(w.closes()).toBe(1);
    });

    it('a connection error ends it with that error', async () => {
      const s = await serve(pair, (_req, res) => json(res, 200, {}));
      const url = s.url;
      await s.close();
      servers.length = 0;
      const err = await watch(connect(url, { ca: pair.cert })).closed;
      expect(err).toMatchObject({ code: 'ECONNREFUSED' });
    });
  });
});
