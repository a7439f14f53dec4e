import { describe, expect, it, jest } from '@jest/globals';
import type { NodeIsolationSpec } from '@kubeplus-isolation/spec';
import { admit, failOpenWarning } from '../../src/admission/admit.js';
import { type AdmissionRequest, parseAdmissionReview } from '../../src/admission/review.js';
import type { Resolution } from '../../src/cache/resolver.js';
import { decodePatch, pod, review, TEAM_A } from '../helpers/fixtures.js';

function request(overrides: Parameters<typeof review>[0] = {}): AdmissionRequest {
  const r = parseAdmissionReview(review(overrides));
  if (!r.ok) throw new Error(r.message);
  return r.request;
}

const resolved =
  (spec: NodeIsolationSpec) =>
  async (_namespace: string): Promise<Resolution> => ({ ok: true, spec });

describe('admit', () => {
  it('patches a Pod CREATE in an isolated namespace', async () => {
    const out = await admit(request(), resolved(TEAM_A));
    expect(out.result).toBe('patched');
    expect(out.review.response).toMatchObject({ uid: '705ab4f5-6393-11e8-b7cc-42010a800002', allowed: true });
    expect(out.review.response.patchType).toBe('JSONPatch');
    expect(decodePatch(out.review.response.patch ?? '')).toEqual(out.patch);
    expect(out.patch.length).toBe(2);
  });

  it('answers unchanged, without a patch, for a Pod that already complies', async () => {
    const compliant = pod({ nodeSelector: TEAM_A.nodeSelector, tolerations: TEAM_A.tolerations });
    const out = await admit(request({ object: compliant }), resolved(TEAM_A));
    expect(out.result).toBe('unchanged');
    expect(out.review.response).toEqual({ uid: '705ab4f5-6393-11e8-b7cc-42010a800002', allowed: true });
  });

  it('looks up the namespace of the request', async () => {
    const resolve = jest.fn(resolved(TEAM_A));
    await admit(request({ namespace: 'team-b' }), resolve);
    expect(resolve).toHaveBeenCalledWith('team-b');
  });

  it.each([
    ['UPDATE', { operation: 'UPDATE' }],
    ['a subresource', { subResource: 'binding' }],
    [
      'a Deployment',
      {
        kind: { group: 'apps', version: 'v1', kind: 'Deployment' },
        resource: { group: 'apps', version: 'v1', resource: 'deployments' },
      },
    ],
  ])('skips %s without looking anything up', async (_name, overrides) => {
    const resolve = jest.fn(resolved(TEAM_A));
    const out = await admit(request(overrides), resolve);
    expect(out.result).toBe('skipped');
    expect(out.review.response).toEqual({ uid: '705ab4f5-6393-11e8-b7cc-42010a800002', allowed: true });
    expect(resolve).not.toHaveBeenCalled();
  });

  it('fails open with the resolver reason and a warning for the client', async () => {
    const out = await admit(request(), async () => ({
      ok: false,
      reason: 'annotation_invalid',
      detail: 'tolerations[0].effect must be one of ...',
    }));
    expect(out.result).toBe('failopen');
    expect(out.reason).toBe('annotation_invalid');
    expect(out.detail).toContain('tolerations[0]');
    expect(out.review.response.allowed).toBe(true);
    expect(out.review.response.patch).toBeUndefined();
    expect(out.review.response.warnings).toEqual([failOpenWarning('annotation_invalid')]);
  });

  it('answers allowed without a patch when resolving throws (internal error, fail open)', async () => {
    const out = await admit(request(), async () => {
      throw new Error('boom');
    });
    expect(out.result).toBe('error');
    expect(out.reason).toBe('internal_error');
    expect(out.detail).toBe('boom');
    expect(out.review.response).toMatchObject({ allowed: true });
    expect(out.review.response.patch).toBeUndefined();
  });

  it('answers allowed without a patch when building the patch throws', async () => {
    const hostile = {
      tolerations: [],
      get nodeSelector(): Record<string, string> {
        throw new TypeError('corrupt spec');
      },
    } as NodeIsolationSpec;
    const out = await admit(request(), resolved(hostile));
    expect(out.result).toBe('error');
    expect(out.detail).toBe('corrupt spec');
    expect(out.review.response.allowed).toBe(true);
  });

  it('answers a cache hit in the same turn: no Promise when the resolver has the mandate at hand', () => {
    const out = admit(request(), () => ({ ok: true, spec: TEAM_A }));
    expect(out).not.toBeInstanceOf(Promise);
    expect((out as Awaited<typeof out>).result).toBe('patched');
  });

  it('answers a Promise only when the resolver has to look the namespace up', async () => {
    const out = admit(request(), resolved(TEAM_A));
    expect(out).toBeInstanceOf(Promise);
    expect((await out).result).toBe('patched');
  });

  it('answers allowed without a patch when resolving throws synchronously (internal error, fail open)', () => {
    const out = admit(request(), () => {
      throw new Error('cache corrupted');
    });
    expect(out).not.toBeInstanceOf(Promise);
    expect(out).toMatchObject({ result: 'error', reason: 'internal_error', detail: 'cache corrupted' });
  });

  it('warnings stay short enough for kubectl to print whole', () => {
    expect(failOpenWarning('namespace_not_labeled').length).toBeLessThanOrEqual(120);
  });
});
