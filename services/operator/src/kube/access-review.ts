/**
 * Secure metrics' reviews on a real cluster (--metrics-secure; the guard is
 * @kubeplus-isolation/service metrics-auth.ts): a TokenReview (authentication.k8s.io/v1) of the
 * caller's bearer token, then a SubjectAccessReview (authorization.k8s.io/v1) of the user it names
 * for a non-resource URL. Both are creates the chart grants by name (`<operator>-metrics-auth`).
 * The token goes only into the TokenReview's body; nothing here logs it.
 */
import type { AccessReviewer, Authentication, Authorization } from '@kubeplus-isolation/service';
import { AuthenticationV1Api, AuthorizationV1Api, type KubeConfig } from '@kubernetes/client-node';
import { requestOptions } from './request.js';

export function kubeAccessReviewer(kc: KubeConfig): AccessReviewer {
  const authentication = kc.makeApiClient(AuthenticationV1Api);
  const authorization = kc.makeApiClient(AuthorizationV1Api);
  return {
    async authenticate(token, signal): Promise<Authentication> {
      const review = await authentication.createTokenReview(
        { body: { apiVersion: 'authentication.k8s.io/v1', kind: 'TokenReview', spec: { token } } },
        requestOptions({ signal }),
      );
      const status = review.status;
      const user = status?.user;
      if (status?.authenticated !== true || !user?.username) {
        return { authenticated: false, reason: status?.error || 'token not authenticated' };
      }
      return {
        authenticated: true,
        user: {
          username: user.username,
          ...(user.uid ? { uid: user.uid } : {}),
          groups: user.groups ?? [],
          ...(user.extra ? { extra: user.extra } : {}),
        },
      };
    },
    async authorize(user, attributes, signal): Promise<Authorization> {
      const review = await authorization.createSubjectAccessReview(
        {
          body: {
            apiVersion: 'authorization.k8s.io/v1',
            kind: 'SubjectAccessReview',
            spec: {
              user: user.username,
              ...(user.uid ? { uid: user.uid } : {}),
              groups: [...user.groups],
              ...(user.extra
                ? { extra: Object.fromEntries(Object.entries(user.extra).map(([k, v]) => [k, [...v]])) }
                : {}),
              nonResourceAttributes: { path: attributes.path, verb: attributes.verb },
            },
          },
        },
        requestOptions({ signal }),
      );
      const status = review.status;
      if (status?.allowed === true && status.denied !== true) return { allowed: true };
      return { allowed: false, reason: status?.reason || status?.evaluationError || 'no rule allows it' };
    },
  };
}
