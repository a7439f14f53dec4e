/**
 * An in-process fake API server on 127.0.0.1 for the thin client-node adapters: each request is
 * recorded (method, path, query) and answered by the test's handler; the bytes of each response
 * body are recorded too, so a test can bound what one response carried.
 */
import { once } from 'node:events';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { KubeConfig } from '@kubernetes/client-node';

export interface SeenRequest {
  method: string;
  path: string;
  query: URLSearchParams;
  body: unknown;
  /** Bytes of the JSON body sent back. */
  responseBytes: number;
}

export type Handler = (req: SeenRequest) => { status: number; body: unknown };

export interface FakeApiServer {
  kc: KubeConfig;
  seen: SeenRequest[];
  handle(handler: Handler): void;
  close(): Promise<void>;
}

export async function startFakeApiServer(): Promise<FakeApiServer> {
  const seen: SeenRequest[] = [];
  let handler: Handler = () => ({ status: 500, body: {} });
  const server: Server = createServer((req: IncomingMessage, res: ServerResponse) => {
    let data = '';
    req.on('data', (chunk: Buffer) => {
      data += chunk.toString();
    });
    req.on('end', () => {
      const url = new URL(req.url ?? '/', 'http://localhost');
      const entry: SeenRequest = {
        method: req.method ?? '',
        path: url.pathname,
        query: url.searchParams,
        body: data ? JSON.parse(data) : undefined,
        responseBytes: 0,
      };
      seen.push(entry);
      const reply = handler(entry);
      const text = JSON.stringify(reply.body);
      entry.responseBytes = Buffer.byteLength(text);
      res.writeHead(reply.status, { 'content-type': 'application/json' });
      res.end(text);
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as AddressInfo;
  const kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [{ name: 'test', server: `http://127.0.0.1:${port}`, skipTLSVerify: true }],
    users: [{ name: 'test' }],
    contexts: [{ name: 'test', cluster: 'test', user: 'test' }],
    currentContext: 'test',
  });
  return {
    kc,
    seen,
    handle(h) {
      handler = h;
    },
    async close() {
      server.closeAllConnections();
      server.close();
      await once(server, 'close');
    },
  };
}
