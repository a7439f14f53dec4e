import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from '@jest/globals';
import {
  type BodyOutcome,
  charsetProblem,
  declaredLength,
  encodingProblem,
  parseStrictJson,
  readBody,
} from '../../src/http/read-body.js';

const text = (s: string) => Buffer.from(s, 'utf8');
const BOM = Buffer.from([0xef, 0xbb, 0xbf]);

describe('parseStrictJson', () => {
  it('parses an object or an array, after JSON whitespace and a UTF-8 BOM', () => {
    expect(parseStrictJson(text('{"a":[1,"é"]}'))).toEqual({ ok: true, value: { a: [1, 'é'] } });
    expect(parseStrictJson(text(' \t\r\n[1]'))).toEqual({ ok: true, value: [1] });
    expect(parseStrictJson(Buffer.concat([BOM, text('\n{"b":true}')]))).toEqual({ ok: true, value: { b: true } });
  });

  // U+00A0 is whitespace to JavaScript, not to JSON.
  it.each([['"review"'], ['42'], ['null'], ['true'], ['   '], ['{"a":'], ['{"a":1}x'], ['\u00a0{}']])(
    'refuses %j as strict JSON: 400 invalid_json',
    (s) => {
      expect(parseStrictJson(text(s))).toEqual({
        ok: false,
        status: 400,
        reason: 'invalid_json',
        message: 'request body is not valid JSON',
      });
    },
  );

  it('an empty body (or a BOM alone) is a missing one', () => {
    for (const body of [Buffer.alloc(0), BOM]) {
      expect(parseStrictJson(body)).toMatchObject({ ok: false, status: 400, reason: 'missing_body' });
    }
  });
});

describe('encodingProblem', () => {
  it.each([[undefined], ['identity'], [' Identity '], ['']])('accepts %j (uncompressed)', (header) => {
    expect(encodingProblem(header)).toBeUndefined();
  });

  // Issue 34: the API server never compresses a review; a few KB of gzip decompress to megabytes.
  it.each([['gzip'], [' GZIP '], ['deflate'], ['br'], ['zstd'], ['compress'], ['gzip, deflate']])(
    'refuses %j: 415 unsupported_encoding naming it, and closes the connection',
    (header) => {
      const refusal = encodingProblem(header);
      expect(refusal).toMatchObject({ ok: false, status: 415, reason: 'unsupported_encoding', closeConnection: true });
      expect(refusal?.message).toContain(JSON.stringify(header.trim().toLowerCase()));
      expect(refusal?.message).toContain('compressed request bodies are not accepted');
    },
  );
});

describe('declaredLength', () => {
  it('is the Content-Length, up to the limit', () => {
    expect(declaredLength({ 'content-length': '0' }, 10)).toBe(0);
    expect(declaredLength({ 'content-length': '10' }, 10)).toBe(10);
  });

  it('over the limit: 413 naming it, without reading the body', () => {
    expect(declaredLength({ 'content-length': '11' }, 10)).toEqual({
      ok: false,
      status: 413,
      reason: 'body_too_large',
      message: 'request body exceeds the size limit of 10 bytes',
      closeConnection: true,
    });
  });

  it('a chunked body (no Content-Length, or Transfer-Encoding beside it) is 411 length_required', () => {
    for (const headers of [
      {},
      { 'transfer-encoding': 'chunked' },
      { 'content-length': '5', 'transfer-encoding': 'chunked' },
    ]) {
      expect(declaredLength(headers, 10)).toMatchObject({ ok: false, status: 411, reason: 'length_required' });
    }
  });
});

describe('charsetProblem', () => {
  it.each([
    [undefined],
    ['application/json'],
    ['application/json; charset=utf-8'],
    ['application/json;charset="UTF-8"'],
    ['application/json; foo=bar'],
  ])('accepts %j', (contentType) => {
    expect(charsetProblem(contentType)).toBeUndefined();
  });

  it.each([
    ['application/json; charset=utf-16'],
    ['application/json; charset=latin1'],
    ['application/json; charset="utf8"'],
  ])('refuses %j: 415 unsupported_encoding naming the charset', (contentType) => {
    const refusal = charsetProblem(contentType);
    expect(refusal).toMatchObject({ ok: false, status: 415, reason: 'unsupported_encoding' });
    expect(refusal?.message).toMatch(/unsupported charset "(utf-16|latin1|utf8)" \(use utf-8\)/);
  });
});

describe('readBody (a real HTTP server), then parseStrictJson', () => {
  let server: http.Server | undefined;
  afterEach(async () => {
    server?.closeAllConnections();
    await new Promise((resolve) => server?.close(resolve));
    server = undefined;
  });

  /** Serves readJsonBody's outcome (status 200, the outcome as JSON) and records each outcome. */
  async function serve(timeoutMs = 5_000): Promise<{ port: number; outcomes: BodyOutcome[] }> {
    const outcomes: BodyOutcome[] = [];
    server = http.createServer((req, res) => {
      const length = declaredLength(req.headers, 1024 * 1024);
      if (typeof length !== 'number') throw new Error('test sends a Content-Length within the limit');
      readBody(req, length, timeoutMs, (read) => {
        const outcome = read.ok ? parseStrictJson(read.bytes) : read;
        outcomes.push(outcome);
        if (!outcome.ok && outcome.closeConnection === true) res.setHeader('Connection', 'close');
        res.end(JSON.stringify(outcome));
      });
    });
    await new Promise<void>((resolve) => server?.listen(0, '127.0.0.1', resolve));
    return { port: (server.address() as AddressInfo).port, outcomes };
  }

  /** POSTs `chunks` with a Content-Length of their total (or `length`); the answer's JSON. */
  function send(port: number, chunks: Buffer[], length?: number, agent?: http.Agent): Promise<BodyOutcome> {
    const total = length ?? chunks.reduce((n, c) => n + c.length, 0);
    return new Promise((resolve, reject) => {
      const req = http.request(
        { port, host: '127.0.0.1', method: 'POST', path: '/', headers: { 'Content-Length': String(total) }, agent },
        (res) => {
          const parts: Buffer[] = [];
          res.on('data', (c: Buffer) => parts.push(c));
          res.on('end', () => resolve(JSON.parse(Buffer.concat(parts).toString('utf8')) as BodyOutcome));
        },
      );
      req.on('error', reject);
      for (const c of chunks) req.write(c);
      if (length === undefined) req.end();
    });
  }

  const review = { apiVersion: 'admission.k8s.io/v1', kind: 'AdmissionReview', request: { uid: 'u' } };
  const json = text(JSON.stringify(review));

  it('joins the chunks of a body and parses it once', async () => {
    const { port } = await serve();
    const parts = [json.subarray(0, 7), json.subarray(7, 8), json.subarray(8)];
    expect(await send(port, parts)).toEqual({ ok: true, value: review });
    expect(await send(port, [json])).toEqual({ ok: true, value: review });
  });

  it('an empty body is a missing one', async () => {
    const { port } = await serve();
    expect(await send(port, [])).toMatchObject({ ok: false, status: 400, reason: 'missing_body' });
  });

  it('keeps the keep-alive connection for the next request after a refused but complete body', async () => {
    const { port, outcomes } = await serve();
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    try {
      expect(await send(port, [text('not json')], undefined, agent)).toMatchObject({
        status: 400,
        reason: 'invalid_json',
      });
      expect(await send(port, [json], undefined, agent)).toEqual({ ok: true, value: review });
      expect(outcomes).toHaveLength(2);
    } finally {
      agent.destroy();
    }
  });

  // Issue 34: a stalled sender held its bytes (and a slot) for up to the server's 30 s request timeout.
  it('a body not all there within the timeout is cut off: 408 body_timeout, connection closed', async () => {
    const { port, outcomes } = await serve(200);
    const started = Date.now();
    const answer = await send(port, [json.subarray(0, 10)], json.length);
    expect(answer).toEqual({
      ok: false,
      status: 408,
      reason: 'body_timeout',
      message: 'request body not received within 200 ms',
      closeConnection: true,
    });
    expect(Date.now() - started).toBeGreaterThanOrEqual(190);
    expect(outcomes).toHaveLength(1);
  });

  it('a client that goes away mid-body is 400 aborted', async () => {
    const { port, outcomes } = await serve();
    const req = http.request({
      port,
      host: '127.0.0.1',
      method: 'POST',
      path: '/',
      headers: { 'Content-Length': '100000' },
    });
    req.on('error', () => undefined);
    req.write(json.subarray(0, 10));
    await new Promise((resolve) => setTimeout(resolve, 50));
    req.destroy();
    for (let i = 0; i < 100 && outcomes.length === 0; i++) await new Promise((resolve) => setTimeout(resolve, 10));
    expect(outcomes).toEqual([{ ok: false, status: 400, reason: 'aborted', message: 'request aborted by the client' }]);
  });
});
