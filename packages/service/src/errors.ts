/**
 * What both services say about a thrown value. client-node's ApiException carries the HTTP
 * status in `code`, its watch in `statusCode`, other HTTP stacks in `status` or
 * `response.statusCode`; like apimachinery's `errors.IsConflict`, callers look at the status only.
 */

/** The HTTP status carried by an error from any Kubernetes client path, if any. */
export function httpStatusOf(err: unknown): number | undefined {
  if (typeof err !== 'object' || err === null) return undefined;
  const candidate = err as {
    code?: unknown;
    statusCode?: unknown;
    status?: unknown;
    response?: { statusCode?: unknown; status?: unknown } | null;
  };
  for (const value of [
    candidate.code,
    candidate.statusCode,
    candidate.status,
    candidate.response?.statusCode,
    candidate.response?.status,
  ]) {
    if (typeof value === 'number' && Number.isInteger(value) && value >= 100 && value <= 599) return value;
  }
  return undefined;
}

/**
 * Bound on an error's description where it lands in a bounded place: a fail-open detail, a log
 * field, a status. `describeError(err, MAX_ERROR_DETAIL)`.
 */
export const MAX_ERROR_DETAIL = 300;

/**
 * One line describing any thrown value, for logs, Events and fail-open details. Never throws.
 * Prefers the API server's Status message (client-node's ApiException puts the whole response in
 * `message`), prefixes the HTTP status when there is one, and appends causes with their errno code
 * (`fetch failed: connect ECONNREFUSED 127.0.0.1:6443 (ECONNREFUSED)`): fetch and node:https report
 * network and TLS failures with the reason in `cause`. At most `maxLength` characters (then `...`).
 */
export function describeError(err: unknown, maxLength = Number.POSITIVE_INFINITY): string {
  const parts: string[] = [];
  let current: unknown = err;
  for (let depth = 0; depth < 4 && current !== undefined && current !== null; depth++) {
    const text = describeOne(current);
    const code = typeof current === 'object' ? (current as { code?: unknown }).code : undefined;
    parts.push(typeof code === 'string' && !text.includes(code) ? `${text} (${code})` : text);
    current = current instanceof Error ? current.cause : undefined;
  }
  const text = parts.filter((p) => p !== '').join(': ');
  return text.length > maxLength ? `${text.slice(0, maxLength)}...` : text;
}

function describeOne(err: unknown): string {
  const status = httpStatusOf(err);
  const prefix = status === undefined ? '' : `HTTP ${status}: `;
  const body = typeof err === 'object' && err !== null ? (err as { body?: unknown }).body : undefined;
  const statusMessage = statusMessageOf(body);
  if (statusMessage !== undefined) return prefix + statusMessage;
  if (err instanceof Error) {
    const firstLine = err.message.split('\n', 1)[0] ?? '';
    return prefix + (firstLine || err.name);
  }
  if (typeof err === 'string') return err;
  try {
    return JSON.stringify(err) ?? String(err);
  } catch {
    return String(err);
  }
}

function statusMessageOf(body: unknown): string | undefined {
  let parsed = body;
  if (typeof body === 'string') {
    try {
      parsed = JSON.parse(body);
    } catch {
      return undefined;
    }
  }
  if (typeof parsed !== 'object' || parsed === null) return undefined;
  const message = (parsed as { message?: unknown }).message;
  return typeof message === 'string' && message !== '' ? message : undefined;
}
