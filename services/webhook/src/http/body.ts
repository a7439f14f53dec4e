/**
 * The JSON body of the API server's POST /mutate/pods — `Content-Type: application/json`, a
 * Content-Length within the limit, no Content-Encoding — read without express (`directLength`
 * says whether a request is one, `readDirect` reads it; app.ts serves such a request before
 * express sees it): the chunks collected, one JSON.parse. Every other POST /mutate/pods (a
 * compressed or chunked body, a charset parameter, a length over the limit, a path express
 * matches loosely) goes through express to body-parser's `express.json`, which decompresses,
 * decodes and enforces the limit after decompression. Both report failures as body-parser does
 * (errors with its `type` and a 4xx `status`), so the app maps them to the same 400/413/415
 * answers either way.
 *
 * Why: body-parser's generic path (type-is, content-type parsing, raw-body with an iconv
 * decoder, on-finished) costs more per request than reading ~2 KiB of JSON does.
 */
import type { IncomingHttpHeaders, IncomingMessage } from 'node:http';

/** An error shaped like body-parser's (http-errors): `type` names it, `status` is the 4xx to answer. */
function bodyError(status: number, type: string, message: string): Error {
  return Object.assign(new Error(message), { status, statusCode: status, expose: true, type });
}

/** The body length when the request takes the direct path, else undefined. */
export function directLength(h: IncomingHttpHeaders, limit: number): number | undefined {
  if (h['content-type'] !== 'application/json') return undefined;
  if (h['transfer-encoding'] !== undefined) return undefined;
  const encoding = h['content-encoding'];
  if (encoding !== undefined && encoding !== 'identity') return undefined;
  const raw = h['content-length'];
  if (raw === undefined) return undefined;
  const length = Number(raw);
  return Number.isSafeInteger(length) && length > 0 && length <= limit ? length : undefined;
}

/** JSON whitespace (RFC 8259): what body-parser's strict mode skips before the first character. */
function isJsonSpace(c: number): boolean {
  return c === 0x20 || c === 0x09 || c === 0x0a || c === 0x0d;
}

/**
 * body-parser's strict JSON: the text must start (after whitespace, and a UTF-8 byte order mark,
 * which its decoder drops) with `{` or `[`. Throws a body-parser-shaped error otherwise.
 */
export function parseStrictJson(buf: Buffer): unknown {
  const start = buf.length >= 3 && buf[0] === 0xef && buf[1] === 0xbb && buf[2] === 0xbf ? 3 : 0;
  let i = start;
  while (i < buf.length && isJsonSpace(buf[i] as number)) i++;
  const first = buf[i];
  if (first !== 0x7b && first !== 0x5b) {
    throw bodyError(400, 'entity.parse.failed', 'request body is not a JSON object or array');
  }
  try {
    return JSON.parse(buf.toString('utf8', start));
  } catch (e) {
    throw bodyError(400, 'entity.parse.failed', e instanceof Error ? e.message : String(e));
  }
}

/**
 * Reads a body of exactly `length` bytes (`directLength`) and parses it as strict JSON; calls
 * `done` once, with the value or with a body-parser-shaped error.
 */
export function readDirect(
  req: IncomingMessage,
  length: number,
  done: (err: Error | undefined, body?: unknown) => void,
): void {
  const chunks: Buffer[] = [];
  let received = 0;
  let settled = false;
  // The listeners stay on the request once it is settled (it is done with; removing four costs
  // more than leaving them): later events find `settled`, and a late 'error' still has a handler.
  const finish = (err?: Error): void => {
    if (settled) return;
    settled = true;
    if (err !== undefined) {
      done(err);
      return;
    }
    if (received !== length) {
      done(bodyError(400, 'request.size.invalid', 'request body length does not match Content-Length'));
      return;
    }
    let body: unknown;
    try {
      body = parseStrictJson(chunks.length === 1 ? (chunks[0] as Buffer) : Buffer.concat(chunks, received));
    } catch (e) {
      done(e as Error);
      return;
    }
    done(undefined, body);
  };
  const onData = (chunk: Buffer): void => {
    received += chunk.length;
    // Node's parser never delivers more than Content-Length; guard anyway rather than buffer it.
    if (received > length) finish(bodyError(400, 'request.size.invalid', 'request body exceeds its Content-Length'));
    else chunks.push(chunk);
  };
  const onEnd = (): void => finish();
  const onError = (): void => finish(bodyError(400, 'request.aborted', 'request aborted by the client'));
  const onClose = (): void => {
    if (!req.complete) finish(bodyError(400, 'request.aborted', 'request aborted by the client'));
  };
  req.on('data', onData);
  req.on('end', onEnd);
  req.on('error', onError);
  req.on('close', onClose);
}
