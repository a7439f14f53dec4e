/**
 * Reads a request's JSON body: the Buffers of the stream, exactly its declared Content-Length,
 * decoded as UTF-8 and parsed once — instead of body-parser, whose per-request work (raw-body's
 * streaming iconv decoder into a string, http-errors objects, type checks the route has already
 * made) cost ~5-10% of the webhook's CPU time under load (its 16% in the profile was mostly
 * JSON.parse, which any reader pays), and whose string garbage left ~55 MiB more RSS after load
 * with 75 KiB reviews (services/webhook/README.md, issue 24).
 *
 * What it accepts is what the API server sends (issue 34: anything more is work a caller that is
 * not the API server can make the webhook do): an uncompressed body of a declared length. Its
 * refusals, which the route turns into 4xx answers:
 * - no Content-Length (a chunked body) → 411 `length_required`: the API server always sends one,
 *   and the body budget (body-budget.ts) admits a request by it before reading;
 * - more than `limit` bytes declared → 413 `body_too_large`, without reading the body;
 * - a body whose parse would take more memory than one review may (parse-cost.ts) → 413
 *   `too_complex` (the route checks it between reading and parsing);
 * - any Content-Encoding but identity → 415 `unsupported_encoding`: the API server never
 *   compresses a review, and a few KB of gzip decompress to megabytes;
 * - not strict JSON (an object or array, after JSON whitespace and an optional UTF-8 BOM) →
 *   400 `invalid_json` (body-parser's `strict: true`);
 * - a charset other than UTF-8 → 415 `unsupported_encoding` (JSON between systems is UTF-8,
 *   RFC 8259 §8.1, and the API server sends no charset);
 * - the body not all there within `timeoutMs` → 408 `body_timeout` (a stalled or slow sender);
 * - the client went away before the end → 400 `aborted`.
 *
 * A refusal after the body was read in full leaves the keep-alive connection usable for the next
 * review. One refused before or while reading (411, 413, 415 for an encoding, 408) is answered
 * with `Connection: close` (`closeConnection`): the rest of such a body is never read.
 */
import type { IncomingMessage } from 'node:http';
import type { BadRequestReason } from '../admission/metric-labels.js';

/** What the webhook answers for a request whose body it refuses. */
export interface BodyRefusal {
  ok: false;
  status: number;
  reason: BadRequestReason;
  message: string;
  /** Answer with `Connection: close`: the body was not read to its end. */
  closeConnection?: boolean;
}

export type BodyOutcome = { ok: true; value: unknown } | BodyRefusal;
/** The body's bytes, all of them, or why they could not be read. */
export type BytesOutcome = { ok: true; bytes: Buffer } | BodyRefusal;

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
export const LENGTH_REQUIRED: BodyRefusal = {
  ok: false,
  status: 411,
  reason: 'length_required',
  message: 'Content-Length is required (the API server always sends it)',
  closeConnection: true,
};

export function bodyTimeout(timeoutMs: number): BodyRefusal {
  return {
    ok: false,
    status: 408,
    reason: 'body_timeout',
    message: `request body not received within ${timeoutMs} ms`,
    closeConnection: true,
  };
}

/** A review whose parse would take more memory than the webhook gives one review (parse-cost.ts). */
export function tooComplex(cost: number, capacity: number): BodyRefusal {
  return {
    ok: false,
    status: 413,
    reason: 'too_complex',
    message: `request body would take ~${cost} bytes of memory to parse, over the ${capacity} one review may take`,
  };
}

export function tooLarge(limit: number): BodyRefusal {
  return {
    ok: false,
    status: 413,
    reason: 'body_too_large',
    message: `request body exceeds the size limit of ${limit} bytes`,
    closeConnection: true,
  };
}

/**
 * A 415 refusal for a Content-Encoding other than identity, else undefined. Pure. Compressed bodies
 * are refused, not decoded: the API server never compresses a review, and a few KB of gzip, deflate,
 * br or zstd decompress to megabytes.
 */
export function encodingProblem(header: string | undefined): BodyRefusal | undefined {
  const encoding = (header ?? 'identity').trim().toLowerCase();
  if (encoding === '' || encoding === 'identity') return undefined;
  return {
    ok: false,
    status: 415,
    reason: 'unsupported_encoding',
    message: `compressed request bodies are not accepted (Content-Encoding ${JSON.stringify(encoding.slice(0, 40))}): send the AdmissionReview uncompressed, as the API server does`,
    closeConnection: true,
  };
}

/**
 * The request's declared body length, or its refusal: 411 without a Content-Length (a chunked
 * body), 413 over `limit`. Pure.
 */
export function declaredLength(
  headers: { 'content-length'?: string | undefined; 'transfer-encoding'?: string | undefined },
  limit: number,
): number | BodyRefusal {
  const header = headers['content-length'];
  // Node's parser has already refused a malformed or duplicated Content-Length, and one sent beside
  // Transfer-Encoding is ignored by it (RFC 9112 §6.3): the body is then read as chunked.
  if (header === undefined || headers['transfer-encoding'] !== undefined) return LENGTH_REQUIRED;
  const length = Number(header);
  if (!Number.isSafeInteger(length) || length < 0) return LENGTH_REQUIRED;
  if (length > limit) return tooLarge(limit);
  return length;
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

/**
 * Reads `req`'s body (its declared `length` bytes, identity-encoded) and calls `done` once with
 * its bytes or the refusal: after the request has been read to its end, or at once when the body
 * is not all there within `timeoutMs` (the stream is then left unread: the answer closes the
 * connection). `parseStrictJson` parses them.
 */
export function readBody(
  req: IncomingMessage,
  length: number,
  timeoutMs: number,
  done: (outcome: BytesOutcome) => void,
): void {
  // One Buffer of the declared length, filled in place: no list of chunks, no second copy.
  const body = Buffer.allocUnsafe(length);
  let received = 0;
  let finished = false;
  const finish = (outcome: BytesOutcome): void => {
    if (finished) return;
    finished = true;
    clearTimeout(timer);
    req.off('data', onData);
    req.off('end', onEnd);
    req.off('error', onError);
    done(outcome);
  };
  const onData = (chunk: Buffer): void => {
    // Node's parser never delivers more than the declared Content-Length.
    chunk.copy(body, received);
    received += chunk.length;
  };
  const onEnd = (): void => {
    finish(received === length ? { ok: true, bytes: body } : ABORTED);
  };
  const onError = (): void => finish(ABORTED);
  const timer = setTimeout(() => {
    req.pause();
    finish(bodyTimeout(timeoutMs));
  }, timeoutMs);
  req.on('data', onData);
  req.once('end', onEnd);
  // The request's stream errs (or closes early) when the client goes away.
  req.once('error', onError);
  req.once('close', () => {
    if (!req.complete) finish(ABORTED);
  });
}
