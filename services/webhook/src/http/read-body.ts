/**
 * Reads a request's JSON body: the Buffers of the stream (decompressed first for a
 * Content-Encoding of gzip, deflate, br or zstd), at most `limit` bytes of them, decoded as UTF-8
 * and parsed once — instead of body-parser, whose per-request work (raw-body's streaming iconv
 * decoder into a string, http-errors objects, type checks the route has already made) cost ~5-10%
 * of the webhook's CPU time under load (its 16% in the profile was mostly JSON.parse, which any
 * reader pays), and whose string garbage left ~55 MiB more RSS after load with 75 KiB reviews
 * (services/webhook/README.md, issue 24).
 *
 * Its answers are body-parser's (`express.json({ strict: true })`), as the route turned them
 * into 4xx answers:
 * - more than `limit` bytes (after decompression; a Content-Length over it is refused before
 *   reading) → 413 `body_too_large`;
 * - not strict JSON (an object or array, after JSON whitespace and an optional UTF-8 BOM) →
 *   400 `invalid_json`;
 * - an unknown Content-Encoding → 415 `unsupported_encoding`; a corrupt compressed body → 400
 *   `invalid_body`;
 * - a charset other than UTF-8 → 415 `unsupported_encoding` (body-parser also decoded UTF-16,
 *   UTF-32 and UTF-7; JSON between systems is UTF-8, RFC 8259 §8.1, and the API server sends
 *   no charset);
 * - the client went away before the end → 400 `aborted`.
 * One difference: an empty body sent without a Content-Length (chunked) is 400 `missing_body`,
 * as an empty one with `Content-Length: 0` already was (body-parser read it as `{}`, which the
 * review check then refused).
 *
 * A refused body is still read to its end (and discarded) before `done` is called, as
 * body-parser did, so the keep-alive connection stays usable for the next review.
 */
import type { IncomingMessage } from 'node:http';
import type { Readable } from 'node:stream';
import zlib from 'node:zlib';
import type { BadRequestReason } from '../admission/metric-labels.js';

/** What the webhook answers for a request whose body it refuses. */
export interface BodyRefusal {
  ok: false;
  status: number;
  reason: BadRequestReason;
  message: string;
}

export type BodyOutcome = { ok: true; value: unknown } | BodyRefusal;

const INVALID_JSON: BodyRefusal = {
  ok: false,
  status: 400,
  reason: 'invalid_json',
  message: 'request body is not valid JSON',
};
export const MISSING_BODY: BodyRefusal = {
  ok: false,
  status: 400,
  reason: 'missing_body',
  message: 'request body is required: a JSON AdmissionReview',
};
const ABORTED: BodyRefusal = { ok: false, status: 400, reason: 'aborted', message: 'request aborted by the client' };
const CORRUPT: BodyRefusal = {
  ok: false,
  status: 400,
  reason: 'invalid_body',
  message: 'request body could not be read (corrupt or truncated content encoding?)',
};

export type ContentEncoding = 'identity' | 'gzip' | 'deflate' | 'br' | 'zstd';

/** The Content-Encodings body-parser read: zstd where this Node.js has it (24 does). */
export const SUPPORTED_ENCODINGS: readonly ContentEncoding[] = [
  'identity',
  'gzip',
  'deflate',
  'br',
  ...('createZstdDecompress' in zlib ? (['zstd'] as const) : []),
];

export function tooLarge(limit: number): BodyRefusal {
  return {
    ok: false,
    status: 413,
    reason: 'body_too_large',
    message: `request body exceeds the size limit of ${limit} bytes`,
  };
}

/** The Content-Encoding header as one of the supported encodings, or a 415 refusal. Pure. */
export function contentEncoding(header: string | undefined): ContentEncoding | BodyRefusal {
  const encoding = (header ?? 'identity').trim().toLowerCase();
  if (encoding === '' || encoding === 'identity') return 'identity';
  if ((SUPPORTED_ENCODINGS as readonly string[]).includes(encoding)) return encoding as ContentEncoding;
  return {
    ok: false,
    status: 415,
    reason: 'unsupported_encoding',
    message: `unsupported Content-Encoding ${JSON.stringify(encoding.slice(0, 40))} (use identity, ${SUPPORTED_ENCODINGS.slice(1).join(', ')})`,
  };
}

const CHARSET = /;\s*charset\s*=\s*(?:"([^"]*)"|([^;\s]*))/i;

/** A 415 refusal when the Content-Type names a charset other than UTF-8; else undefined. Pure. */
export function charsetProblem(contentType: string | undefined): BodyRefusal | undefined {
  if (contentType === undefined || contentType === 'application/json') return undefined;
  const m = CHARSET.exec(contentType);
  if (m === null) return undefined;
  const charset = (m[1] ?? m[2] ?? '').toLowerCase();
  if (charset === 'utf-8') return undefined;
  return {
    ok: false,
    status: 415,
    reason: 'unsupported_encoding',
    message: `unsupported charset ${JSON.stringify(charset.slice(0, 40))} (use utf-8)`,
  };
}

/** A UTF-8 byte order mark, which body-parser's decoder dropped. */
function hasBom(body: Buffer): boolean {
  return body.length >= 3 && body[0] === 0xef && body[1] === 0xbb && body[2] === 0xbf;
}

/** JSON's whitespace (RFC 8259): space, tab, line feed, carriage return. */
function isJsonWhitespace(byte: number | undefined): boolean {
  return byte === 0x20 || byte === 0x09 || byte === 0x0a || byte === 0x0d;
}

/**
 * The body's JSON value, strictly: an object or an array (after whitespace and an optional BOM),
 * as body-parser's `strict: true` accepted; an empty body is a missing one. Pure.
 */
export function parseStrictJson(body: Buffer): BodyOutcome {
  const start = hasBom(body) ? 3 : 0;
  if (body.length === start) return MISSING_BODY;
  let first = start;
  while (isJsonWhitespace(body[first])) first++;
  const c = body[first];
  if (c !== 0x7b && c !== 0x5b) return INVALID_JSON; // '{' or '['
  try {
    return { ok: true, value: JSON.parse(body.toString('utf8', start)) };
  } catch {
    return INVALID_JSON;
  }
}

function decompressor(
  encoding: Exclude<ContentEncoding, 'identity'>,
): zlib.Gunzip | zlib.Inflate | zlib.BrotliDecompress {
  switch (encoding) {
    case 'gzip':
      return zlib.createGunzip();
    case 'deflate':
      return zlib.createInflate();
    case 'br':
      return zlib.createBrotliDecompress();
    case 'zstd':
      return (zlib as unknown as { createZstdDecompress(): zlib.Gunzip }).createZstdDecompress();
  }
}

/** Reads the rest of `req` and throws it away, then calls `then` (at once if it has ended). */
function drain(req: IncomingMessage, then: () => void): void {
  if (req.complete || req.destroyed) {
    then();
    return;
  }
  let called = false;
  const once = (): void => {
    if (called) return;
    called = true;
    then();
  };
  req.on('end', once);
  req.on('close', once);
  req.on('error', once);
  req.resume();
}

/**
 * Reads `req`'s body (Content-Encoding `encoding`, at most `limit` bytes decoded) and calls
 * `done` once with the parsed JSON or the refusal, after the request has been read to its end.
 */
export function readJsonBody(
  req: IncomingMessage,
  encoding: ContentEncoding,
  limit: number,
  done: (outcome: BodyOutcome) => void,
): void {
  const declared = req.headers['content-length'];
  if (encoding === 'identity' && declared !== undefined && Number(declared) > limit) {
    drain(req, () => done(tooLarge(limit)));
    return;
  }
  const inflate = encoding === 'identity' ? undefined : decompressor(encoding);
  const source: Readable = inflate === undefined ? req : req.pipe(inflate);
  const chunks: Buffer[] = [];
  let received = 0;
  let finished = false;
  const finish = (outcome: BodyOutcome | undefined): void => {
    if (finished) return;
    finished = true;
    source.off('data', onData);
    if (inflate !== undefined) {
      req.unpipe(inflate);
      inflate.on('error', () => undefined);
      inflate.destroy();
    }
    if (outcome !== undefined) {
      drain(req, () => done(outcome));
      return;
    }
    const body = chunks.length === 1 ? (chunks[0] as Buffer) : Buffer.concat(chunks, received);
    if (source !== req) drain(req, () => done(parseStrictJson(body)));
    else done(parseStrictJson(body));
  };
  const onData = (chunk: Buffer): void => {
    received += chunk.length;
    if (received > limit) finish(tooLarge(limit));
    else chunks.push(chunk);
  };
  source.on('data', onData);
  source.once('end', () => finish(undefined));
  // The request's stream errs when the client goes away; a decompressor's, when its input is corrupt.
  source.once('error', () => finish(inflate === undefined ? ABORTED : CORRUPT));
  if (inflate !== undefined) req.once('error', () => finish(ABORTED));
}
