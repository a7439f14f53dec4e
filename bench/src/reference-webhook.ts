/**
 * A reference point, not a product: the least a Node.js HTTPS mutating webhook can do for the
 * same job — node:https (same TLS settings as services/webhook: TLS ≥ 1.2, keep-alive longer
 * than the API server's), read the body, JSON.parse, answer the seed's Go-snippet patch
 * (nodeSelector add/replace by presence, tolerations add or append), no framework, no logging,
 * no metrics, no validation. Comparing the webhook with it on the same machine, side by side,
 * separates what the platform costs (TLS, HTTP, JSON, the API server's webhook call) from what
 * services/webhook adds.
 *
 *   node bench/dist/reference-webhook.js --port=P --tls-cert-file=F --tls-key-file=F \
 *        --pool=POOL
 */
import { readFileSync } from 'node:fs';
import https from 'node:https';
import { parseArgs } from 'node:util';

const { values } = parseArgs({
  options: {
    port: { type: 'string' },
    'tls-cert-file': { type: 'string' },
    'tls-key-file': { type: 'string' },
    pool: { type: 'string', default: 'bench-pool' },
  },
});
const pool = values.pool as string;
const toleration = { key: 'dedicated', operator: 'Equal', value: pool, effect: 'NoSchedule' };

interface Review {
  request?: { uid?: string; object?: { spec?: { nodeSelector?: Record<string, string>; tolerations?: unknown[] } } };
}

function respond(review: Review): string {
  const spec = review.request?.object?.spec ?? {};
  const ops: unknown[] = [
    {
      op: spec.nodeSelector ? 'replace' : 'add',
      path: '/spec/nodeSelector',
      value: { ...spec.nodeSelector, pool },
    },
    spec.tolerations && spec.tolerations.length > 0
      ? { op: 'add', path: '/spec/tolerations/-', value: toleration }
      : { op: 'add', path: '/spec/tolerations', value: [toleration] },
  ];
  return JSON.stringify({
    apiVersion: 'admission.k8s.io/v1',
    kind: 'AdmissionReview',
    response: {
      uid: review.request?.uid ?? '',
      allowed: true,
      patchType: 'JSONPatch',
      patch: Buffer.from(JSON.stringify(ops)).toString('base64'),
    },
  });
}

const server = https.createServer(
  {
    cert: readFileSync(values['tls-cert-file'] as string),
    key: readFileSync(values['tls-key-file'] as string),
    minVersion: 'TLSv1.2',
  },
  (req, res) => {
    if (req.method === 'GET') {
      res.writeHead(200, { 'content-type': 'application/json' }).end('{"status":"ok"}');
      return;
    }
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      let out: string;
      try {
        out = respond(JSON.parse(Buffer.concat(chunks).toString('utf8')) as Review);
      } catch {
        res.writeHead(400).end();
        return;
      }
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(out) }).end(out);
    });
  },
);
server.keepAliveTimeout = 95_000;
server.listen(Number(values.port), '127.0.0.1');
// Nothing to drain: a reference server for benchmarks stops at once.
process.on('SIGTERM', () => process.exit(0));
