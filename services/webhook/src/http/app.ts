/**
 * HTTP surface (express), without TLS so tests drive it with supertest; tls.ts serves it.
 *
 * Webhook app (HTTPS port):
 *   POST /mutate/pods   AdmissionReview (admission.k8s.io/v1) in, AdmissionReview out. Always
 *                       200 + allowed:true for a well-formed review; 400/408/411/413/415 with a
 *                       JSON {error, message} body for a malformed request (never a 5xx for one),
 *                       503 `overloaded` when the body budget is full (body-budget.ts).
 *                       The API server admits the Pod of an unanswered review unpatched
 *                       (failurePolicy Ignore), so every 4xx here is counted as a fail-open:
 *                       admissions_total{result="failopen"}, failopen_total{reason="bad_request"},
 *                       and every 503 too: failopen_total{reason="overloaded"}.
 *   GET  /healthz       200 while the process serves requests (the answer itself shows the
 *                       event loop is responsive; the kubelet's probe timeout bounds it).
 *   GET  /readyz        200 once the namespace informer has synced and while its watch is not
 *                       stale beyond the bound; 503 otherwise and while shutting down.
 * The metrics port's app is http/metrics-app.ts.
 *
 * Express serves every request, the API server's included. POST /mutate/pods is its first
 * route (nothing runs before it), and the first step of the admission path (route → admit →
 * resolve → patch, listed in admission/admit.ts). It admits each request to the body budget by
 * its declared length before reading a byte of it (body-budget.ts: the bytes held at once are
 * bounded whatever callers send), then reads it with read-body.ts (the stream's Buffers, parsed
 * once; body-parser's answers, without its per-request cost), whose refusals become the 4xx
 * answers above.
 */
import type { ServerResponse } from 'node:http';
import express, { type NextFunction, type Request, type Response } from 'express';
import type { Logger } from 'winston';
import { type AdmissionOutcome, admit, type ResolveNamespace } from '../admission/admit.js';
import type { AdmissionResult, BadRequestReason } from '../admission/metric-labels.js';
import { type AdmissionRequest, parseAdmissionReview, podIdentity } from '../admission/review.js';
import type { Readiness } from '../cache/informer.js';
import { HOLD_PATH } from '../hold/hold-admit.js';
import { logRecord } from '../log.js';
import { recordAdmission, recordBadRequest, recordFailOpen, type WebhookMetrics } from '../metrics.js';
import type { BodyBudget, Hold, Lane } from './body-budget.js';
import { parseCost } from './parse-cost.js';
import {
  type BodyRefusal,
  charsetProblem,
  declaredLength,
  encodingProblem,
  MISSING_BODY,
  parseStrictJson,
  readBody,
  tooComplex,
} from './read-body.js';

/** The only request body the route reads: what the API server sends as Content-Type. */
const JSON_MEDIA_TYPE = 'application/json';
/** What express's res.json sends as Content-Type. */
const JSON_CONTENT_TYPE = `${JSON_MEDIA_TYPE}; charset=utf-8`;

export const MUTATE_PODS_PATH = '/mutate/pods';

export interface WebhookAppOptions {
  resolve: ResolveNamespace;
  /** The hold (POST /hold, hold/hold-admit.ts); without it /hold answers 404. */
  hold?: (request: AdmissionRequest) => AdmissionOutcome | Promise<AdmissionOutcome>;
  readiness: () => Readiness;
  metrics: WebhookMetrics;
  logger: Logger;
  maxBodyBytes: number;
  /** Bounds the bytes of reviews held at once (body-budget.ts). */
  budget: BodyBudget;
  /** A body not all there this long after it may be read is cut off (408). */
  bodyReadTimeoutMs: number;
  /** True once shutdown began: /readyz fails and responses close their connection. */
  isShuttingDown?: () => boolean;
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

const UNSUPPORTED_MEDIA_TYPE: BodyRefusal = {
  ok: false,
  status: 415,
  reason: 'unsupported_media_type',
  message: `Content-Type must be ${JSON_MEDIA_TYPE}`,
};

const ADMISSION_LOG: Record<AdmissionResult, { level: 'info' | 'warn' | 'error' | 'debug'; message: string }> = {
  patched: { level: 'info', message: 'pod admitted with node isolation' },
  failopen: { level: 'warn', message: 'pod admitted WITHOUT node isolation (fail open)' },
  error: { level: 'error', message: 'pod admitted WITHOUT node isolation after an internal error (fail open)' },
  unchanged: { level: 'debug', message: 'pod admitted unchanged' },
  skipped: { level: 'debug', message: 'pod admitted unchanged' },
  refused: { level: 'warn', message: 'request refused: its namespace is not yet settled (the hold)' },
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
  } else if (outcome.detail !== undefined) {
    record.detail = outcome.detail;
  }
  if (outcome.patch.length > 0) record.patchOps = outcome.patch.length;
  logRecord(logger, level, record);
}

/** The handler of `POST /mutate/pods`, as express calls it. */
export type AdmissionRoute = (req: Request, res: Response, next: NextFunction) => void;

/**
 * `POST /mutate/pods`: step 1 of the admission path (admission/admit.ts lists it), HTTP only.
 * Reads the body (read-body.ts), decodes the review (review.ts), calls `admit`, encodes the
 * answer, counts and logs it. A malformed request gets its 4xx here; an error after that goes to
 * `next` (express's error handler answers 500).
 */
export function createAdmissionRoute(
  opts: WebhookAppOptions,
  admitRequest: (request: AdmissionRequest) => AdmissionOutcome | Promise<AdmissionOutcome> = (r) =>
    admit(r, opts.resolve),
): AdmissionRoute {
  const { metrics, logger, maxBodyBytes, budget, bodyReadTimeoutMs } = opts;
  const shuttingDown = opts.isShuttingDown ?? (() => false);
  const refuse = (res: ServerResponse, startedAt: number, refusal: BodyRefusal): void => {
    // A body left unread is never read: the connection goes with the answer.
    if (refusal.closeConnection === true) res.setHeader('Connection', 'close');
    sendBadRequest(res, metrics, startedAt, refusal.status, refusal.reason, refusal.message);
  };

  // A flood of refusals is one log line a second, with how many it stands for: a caller that
  // fills the budget must not fill the log too.
  let lastOverloadLog = Number.NEGATIVE_INFINITY;
  let unlogged = 0;
  /** A 503 from the body budget: the API server admits the Pod unpatched, so a fail-open too. */
  const overloaded = (res: ServerResponse, startedAt: number, lane: Lane, message: string): void => {
    metrics.overloaded.inc({ lane });
    recordAdmission(metrics, 'failopen', (performance.now() - startedAt) / 1e3);
    recordFailOpen(metrics, 'overloaded');
    res.setHeader('Connection', 'close');
    res.setHeader('Retry-After', '1');
    sendJson(res, 503, { error: 'overloaded', message });
    unlogged++;
    if (startedAt - lastOverloadLog < 1_000) return;
    logRecord(logger, 'warn', {
      message: 'review refused: the body budget is full (fail open)',
      lane,
      detail: message,
      refused: unlogged,
    });
    lastOverloadLog = startedAt;
    unlogged = 0;
  };

  /** Counts, answers and logs one admission's outcome. */
  const answer = (outcome: AdmissionOutcome, request: AdmissionRequest, res: ServerResponse, startedAt: number) => {
    const seconds = (performance.now() - startedAt) / 1e3;
    recordAdmission(metrics, outcome.result, seconds);
    if (outcome.reason !== undefined) recordFailOpen(metrics, outcome.reason);
    // What res.json would send, without its generic content-type and ETag handling.
    sendJson(res, 200, outcome.review);
    logAdmission(logger, outcome, request, seconds);
  };

  /**
   * The admission itself, once the body is read and parsed: answered in the same turn on a cache
   * hit (no Promise on the hot path), after the live GET on a miss.
   */
  const review = (body: unknown, res: ServerResponse, startedAt: number, next: NextFunction): void => {
    const parsed = parseAdmissionReview(body);
    if (!parsed.ok) {
      sendBadRequest(res, metrics, startedAt, 400, parsed.code, parsed.message);
      return;
    }
    const request = parsed.request;
    const outcome = admitRequest(request);
    if (outcome instanceof Promise) {
      outcome.then((o) => answer(o, request, res, startedAt)).catch(next);
      return;
    }
    answer(outcome, request, res, startedAt);
  };

  return (req, res, next) => {
    const startedAt = performance.now();
    // While draining, let each connection carry its current response and then close.
    if (shuttingDown()) res.setHeader('Connection', 'close');
    const headers = req.headers;
    const contentLength = headers['content-length'];
    // The API server's exact header skips type-is; anything else is checked in full.
    if (headers['content-type'] !== JSON_MEDIA_TYPE || contentLength === '0') {
      const type = req.is(JSON_MEDIA_TYPE);
      if (type === null || contentLength === '0') {
        refuse(res, startedAt, MISSING_BODY);
        return;
      }
      if (type === false) {
        const got = JSON.stringify((headers['content-type'] ?? '').slice(0, 100));
        refuse(res, startedAt, { ...UNSUPPORTED_MEDIA_TYPE, message: `${UNSUPPORTED_MEDIA_TYPE.message}, got ${got}` });
        return;
      }
      const charset = charsetProblem(headers['content-type']);
      if (charset !== undefined) {
        refuse(res, startedAt, charset);
        return;
      }
    }
    const encoding = encodingProblem(headers['content-encoding']);
    if (encoding !== undefined) {
      refuse(res, startedAt, encoding);
      return;
    }
    const length = declaredLength(headers, maxBodyBytes);
    if (typeof length !== 'number') {
      refuse(res, startedAt, length);
      return;
    }
    /** Reads the body, holds its estimated memory, parses it and admits the review. */
    const read = (hold: Hold): void => {
      // The memory is held until the answer is sent or the connection is gone.
      res.once('close', hold.release);
      readBody(req, length, bodyReadTimeoutMs, (read) => {
        if (!read.ok) {
          refuse(res, startedAt, read);
          return;
        }
        const cost = parseCost(read.bytes);
        const capacity = budget.capacity(hold.lane);
        if (cost > capacity) {
          refuse(res, startedAt, tooComplex(cost, capacity));
          return;
        }
        if (!hold.resize(cost)) {
          overloaded(res, startedAt, hold.lane, 'webhook overloaded: no memory left to parse this review; try again');
          return;
        }
        const body = parseStrictJson(read.bytes);
        if (!body.ok) {
          refuse(res, startedAt, body);
          return;
        }
        try {
          review(body.value, res, startedAt, next);
        } catch (e) {
          next(e);
        }
      });
    };
    const admission = budget.admit(length);
    if (admission.kind === 'refused') {
      overloaded(res, startedAt, admission.lane, admission.message);
      return;
    }
    if (admission.kind === 'admitted') {
      read(admission.hold);
      return;
    }
    // Queued behind earlier large reviews: the body stays unread (TCP pushes back) until its turn.
    let gone = false;
    const leave = (): void => {
      gone = true;
      admission.cancel();
    };
    res.once('close', leave);
    void admission.granted.then((hold) => {
      res.off('close', leave);
      if (hold === undefined) {
        if (!gone)
          overloaded(res, startedAt, 'large', 'webhook overloaded: no turn for this large review in time; try again');
        return;
      }
      if (gone) {
        hold.release();
        return;
      }
      read(hold);
    });
  };
}

/** Serves the webhook's HTTPS port: the express app, a request listener for `https.createServer` (or supertest). */
export function createWebhookApp(opts: WebhookAppOptions): express.Express {
  const { logger } = opts;
  const shuttingDown = opts.isShuttingDown ?? (() => false);
  /** While draining, let each connection carry its current response and then close. */
  const closeIfDraining = (res: ServerResponse): void => {
    if (shuttingDown()) res.setHeader('Connection', 'close');
  };
  const app = express();
  app.disable('x-powered-by');
  app.set('etag', false);

  /** A request that failed after routing: logged and answered 500 (never for a malformed request). */
  const answerError = (err: unknown, method: string | undefined, path: string, res: ServerResponse): void => {
    logger.error('unhandled error serving request', {
      method,
      path,
      error: err instanceof Error ? err.message : String(err),
      stack: err instanceof Error ? err.stack : undefined,
    });
    if (!res.headersSent) sendJson(res, 500, { error: 'internal_error', message: 'internal server error' });
  };

  // POST /mutate/pods (its `?timeout=` query, and the paths express matches loosely:
  // "/mutate/pods/", "/MUTATE/pods"), first and in one handler: express runs no other layer
  // before it.
  app.post(MUTATE_PODS_PATH, createAdmissionRoute(opts));
  // POST /hold: the hold entry's requests, through the same reading and answering (hold/hold-admit.ts).
  const hold = opts.hold;
  if (hold !== undefined) app.post(HOLD_PATH, createAdmissionRoute(opts, hold));

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
