import { request as httpRequest } from 'node:http';
import { request as httpsRequest } from 'node:https';

export interface ProbeTls {
  caPem: string;
  certPem?: string;
  keyPem?: string;
}

export interface ProbeResponse {
  status: number;
  body: string;
}

/** One GET, no keep-alive, verifying the server against `tls.caPem` for https URLs. */
export function httpGet(url: string, tls?: ProbeTls, timeoutMs = 5_000): Promise<ProbeResponse> {
  return new Promise((resolve, reject) => {
    const target = new URL(url);
    const options = { method: 'GET', timeout: timeoutMs, agent: false as const };
    const onResponse = (res: import('node:http').IncomingMessage): void => {
      const chunks: Buffer[] = [];
      res.on('data', (chunk: Buffer) => chunks.push(chunk));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString('utf8') }));
      res.on('error', reject);
    };
    const req =
      target.protocol === 'https:'
        ? httpsRequest(target, { ...options, ca: tls?.caPem, cert: tls?.certPem, key: tls?.keyPem }, onResponse)
        : httpRequest(target, options, onResponse);
    req.on('timeout', () => req.destroy(new Error(`GET ${url}: no response within ${timeoutMs}ms`)));
    req.on('error', reject);
    req.end();
  });
}
