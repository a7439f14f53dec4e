import { describe, expect, it } from '@jest/globals';
import type { Operation } from 'fast-json-patch';
import {
  type AdmissionRequest,
  buildReviewResponse,
  isPodCreate,
  parseAdmissionReview,
  podIdentity,
} from '../../src/admission/review.js';
import { decodePatch, pod, review } from '../helpers/fixtures.js';

function parsedRequest(body: unknown): AdmissionRequest {
  const r = parseAdmissionReview(body);
  if (!r.ok) throw new Error(`expected a valid review, got ${r.code}: ${r.message}`);
  return r.request;
}

function withRequest(patch: Record<string, unknown>): Record<string, unknown> {
  const r = review();
  return { ...r, request: { ...(r.request as Record<string, unknown>), ...patch } };
}

describe('parseAdmissionReview', () => {
  it('accepts the review the API server sends for a Pod CREATE', () => {
    const req = parsedRequest(review());
    expect(req).toMatchObject({
      uid: '705ab4f5-6393-11e8-b7cc-42010a800002',
      operation: 'CREATE',
      namespace: 'team-a',
      kind: { group: '', version: 'v1', kind: 'Pod' },
      resource: { group: '', version: 'v1', resource: 'pods' },
      dryRun: false,
      subResource: undefined,
    });
    expect(req.object).toEqual(pod());
  });

  it('reads dryRun', () => {
    expect(parsedRequest(review({ dryRun: true })).dryRun).toBe(true);
  });

  it('accepts a DELETE without an object (the webhook skips it, it does not reject it)', () => {
    expect(parsedRequest(review({ operation: 'DELETE', object: null })).operation).toBe('DELETE');
  });

  const invalid: Array<[string, unknown, string]> = [
    ['a JSON array', [], 'not_an_object'],
    ['a v1beta1 review', { ...review(), apiVersion: 'admission.k8s.io/v1beta1' }, 'invalid_api_version'],
    ['no apiVersion', { ...review(), apiVersion: undefined }, 'invalid_api_version'],
    ['another kind', { ...review(), kind: 'Pod' }, 'invalid_kind'],
    ['no request', { apiVersion: 'admission.k8s.io/v1', kind: 'AdmissionReview' }, 'missing_request'],
    ['request not an object', { ...review(), request: 'x' }, 'missing_request'],
    ['no uid', withRequest({ uid: undefined }), 'invalid_uid'],
    ['empty uid', withRequest({ uid: '' }), 'invalid_uid'],
    ['numeric uid', withRequest({ uid: 42 }), 'invalid_uid'],
    ['uid of 129 characters', withRequest({ uid: 'u'.repeat(129) }), 'invalid_uid'],
    ['unknown operation', withRequest({ operation: 'PATCH' }), 'invalid_operation'],
    ['no kind', withRequest({ kind: undefined }), 'invalid_request_kind'],
    ['malformed resource', withRequest({ resource: { group: '', version: 'v1' } }), 'invalid_request_kind'],
    ['CREATE without object', withRequest({ object: undefined }), 'missing_object'],
    ['CREATE with a null object', withRequest({ object: null }), 'missing_object'],
    ['Pod CREATE without namespace', withRequest({ namespace: undefined }), 'missing_namespace'],
  ];

  it.each(invalid)('rejects %s with code %s and a message', (_name, body, code) => {
    const r = parseAdmissionReview(body);
    expect(r.ok).toBe(false);
    if (!r.ok) {
      expect(r.code).toBe(code);
      expect(r.message.length).toBeGreaterThan(10);
    }
  });

  it('quotes a wrong apiVersion in the message, cut to a bounded length', () => {
    const r = parseAdmissionReview({ ...review(), apiVersion: 'x'.repeat(10_000) });
    expect(r.ok).toBe(false);
    if (!r.ok) {
      expect(r.message).toContain('admission.k8s.io/v1');
      expect(r.message.length).toBeLessThan(300);
    }
  });
});

describe('isPodCreate', () => {
  const cases: Array<[string, Parameters<typeof review>[0], boolean]> = [
    ['Pod CREATE', {}, true],
    ['Pod UPDATE', { operation: 'UPDATE' }, false],
    ['Pod DELETE', { operation: 'DELETE', object: null }, false],
    ['pods/binding CREATE (subresource)', { subResource: 'binding' }, false],
    ['pods/ephemeralcontainers (subresource)', { operation: 'UPDATE', subResource: 'ephemeralcontainers' }, false],
    [
      'Deployment CREATE',
      {
        kind: { group: 'apps', version: 'v1', kind: 'Deployment' },
        resource: { group: 'apps', version: 'v1', resource: 'deployments' },
      },
      false,
    ],
    [
      'ConfigMap CREATE',
      {
        kind: { group: '', version: 'v1', kind: 'ConfigMap' },
        resource: { group: '', version: 'v1', resource: 'configmaps' },
      },
      false,
    ],
  ];
  it.each(cases)('%s → %s', (_name, overrides, expected) => {
    expect(isPodCreate(parsedRequest(review(overrides)))).toBe(expected);
  });
});

describe('buildReviewResponse', () => {
  const ops: Operation[] = [{ op: 'add', path: '/spec/nodeSelector', value: { pool: 'team-a-pool' } }];

  it('echoes the uid and allows, with a base64 JSONPatch when there are operations', () => {
    const r = buildReviewResponse('uid-1', ops);
    expect(r.apiVersion).toBe('admission.k8s.io/v1');
    expect(r.kind).toBe('AdmissionReview');
    expect(r.response.uid).toBe('uid-1');
    expect(r.response.allowed).toBe(true);
    expect(r.response.patchType).toBe('JSONPatch');
    expect(decodePatch(r.response.patch ?? '')).toEqual(ops);
  });

  it('omits patchType and patch entirely when nothing changes', () => {
    const r = buildReviewResponse('uid-2', []);
    expect(r.response).toEqual({ uid: 'uid-2', allowed: true });
  });

  it('carries warnings only when given', () => {
    expect(buildReviewResponse('u', [], ['careful']).response.warnings).toEqual(['careful']);
    expect('warnings' in buildReviewResponse('u').response).toBe(false);
  });
});

describe('podIdentity', () => {
  it('uses the request name, then metadata.name', () => {
    expect(podIdentity(parsedRequest(withRequest({ name: 'from-request' })))).toEqual({ pod: 'from-request' });
    expect(podIdentity(parsedRequest(review()))).toEqual({ pod: 'web-0' });
  });

  it('falls back to generateName for a Pod whose name the API server has not assigned yet', () => {
    const p = pod({}, { name: undefined, generateName: 'web-7d9f8-' });
    expect(podIdentity(parsedRequest(review({ object: p })))).toEqual({ generateName: 'web-7d9f8-' });
  });

  it('cuts absurdly long names', () => {
    const p = pod({}, { name: 'n'.repeat(5000) });
    expect(podIdentity(parsedRequest(review({ object: p }))).pod).toHaveLength(253);
  });
});
