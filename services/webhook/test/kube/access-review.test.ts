/** Secure metrics' reviews through the webhook's own client (kube/access-review.ts): what is sent, how the status is read. */
import { describe, expect, it } from '@jest/globals';
import { KubeAccessReviewer, SUBJECT_ACCESS_REVIEWS_PATH, TOKEN_REVIEWS_PATH } from '../../src/kube/access-review.js';
import { KubeApiError, type KubeClient } from '../../src/kube/client.js';

/** A KubeClient whose POSTs the test answers; every POST recorded. */
function client(answer: (path: string, body: unknown) => unknown) {
  const posts: Array<{ path: string; body: unknown }> = [];
  const fake = {
    async postJson(path: string, body: unknown, _signal: AbortSignal): Promise<unknown> {
      posts.push({ path, body });
      return answer(path, body);
    },
  };
  return { kube: fake as unknown as KubeClient, posts };
}

const signal = (): AbortSignal => AbortSignal.timeout(5_000);
const PROMETHEUS = {
  username: 'system:serviceaccount:monitoring:prometheus',
  uid: 'uid-1',
  groups: ['system:serviceaccounts', 'system:authenticated'],
  extra: { 'authentication.kubernetes.io/pod-name': ['prometheus-0'] },
};

describe('KubeAccessReviewer', () => {
  it('authenticate: a TokenReview of the token; the user it names', async () => {
    const { kube, posts } = client(() => ({ status: { authenticated: true, user: PROMETHEUS } }));
    expect(await new KubeAccessReviewer(kube).authenticate('the-token', signal())).toEqual({
      authenticated: true,
      user: PROMETHEUS,
    });
    expect(posts).toEqual([
      {
        path: TOKEN_REVIEWS_PATH,
        body: { apiVersion: 'authentication.k8s.io/v1', kind: 'TokenReview', spec: { token: 'the-token' } },
      },
    ]);
    expect(TOKEN_REVIEWS_PATH).toBe('/apis/authentication.k8s.io/v1/tokenreviews');
  });

  it('authenticate: not authenticated, or an answer without a usable user, is a refusal', async () => {
    for (const [status, reason] of [
      [{ authenticated: false, error: 'invalid bearer token' }, 'invalid bearer token'],
      [{ authenticated: false }, 'token not authenticated'],
      [{ authenticated: true }, 'token not authenticated'],
      [{ authenticated: true, user: { username: '' } }, 'token not authenticated'],
      [undefined, 'token not authenticated'],
    ] as const) {
      const { kube } = client(() => ({ status }));
      expect(await new KubeAccessReviewer(kube).authenticate('x', signal())).toEqual({ authenticated: false, reason });
    }
    // Groups and extra are kept only as strings; a missing uid is left out.
    const { kube } = client(() => ({
      status: { authenticated: true, user: { username: 'u', groups: ['g', 7], extra: { k: ['v', null] } } },
    }));
    expect(await new KubeAccessReviewer(kube).authenticate('x', signal())).toEqual({
      authenticated: true,
      user: { username: 'u', groups: ['g'], extra: { k: ['v'] } },
    });
  });

  it('authorize: a SubjectAccessReview of the user for the non-resource URL', async () => {
    const { kube, posts } = client(() => ({ status: { allowed: true } }));
    expect(
      await new KubeAccessReviewer(kube).authorize(PROMETHEUS, { path: '/metrics', verb: 'get' }, signal()),
    ).toEqual({ allowed: true });
    expect(posts).toEqual([
      {
        path: SUBJECT_ACCESS_REVIEWS_PATH,
        body: {
          apiVersion: 'authorization.k8s.io/v1',
          kind: 'SubjectAccessReview',
          spec: {
            user: PROMETHEUS.username,
            uid: PROMETHEUS.uid,
            groups: PROMETHEUS.groups,
            extra: PROMETHEUS.extra,
            nonResourceAttributes: { path: '/metrics', verb: 'get' },
          },
        },
      },
    ]);
    expect(SUBJECT_ACCESS_REVIEWS_PATH).toBe('/apis/authorization.k8s.io/v1/subjectaccessreviews');
  });

  it('authorize: not allowed, or denied, is a refusal with the server’s reason', async () => {
    const user = { username: 'alice', groups: [] };
    const attributes = { path: '/metrics', verb: 'get' };
    for (const [status, reason] of [
      [{ allowed: false, reason: 'no RBAC policy matched' }, 'no RBAC policy matched'],
      [{ allowed: true, denied: true, reason: 'denied by a webhook' }, 'denied by a webhook'],
      [{ allowed: false, evaluationError: 'webhook unreachable' }, 'webhook unreachable'],
      [{}, 'no rule allows it'],
    ] as const) {
      const { kube } = client(() => ({ status }));
      expect(await new KubeAccessReviewer(kube).authorize(user, attributes, signal())).toEqual({
        allowed: false,
        reason,
      });
    }
  });

  it('a failed call rejects (the guard answers 503)', async () => {
    const { kube } = client(() => {
      throw new KubeApiError(`POST ${TOKEN_REVIEWS_PATH}`, 403, { reason: 'Forbidden' });
    });
    await expect(new KubeAccessReviewer(kube).authenticate('x', signal())).rejects.toThrow(KubeApiError);
  });
});
