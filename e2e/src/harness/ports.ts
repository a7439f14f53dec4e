import { createServer, type Server } from 'node:net';

/**
 * Reserves `count` distinct free TCP ports on `host` by binding them all at once (port 0) and
 * releasing them. A port can still be taken by another process between release and use; callers
 * that start servers on these ports detect that ("address already in use") and retry with fresh
 * ports (see control-plane.ts).
 */
export async function freePorts(count: number, host = '127.0.0.1'): Promise<number[]> {
  const servers: Server[] = [];
  try {
    for (let i = 0; i < count; i++) {
      const server = createServer();
      servers.push(server);
      await new Promise<void>((resolve, reject) => {
        server.once('error', reject);
        server.listen({ port: 0, host, exclusive: true }, resolve);
      });
    }
    return servers.map((server) => {
      const address = server.address();
      if (address === null || typeof address === 'string') {
        throw new Error(`freePorts: unexpected listen address ${String(address)}`);
      }
      return address.port;
    });
  } finally {
    await Promise.all(servers.map((server) => new Promise<void>((resolve) => server.close(() => resolve()))));
  }
}
