/**
 * What the operator's API requests look like to an SRE (client-go's rest_client_* metrics, under
 * the operator's prefix), from the records kube/api-requests.ts observes:
 *
 *   kubeplus_operator_api_requests_total{method, code}            every request, by outcome
 *   kubeplus_operator_api_request_duration_seconds{method}        latency of every non-watch request
 *
 * `method` is the HTTP method, or WATCH for a watch (its duration is how long it stayed open, so
 * it is counted, not timed); `code` the response status, or `error` when none came (a network
 * error, an abort). Both label sets are bounded whatever the cluster holds. A non-watch request
 * that took SLOW_API_REQUEST_SECONDS or more is also logged (warn, with its path): a reconcile
 * waits for its requests, so this is where a slow API server, an admission webhook holding a
 * write or a stalled connection shows up.
 */
import type { Logger } from '@kubeplus-isolation/service';
import { Counter, Histogram, type Registry } from 'prom-client';
import type { ApiRequestObserver, ApiRequestRecord } from '../kube/api-requests.js';

export const SLOW_API_REQUEST_SECONDS = 10;

const METHODS = new Set(['GET', 'POST', 'PUT', 'PATCH', 'DELETE']);

/** The `method` label of a record: its HTTP method, WATCH for a watch, OTHER for anything else. */
export function methodLabel(r: Pick<ApiRequestRecord, 'method' | 'watch'>): string {
  if (r.watch) return 'WATCH';
  const m = r.method.toUpperCase();
  return METHODS.has(m) ? m : 'OTHER';
}

/** The `code` label: the status (100–599), or `error` when there was none. */
export function codeLabel(status: number | undefined): string {
  return status !== undefined && Number.isInteger(status) && status >= 100 && status <= 599 ? String(status) : 'error';
}

/** Registers the metrics on `registry`; returns the observer that feeds them (and logs slow requests). */
export function apiRequestMetrics(registry: Registry, logger: Logger): ApiRequestObserver {
  const total = new Counter({
    name: 'kubeplus_operator_api_requests_total',
    help: 'Requests the operator sent to the API server, by HTTP method (WATCH for watches) and response code (error: none).',
    labelNames: ['method', 'code'] as const,
    registers: [registry],
  });
  const duration = new Histogram({
    name: 'kubeplus_operator_api_request_duration_seconds',
    help: 'Latency of the operator’s API requests (watches excluded), from dispatch to the end of the response.',
    labelNames: ['method'] as const,
    buckets: [0.005, 0.025, 0.1, 0.25, 0.5, 1, 2, 4, 8, 15, 30, 60],
    registers: [registry],
  });
  return (r) => {
    const method = methodLabel(r);
    total.inc({ method, code: codeLabel(r.status) });
    if (r.watch) return;
    duration.observe({ method }, r.seconds);
    if (r.seconds >= SLOW_API_REQUEST_SECONDS) {
      logger.warn('slow API request', {
        method: r.method,
        path: r.path,
        status: r.status,
        durationMs: Math.round(r.seconds * 1000),
        ...(r.error === undefined ? {} : { error: r.error }),
      });
    }
  };
}
