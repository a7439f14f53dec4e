/**
 * The metrics port's express app: GET /metrics from the registry (Prometheus text format).
 *
 * With a guard (secure metrics, `--metrics-secure`; @kubeplus-isolation/service metrics-auth.ts)
 * /metrics answers only a bearer token that a TokenReview authenticates and whose user a
 * SubjectAccessReview allows to get the non-resource URL /metrics (kube/access-review.ts): 401
 * without a token or with an invalid one, 403 when not allowed, 503 when the review cannot be made,
 * each with a JSON `{error, message}`; decisions are cached, so a scrape costs no API call. The
 * app is then served over HTTPS with the webhook's own serving certificate (tls.ts). Without a
 * guard it is the open, plain-HTTP endpoint it was.
 *
 * Nothing else is served on this port: the probes are on the HTTPS admission port.
 */
import type { MetricsAccessGuard } from '@kubeplus-isolation/service';
import express, { type NextFunction, type Request, type Response } from 'express';
import type { Registry } from 'prom-client';

export const METRICS_PATH = '/metrics';

export interface MetricsAppOptions {
  registry: Registry;
  /** Who may read /metrics; absent: anyone who reaches the port. */
  guard?: MetricsAccessGuard;
}

export function createMetricsApp({ registry, guard }: MetricsAppOptions): express.Express {
  const app = express();
  app.disable('x-powered-by');
  app.set('etag', false);
  const authorize = guard?.middleware();
  app.get(
    METRICS_PATH,
    (req: Request, res: Response, next: NextFunction) => (authorize === undefined ? next() : authorize(req, res, next)),
    async (_req: Request, res: Response) => {
      res.setHeader('Content-Type', registry.contentType);
      res.send(await registry.metrics());
    },
  );
  app.use((req, res) => {
    res
      .status(404)
      .json({ error: 'not_found', message: `no route for ${req.method} ${req.path}; metrics are at ${METRICS_PATH}` });
  });
  // Four parameters: express recognizes an error handler by its arity.
  app.use((_err: unknown, _req: Request, res: Response, _next: NextFunction) => {
    if (!res.headersSent) res.status(500).json({ error: 'internal_error', message: 'internal server error' });
  });
  return app;
}
