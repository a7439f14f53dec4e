/**
 * Which lines of a service's log say the API server refused it (401/403): the check behind "its
 * RBAC is complete". A line is judged by what it says, not by its digits: a JSON log line's
 * `durationMs: 0.403` or `ts: "...14.401Z"` is not a refusal, while an error string such as
 * `GET /api/v1/namespaces: 403 namespaces is forbidden: ...` or a numeric `statusCode: 401` is.
 */

const REFUSAL_WORDS = /\bforbidden\b|\bunauthorized\b|\b40[13]\b/i;
const STATUS_KEY = /status|code/i;

/** Whether a parsed log record (or any value inside it) reports a 401/403 from the API server. */
export function reportsRefusal(value: unknown, key = ''): boolean {
  if (typeof value === 'string') return REFUSAL_WORDS.test(value);
  if (typeof value === 'number') return STATUS_KEY.test(key) && (value === 401 || value === 403);
  if (Array.isArray(value)) return value.some((item) => reportsRefusal(item, key));
  if (typeof value === 'object' && value !== null) {
    return Object.entries(value).some(([k, v]) => reportsRefusal(v, k));
  }
  return false;
}

/** The lines of a log that report a refusal. A line that is not JSON is judged by its whole text. */
export function refusedLogLines(text: string): string[] {
  return text.split('\n').filter((line) => {
    if (line.trim() === '') return false;
    let record: unknown;
    try {
      record = JSON.parse(line);
    } catch {
      return REFUSAL_WORDS.test(line);
    }
    return typeof record === 'object' && record !== null ? reportsRefusal(record) : REFUSAL_WORDS.test(line);
  });
}
