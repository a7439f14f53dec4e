/**
 * Secure metrics' reviews (the guard is @kubeplus-isolation/service metrics-auth.ts) through the
 * webhook's own client (client.ts `postJson`, no @kubernetes/client-node): a TokenReview
 * (authentication.k8s.io/v1) of the scraper's bearer token, then a SubjectAccessReview
 * (authorization.k8s.io/v1) of the user it names for a non-resource URL. The API server evaluates
 * both and stores nothing; the chart grants `create` on exactly these two resources. The token
 * goes only into the TokenReview's body; nothing here logs it.
 */
import type {
  AccessReviewer,
  Authentication,
  Authorization,
  NonResourceAttributes,
  UserInfo,
} from '@kubeplus-isolation/service';
import type { KubeClient } from './client.js';

export const TOKEN_REVIEWS_PATH = '/apis/authentication.k8s.io/v1/tokenreviews';
export const SUBJECT_ACCESS_REVIEWS_PATH = '/apis/authorization.k8s.io/v1/subjectaccessreviews';

type Json = Record<string, unknown>;

function object(value: unknown): Json | undefined {
  return typeof value === 'object' && value !== null && !Array.isArray(value) ? (value as Json) : undefined;
}

function strings(value: unknown): string[] {
  return Array.isArray(value) ? value.filter((v): v is string => typeof v === 'string') : [];
}

/** status.user of a TokenReview, as far as it is well-formed. */
function userOf(value: unknown): UserInfo | undefined {
  const user = object(value);
  const username = user?.username;
  if (typeof username !== 'string' || username === '') return undefined;
  const extra: Record<string, string[]> = {};
  for (const [key, values] of Object.entries(object(user?.extra) ?? {})) extra[key] = strings(values);
  return {
    username,
    ...(typeof user?.uid === 'string' && user.uid !== '' ? { uid: user.uid } : {}),
    groups: strings(user?.groups),
    ...(Object.keys(extra).length > 0 ? { extra } : {}),
  };
}

export class KubeAccessReviewer implements AccessReviewer {
  readonly #client: KubeClient;

  constructor(client: KubeClient) {
    this.#client = client;
  }

  async authenticate(token: string, signal: AbortSignal): Promise<Authentication> {
    const review = await this.#client.postJson(
      TOKEN_REVIEWS_PATH,
      { apiVersion: 'authentication.k8s.io/v1', kind: 'TokenReview', spec: { token } },
      signal,
    );
    const status = object(object(review)?.status);
    const user = userOf(status?.user);
    if (status?.authenticated !== true || user === undefined) {
      const error = status?.error;
      return {
        authenticated: false,
        reason: typeof error === 'string' && error !== '' ? error : 'token not authenticated',
      };
    }
    return { authenticated: true, user };
  }

  async authorize(user: UserInfo, attributes: NonResourceAttributes, signal: AbortSignal): Promise<Authorization> {
    const review = await this.#client.postJson(
      SUBJECT_ACCESS_REVIEWS_PATH,
      {
        apiVersion: 'authorization.k8s.io/v1',
        kind: 'SubjectAccessReview',
        spec: {
          user: user.username,
          ...(user.uid !== undefined ? { uid: user.uid } : {}),
          groups: user.groups,
          ...(user.extra !== undefined ? { extra: user.extra } : {}),
          nonResourceAttributes: { path: attributes.path, verb: attributes.verb },
        },
      },
      signal,
    );
    const status = object(object(review)?.status);
    if (status?.allowed === true && status.denied !== true) return { allowed: true };
    const reason = [status?.reason, status?.evaluationError].find((r) => typeof r === 'string' && r !== '');
    return { allowed: false, reason: typeof reason === 'string' ? reason : 'no rule allows it' };
  }
}
