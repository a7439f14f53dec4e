import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from '@jest/globals';
import { closeGracefully } from '../../src/http/shutdown.js';

interface Response {
  status: number;
  body: string;
}

function get(port: number, path: string, agent?: http.Agent): Promise<Response> {
  return new Promise((resolve, reject) => {
    const req = http.get({ host: '127.0.0.1', port, path, agent }, (res) => {
      let body = '';
      res.on('data', (c: Buffer) => {
        body += c.toString();
      });
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on('error', reject);
  });
}

describe('closeGracefully', () => {
  let server: http.Server;
  let port: number;
  let releaseSlow: () => void = () => undefined;
  let slowStarted: Promise<void>;

  async function start(): Promise<void> {
    let markStarted: () => void = () => undefined;
    slowStarted = new Promise((r) => {
      markStarted = r;
    });
    server = http.createServer((req, res) => {
      if (req.url === '/slow') {
        markStarted();
        releaseSlow = () => res.end('slow done');
      } else if (req.url === '/hang') {
        markStarted();
      } else {
        res.end('fast');
      }
    });
    // Far longer than any test: an idle keep-alive connection must be closed by the drain, not by this timeout.
    server.keepAliveTimeout = 120_000;
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    port = (server.address() as AddressInfo).port;
  }

  afterEach(() => {
    server.closeAllConnections();
    server.close();
  });

  it('lets an in-flight request finish, refuses new connections, then reports drained', async () => {
    await start();
    const inFlight = get(port, '/slow');
    await slowStarted;

    const closing = closeGracefully(server, 10_000);
    await expect(get(port, '/fast')).rejects.toMatchObject({ code: 'ECONNREFUSED' });

    releaseSlow();
    expect(await inFlight).toEqual({ status: 200, body: 'slow done' });
    expect(await closing).toBe('drained');
  });

  it('closes idle keep-alive connections instead of waiting for their timeout', async () => {
    await start();
    const agent = new http.Agent({ keepAlive: true });
    expect((await get(port, '/fast', agent)).body).toBe('fast');
    expect(await closeGracefully(server, 60_000)).toBe('drained');
    agent.destroy();
  });

  it('cuts connections still busy at the deadline and reports forced', async () => {
    await start();
    const hung = get(port, '/hang');
    await slowStarted;
    expect(await closeGracefully(server, 100)).toBe('forced');
    await expect(hung).rejects.toMatchObject({ code: 'ECONNRESET' });
  });

  it('is a no-op for a server that is not listening', async () => {
    const idle = http.createServer();
    expect(await closeGracefully(idle, 10)).toBe('drained');
    server = idle;
  });
});
