import { describe, expect, it } from '@jest/globals';
import { Registry } from 'prom-client';
import type { ApiRequestRecord } from '../../src/kube/api-requests.js';
import {
  apiRequestMetrics,
  codeLabel,
  methodLabel,
  SLOW_API_REQUEST_SECONDS,
} from '../../src/runtime/api-request-metrics.js';
import { captureLogger } from './fakes.js';

const rec = (o: Partial<ApiRequestRecord>): ApiRequestRecord => ({
  method: 'GET',
  path: '/api/v1/namespaces/x',
  watch: false,
  status: 200,
  seconds: 0.01,
  ...o,
});

async function values(registry: Registry, name: string): Promise<Array<{ labels: object; value: number }>> {
  const metric = (await registry.getMetricsAsJSON()).find((m) => m.name === name);
  return (metric?.values ?? []).map((v) => ({ labels: v.labels, value: v.value }));
}

describe('labels', () => {
  it('method: the HTTP method, WATCH for a watch, OTHER for anything else; code: the status or error', () => {
    expect(methodLabel({ method: 'patch', watch: false })).toBe('PATCH');
    expect(methodLabel({ method: 'GET', watch: true })).toBe('WATCH');
    expect(methodLabel({ method: 'PROPFIND', watch: false })).toBe('OTHER');
    expect(codeLabel(409)).toBe('409');
    expect(codeLabel(undefined)).toBe('error');
    expect(codeLabel(42)).toBe('error');
  });
});

describe('apiRequestMetrics', () => {
  it('counts every request by method and code, times all but watches', async () => {
    const registry = new Registry();
    const { logger } = captureLogger();
    const observe = apiRequestMetrics(registry, logger);
    observe(rec({}));
    observe(rec({ status: 404 }));
    observe(rec({ method: 'PATCH', status: 409, seconds: 0.2 }));
    observe(rec({ watch: true, seconds: 3600 }));
    observe(rec({ method: 'POST', status: undefined, error: 'ECONNRESET' }));

    expect(await values(registry, 'kubeplus_operator_api_requests_total')).toEqual(
      expect.arrayContaining([
        { labels: { method: 'GET', code: '200' }, value: 1 },
        { labels: { method: 'GET', code: '404' }, value: 1 },
        { labels: { method: 'PATCH', code: '409' }, value: 1 },
        { labels: { method: 'WATCH', code: '200' }, value: 1 },
        { labels: { method: 'POST', code: 'error' }, value: 1 },
      ]),
    );
    const counts = (await registry.getMetricsAsJSON())
      .find((m) => m.name === 'kubeplus_operator_api_request_duration_seconds')
      ?.values.filter(
        (v) => (v as { metricName?: string }).metricName === 'kubeplus_operator_api_request_duration_seconds_count',
      );
    expect(counts?.map((v) => [v.labels.method, v.value])).toEqual(
      expect.arrayContaining([
        ['GET', 2],
        ['PATCH', 1],
        ['POST', 1],
      ]),
    );
    expect(counts?.some((v) => v.labels.method === 'WATCH')).toBe(false);
  });

  it(`logs a non-watch request of ${SLOW_API_REQUEST_SECONDS} s or more, with its path; not a watch, not a fast one`, () => {
    const { logger, lines } = captureLogger();
    const observe = apiRequestMetrics(new Registry(), logger);
    observe(rec({ seconds: SLOW_API_REQUEST_SECONDS - 0.001 }));
    observe(rec({ watch: true, seconds: 600 }));
    observe(rec({ method: 'PATCH', path: '/api/v1/namespaces/t', status: 200, seconds: 104.2 }));
    observe(rec({ method: 'GET', path: '/api/v1/pods', status: undefined, seconds: 30, error: 'aborted' }));
    expect(lines().filter((l) => l.msg === 'slow API request')).toEqual([
      expect.objectContaining({
        level: 'warn',
        method: 'PATCH',
        path: '/api/v1/namespaces/t',
        status: 200,
        durationMs: 104_200,
      }),
      expect.objectContaining({ method: 'GET', path: '/api/v1/pods', durationMs: 30_000, error: 'aborted' }),
    ]);
  });
});
