/**
 * Secure metrics, as kubebuilder scaffolds them (controller-runtime's
 * `filters.WithAuthenticationAndAuthorization`): the caller's bearer token is authenticated by a
 * TokenReview (authentication.k8s.io/v1) and the user it names is authorized by a
 * SubjectAccessReview (authorization.k8s.io/v1) for a non-resource URL, `get /metrics` by default,
 * which a ClusterRole grants with `nonResourceURLs: ["/metrics"]`. Missing or invalid token: 401;
 * authenticated but not authorized: 403; both with a JSON `{error, message}`.
 *
 * The reviews themselves are the service's (`AccessReviewer`: client-node in the operator, the
 * webhook's own client there); this module decides, caches and answers:
 * - a decision is cached by a keyed hash of the token (HMAC-SHA256 under a key drawn at random per
 *   guard, never the token, nor a plain hash one could match against a token seen elsewhere):
 *   allowed for `allowedTtlMs` (1 min), denied or unauthenticated for `deniedTtlMs` (10 s), at most
 *   `maxEntries` (least recently used first out), so a scrape every 30 s costs one pair of reviews
 *   every other scrape at most, and a repeated bad token costs none within its TTL;
 * - concurrent requests with the same token share one review; at most `maxConcurrentReviews`
 *   distinct tokens are reviewed at once, and one more is answered 503 at once (so a flood of
 *   made-up tokens cannot turn into a flood of API calls);
 * - a review that fails (API server unreachable, `reviewTimeoutMs` passed) is answered 503 and not
 *   cached.
 * The token is never logged, never echoed and never kept past its review.
 */
import { createHmac, randomBytes } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { describeError, MAX_ERROR_DETAIL } from './errors.js';
import type { Logger } from './log.js';

/** Who a token belongs to, as a TokenReview's status.user says. */
export interface UserInfo {
  username: string;
  uid?: string;
  groups: readonly string[];
  extra?: Readonly<Record<string, readonly string[]>>;
}

export type Authentication = { authenticated: true; user: UserInfo } | { authenticated: false; reason: string };

/** What is asked for: a non-resource URL and a verb (SubjectAccessReview's nonResourceAttributes). */
export interface NonResourceAttributes {
  path: string;
  verb: string;
}

export type Authorization = { allowed: true } | { allowed: false; reason: string };

/**
 * The two API calls a guard needs. Each rejects when the review could not be made (network,
 * status, the signal's abort); a token the API server does not accept is `authenticated: false`,
 * a user it does not allow is `allowed: false`.
 */
export interface AccessReviewer {
  /** A TokenReview of `token` (spec.token; no audiences: the API server's own). */
  authenticate(token: string, signal: AbortSignal): Promise<Authentication>;
  /** A SubjectAccessReview of `user` (username, uid, groups, extra) for `attributes`. */
  authorize(user: UserInfo, attributes: NonResourceAttributes, signal: AbortSignal): Promise<Authorization>;
}

/** The decision on one request. */
export type MetricsAccess =
  | { kind: 'allowed'; username: string }
  | { kind: 'unauthenticated'; message: string }
  | { kind: 'forbidden'; username: string }
  | { kind: 'unavailable'; message: string };

export const METRICS_ATTRIBUTES: NonResourceAttributes = { path: '/metrics', verb: 'get' };

/** The longest token looked at; a longer one is refused without a review (JWTs are 1-2 KB). */
export const MAX_TOKEN_BYTES = 16 * 1024;

/**
 * The token of an `Authorization: Bearer <token>` header (scheme case-insensitive, as the API
 * server reads it); undefined when there is none, the scheme is another or the token is too long.
 */
export function bearerToken(header: string | undefined): string | undefined {
  if (header === undefined) return undefined;
  const match = /^bearer +(\S+)$/i.exec(header.trim());
  const token = match?.[1];
  if (token === undefined || token.length > MAX_TOKEN_BYTES) return undefined;
  return token;
}

export interface AccessResponse {
  status: number;
  headers: Record<string, string>;
  body: { error: string; message: string };
}

/** The HTTP answer to a refused request (an allowed one goes on to the handler). */
export function accessResponse(access: Exclude<MetricsAccess, { kind: 'allowed' }>, path: string): AccessResponse {
  switch (access.kind) {
    case 'unauthenticated':
      return {
        status: 401,
        headers: { 'WWW-Authenticate': 'Bearer realm="metrics"' },
        body: { error: 'unauthorized', message: access.message },
      };
    case 'forbidden':
      return {
        status: 403,
        headers: {},
        body: {
          error: 'forbidden',
          message: `user ${JSON.stringify(access.username)} may not get ${path}: bind it to a ClusterRole granting get on nonResourceURLs ["${path}"]`,
        },
      };
    case 'unavailable':
      return { status: 503, headers: { 'Retry-After': '1' }, body: { error: 'unavailable', message: access.message } };
  }
}

export interface MetricsAccessGuardOptions {
  reviewer: AccessReviewer;
  /** What a caller must be allowed (default `get /metrics`). */
  attributes?: NonResourceAttributes;
  /** How long an allowed decision is reused (default 60 s). */
  allowedTtlMs?: number;
  /** How long a denied or unauthenticated decision is reused (default 10 s). */
  deniedTtlMs?: number;
  /** Decisions kept at most (default 1024). */
  maxEntries?: number;
  /** Distinct tokens reviewed at once at most (default 8). */
  maxConcurrentReviews?: number;
  /** Bound on the two reviews of one token together (default 5 s). */
  reviewTimeoutMs?: number;
  /** ms since the epoch (tests). */
  now?: () => number;
  logger?: Logger;
}

interface CacheEntry {
  access: Exclude<MetricsAccess, { kind: 'unavailable' }>;
  expiresAt: number;
}

/** Decides, per request, whether its bearer token may read the metrics (see the module comment). */
export class MetricsAccessGuard {
  readonly attributes: NonResourceAttributes;
  readonly #reviewer: AccessReviewer;
  readonly #allowedTtlMs: number;
  readonly #deniedTtlMs: number;
  readonly #maxEntries: number;
  readonly #maxConcurrent: number;
  readonly #timeoutMs: number;
  readonly #now: () => number;
  readonly #logger: Logger | undefined;
  /** Per guard: a digest means nothing outside this process. */
  readonly #hashKey = randomBytes(32);
  /** Digest → decision, least recently used first (a Map keeps insertion order). */
  readonly #cache = new Map<string, CacheEntry>();
  /** Digest → the review under way. */
  readonly #inFlight = new Map<string, Promise<MetricsAccess>>();

  constructor(options: MetricsAccessGuardOptions) {
    this.#reviewer = options.reviewer;
    this.attributes = options.attributes ?? METRICS_ATTRIBUTES;
    this.#allowedTtlMs = options.allowedTtlMs ?? 60_000;
    this.#deniedTtlMs = options.deniedTtlMs ?? 10_000;
    this.#maxEntries = options.maxEntries ?? 1024;
    this.#maxConcurrent = options.maxConcurrentReviews ?? 8;
    this.#timeoutMs = options.reviewTimeoutMs ?? 5_000;
    this.#now = options.now ?? Date.now;
    this.#logger = options.logger;
    if (!(Number.isInteger(this.#maxEntries) && this.#maxEntries >= 1)) throw new Error('maxEntries must be >= 1');
    if (!(Number.isInteger(this.#maxConcurrent) && this.#maxConcurrent >= 1)) {
      throw new Error('maxConcurrentReviews must be >= 1');
    }
  }

  /** The decision for a request carrying `authorization` (its Authorization header). */
  async check(authorization: string | undefined): Promise<MetricsAccess> {
    const token = bearerToken(authorization);
    if (token === undefined) {
      return { kind: 'unauthenticated', message: 'a bearer token is required (Authorization: Bearer <token>)' };
    }
    const key = this.#digest(token);
    const cached = this.#cached(key);
    if (cached !== undefined) return cached;
    const pending = this.#inFlight.get(key);
    if (pending !== undefined) return pending;
    if (this.#inFlight.size >= this.#maxConcurrent) {
      return { kind: 'unavailable', message: 'too many access reviews under way; try again' };
    }
    const review = this.#review(token, key).finally(() => this.#inFlight.delete(key));
    this.#inFlight.set(key, review);
    return review;
  }

  /**
   * The guard as express (or plain node:http) middleware: an allowed request goes on (`next()`),
   * any other is answered here with its status and JSON body.
   */
  middleware(): (req: IncomingMessage, res: ServerResponse, next: (err?: unknown) => void) => void {
    return (req, res, next) => {
      this.check(req.headers.authorization).then(
        (access) => {
          if (access.kind === 'allowed') {
            next();
            return;
          }
          const answer = accessResponse(access, this.attributes.path);
          const body = JSON.stringify(answer.body);
          res.writeHead(answer.status, {
            ...answer.headers,
            'Content-Type': 'application/json; charset=utf-8',
            'Content-Length': String(Buffer.byteLength(body)),
          });
          res.end(body);
        },
        (err: unknown) => next(err),
      );
    };
  }

  /** The cache's keys and decisions (diagnostics and tests): digests, never tokens. */
  entries(): Array<[string, CacheEntry]> {
    return [...this.#cache.entries()].map(([k, v]) => [k, { ...v }]);
  }

  /** Reviews in flight. */
  reviewsInFlight(): number {
    return this.#inFlight.size;
  }

  #digest(token: string): string {
    return createHmac('sha256', this.#hashKey).update(token).digest('base64url');
  }

  #cached(key: string): MetricsAccess | undefined {
    const entry = this.#cache.get(key);
    if (entry === undefined) return undefined;
    this.#cache.delete(key);
    if (entry.expiresAt <= this.#now()) return undefined;
    this.#cache.set(key, entry);
    return entry.access;
  }

  #remember(key: string, access: CacheEntry['access']): void {
    const ttl = access.kind === 'allowed' ? this.#allowedTtlMs : this.#deniedTtlMs;
    if (ttl <= 0) return;
    this.#cache.delete(key);
    this.#cache.set(key, { access, expiresAt: this.#now() + ttl });
    while (this.#cache.size > this.#maxEntries) {
      const oldest = this.#cache.keys().next();
      if (oldest.done) break;
      this.#cache.delete(oldest.value);
    }
  }

  async #review(token: string, key: string): Promise<MetricsAccess> {
    const signal = AbortSignal.timeout(this.#timeoutMs);
    let access: CacheEntry['access'];
    try {
      const authn = await this.#reviewer.authenticate(token, signal);
      if (!authn.authenticated) {
        this.#logger?.debug('metrics request refused: token not authenticated', { reason: authn.reason });
        access = { kind: 'unauthenticated', message: 'the bearer token is not valid' };
      } else {
        const authz = await this.#reviewer.authorize(authn.user, this.attributes, signal);
        if (authz.allowed) {
          access = { kind: 'allowed', username: authn.user.username };
        } else {
          this.#logger?.debug('metrics request refused: not authorized', {
            user: authn.user.username,
            reason: authz.reason,
          });
          access = { kind: 'forbidden', username: authn.user.username };
        }
      }
    } catch (err) {
      this.#logger?.warn('metrics request refused: the access review failed', {
        error: describeError(err, MAX_ERROR_DETAIL),
      });
      return { kind: 'unavailable', message: 'the access review could not be made; try again' };
    }
    this.#remember(key, access);
    return access;
  }
}
