/**
 * HTTP surface (express), without TLS so tests drive it with supertest; tls.ts serves it.
 *
 * Webhook app (HTTPS port):
 *   POST /mutate/pods   AdmissionReview (admission.k8s.io/v1) in, AdmissionReview out. Always
 *                       200 + allowed:true for a well-formed review; 400/413/415 with a JSON
 *                       {error, message} body for a malformed request (never a 5xx for one).
 *   GET  /healthz       200 while the process serves requests (the answer itself shows the
 *                       event loop is responsive; the kubelet's probe timeout bounds it).
 *   GET  /readyz        200 once the namespace informer has synced and while its watch is not
 *                       stale beyond the bound; 503 otherwise and while shutting down.
 * Metrics app (plain-HTTP port): GET /metrics.
 */
import express, { type NextFunction, type Request, type Response } from 'express';
import type { Registry } from 'prom-client';
import type { Logger } from 'winston';
import { type AdmissionOutcome, admit, type ResolveNamespace } from '../admission/admit.js';
import type { BadRequestReason } from '../admission/reasons.js';
import { parseAdmissionReview, podIdentity } from '../admission/review.js';
import type { Readiness } from '../cache/informer.js';
import { recordAdmission, recordBadRequest, recordFailOpen, type WebhookMetrics } from '../metrics.js';

export const MUTATE_PODS_PATH = '/mutate/pods';

export interface WebhookAppOptions {
  resolve: ResolveNamespace;
  readiness: () => Readiness;
  metrics: WebhookMetrics;
  logger: Logger;
  maxBodyBytes: number;
  /** True once shutdown began: /readyz fails and responses close their connection. */
  isShuttingDown?: () => boolean;
}

/** body-parser error types → (status, bounded reason, message). */
const BODY_ERRORS: Record<string, { status: number; reason: BadRequestReason; message: string }> = {
  'entity.parse.failed': { status: 400, reason: 'invalid_json', message: 'request body is not valid JSON' },
  'entity.too.large': { status: 413, reason: 'body_too_large', message: 'request body exceeds the size limit' },
  'encoding.unsupported': {
    status: 415,
    reason: 'unsupported_encoding',
    message: 'unsupported Content-Encoding (use identity, gzip or deflate)',
  },
  'charset.unsupported': { status: 415, reason: 'unsupported_encoding', message: 'unsupported charset (use utf-8)' },
  'request.aborted': { status: 400, reason: 'aborted', message: 'request aborted by the client' },
  'request.size.invalid': {
    status: 400,
    reason: 'aborted',
    message: 'request body length does not match Content-Length',
  },
};

function bodyErrorType(err: unknown): string | undefined {
  if (typeof err !== 'object' || err === null || !('type' in err)) return undefined;
  return typeof err.type === 'string' ? err.type : undefined;
}

/** The 4xx status a body-reading error carries (e.g. a corrupt gzip stream), if any. */
function clientErrorStatus(err: unknown): number | undefined {
  if (typeof err !== 'object' || err === null || !('status' in err)) return undefined;
  const status = err.status;
  return typeof status === 'number' && status >= 400 && status < 500 ? status : undefined;
}

function sendBadRequest(
  res: Response,
  metrics: WebhookMetrics,
  status: number,
  reason: BadRequestReason,
  message: string,
): void {
  recordBadRequest(metrics, reason);
  res.status(status).json({ error: reason, message });
}

function logAdmission(logger: Logger, outcome: AdmissionOutcome, fields: Record<string, unknown>): void {
  const record = {
    ...fields,
    result: outcome.result,
    ...(outcome.reason !== undefined && { reason: outcome.reason, detail: outcome.detail }),
    ...(outcome.patch.length > 0 && { patchOps: outcome.patch.length }),
  };
  switch (outcome.result) {
    case 'patched':
      logger.info('pod admitted with node isolation', record);
      break;
    case 'failopen':
      logger.warn('pod admitted WITHOUT node isolation (fail open)', record);
      break;
    case 'error':
      logger.error('pod admitted WITHOUT node isolation after an internal error (fail open)', record);
      break;
    default:
      logger.debug('pod admitted unchanged', record);
  }
}

export function createWebhookApp(opts: WebhookAppOptions): express.Express {
  const { metrics, logger } = opts;
  const shuttingDown = opts.isShuttingDown ?? (() => false);
  const app = express();
  app.disable('x-powered-by');
  app.set('etag', false);

  app.use((_req, res, next) => {
    // While draining, let each connection carry its current response and then close.
    if (shuttingDown()) res.setHeader('Connection', 'close');
    next();
  });

  app.get('/healthz', (_req, res) => {
    res.json({ status: 'ok' });
  });

  app.get('/readyz', (_req, res) => {
    const r: Readiness = shuttingDown() ? { ready: false, reason: 'shutting down' } : opts.readiness();
    if (r.ready) res.json({ status: 'ready' });
    else res.status(503).json({ status: 'not ready', reason: r.reason });
  });

  const parseJson = express.json({ limit: opts.maxBodyBytes, type: 'application/json', strict: true });

  app.post(
    MUTATE_PODS_PATH,
    (req, res, next) => {
      res.locals.startedAt = process.hrtime.bigint();
      const type = req.is('application/json');
      if (type === null || req.headers['content-length'] === '0') {
        sendBadRequest(res, metrics, 400, 'missing_body', 'request body is required: a JSON AdmissionReview');
      } else if (type === false) {
        sendBadRequest(
          res,
          metrics,
          415,
          'unsupported_media_type',
          `Content-Type must be application/json, got ${JSON.stringify((req.get('content-type') ?? '').slice(0, 100))}`,
        );
      } else {
        next();
      }
    },
    parseJson,
    async (req, res) => {
      const parsed = parseAdmissionReview(req.body);
      if (!parsed.ok) {
        sendBadRequest(res, metrics, 400, parsed.code, parsed.message);
        return;
      }
      const request = parsed.request;
      const outcome = await admit(request, opts.resolve);
      const seconds = Number(process.hrtime.bigint() - (res.locals.startedAt as bigint)) / 1e9;
      recordAdmission(metrics, outcome.result, seconds);
      if (outcome.reason !== undefined) recordFailOpen(metrics, outcome.reason);
      res.json(outcome.review);
      logAdmission(logger, outcome, {
        uid: request.uid,
        namespace: request.namespace,
        ...podIdentity(request),
        operation: request.operation,
        resource: request.resource.resource,
        ...(request.subResource !== undefined && { subResource: request.subResource }),
        ...(request.dryRun && { dryRun: true }),
        durationMs: Math.round(seconds * 1e6) / 1e3,
      });
    },
  );

  app.all(MUTATE_PODS_PATH, (_req, res) => {
    res.setHeader('Allow', 'POST');
    res.status(405).json({ error: 'method_not_allowed', message: `use POST ${MUTATE_PODS_PATH}` });
  });

  app.use((req, res) => {
    res.status(404).json({ error: 'not_found', message: `no route for ${req.method} ${req.path}` });
  });

  // Four parameters: express recognizes an error handler by its arity.
  app.use((err: unknown, req: Request, res: Response, _next: NextFunction) => {
    const known = BODY_ERRORS[bodyErrorType(err) ?? ''];
    if (known !== undefined) {
      const message =
        known.reason === 'body_too_large' ? `${known.message} of ${opts.maxBodyBytes} bytes` : known.message;
      sendBadRequest(res, metrics, known.status, known.reason, message);
      return;
    }
    const clientStatus = clientErrorStatus(err);
    if (clientStatus !== undefined) {
      const message = 'request body could not be read (corrupt or truncated content encoding?)';
      sendBadRequest(res, metrics, clientStatus, 'invalid_body', message);
      return;
    }
    logger.error('unhandled error serving request', {
      method: req.method,
      path: req.path,
      error: err instanceof Error ? err.message : String(err),
      stack: err instanceof Error ? err.stack : undefined,
    });
    if (!res.headersSent) res.status(500).json({ error: 'internal_error', message: 'internal server error' });
  });

  return app;
}

/** Plain-HTTP app for Prometheus: GET /metrics from `registry`. */
export function createMetricsApp(registry: Registry): express.Express {
  const app = express();
  app.disable('x-powered-by');
  app.get('/metrics', async (_req, res) => {
    res.setHeader('Content-Type', registry.contentType);
    res.send(await registry.metrics());
  });
  app.use((req, res) => {
    res
      .status(404)
      .json({ error: 'not_found', message: `no route for ${req.method} ${req.path}; metrics are at /metrics` });
  });
  return app;
}
