/**
 * A measuring instrument, not a product: the webhook's own admission route
 * (services/webhook/src/http/app.ts `createAdmissionRoute`: body reader, review validation, patch,
 * check, metrics, the JSON log line) served three ways, to show what express's dispatch costs per
 * request:
 *
 * - `--dispatch=express`: as the webhook serves it, the whole express app (`createWebhookApp`) on
 *   a server whose requests and responses are born with express's prototypes
 *   (`expressMessageClasses`);
 * - `--dispatch=express-node-messages`: the same app on node:http's own IncomingMessage and
 *   ServerResponse, so express switches each one's prototype per request (the webhook before
 *   express-messages.ts);
 * - `--dispatch=direct`: the same route handler called by `node:https` itself, express's
 *   `app.handle` (the prototype switch of `req` and `res`, the router) skipped.
 *
 * Everything else is identical in both: the same modules, logger (stdout), metrics registry,
 * TLS settings (`createHttpsServer`) and a cache holding the one namespace the load targets (its
 * mandate from `--mandate`, as the operator would write it), so no request misses it. The two run
 * in the same rounds as the real webhook and the reference (docs/benchmarks.md §2).
 *
 *   node bench/dist/dispatch-webhook.js --dispatch=express|express-node-messages|direct --port=P \
 *        --tls-cert-file=F --tls-key-file=F --namespace=NS --mandate='{"nodeSelector":…}'
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { parseArgs } from 'node:util';
import {
  canonicalNodeIsolation,
  NODE_ISOLATION_ENABLED_LABEL,
  NODE_ISOLATION_RESOLVED_ANNOTATION,
  parseNodeIsolation,
} from '@kubeplus-isolation/spec';
import { NamespaceCache } from '@kubeplus-isolation/webhook/dist/cache/namespace-cache.js';
import { IsolationResolver } from '@kubeplus-isolation/webhook/dist/cache/resolver.js';
import { createAdmissionRoute, createWebhookApp, MUTATE_PODS_PATH } from '@kubeplus-isolation/webhook/dist/http/app.js';
import { BodyBudget, defaultBodyBudget } from '@kubeplus-isolation/webhook/dist/http/body-budget.js';
import { expressMessageClasses, type MessageClasses } from '@kubeplus-isolation/webhook/dist/http/express-messages.js';
import { createLogger } from '@kubeplus-isolation/webhook/dist/log.js';
import { createMetrics } from '@kubeplus-isolation/webhook/dist/metrics.js';
import { createHttpsServer, loadKeyPair } from '@kubeplus-isolation/webhook/dist/tls.js';

const DISPATCHES = ['express', 'express-node-messages', 'direct'] as const;
export type Dispatch = (typeof DISPATCHES)[number];

const { values } = parseArgs({
  options: {
    dispatch: { type: 'string' },
    port: { type: 'string' },
    'tls-cert-file': { type: 'string' },
    'tls-key-file': { type: 'string' },
    namespace: { type: 'string' },
    mandate: { type: 'string' },
  },
});
const dispatch = values.dispatch as Dispatch;
if (!DISPATCHES.includes(dispatch)) throw new Error(`--dispatch must be one of ${DISPATCHES.join(', ')}`);
const parsed = parseNodeIsolation(values.mandate);
if (!parsed.ok) throw new Error(`--mandate: ${parsed.errors.join('; ')}`);

const logger = createLogger({ level: 'info' });
const cache = new NamespaceCache({ logger });
cache.upsert({
  metadata: {
    name: values.namespace as string,
    labels: { [NODE_ISOLATION_ENABLED_LABEL]: 'true' },
    annotations: { [NODE_ISOLATION_RESOLVED_ANNOTATION]: canonicalNodeIsolation(parsed.value) },
  },
});
const metrics = createMetrics({ sources: { cacheCounts: () => cache.counts() } });
const resolver = new IsolationResolver(
  cache,
  { read: () => Promise.reject(new Error('no API server: the bench namespace is cached')) },
  { liveLookupTimeoutMs: 1_000 },
);
const opts = {
  resolve: (ns: string) => resolver.resolve(ns),
  readiness: () => ({ ready: true }) as const,
  metrics,
  logger,
  maxBodyBytes: 3 * 1024 * 1024,
  // The webhook's default body budget (config.ts), as the served webhook runs it.
  budget: new BodyBudget(defaultBodyBudget(3 * 1024 * 1024)),
  bodyReadTimeoutMs: 5_000,
};

type Listener = (req: IncomingMessage, res: ServerResponse) => void;
let listener: Listener;
let messages: MessageClasses | undefined;
if (dispatch === 'express' || dispatch === 'express-node-messages') {
  const app = createWebhookApp(opts);
  listener = app as unknown as Listener;
  if (dispatch === 'express') messages = expressMessageClasses(app);
} else {
  const route = createAdmissionRoute(opts);
  listener = (req, res) => {
    if (req.method === 'POST' && req.url === MUTATE_PODS_PATH) {
      // The route reads express's `req.is` only for a Content-Type other than the API server's
      // exact `application/json`, which this load always sends.
      route(req as never, res as never, (err?: unknown) => {
        logger.error('route failed', { error: String(err) });
        res.statusCode = 500;
        res.end();
      });
      return;
    }
    res.writeHead(req.url === '/healthz' ? 200 : 404, { 'content-type': 'application/json' }).end('{}');
  };
}
const pair = loadKeyPair({ certFile: values['tls-cert-file'] as string, keyFile: values['tls-key-file'] as string });
createHttpsServer(listener, pair, messages).listen(Number(values.port), '127.0.0.1');
