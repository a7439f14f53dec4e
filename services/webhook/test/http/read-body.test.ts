import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { brotliCompressSync, deflateSync, gzipSync, zstdCompressSync } from 'node:zlib';
import { afterEach, describe, expect, it } from '@jest/globals';
import {
  type BodyOutcome,
  charsetProblem,
  contentEncoding,
  parseStrictJson,
  readJsonBody,
  SUPPORTED_ENCODINGS,
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

describe('contentEncoding', () => {
  it('reads identity (or none), gzip, deflate, br and zstd, in any case', () => {
    expect(contentEncoding(undefined)).toBe('identity');
    expect(contentEncoding('identity')).toBe('identity');
    expect(contentEncoding(' GZIP ')).toBe('gzip');
    expect(contentEncoding('deflate')).toBe('deflate');
    expect(contentEncoding('br')).toBe('br');
    expect(contentEncoding('zstd')).toBe('zstd');
    expect(SUPPORTED_ENCODINGS).toEqual(['identity', 'gzip', 'deflate', 'br', 'zstd']);
  });

  it.each([['compress'], ['gzip, deflate'], ['x-gzip']])('refuses %j: 415 unsupported_encoding', (header) => {
    const refusal = contentEncoding(header);
    expect(refusal).toMatchObject({ ok: false, status: 415, reason: 'unsupported_encoding' });
    expect((refusal as { message: string }).message).toContain(JSON.stringify(header));
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

describe('readJsonBody (a real HTTP server)', () => {
  let server: http.Server | undefined;
  afterEach(async () => {
    server?.closeAllConnections();
    await new Promise((resolve) => server?.close(resolve));
    server = undefined;
  });

  /** Serves readJsonBody's outcome (status 200, the outcome as JSON) and records each outcome. */
  async function serve(limit: number): Promise<{ port: number; outcomes: BodyOutcome[] }> {
    const outcomes: BodyOutcome[] = [];
    server = http.createServer((req, res) => {
      const encoding = contentEncoding(req.headers['content-encoding']);
      if (typeof encoding !== 'string') throw new Error('test sends supported encodings only');
      readJsonBody(req, encoding, limit, (outcome) => {
        outcomes.push(outcome);
        res.end(JSON.stringify(outcome));
      });
    });
    await new Promise<void>((resolve) => server?.listen(0, '127.0.0.1', resolve));
    return { port: (server.address() as AddressInfo).port, outcomes };
  }

  /** POSTs `chunks` (chunked unless `length` is given) on one keep-alive agent; the answer's JSON. */
  function send(
    port: number,
    chunks: Buffer[],
    headers: Record<string, string> = {},
    agent?: http.Agent,
  ): Promise<BodyOutcome> {
    return new Promise((resolve, reject) => {
      const req = http.request({ port, host: '127.0.0.1', method: 'POST', path: '/', headers, agent }, (res) => {
        const parts: Buffer[] = [];
        res.on('data', (c: Buffer) => parts.push(c));
        res.on('end', () => resolve(JSON.parse(Buffer.concat(parts).toString('utf8')) as BodyOutcome));
      });
      req.on('error', reject);
      for (const c of chunks) req.write(c);
      req.end();
    });
  }

  const review = { apiVersion: 'admission.k8s.io/v1', kind: 'AdmissionReview', request: { uid: 'u' } };
  const json = text(JSON.stringify(review));

  it('joins the chunks of a body and parses it once', async () => {
    const { port } = await serve(1024);
    const parts = [json.subarray(0, 7), json.subarray(7, 8), json.subarray(8)];
    expect(await send(port, parts)).toEqual({ ok: true, value: review });
    expect(await send(port, [json], { 'Content-Length': String(json.length) })).toEqual({ ok: true, value: review });
  });

  it.each([
    ['gzip', gzipSync],
    ['deflate', deflateSync],
    ['br', brotliCompressSync],
    ['zstd', zstdCompressSync],
  ])('decompresses a %s body', async (encoding, compress) => {
    const { port } = await serve(1024);
    expect(await send(port, [compress(json)], { 'Content-Encoding': encoding })).toEqual({ ok: true, value: review });
  });

  it('the limit is on the bytes read: exactly the limit passes, one more is 413 naming it', async () => {
    const { port } = await serve(json.length);
    expect(await send(port, [json])).toMatchObject({ ok: true });
    const padded = Buffer.concat([text(' '), json]);
    expect(await send(port, [padded])).toEqual({
      ok: false,
      status: 413,
      reason: 'body_too_large',
      message: `request body exceeds the size limit of ${json.length} bytes`,
    });
  });

  it('the limit is on the decompressed size', async () => {
    const big = text(JSON.stringify({ pad: 'x'.repeat(50_000) }));
    const zipped = gzipSync(big);
    const { port } = await serve(4096);
    expect(zipped.length).toBeLessThan(4096);
    expect(await send(port, [zipped], { 'Content-Encoding': 'gzip' })).toMatchObject({
      ok: false,
      status: 413,
      reason: 'body_too_large',
    });
  });

  it('refuses a Content-Length over the limit, and reads the body off so the connection serves the next request', async () => {
    const { port, outcomes } = await serve(1024);
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    try {
      const big = Buffer.alloc(256 * 1024, 0x20);
      const refused = await send(port, [big], { 'Content-Length': String(big.length) }, agent);
      expect(refused).toMatchObject({ status: 413, reason: 'body_too_large' });
      // The same socket carries the next request: the refused body was read to its end.
      expect(await send(port, [json], {}, agent)).toEqual({ ok: true, value: review });
      expect(outcomes).toHaveLength(2);
    } finally {
      agent.destroy();
    }
  });

  it('a corrupt compressed body is 400 invalid_body', async () => {
    const { port } = await serve(1024);
    for (const encoding of ['gzip', 'deflate', 'br']) {
      expect(await send(port, [json], { 'Content-Encoding': encoding })).toMatchObject({
        ok: false,
        status: 400,
        reason: 'invalid_body',
      });
    }
    // Truncated: the stream ends before the compressed data does.
    expect(await send(port, [gzipSync(json).subarray(0, 20)], { 'Content-Encoding': 'gzip' })).toMatchObject({
      reason: 'invalid_body',
    });
  });

  it('an empty chunked body is a missing one', async () => {
    const { port } = await serve(1024);
    expect(await send(port, [])).toMatchObject({ ok: false, status: 400, reason: 'missing_body' });
  });

  it.each([['identity'], ['gzip']])('a client that goes away mid-body (%s) is 400 aborted', async (encoding) => {
    const { port, outcomes } = await serve(1024 * 1024);
    const req = http.request({
      port,
      host: '127.0.0.1',
      method: 'POST',
      path: '/',
      headers: { 'Content-Length': '100000', 'Content-Encoding': encoding },
    });
    req.on('error', () => undefined);
    req.write(encoding === 'gzip' ? gzipSync(json).subarray(0, 10) : json.subarray(0, 10));
    await new Promise((resolve) => setTimeout(resolve, 50));
    req.destroy();
    for (let i = 0; i < 100 && outcomes.length === 0; i++) await new Promise((resolve) => setTimeout(resolve, 10));
    expect(outcomes).toEqual([{ ok: false, status: 400, reason: 'aborted', message: 'request aborted by the client' }]);
  });
});
