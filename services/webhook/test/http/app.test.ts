import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { gzipSync } from 'node:zlib';
import { afterEach, describe, expect, it } from '@jest/globals';
import request from 'supertest';
import type { Readiness } from '../../src/cache/informer.js';
import { NamespaceCache, type NamespaceLike } from '../../src/cache/namespace-cache.js';
import { IsolationResolver } from '../../src/cache/resolver.js';
import { createWebhookApp } from '../../src/http/app.js';
import { BodyBudget, type BodyBudgetOptions, defaultBodyBudget } from '../../src/http/body-budget.js';
import { createMetricsApp } from '../../src/http/metrics-app.js';
import { createMetrics } from '../../src/metrics.js';
import { captureLogger } from '../helpers/capture-logger.js';
import { decodePatch, namespace, pod, review, TEAM_A, TEAM_A_ANNOTATION } from '../helpers/fixtures.js';
import { metricValue } from '../helpers/metrics.js';

const UID = '705ab4f5-6393-11e8-b7cc-42010a800002';

/** Sends a Buffer body byte for byte (superagent would JSON-encode it for a JSON content type). */
const asIs = ((body: Buffer) => body) as unknown as (body: unknown) => string;

interface SetupOptions {
  namespaces?: NamespaceLike[];
  /** Answers live GETs on a cache miss; default: not found. */
  live?: (name: string) => Promise<NamespaceLike | undefined>;
  readiness?: () => Readiness;
  shuttingDown?: () => boolean;
  maxBodyBytes?: number;
  budget?: Partial<BodyBudgetOptions>;
  bodyReadTimeoutMs?: number;
  resolve?: (ns: string) => Promise<never>;
}

function setup(o: SetupOptions = {}) {
  const cache = new NamespaceCache();
  for (const ns of o.namespaces ?? [namespace('team-a', { annotation: TEAM_A_ANNOTATION })]) cache.upsert(ns);
  const metrics = createMetrics({ defaultMetrics: false, sources: { cacheCounts: () => cache.counts() } });
  const reads: string[] = [];
  const resolver = new IsolationResolver(
    cache,
    {
      read: (name) => {
        reads.push(name);
        return (o.live ?? (async () => undefined))(name);
      },
    },
    { liveLookupTimeoutMs: 50, onLiveLookup: (result) => metrics.liveLookups.inc({ result }) },
  );
  const { logger, lines } = captureLogger();
  const budget = new BodyBudget({ ...defaultBodyBudget(o.maxBodyBytes ?? 4 * 1024 * 1024), ...o.budget });

  const app = createWebhookApp({
    resolve: o.resolve ?? ((ns) => resolver.resolve(ns)),
    readiness: o.readiness ?? (() => ({ ready: true })),
    metrics,
    logger,
    maxBodyBytes: o.maxBodyBytes ?? 4 * 1024 * 1024,
    budget,
    bodyReadTimeoutMs: o.bodyReadTimeoutMs ?? 5_000,
    ...(o.shuttingDown && { isShuttingDown: o.shuttingDown }),
  });
  const count = (name: string, labels: Record<string, string> = {}) => metricValue(metrics.registry, name, labels);
  return { app, metrics, lines, reads, count, budget };
}

function post(app: ReturnType<typeof setup>['app'], body: unknown) {
  return request(app)
    .post('/mutate/pods?timeout=10s')
    .set('Content-Type', 'application/json')
    .send(JSON.stringify(body));
}

describe('POST /mutate/pods', () => {
  it('patches a Pod CREATE in an isolated namespace (happy path)', async () => {
    const { app, count } = setup();
    const res = await post(app, review());
    expect(res.status).toBe(200);
    expect(res.headers['content-type']).toMatch(/application\/json/);
    expect(res.body.apiVersion).toBe('admission.k8s.io/v1');
    expect(res.body.kind).toBe('AdmissionReview');
    expect(res.body.response).toMatchObject({ uid: UID, allowed: true, patchType: 'JSONPatch' });
    expect(decodePatch(res.body.response.patch)).toEqual(
      expect.arrayContaining([
        { op: 'add', path: '/spec/nodeSelector', value: TEAM_A.nodeSelector },
        { op: 'add', path: '/spec/tolerations', value: TEAM_A.tolerations },
      ]),
    );
    expect(await count('kubeplus_webhook_admissions_total', { result: 'patched' })).toBe(1);
    expect(await count('kubeplus_webhook_admission_duration_seconds_count', { result: 'patched' })).toBe(1);
  });

  it('answers a compliant Pod without patchType (unchanged)', async () => {
    const { app, count } = setup();
    const compliant = pod({ nodeSelector: TEAM_A.nodeSelector, tolerations: TEAM_A.tolerations });
    const res = await post(app, review({ object: compliant }));
    expect(res.status).toBe(200);
    expect(res.body.response).toEqual({ uid: UID, allowed: true });
    expect(await count('kubeplus_webhook_admissions_total', { result: 'unchanged' })).toBe(1);
  });

  it('answers a dryRun request exactly like any other', async () => {
    const { app } = setup();
    const dry = await post(app, review({ dryRun: true }));
    const real = await post(app, review());
    expect(dry.status).toBe(200);
    expect(dry.body).toEqual(real.body);
    expect(dry.body.response.patchType).toBe('JSONPatch');
  });

  it.each([
    ['a Pod UPDATE', { operation: 'UPDATE' }],
    ['a Pod DELETE', { operation: 'DELETE', object: null }],
    ['pods/binding', { subResource: 'binding' }],
    [
      'a Deployment CREATE',
      {
        kind: { group: 'apps', version: 'v1', kind: 'Deployment' },
        resource: { group: 'apps', version: 'v1', resource: 'deployments' },
      },
    ],
  ])('allows %s unchanged and counts it as skipped', async (_name, overrides) => {
    const { app, count, reads } = setup({ namespaces: [] });
    const res = await post(app, review(overrides));
    expect(res.status).toBe(200);
    expect(res.body.response).toEqual({ uid: UID, allowed: true });
    expect(await count('kubeplus_webhook_admissions_total', { result: 'skipped' })).toBe(1);
    expect(reads).toEqual([]);
  });

  it('logs uid, namespace, pod and result of an admission, never the Pod body', async () => {
    const { app, lines } = setup();
    await post(app, review({ object: pod({ containers: [{ name: 'app', image: 'secret-registry/app:1' }] }) }));
    const line = lines().find((l) => l.msg === 'pod admitted with node isolation');
    expect(line).toMatchObject({ uid: UID, namespace: 'team-a', pod: 'web-0', result: 'patched', level: 'info' });
    expect(JSON.stringify(lines())).not.toContain('secret-registry');
  });

  describe('fail open, visibly', () => {
    it.each([
      ['annotation_missing', namespace('team-a')],
      ['annotation_invalid', namespace('team-a', { annotation: '{"nodeSelector": {"pool": 7}}' })],
    ])('%s → allowed, no patch, warning log, counted', async (reason, ns) => {
      const { app, count, lines } = setup({ namespaces: [ns] });
      const res = await post(app, review());
      expect(res.status).toBe(200);
      expect(res.body.response.allowed).toBe(true);
      expect(res.body.response.patch).toBeUndefined();
      expect(res.body.response.warnings[0]).toContain(reason);
      expect(await count('kubeplus_webhook_failopen_total', { reason })).toBe(1);
      expect(await count('kubeplus_webhook_admissions_total', { result: 'failopen' })).toBe(1);
      expect(lines().find((l) => l.level === 'warn')).toMatchObject({ uid: UID, namespace: 'team-a', reason });
    });

    it('namespace_not_found after a live GET on a cache miss', async () => {
      const { app, count, reads } = setup({ namespaces: [] });
      const res = await post(app, review());
      expect(res.body.response).toMatchObject({ allowed: true });
      expect(res.body.response.patch).toBeUndefined();
      expect(reads).toEqual(['team-a']);
      expect(await count('kubeplus_webhook_failopen_total', { reason: 'namespace_not_found' })).toBe(1);
      expect(await count('kubeplus_webhook_live_lookups_total', { result: 'not_found' })).toBe(1);
    });

    it('a cache miss answered by the live GET is patched, and later requests hit the cache', async () => {
      const { app, count, reads } = setup({
        namespaces: [],
        live: async (name) => namespace(name, { annotation: TEAM_A_ANNOTATION }),
      });
      expect((await post(app, review())).body.response.patchType).toBe('JSONPatch');
      expect((await post(app, review())).body.response.patchType).toBe('JSONPatch');
      expect(reads).toEqual(['team-a']);
      expect(await count('kubeplus_webhook_live_lookups_total', { result: 'found' })).toBe(1);
    });

    it('lookup_timeout when the live GET hangs', async () => {
      const { app, count } = setup({ namespaces: [], live: () => new Promise(() => undefined) });
      const res = await post(app, review());
      expect(res.status).toBe(200);
      expect(res.body.response.allowed).toBe(true);
      expect(await count('kubeplus_webhook_failopen_total', { reason: 'lookup_timeout' })).toBe(1);
      expect(await count('kubeplus_webhook_live_lookups_total', { result: 'timeout' })).toBe(1);
    });

    it('an internal error still answers allowed:true without a patch, counted as error', async () => {
      const { app, count, lines } = setup({
        resolve: async () => {
          throw new Error('cache corrupted');
        },
      });
      const res = await post(app, review());
      expect(res.status).toBe(200);
      expect(res.body.response).toMatchObject({ uid: UID, allowed: true });
      expect(res.body.response.patch).toBeUndefined();
      expect(await count('kubeplus_webhook_admissions_total', { result: 'error' })).toBe(1);
      expect(await count('kubeplus_webhook_failopen_total', { reason: 'internal_error' })).toBe(1);
      expect(lines().find((l) => l.level === 'error')).toMatchObject({ detail: 'cache corrupted' });
    });
  });

  describe('bad input: a clear 4xx JSON answer, counted, never a crash', () => {
    const cases: Array<[string, (t: request.Test) => request.Test, number, string]> = [
      ['non-JSON body', (t) => t.set('Content-Type', 'application/json').send('{"apiVersion": '), 400, 'invalid_json'],
      [
        'a JSON string, not an object',
        (t) => t.set('Content-Type', 'application/json').send('"review"'),
        400,
        'invalid_json',
      ],
      ['wrong content type', (t) => t.set('Content-Type', 'text/plain').send('hello'), 415, 'unsupported_media_type'],
      ['no body at all', (t) => t, 400, 'missing_body'],
      [
        'unsupported content encoding',
        (t) => t.set('Content-Type', 'application/json').set('Content-Encoding', 'compress').send('{}'),
        415,
        'unsupported_encoding',
      ],
      [
        'a charset other than UTF-8',
        (t) => t.set('Content-Type', 'application/json; charset=utf-16').send('{}'),
        415,
        'unsupported_encoding',
      ],
      [
        // Issue 34: the API server never compresses; a few KB of gzip decompress to megabytes.
        'a gzip body, even a valid one',
        (t) =>
          t
            .set('Content-Type', 'application/json')
            .set('Content-Encoding', 'gzip')
            .serialize(asIs)
            .send(gzipSync(JSON.stringify(review()))),
        415,
        'unsupported_encoding',
      ],
      [
        'wrong apiVersion',
        (t) => t.set('Content-Type', 'application/json').send({ ...review(), apiVersion: 'admission.k8s.io/v1beta1' }),
        400,
        'invalid_api_version',
      ],
      [
        'wrong kind',
        (t) => t.set('Content-Type', 'application/json').send({ ...review(), kind: 'Pod' }),
        400,
        'invalid_kind',
      ],
      [
        'missing request',
        (t) =>
          t
            .set('Content-Type', 'application/json')
            .send({ apiVersion: 'admission.k8s.io/v1', kind: 'AdmissionReview' }),
        400,
        'missing_request',
      ],
      ['missing uid', (t) => t.set('Content-Type', 'application/json').send(review({ uid: '' })), 400, 'invalid_uid'],
      [
        'missing object on CREATE',
        (t) => t.set('Content-Type', 'application/json').send(review({ object: undefined })),
        400,
        'missing_object',
      ],
    ];

    it.each(cases)('%s → %i %s', async (_name, build, status, reason) => {
      const { app, count } = setup();
      const res = await build(request(app).post('/mutate/pods'));
      expect(res.status).toBe(status);
      expect(res.headers['content-type']).toMatch(/application\/json/);
      expect(res.body.error).toBe(reason);
      expect(typeof res.body.message).toBe('string');
      expect(res.body.message.length).toBeGreaterThan(10);
      expect(await count('kubeplus_webhook_bad_requests_total', { reason })).toBe(1);
      expect(await count('kubeplus_webhook_admissions_total', { result: 'patched' })).toBe(0);
      // Every 4xx is a Pod the API server admits unpatched: counted as a fail-open.
      expect(await count('kubeplus_webhook_admissions_total', { result: 'failopen' })).toBe(1);
      expect(await count('kubeplus_webhook_failopen_total', { reason: 'bad_request' })).toBe(1);
    });

    it('a body over the limit → 413 naming the limit', async () => {
      const { app, count } = setup({ maxBodyBytes: 4096 });
      const big = review({ object: pod({ containers: [{ name: 'a', image: 'x'.repeat(5000) }] }) });
      const res = await post(app, big);
      expect(res.status).toBe(413);
      expect(res.body).toMatchObject({ error: 'body_too_large', message: expect.stringContaining('4096') });
      expect(await count('kubeplus_webhook_bad_requests_total', { reason: 'body_too_large' })).toBe(1);
      // The API server admits that Pod unpatched: a fail-open, where the alert reads.
      expect(await count('kubeplus_webhook_admissions_total', { result: 'failopen' })).toBe(1);
      expect(await count('kubeplus_webhook_failopen_total', { reason: 'bad_request' })).toBe(1);
      expect(await count('kubeplus_webhook_admission_duration_seconds_count', { result: 'failopen' })).toBe(1);
    });

    it('keeps serving after bad requests', async () => {
      const { app } = setup();
      await request(app).post('/mutate/pods').set('Content-Type', 'application/json').send('{{{');
      const ok = await post(app, review());
      expect(ok.status).toBe(200);
      expect(ok.body.response.allowed).toBe(true);
    });

    it('GET /mutate/pods → 405 with Allow: POST', async () => {
      const { app } = setup();
      const res = await request(app).get('/mutate/pods');
      expect(res.status).toBe(405);
      expect(res.headers.allow).toBe('POST');
    });

    it('an unknown path → 404 JSON', async () => {
      const { app } = setup();
      const res = await request(app).post('/mutate');
      expect(res.status).toBe(404);
      expect(res.body.error).toBe('not_found');
    });
  });
});

describe('request bodies (read-body.ts: strict JSON, as body-parser read it)', () => {
  const body = JSON.stringify(review());

  it.each([['application/json'], ['application/json; charset=utf-8'], ['Application/JSON']])(
    'Content-Type %s → the AdmissionReview',
    async (contentType) => {
      const { app } = setup();
      const res = await request(app).post('/mutate/pods').set('Content-Type', contentType).send(body);
      expect(res.status).toBe(200);
      expect(res.headers['content-type']).toBe('application/json; charset=utf-8');
      expect(res.body.response).toMatchObject({ allowed: true, patchType: 'JSONPatch' });
    },
  );

  it('a body over the limit is refused with 413, whatever the JSON Content-Type', async () => {
    const { app, count } = setup({ maxBodyBytes: 256 });
    expect(body.length).toBeGreaterThan(256);
    for (const contentType of ['application/json', 'application/json; charset=utf-8']) {
      const res = await request(app).post('/mutate/pods').set('Content-Type', contentType).send(body);
      expect(res.status).toBe(413);
      expect(res.body.error).toBe('body_too_large');
    }
    expect(await count('kubeplus_webhook_bad_requests_total', { reason: 'body_too_large' })).toBe(2);
  });

  it('parses an object or array after JSON whitespace and a UTF-8 byte order mark', async () => {
    const { app, count } = setup();
    const send = (bytes: Buffer) =>
      request(app).post('/mutate/pods').set('Content-Type', 'application/json').serialize(asIs).send(bytes);
    const bom = Buffer.from([0xef, 0xbb, 0xbf]);
    const spaced = await send(Buffer.concat([bom, Buffer.from(' \t\r\n'), Buffer.from(body)]));
    expect(spaced.status).toBe(200);
    expect(spaced.body.response).toMatchObject({ allowed: true, patchType: 'JSONPatch' });
    // An array is strict JSON (as body-parser also accepted); the review check then refuses it.
    const array = await send(Buffer.from('[1]'));
    expect(array.status).toBe(400);
    expect(array.body.error).toBe('not_an_object');
    expect(await count('kubeplus_webhook_bad_requests_total', { reason: 'invalid_json' })).toBe(0);
  });

  it.each([['"review"'], ['42'], ['null'], ['   '], ['{"a":'], ['{"a":1}x']])(
    'refuses %j as strict JSON (400 invalid_json)',
    async (text) => {
      const { app, count } = setup();
      const res = await request(app).post('/mutate/pods').set('Content-Type', 'application/json').send(text);
      expect(res.status).toBe(400);
      expect(res.body).toMatchObject({ error: 'invalid_json', message: 'request body is not valid JSON' });
      expect(await count('kubeplus_webhook_bad_requests_total', { reason: 'invalid_json' })).toBe(1);
    },
  );

  describe("the API server's ?timeout= query and the paths express matches loosely reach the route", () => {
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
      const { app, count } = setup();
      for (const path of ['/mutate/pods?timeout=10s', '/mutate/pods/', '/MUTATE/PODS']) {
        const res = await request(app).post(path).set('Content-Type', 'application/json').send(text);
        expect(res.status).toBe(status);
        expect(res.headers['content-type']).toBe('application/json; charset=utf-8');
        expect(res.headers['content-length']).toBe(String(Buffer.byteLength(res.text)));
        if (status === 200) expect(res.body.response).toMatchObject({ allowed: true, patchType: 'JSONPatch' });
        else expect(res.body).toMatchObject({ error: Object.values(labels)[0], message: expect.any(String) });
      }
      expect(await count(metric, labels)).toBe(3);
    });
  });

  describe('a client that goes away mid-body', () => {
    let server: http.Server | undefined;
    afterEach(async () => {
      server?.closeAllConnections();
      await new Promise((resolve) => server?.close(resolve));
    });

    it('is counted as aborted, and the server keeps serving', async () => {
      const { app, count } = setup();
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
      const aborted = () => count('kubeplus_webhook_bad_requests_total', { reason: 'aborted' });
      await new Promise((resolve) => setTimeout(resolve, 50));
      req.destroy();
      for (let i = 0; i < 100 && (await aborted()) === 0; i++) await new Promise((resolve) => setTimeout(resolve, 20));
      expect(await aborted()).toBe(1);
      const ok = await request(server).post('/mutate/pods').set('Content-Type', 'application/json').send(body);
      expect(ok.status).toBe(200);
    });
  });
});

describe('the body budget (issue 34: bounded work, whatever callers send)', () => {
  let server: http.Server | undefined;
  const stalled: http.ClientRequest[] = [];
  afterEach(async () => {
    for (const r of stalled.splice(0)) r.destroy();
    server?.closeAllConnections();
    await new Promise((resolve) => server?.close(resolve));
    server = undefined;
  });

  async function listen(o: SetupOptions) {
    const s = setup(o);
    const listening = http.createServer(s.app);
    server = listening;
    await new Promise<void>((resolve) => listening.listen(0, '127.0.0.1', resolve));
    return { ...s, server: listening, port: (listening.address() as AddressInfo).port };
  }

  /** Sends the headers of a review of `length` bytes and a few of its bytes, then stalls; its answer, when one comes. */
  function stall(port: number, length: number): Promise<{ status: number; body: string; connection?: string }> {
    return new Promise((resolve) => {
      const req = http.request(
        {
          port,
          host: '127.0.0.1',
          method: 'POST',
          path: '/mutate/pods',
          agent: false,
          headers: { 'Content-Type': 'application/json', 'Content-Length': String(length) },
        },
        (res) => {
          const parts: Buffer[] = [];
          res.on('data', (c: Buffer) => parts.push(c));
          res.on('end', () =>
            resolve({
              status: res.statusCode ?? 0,
              body: Buffer.concat(parts).toString('utf8'),
              ...(res.headers.connection !== undefined && { connection: res.headers.connection }),
            }),
          );
        },
      );
      req.on('error', () => undefined);
      req.write('{"apiVersion":');
      stalled.push(req);
    });
  }

  async function until(check: () => boolean): Promise<void> {
    for (let i = 0; i < 200 && !check(); i++) await new Promise((resolve) => setTimeout(resolve, 10));
    expect(check()).toBe(true);
  }

  it('a chunked body (no Content-Length: the API server always sends one) → 411 length_required, a fail-open', async () => {
    const { port, count } = await listen({});
    const answer = await new Promise<{ status: number; body: string }>((resolve, reject) => {
      const req = http.request(
        {
          port,
          host: '127.0.0.1',
          method: 'POST',
          path: '/mutate/pods',
          headers: { 'Content-Type': 'application/json' },
        },
        (res) => {
          const parts: Buffer[] = [];
          res.on('data', (c: Buffer) => parts.push(c));
          res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(parts).toString('utf8') }));
        },
      );
      req.on('error', reject);
      // Written in two parts without a Content-Length: Node sends it chunked.
      req.write(JSON.stringify(review()).slice(0, 10));
      req.end(JSON.stringify(review()).slice(10));
    });
    expect(answer.status).toBe(411);
    expect(JSON.parse(answer.body)).toMatchObject({
      error: 'length_required',
      message: expect.stringContaining('Content-Length'),
    });
    expect(await count('kubeplus_webhook_bad_requests_total', { reason: 'length_required' })).toBe(1);
    expect(await count('kubeplus_webhook_failopen_total', { reason: 'bad_request' })).toBe(1);
  });

  it('a large review beyond the queue is answered 503 overloaded at once, counted as a fail-open; small reviews are still patched', async () => {
    const { server, port, budget, count, lines } = await listen({
      budget: { maxQueued: 1, maxWaitMs: 10_000, largeBudgetBytes: 9 * 1024 * 1024 },
    });
    void stall(port, 3 * 1024 * 1024); // holds the large lane
    await until(() => budget.inUse().large > 0);
    void stall(port, 3 * 1024 * 1024); // waits its turn
    await until(() => budget.queued() === 1);
    const refused = await stall(port, 2 * 1024 * 1024);
    expect(refused.status).toBe(503);
    expect(refused.connection).toBe('close');
    expect(JSON.parse(refused.body)).toMatchObject({
      error: 'overloaded',
      message: expect.stringContaining('overloaded'),
    });
    expect(await count('kubeplus_webhook_overloaded_total', { lane: 'large' })).toBe(1);
    expect(await count('kubeplus_webhook_failopen_total', { reason: 'overloaded' })).toBe(1);
    expect(await count('kubeplus_webhook_admissions_total', { result: 'failopen' })).toBe(1);
    // Another refusal within the second is counted, not logged: one line a second, with how many it stands for.
    expect((await stall(port, 2 * 1024 * 1024)).status).toBe(503);
    expect(await count('kubeplus_webhook_overloaded_total', { lane: 'large' })).toBe(2);
    const refusals = () => lines().filter((l) => l.msg === 'review refused: the body budget is full (fail open)');
    await until(() => refusals().length > 0); // log lines are written in batches
    expect(refusals()).toEqual([expect.objectContaining({ level: 'warn', lane: 'large', refused: 1 })]);
    // The reviews every real Pod makes go through the small lane meanwhile.
    const ok = await request(server).post('/mutate/pods').set('Content-Type', 'application/json').send(review());
    expect(ok.status).toBe(200);
    expect(ok.body.response.patchType).toBe('JSONPatch');
  });

  it('a queued large review whose turn does not come in time is answered 503', async () => {
    const { port, budget, count } = await listen({ budget: { maxWaitMs: 100, largeBudgetBytes: 9 * 1024 * 1024 } });
    void stall(port, 3 * 1024 * 1024);
    await until(() => budget.inUse().large > 0);
    const waited = await stall(port, 3 * 1024 * 1024);
    expect(waited.status).toBe(503);
    expect(await count('kubeplus_webhook_overloaded_total', { lane: 'large' })).toBe(1);
    expect(budget.queued()).toBe(0);
  });

  it('small reviews beyond the small lane get 503 at once, and the lane frees when stalled senders are cut off (408)', async () => {
    const { server, port, budget, count } = await listen({
      // Two stalled 64 KiB reviews hold 3 × 64 KiB each: the whole lane.
      budget: { smallReviewBytes: 64 * 1024, smallBudgetBytes: 384 * 1024 },
      bodyReadTimeoutMs: 300,
    });
    const first = stall(port, 64 * 1024);
    const second = stall(port, 64 * 1024);
    await until(() => budget.inUse().small === 384 * 1024);
    const refused = await request(server).post('/mutate/pods').set('Content-Type', 'application/json').send(review());
    expect(refused.status).toBe(503);
    expect(await count('kubeplus_webhook_overloaded_total', { lane: 'small' })).toBe(1);
    // The stalled senders are cut off at the read timeout, and their bytes given back.
    expect((await first).status).toBe(408);
    expect((await second).status).toBe(408);
    expect(await count('kubeplus_webhook_bad_requests_total', { reason: 'body_timeout' })).toBe(2);
    await until(() => budget.inUse().small === 0);
    const ok = await request(server).post('/mutate/pods').set('Content-Type', 'application/json').send(review());
    expect(ok.status).toBe(200);
  });

  it('a body that would parse to more memory than the lane holds is 413 too_complex; a dense one that fits is served', async () => {
    const { server, budget, count } = await listen({ budget: { smallBudgetBytes: 1024 * 1024 } });
    // 100 KB of {}: ~4 MB once parsed (parse-cost.ts), over the 1 MiB lane.
    const dense = `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","pad":[${Array(33_000).fill('{}').join(',')}]}`;
    const refused = await request(server).post('/mutate/pods').set('Content-Type', 'application/json').send(dense);
    expect(refused.status).toBe(413);
    expect(refused.body).toMatchObject({ error: 'too_complex', message: expect.stringContaining('1048576') });
    expect(await count('kubeplus_webhook_bad_requests_total', { reason: 'too_complex' })).toBe(1);
    expect(await count('kubeplus_webhook_failopen_total', { reason: 'bad_request' })).toBe(1);
    await until(() => budget.inUse().small === 0);
    const ok = await request(server).post('/mutate/pods').set('Content-Type', 'application/json').send(review());
    expect(ok.status).toBe(200);
  });

  it('a queued large review is read when the one before it is answered, and every byte is given back after', async () => {
    const { server, port, budget } = await listen({
      budget: { smallReviewBytes: 1024, largeBudgetBytes: 3 * 1024 * 1024 },
    });
    const big = JSON.stringify(review({ object: pod({ containers: [{ name: 'a', image: 'x'.repeat(8_000) }] }) }));
    void stall(port, 3 * 1024 * 1024);
    await until(() => budget.inUse().large > 0);
    const queued = request(server).post('/mutate/pods').set('Content-Type', 'application/json').send(big);
    const answered = queued.then((r) => r);
    await until(() => budget.queued() === 1);
    // The stalled holder goes away: the queued review gets its turn.
    stalled[0]?.destroy();
    const res = await answered;
    expect(res.status).toBe(200);
    expect(res.body.response.patchType).toBe('JSONPatch');
    await until(() => budget.inUse().large === 0 && budget.queued() === 0);
  });
});

describe('probes', () => {
  it('/healthz answers 200 while the process serves', async () => {
    const { app } = setup({ readiness: () => ({ ready: false, reason: 'x' }) });
    const res = await request(app).get('/healthz');
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ status: 'ok' });
  });

  it('/readyz is 503 with the reason until the informer has synced, 200 after', async () => {
    let readiness: Readiness = { ready: false, reason: 'namespace informer has not completed its initial list' };
    const { app } = setup({ readiness: () => readiness });
    const before = await request(app).get('/readyz');
    expect(before.status).toBe(503);
    expect(before.body).toEqual({ status: 'not ready', reason: expect.stringContaining('initial list') });
    readiness = { ready: true };
    const after = await request(app).get('/readyz');
    expect(after.status).toBe(200);
    expect(after.body).toEqual({ status: 'ready' });
  });

  it('/readyz fails while shutting down, and responses then close their connection', async () => {
    let stopping = false;
    const { app } = setup({ shuttingDown: () => stopping });
    expect((await request(app).get('/readyz')).status).toBe(200);
    stopping = true;
    const res = await request(app).get('/readyz');
    expect(res.status).toBe(503);
    expect(res.body.reason).toBe('shutting down');
    expect(res.headers.connection).toBe('close');
    // Admission requests are still answered while draining, and close their connection too.
    const admission = await post(app, review());
    expect(admission.body.response.allowed).toBe(true);
    expect(admission.headers.connection).toBe('close');
  });
});

describe('GET /metrics', () => {
  it('serves the registry in Prometheus text format, with every series pre-initialized and no namespace label', async () => {
    const { metrics } = setup({ namespaces: [namespace('team-a', { annotation: TEAM_A_ANNOTATION }), namespace('b')] });
    const res = await request(createMetricsApp({ registry: metrics.registry })).get('/metrics');
    expect(res.status).toBe(200);
    expect(res.headers['content-type']).toMatch(/text\/plain/);
    expect(res.text).toContain('kubeplus_webhook_admissions_total{result="failopen"} 0');
    expect(res.text).toContain('kubeplus_webhook_failopen_total{reason="annotation_invalid"} 0');
    expect(res.text).toContain('kubeplus_webhook_namespace_cache_entries{state="valid"} 1');
    expect(res.text).toContain('kubeplus_webhook_namespace_cache_entries{state="annotation_missing"} 1');
    expect(res.text).toContain('kubeplus_webhook_admission_duration_seconds_bucket{le="0.0001"');
    expect(res.text).not.toMatch(/namespace="/);
  });

  it('includes process metrics by default', async () => {
    const metrics = createMetrics();
    const res = await request(createMetricsApp({ registry: metrics.registry })).get('/metrics');
    expect(res.text).toContain('process_cpu_seconds_total');
    expect(res.text).toContain('nodejs_eventloop_lag_seconds');
  });
});
