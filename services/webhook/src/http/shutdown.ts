/**
 * Graceful close of an HTTP(S) server: stop accepting connections, let in-flight requests
 * finish, close keep-alive connections as soon as they are idle, and cut whatever is still
 * open when the deadline passes.
 */
import type { Server } from 'node:http';

/** How often idle keep-alive connections are swept while draining. */
const IDLE_SWEEP_MS = 50;

export type CloseResult = 'drained' | 'forced';

export function closeGracefully(server: Server, timeoutMs: number): Promise<CloseResult> {
  if (!server.listening) return Promise.resolve('drained');
  return new Promise((resolve) => {
    let settled = false;
    const finish = (result: CloseResult): void => {
      if (settled) return;
      settled = true;
      clearInterval(sweep);
      clearTimeout(deadline);
      resolve(result);
    };
    // A connection whose response just finished is idle: close it rather than wait for its keep-alive timeout.
    const sweep = setInterval(() => server.closeIdleConnections(), IDLE_SWEEP_MS);
    const deadline = setTimeout(() => {
      server.closeAllConnections();
      finish('forced');
    }, timeoutMs);
    server.close(() => finish('drained'));
    server.closeIdleConnections();
  });
}
