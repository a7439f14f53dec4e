/**
 * The check behind "nothing the webhook/operator did was refused by the API server": which log
 * lines report a 401/403. CI once failed it on the 1.30 floor with no refusal at all: the old check
 * searched each raw line for `\b403\b`, and a webhook line's `"durationMs":0.403` matched.
 */
import { describe, expect, test } from '@jest/globals';
import { refusedLogLines, reportsRefusal } from '../../src/harness/log-refusals.js';

const admitted = JSON.stringify({
  ts: '2026-12-03T15:32:14.401Z',
  level: 'info',
  msg: 'pod admitted with node isolation',
  uid: '868d880c-2271-474c-bff1-1c311051d24a',
  namespace: 'e2e-ni-fresh-4zrbq',
  durationMs: 0.403,
  result: 'patched',
  patchOps: 2,
});
const refusedWatch = JSON.stringify({
  level: 'warn',
  msg: 'namespace watch failed; retrying',
  error: 'GET /api/v1/namespaces?watch=1: 403 namespaces is forbidden: User "system:serviceaccount:x:y" cannot watch',
});

describe('which log lines report that the API server refused the service', () => {
  test('digits that only look like a status code are not a refusal (the CI false positive)', () => {
    expect(/forbidden|\b403\b|Unauthorized|\b401\b/i.test(admitted)).toBe(true); // the old check
    expect(refusedLogLines(admitted)).toEqual([]);
    expect(reportsRefusal({ durationMs: 401, count: 403, uid: 'a-403b-c' })).toBe(false);
  });

  test('an error string naming 403/401, forbidden or unauthorized is a refusal', () => {
    expect(refusedLogLines(`${admitted}\n${refusedWatch}\n`)).toEqual([refusedWatch]);
    expect(reportsRefusal({ error: 'HTTP 401: Unauthorized' })).toBe(true);
    expect(reportsRefusal({ error: 'list gadgets: 403' })).toBe(true);
    expect(reportsRefusal({ details: { errors: ['ok', 'is Forbidden'] } })).toBe(true);
  });

  test('a numeric status field of 401 or 403 is a refusal; other codes are not', () => {
    expect(reportsRefusal({ statusCode: 403 })).toBe(true);
    expect(reportsRefusal({ code: 401 })).toBe(true);
    expect(reportsRefusal({ statusCode: 429 })).toBe(false);
  });

  test('a line that is not JSON is judged by its text; blank lines are not', () => {
    expect(refusedLogLines('Error from server (Forbidden): nope\n\n  \nplain 403 refused')).toEqual([
      'Error from server (Forbidden): nope',
      'plain 403 refused',
    ]);
  });
});
