import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from '@jest/globals';
import request from 'supertest';
import { NamespaceCache } from '../../src/cache/namespace-cache.js';
import { IsolationResolver } from '../../src/cache/resolver.js';
import { createWebhookApp } from '../../src/http/app.js';
import { parseStrictJson } from '../../src/http/body.js';
import { createMetrics } from '../../src/metrics.js';
import { captureLogger } from '../helpers/capture-logger.js';
import { namespace, review, TEAM_A_ANNOTATION } from '../helpers/fixtures.js';
import { metricValue } from '../helpers/metrics.js';

describe('parseStrictJson (body-parser strict mode, as its decoder sees the bytes)', () => {
  it('parses an object or array after JSON whitespace and a UTF-8 byte order mark', () => {
    expect(parseStrictJson(Buffer.from(' \t\r\n{"a":1}'))).toEqual({ a: 1 });
    expect(parseStrictJson(Buffer.from('[1]'))).toEqual([1]);
    expect(parseStrictJson(Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from('{"a":"é"}')]))).toEqual({
      a: 'é',
    });
  });

  it.each([['"review"'], ['42'], ['null'], ['   '], ['{"a":'], ['{"a":1}x']])(
    'rejects %j as body-parser does (400, entity.parse.failed)',
    (text) => {
      expect(() => parseStrictJson(Buffer.from(text))).toThrow(
        expect.objectContaining({ status: 400, type: 'entity.parse.failed' }),
      );
    },
  );
});

function setup(maxBodyBytes = 4 * 1024 * 1024) {
  const cache = new NamespaceCache();
  cache.upsert(namespace('team-a', { annotation: TEAM_A_ANNOTATION }));
  const metrics = createMetrics({ defaultMetrics: false });
  const resolver = new IsolationResolver(cache, { read: async () => undefined }, { liveLookupTimeoutMs: 50 });
  const app = createWebhookApp({
    resolve: (ns) => resolver.resolve(ns),
    readiness: () => ({ ready: true }),
    metrics,
    logger: captureLogger().logger,
    maxBodyBytes,
  });
  return { app, metrics };
}

describe('request bodies: the direct path and body-parser answer alike', () => {
  const body = JSON.stringify(review());

  it.each([
    ['application/json (direct path)', 'application/json'],
    ['application/json; charset=utf-8 (body-parser)', 'application/json; charset=utf-8'],
    ['Application/JSON (body-parser)', 'Application/JSON'],
  ])('%s → the same AdmissionReview', async (_name, contentType) => {
    const { app } = setup();
    const res = await request(app).post('/mutate/pods').set('Content-Type', contentType).send(body);
    expect(res.status).toBe(200);
    expect(res.headers['content-type']).toBe('application/json; charset=utf-8');
    expect(res.body.response).toMatchObject({ allowed: true, patchType: 'JSONPatch' });
  });

  it('a body over the limit is refused with 413 before it is read, on either path', async () => {
    const { app, metrics } = setup(256);
    expect(body.length).toBeGreaterThan(256);
    for (const contentType of ['application/json', 'application/json; charset=utf-8']) {
      const res = await request(app).post('/mutate/pods').set('Content-Type', contentType).send(body);
      expect(res.status).toBe(413);
      expect(res.body.error).toBe('body_too_large');
    }
    expect(
      await metricValue(metrics.registry, 'kubeplus_webhook_bad_requests_total', { reason: 'body_too_large' }),
    ).toBe(2);
  });

  describe("the API server's request (served before express) and one routed by express answer alike", () => {
    // "/mutate/pods/" and "/MUTATE/PODS" reach the same route through express's loose matching;
    // "/mutate/pods?timeout=10s" with the API server's exact headers never enters express.
    const cases: Array<[string, string, number, string, Record<string, string>]> = [
      ['an AdmissionReview', body, 200, 'kubeplus_webhook_admissions_total', { result: 'patched' }],
      ['malformed JSON', '{"apiVersion":', 400, 'kubeplus_webhook_bad_requests_total', { reason: 'invalid_json' }],
      [
        'JSON that is not an object',
        '"review"',
        400,
        'kubeplus_webhook_bad_requests_total',
        { reason: 'invalid_json' },
      ],
      [
        'an object that is not an AdmissionReview',
        '{"apiVersion":"admission.k8s.io/v1"}',
        400,
        'kubeplus_webhook_bad_requests_total',
        { reason: 'invalid_kind' },
      ],
    ];
    it.each(cases)('%s', async (_name, text, status, metric, labels) => {
      const { app, metrics } = setup();
      const answers = [];
      for (const path of ['/mutate/pods?timeout=10s', '/mutate/pods/', '/MUTATE/PODS']) {
        const res = await request(app).post(path).set('Content-Type', 'application/json').send(text);
        answers.push({
          status: res.status,
          type: res.headers['content-type'],
          length: res.headers['content-length'],
          body: res.text,
        });
      }
      expect(answers[0]?.status).toBe(status);
      expect(answers[1]).toEqual(answers[0]);
      expect(answers[2]).toEqual(answers[0]);
      expect(await metricValue(metrics.registry, metric, labels)).toBe(3);
    });
  });

  describe('a client that goes away mid-body', () => {
    let server: http.Server | undefined;
    afterEach(async () => {
      server?.closeAllConnections();
      await new Promise((resolve) => server?.close(resolve));
    });

    it('is counted as aborted, and the server keeps serving', async () => {
      const { app, metrics } = setup();
      server = http.createServer(app);
      await new Promise<void>((resolve) => server?.listen(0, '127.0.0.1', resolve));
      const { port } = server.address() as AddressInfo;
      const req = http.request({
        port,
        host: '127.0.0.1',
        method: 'POST',
        path: '/mutate/pods',
        headers: { 'Content-Type': 'application/json', 'Content-Length': String(body.length) },
      });
      req.on('error', () => undefined);
      req.write(body.slice(0, 100));
      const count = () => metricValue(metrics.registry, 'kubeplus_webhook_bad_requests_total', { reason: 'aborted' });
      await new Promise((resolve) => setTimeout(resolve, 50));
      req.destroy();
      for (let i = 0; i < 100 && (await count()) === 0; i++) await new Promise((resolve) => setTimeout(resolve, 20));
      expect(await count()).toBe(1);
      const ok = await request(server).post('/mutate/pods').set('Content-Type', 'application/json').send(body);
      expect(ok.status).toBe(200);
    });
  });
});
