/**
 * HTTP surface (express), without TLS so tests drive it with supertest; tls.ts serves it.
 *
 * Webhook app (HTTPS port):
 *   POST /mutate/pods   AdmissionReview (admission.k8s.io/v1) in, AdmissionReview out. Always
 *                       200 + allowed:true for a well-formed review; 400/413/415 with a JSON
 *                       {error, message} body for a malformed request (never a 5xx for one).
 *                       The API server admits the Pod of an unanswered review unpatched
 *                       (failurePolicy Ignore), so every 4xx here is counted as a fail-open:
 *                       admissions_total{result="failopen"}, failopen_total{reason="bad_request"}.
 *   GET  /healthz       200 while the process serves requests (the answer itself shows the
 *                       event loop is responsive; the kubelet's probe timeout bounds it).
 *   GET  /readyz        200 once the namespace informer has synced and while its watch is not
 *                       stale beyond the bound; 503 otherwise and while shutting down.
 * Metrics app (plain-HTTP port): GET /metrics.
 *
 * Express serves every request, the API server's included. POST /mutate/pods is its first
 * route (nothing runs before it), its body read by body-parser (`express.json`, strict), whose
 * errors become the 400/413/415 answers above.
 */
import type { ServerResponse } from 'node:http';
import express, { type NextFunction, type Request, type Response } from 'express';
import type { Registry } from 'prom-client';
import type { Logger } from 'winston';
import { type AdmissionOutcome, admit, type ResolveNamespace } from '../admission/admit.js';
import type { AdmissionResult, BadRequestReason } from '../admission/metric-labels.js';
import { type AdmissionRequest, parseAdmissionReview, podIdentity } from '../admission/review.js';
import type { Readiness } from '../cache/informer.js';
import { logRecord } from '../log.js';
import { recordAdmission, recordBadRequest, recordFailOpen, type WebhookMetrics } from '../metrics.js';

/** What express's res.json sends as Content-Type. */
const JSON_CONTENT_TYPE = 'application/json; charset=utf-8';

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

/** What express's `res.status(status).json(value)` sends (its ETag is disabled), with one writeHead and end. */
function sendJson(res: ServerResponse, status: number, value: unknown): void {
  const body = JSON.stringify(value);
  res.writeHead(status, ['Content-Type', JSON_CONTENT_TYPE, 'Content-Length', String(Buffer.byteLength(body))]);
  res.end(body);
}

/**
 * A 4xx answer to /mutate/pods: the API server admits the Pod unpatched (failurePolicy Ignore),
 * so it is counted as a fail-open where the alert reads (`startedAt`: when the request came).
 */
function sendBadRequest(
  res: ServerResponse,
  metrics: WebhookMetrics,
  startedAt: number,
  status: number,
  reason: BadRequestReason,
  message: string,
): void {
  recordBadRequest(metrics, reason);
  recordAdmission(metrics, 'failopen', (performance.now() - startedAt) / 1e3);
  recordFailOpen(metrics, 'bad_request');
  sendJson(res, status, { error: reason, message });
}

/** When the route took the request (set first thing, read by the error handler). */
const STARTED_AT = Symbol('startedAt');
type Timed = { [STARTED_AT]?: number };

const ADMISSION_LOG: Record<AdmissionResult, { level: 'info' | 'warn' | 'error' | 'debug'; message: string }> = {
  patched: { level: 'info', message: 'pod admitted with node isolation' },
  failopen: { level: 'warn', message: 'pod admitted WITHOUT node isolation (fail open)' },
  error: { level: 'error', message: 'pod admitted WITHOUT node isolation after an internal error (fail open)' },
  unchanged: { level: 'debug', message: 'pod admitted unchanged' },
  skipped: { level: 'debug', message: 'pod admitted unchanged' },
};

/**
 * One log line per admission (see the README's log contract): built only when its level is
 * enabled, and written by `logRecord` (winston's line, without its stream pipeline).
 */
function logAdmission(logger: Logger, outcome: AdmissionOutcome, request: AdmissionRequest, seconds: number): void {
  const { level, message } = ADMISSION_LOG[outcome.result];
  if (!logger.isLevelEnabled(level)) return;
  const record: Record<string, unknown> = { message, uid: request.uid, namespace: request.namespace };
  const id = podIdentity(request);
  if (id.pod !== undefined) record.pod = id.pod;
  else if (id.generateName !== undefined) record.generateName = id.generateName;
  record.operation = request.operation;
  record.resource = request.resource.resource;
  if (request.subResource !== undefined) record.subResource = request.subResource;
  if (request.dryRun) record.dryRun = true;
  record.durationMs = Math.round(seconds * 1e6) / 1e3;
  record.result = outcome.result;
  if (outcome.reason !== undefined) {
    record.reason = outcome.reason;
    record.detail = outcome.detail;
  }
  if (outcome.patch.length > 0) record.patchOps = outcome.patch.length;
  logRecord(logger, level, record);
}

/** Serves the webhook's HTTPS port: the express app, a request listener for `https.createServer` (or supertest). */
export function createWebhookApp(opts: WebhookAppOptions): express.Express {
  const { metrics, logger, maxBodyBytes } = opts;
  const shuttingDown = opts.isShuttingDown ?? (() => false);
  /** While draining, let each connection carry its current response and then close. */
  const closeIfDraining = (res: ServerResponse): void => {
    if (shuttingDown()) res.setHeader('Connection', 'close');
  };
  const app = express();
  app.disable('x-powered-by');
  app.set('etag', false);

  // Sets req.body. The route has checked the Content-Type before (see below), so body-parser's
  // own check (type-is, per request) is skipped: `type` answers yes.
  const readBody = express.json({ limit: maxBodyBytes, type: () => true, strict: true });

  /**
   * A request that failed after routing: a body-reading error gets its 4xx answer, anything
   * else is logged and answered 500 (never for a malformed request).
   */
  const answerError = (err: unknown, method: string | undefined, path: string, res: ServerResponse): void => {
    const startedAt = (res as Timed)[STARTED_AT] ?? performance.now();
    const known = BODY_ERRORS[bodyErrorType(err) ?? ''];
    if (known !== undefined) {
      const message = known.reason === 'body_too_large' ? `${known.message} of ${maxBodyBytes} bytes` : known.message;
      sendBadRequest(res, metrics, startedAt, known.status, known.reason, message);
      return;
    }
    const clientStatus = clientErrorStatus(err);
    if (clientStatus !== undefined) {
      const message = 'request body could not be read (corrupt or truncated content encoding?)';
      sendBadRequest(res, metrics, startedAt, clientStatus, 'invalid_body', message);
      return;
    }
    logger.error('unhandled error serving request', {
      method,
      path,
      error: err instanceof Error ? err.message : String(err),
      stack: err instanceof Error ? err.stack : undefined,
    });
    if (!res.headersSent) sendJson(res, 500, { error: 'internal_error', message: 'internal server error' });
  };

  /** The admission itself, once the body is read and parsed. */
  const review = async (body: unknown, res: ServerResponse, startedAt: number): Promise<void> => {
    const parsed = parseAdmissionReview(body);
    if (!parsed.ok) {
      sendBadRequest(res, metrics, startedAt, 400, parsed.code, parsed.message);
      return;
    }
    const request = parsed.request;
    const outcome = await admit(request, opts.resolve);
    const seconds = (performance.now() - startedAt) / 1e3;
    recordAdmission(metrics, outcome.result, seconds);
    if (outcome.reason !== undefined) recordFailOpen(metrics, outcome.reason);
    // What res.json would send, without its generic content-type and ETag handling.
    sendJson(res, 200, outcome.review);
    logAdmission(logger, outcome, request, seconds);
  };

  // POST /mutate/pods (its `?timeout=` query, and the paths express matches loosely:
  // "/mutate/pods/", "/MUTATE/pods"), first and in one handler: express runs no other layer
  // before it.
  app.post(MUTATE_PODS_PATH, (req, res, next) => {
    const startedAt = performance.now();
    (res as Timed)[STARTED_AT] = startedAt;
    closeIfDraining(res);
    const contentLength = req.headers['content-length'];
    // The API server's exact header skips type-is; anything else is checked in full.
    if (req.headers['content-type'] !== 'application/json' || contentLength === '0') {
      const type = req.is('application/json');
      if (type === null || contentLength === '0') {
        sendBadRequest(
          res,
          metrics,
          startedAt,
          400,
          'missing_body',
          'request body is required: a JSON AdmissionReview',
        );
        return;
      }
      if (type === false) {
        sendBadRequest(
          res,
          metrics,
          startedAt,
          415,
          'unsupported_media_type',
          `Content-Type must be application/json, got ${JSON.stringify((req.get('content-type') ?? '').slice(0, 100))}`,
        );
        return;
      }
    }
    readBody(req, res, (err?: unknown) => {
      if (err !== undefined && err !== null) next(err);
      else review(req.body, res, startedAt).catch(next);
    });
  });

  app.use((_req, res, next) => {
    closeIfDraining(res);
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

  app.all(MUTATE_PODS_PATH, (_req, res) => {
    res.setHeader('Allow', 'POST');
    res.status(405).json({ error: 'method_not_allowed', message: `use POST ${MUTATE_PODS_PATH}` });
  });

  app.use((req, res) => {
    res.status(404).json({ error: 'not_found', message: `no route for ${req.method} ${req.path}` });
  });

  // Four parameters: express recognizes an error handler by its arity.
  app.use((err: unknown, req: Request, res: Response, _next: NextFunction) => {
    answerError(err, req.method, req.path, res);
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
