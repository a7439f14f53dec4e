/**
 * The operator's HTTP endpoints, like controller-runtime's health probe and metrics servers:
 * - `/healthz` — liveness: the process is serving and its event loop is not stuck;
 * - `/readyz`  — readiness: caches are synced and not stale. Deliberately NOT leadership: a
 *   standby replica is ready (it must be, to take over at once);
 * - `/metrics` — Prometheus exposition of the given registry; with a `metricsGuard` (--metrics-secure)
 *   only to callers whose bearer token a TokenReview authenticates and a SubjectAccessReview allows
 *   to get /metrics (kubebuilder's secure metrics, @kubeplus-isolation/service metrics-auth.ts): 401
 *   or 403 otherwise. The probes stay open: the kubelet calls them without a token.
 *
 * With `tls` the port is HTTPS (TLS 1.2+, metrics-tls.ts), probes included.
 *
 * Checks are named and composable (controller-runtime's `AddHealthzCheck`/`AddReadyzCheck`);
 * a check that throws counts as failing. Bodies are JSON: `{"status":"ok"|"fail","checks":{…}}`.
 */
import http, { type Server } from 'node:http';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import { createSilentLogger, describeError, type Logger, type MetricsAccessGuard } from '@kubeplus-isolation/service';
import express, { type Express, type NextFunction, type Request, type Response } from 'express';
import type { Registry } from 'prom-client';
import { type Clock, systemClock } from './clock.js';
import { type MetricsTls, MIN_TLS_VERSION } from './metrics-tls.js';

export interface CheckResult {
  ok: boolean;
  message?: string;
}

export interface HealthCheck {
  name: string;
  check(): CheckResult;
}

export interface HttpAppOptions {
  registry: Registry;
  liveness?: readonly HealthCheck[];
  readiness?: readonly HealthCheck[];
  logger?: Logger;
  /** Who may read /metrics (secure metrics); absent: anyone who reaches the port. */
  metricsGuard?: MetricsAccessGuard;
}

/** Runs every check; a throwing check fails with its error. */
export function runChecks(checks: readonly HealthCheck[]): { ok: boolean; checks: Record<string, CheckResult> } {
  const results: Record<string, CheckResult> = {};
  let ok = true;
  for (const { name, check } of checks) {
    let result: CheckResult;
    try {
      result = check();
    } catch (err) {
      result = { ok: false, message: `check threw: ${describeError(err)}` };
    }
    results[name] = result;
    ok &&= result.ok;
  }
  return { ok, checks: results };
}

export function createHttpApp(options: HttpAppOptions): Express {
  const logger = options.logger ?? createSilentLogger();
  const app = express();
  app.disable('x-powered-by');

  const probe =
    (checks: readonly HealthCheck[]) =>
    (_req: Request, res: Response): void => {
      const report = runChecks(checks);
      res.status(report.ok ? 200 : 503).json({ status: report.ok ? 'ok' : 'fail', checks: report.checks });
    };
  app.get('/healthz', probe(options.liveness ?? []));
  app.get('/readyz', probe(options.readiness ?? []));
  const guard = options.metricsGuard?.middleware();
  const authorize = (req: Request, res: Response, next: NextFunction): void =>
    guard === undefined ? next() : guard(req, res, next);
  app.get('/metrics', authorize, async (_req, res, next) => {
    try {
      const body = await options.registry.metrics();
      res.set('Content-Type', options.registry.contentType).send(body);
    } catch (err) {
      next(err);
    }
  });
  app.use((_req, res) => {
    res.status(404).json({ status: 'fail', error: 'not found' });
  });
  app.use((err: unknown, _req: Request, res: Response, _next: NextFunction) => {
    logger.error('http handler failed', { error: describeError(err) });
    if (!res.headersSent) res.status(500).json({ status: 'fail', error: 'internal error' });
  });
  return app;
}

export interface EventLoopMonitorOptions {
  clock?: Clock;
  /** Heartbeat interval. Default 1s. */
  intervalMs?: number;
  /** A heartbeat later than this by more than this many ms fails liveness. Default 10s. */
  maxLagMs?: number;
}

/**
 * Detects a stuck event loop: a heartbeat timer measures how late it fires. After a long
 * block, the first timer to run reports the lag before any pending probe request is served,
 * so /healthz fails; the next on-time heartbeat clears it.
 */
export class EventLoopMonitor {
  private readonly clock: Clock;
  private readonly intervalMs: number;
  private readonly maxLagMs: number;
  private cancel: (() => void) | undefined;
  private lastLagMs = 0;

  constructor(options: EventLoopMonitorOptions = {}) {
    this.clock = options.clock ?? systemClock;
    this.intervalMs = options.intervalMs ?? 1000;
    this.maxLagMs = options.maxLagMs ?? 10_000;
  }

  start(): void {
    if (this.cancel) return;
    this.tick(this.clock.now() + this.intervalMs);
  }

  stop(): void {
    this.cancel?.();
    this.cancel = undefined;
  }

  /** How late the last heartbeat fired, in ms. */
  lagMs(): number {
    return this.lastLagMs;
  }

  healthCheck(): HealthCheck {
    return {
      name: 'event-loop',
      check: () => {
        const lag = this.lastLagMs;
        return lag > this.maxLagMs
          ? { ok: false, message: `event loop blocked for ${lag}ms` }
          : { ok: true, message: `lag ${lag}ms` };
      },
    };
  }

  private tick(expectedAt: number): void {
    this.cancel = this.clock.schedule(Math.max(0, expectedAt - this.clock.now()), () => {
      const now = this.clock.now();
      this.lastLagMs = Math.max(0, now - expectedAt);
      this.tick(now + this.intervalMs);
    });
  }
}

export interface RunningServer {
  readonly port: number;
  /** Stops accepting connections and closes idle keep-alive ones; resolves when closed. */
  close(): Promise<void>;
}

export interface HttpServerOptions {
  /** 0: any free port. */
  port: number;
  host?: string;
  /** Serve HTTPS with this certificate (metrics-tls.ts); absent: plain HTTP. */
  tls?: MetricsTls;
}

/** Listens on `host:port`, over HTTPS when given `tls`. */
export function startHttpServer(app: Express, { port, host, tls }: HttpServerOptions): Promise<RunningServer> {
  const server: Server =
    tls === undefined
      ? http.createServer(app)
      : https.createServer({ cert: tls.pair.cert, key: tls.pair.key, minVersion: MIN_TLS_VERSION }, app);
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host ?? '0.0.0.0', () => {
      server.off('error', reject);
      const unfollow = tls?.follow(server as https.Server) ?? (() => {});
      resolve({
        port: (server.address() as AddressInfo).port,
        close: () =>
          new Promise<void>((done) => {
            unfollow();
            server.close(() => done());
            server.closeIdleConnections();
          }),
      });
    });
  });
}
