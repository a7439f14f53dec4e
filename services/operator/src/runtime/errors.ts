/**
 * Classification of errors raised by Kubernetes API calls.
 *
 * client-node 2.x throws `ApiException` (`code` = HTTP status); its watch throws errors with
 * `statusCode`; other HTTP stacks use `status` or `response.statusCode`. Like apimachinery's
 * `errors.IsConflict`/`IsNotFound`, these helpers look at the status only, never at messages.
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

/** 409: an optimistic-concurrency conflict (stale resourceVersion) or AlreadyExists. */
export function isConflict(err: unknown): boolean {
  return httpStatusOf(err) === 409;
}

export function isNotFound(err: unknown): boolean {
  return httpStatusOf(err) === 404;
}

/** 403: the request's identity lacks the RBAC for it. */
export function isForbidden(err: unknown): boolean {
  return httpStatusOf(err) === 403;
}

/**
 * A one-line description of any thrown value, for logs and Events. Never throws. Prefers the
 * API server's Status message (client-node's ApiException puts the whole response in `message`).
 * Causes are appended (`fetch failed: connect ECONNREFUSED 127.0.0.1:6443 (ECONNREFUSED)`):
 * fetch reports every network and TLS failure as a bare "fetch failed" with the reason in `cause`.
 */
export function describeError(err: unknown): string {
  const parts = [describeOne(err)];
  let cause = err instanceof Error ? err.cause : undefined;
  for (let depth = 0; depth < 3 && cause !== undefined && cause !== null; depth++) {
    const text = describeOne(cause);
    const code = typeof cause === 'object' ? (cause as { code?: unknown }).code : undefined;
    parts.push(typeof code === 'string' && !text.includes(code) ? `${text} (${code})` : text);
    cause = cause instanceof Error ? cause.cause : undefined;
  }
  return parts.filter((p) => p !== '').join(': ');
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
