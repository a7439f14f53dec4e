import { expect, it, jest } from '@jest/globals';
import type { Operation } from 'fast-json-patch';
import { review, TEAM_A } from '../helpers/fixtures.js';

// A builder that returns an operation the Pod cannot take: admit must catch it before the API
// server does (a patch the API server cannot apply makes it reject the Pod).
const badPatch: Operation[] = [{ op: 'replace', path: '/spec/tolerations/7', value: {} }];
const actual = await import('../../src/admission/patch.js');
jest.unstable_mockModule('../../src/admission/patch.js', () => ({
  ...actual,
  buildNodeIsolationPatch: () => badPatch,
}));
const { admit } = await import('../../src/admission/admit.js');
const { parseAdmissionReview } = await import('../../src/admission/review.js');

it('fails open instead of sending a patch that would not apply', async () => {
  const parsed = parseAdmissionReview(review());
  if (!parsed.ok) throw new Error(parsed.message);
  const out = await admit(parsed.request, async () => ({ ok: true, spec: TEAM_A }));
  expect(out.result).toBe('error');
  expect(out.reason).toBe('internal_error');
  expect(out.detail).toMatch(/generated patch does not apply: OPERATION_PATH_UNRESOLVABLE/);
  expect(out.review.response.patch).toBeUndefined();
  expect(out.review.response.allowed).toBe(true);
});
