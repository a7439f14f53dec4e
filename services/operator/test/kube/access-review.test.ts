/**
 * Secure metrics' reviews through client-node (kube/access-review.ts) against a fake API server:
 * what each review sends and how its status is read.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { kubeAccessReviewer } from '../../src/kube/access-review.js';
import { type FakeApiServer, type SeenRequest, startFakeApiServer } from './fake-api-server.js';

let server: FakeApiServer;

beforeAll(async () => {
  server = await startFakeApiServer();
});

afterAll(async () => {
  await server.close();
});

const PROMETHEUS = {
  username: 'system:serviceaccount:monitoring:prometheus',
  uid: 'uid-1',
  groups: ['system:serviceaccounts', 'system:authenticated'],
  extra: { 'authentication.kubernetes.io/pod-name': ['prometheus-0'] },
};

function answer(handler: (req: SeenRequest) => unknown): void {
  server.handle((req) => ({ status: 201, body: handler(req) }));
}

describe('kubeAccessReviewer', () => {
  it('authenticate: POSTs a TokenReview of the token and returns the user it names', async () => {
    answer((req) => ({ ...(req.body as object), status: { authenticated: true, user: PROMETHEUS } }));
    const reviewer = kubeAccessReviewer(server.kc);
    expect(await reviewer.authenticate('the-token', AbortSignal.timeout(5_000))).toEqual({
      authenticated: true,
      user: PROMETHEUS,
    });
    const seen = server.seen.at(-1);
    expect(seen?.method).toBe('POST');
    expect(seen?.path).toBe('/apis/authentication.k8s.io/v1/tokenreviews');
    expect(seen?.body).toEqual({
      apiVersion: 'authentication.k8s.io/v1',
      kind: 'TokenReview',
      spec: { token: 'the-token' },
    });
  });

  it('authenticate: an unauthenticated token, with or without the server’s reason', async () => {
    const reviewer = kubeAccessReviewer(server.kc);
    answer(() => ({ status: { authenticated: false, error: 'invalid bearer token' } }));
    expect(await reviewer.authenticate('x', AbortSignal.timeout(5_000))).toEqual({
      authenticated: false,
      reason: 'invalid bearer token',
    });
    answer(() => ({ status: {} }));
    expect(await reviewer.authenticate('x', AbortSignal.timeout(5_000))).toEqual({
      authenticated: false,
      reason: 'token not authenticated',
    });
  });

  it('authorize: POSTs a SubjectAccessReview of the user for the non-resource URL', async () => {
    answer((req) => ({ ...(req.body as object), status: { allowed: true } }));
    const reviewer = kubeAccessReviewer(server.kc);
    expect(await reviewer.authorize(PROMETHEUS, { path: '/metrics', verb: 'get' }, AbortSignal.timeout(5_000))).toEqual(
      { allowed: true },
    );
    const seen = server.seen.at(-1);
    expect(seen?.method).toBe('POST');
    expect(seen?.path).toBe('/apis/authorization.k8s.io/v1/subjectaccessreviews');
    expect(seen?.body).toEqual({
      apiVersion: 'authorization.k8s.io/v1',
      kind: 'SubjectAccessReview',
      spec: {
        user: PROMETHEUS.username,
        uid: PROMETHEUS.uid,
        groups: PROMETHEUS.groups,
        extra: PROMETHEUS.extra,
        nonResourceAttributes: { path: '/metrics', verb: 'get' },
      },
    });
  });

  it('authorize: not allowed, or denied even where allowed, is a refusal with its reason', async () => {
    const reviewer = kubeAccessReviewer(server.kc);
    const user = { username: 'alice', groups: [] };
    answer(() => ({ status: { allowed: false, reason: 'no RBAC policy matched' } }));
    expect(await reviewer.authorize(user, { path: '/metrics', verb: 'get' }, AbortSignal.timeout(5_000))).toEqual({
      allowed: false,
      reason: 'no RBAC policy matched',
    });
    answer(() => ({ status: { allowed: true, denied: true } }));
    expect(
      (await reviewer.authorize(user, { path: '/metrics', verb: 'get' }, AbortSignal.timeout(5_000))).allowed,
    ).toBe(false);
  });

  it('a failed review rejects (the guard answers 503)', async () => {
    server.handle(() => ({ status: 403, body: { kind: 'Status', code: 403, message: 'forbidden' } }));
    const reviewer = kubeAccessReviewer(server.kc);
    await expect(reviewer.authenticate('x', AbortSignal.timeout(5_000))).rejects.toThrow();
  });
});
