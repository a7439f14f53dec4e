import { createHash } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from '@jest/globals';
import {
  type AccessReviewer,
  type Authentication,
  type Authorization,
  accessResponse,
  bearerToken,
  MAX_TOKEN_BYTES,
  MetricsAccessGuard,
  type MetricsAccessGuardOptions,
  type NonResourceAttributes,
  type UserInfo,
} from '../src/index.js';

const PROMETHEUS_TOKEN = 'eyJhbGciOiJSUzI1NiJ9.prometheus-token.signature';
const TENANT_TOKEN = 'eyJhbGciOiJSUzI1NiJ9.tenant-token.signature';
const PROMETHEUS: UserInfo = {
  username: 'system:serviceaccount:monitoring:prometheus-k8s',
  uid: 'u-1',
  groups: ['system:serviceaccounts', 'system:serviceaccounts:monitoring', 'system:authenticated'],
};
const TENANT: UserInfo = { username: 'system:serviceaccount:team-a:default', groups: ['system:authenticated'] };

/** An API server in a test: two known tokens, only Prometheus may get /metrics; every call recorded. */
class FakeReviewer implements AccessReviewer {
  readonly tokenReviews: string[] = [];
  readonly accessReviews: Array<{ user: UserInfo; attributes: NonResourceAttributes }> = [];
  users = new Map<string, UserInfo>([
    [PROMETHEUS_TOKEN, PROMETHEUS],
    [TENANT_TOKEN, TENANT],
  ]);
  allowed = new Set([PROMETHEUS.username]);
  /** Held reviews: resolved by the test. */
  hold = false;
  readonly held: Array<() => void> = [];
  fail: Error | undefined;

  async authenticate(token: string, signal: AbortSignal): Promise<Authentication> {
    this.tokenReviews.push(token);
    await this.#wait(signal);
    if (this.fail) throw this.fail;
    const user = this.users.get(token);
    return user ? { authenticated: true, user } : { authenticated: false, reason: 'invalid bearer token' };
  }

  async authorize(user: UserInfo, attributes: NonResourceAttributes, signal: AbortSignal): Promise<Authorization> {
    this.accessReviews.push({ user, attributes });
    await this.#wait(signal);
    return this.allowed.has(user.username) ? { allowed: true } : { allowed: false, reason: 'no RBAC policy matched' };
  }

  release(): void {
    for (const r of this.held.splice(0)) r();
  }

  #wait(signal: AbortSignal): Promise<void> {
    if (!this.hold) return Promise.resolve();
    return new Promise((resolve, reject) => {
      this.held.push(resolve);
      signal.addEventListener('abort', () => reject(signal.reason), { once: true });
    });
  }
}

function guardWith(reviewer: AccessReviewer, options: Partial<MetricsAccessGuardOptions> = {}) {
  let now = 1_000_000;
  const guard = new MetricsAccessGuard({ reviewer, now: () => now, ...options });
  return { guard, advance: (ms: number) => (now += ms) };
}

const bearer = (token: string): string => `Bearer ${token}`;

describe('bearerToken', () => {
  it('reads the token of a Bearer header, the scheme in any case, and nothing else', () => {
    expect(bearerToken(bearer('abc.def'))).toBe('abc.def');
    expect(bearerToken('bearer abc')).toBe('abc');
    expect(bearerToken('  BEARER   abc  ')).toBe('abc');
    expect(bearerToken(undefined)).toBeUndefined();
    expect(bearerToken('')).toBeUndefined();
    expect(bearerToken('Bearer')).toBeUndefined();
    expect(bearerToken('Bearer ')).toBeUndefined();
    expect(bearerToken('Basic dXNlcjpwYXNz')).toBeUndefined();
    expect(bearerToken('Bearer a b')).toBeUndefined();
    expect(bearerToken(`Bearer ${'x'.repeat(MAX_TOKEN_BYTES)}`)).toBe('x'.repeat(MAX_TOKEN_BYTES));
    expect(bearerToken(`Bearer ${'x'.repeat(MAX_TOKEN_BYTES + 1)}`)).toBeUndefined();
  });
});

describe('accessResponse', () => {
  it('401 with a Bearer challenge, 403 naming the user and the grant, 503 to retry', () => {
    expect(accessResponse({ kind: 'unauthenticated', message: 'm' }, '/metrics')).toEqual({
      status: 401,
      headers: { 'WWW-Authenticate': 'Bearer realm="metrics"' },
      body: { error: 'unauthorized', message: 'm' },
    });
    const forbidden = accessResponse({ kind: 'forbidden', username: 'alice' }, '/metrics');
    expect(forbidden.status).toBe(403);
    expect(forbidden.body.error).toBe('forbidden');
    expect(forbidden.body.message).toContain('"alice" may not get /metrics');
    expect(forbidden.body.message).toContain('nonResourceURLs ["/metrics"]');
    expect(accessResponse({ kind: 'unavailable', message: 'm' }, '/metrics')).toMatchObject({
      status: 503,
      headers: { 'Retry-After': '1' },
    });
  });
});

describe('MetricsAccessGuard', () => {
  it('no token: 401 without a review', async () => {
    const reviewer = new FakeReviewer();
    const { guard } = guardWith(reviewer);
    expect(await guard.check(undefined)).toEqual({
      kind: 'unauthenticated',
      message: 'a bearer token is required (Authorization: Bearer <token>)',
    });
    expect((await guard.check('Basic dXNlcjpwYXNz')).kind).toBe('unauthenticated');
    expect(reviewer.tokenReviews).toEqual([]);
  });

  it('a token the API server does not know: 401, no access review', async () => {
    const reviewer = new FakeReviewer();
    const { guard } = guardWith(reviewer);
    expect(await guard.check(bearer('made-up'))).toEqual({
      kind: 'unauthenticated',
      message: 'the bearer token is not valid',
    });
    expect(reviewer.tokenReviews).toEqual(['made-up']);
    expect(reviewer.accessReviews).toEqual([]);
  });

  it('a known user without the grant: 403', async () => {
    const reviewer = new FakeReviewer();
    const { guard } = guardWith(reviewer);
    expect(await guard.check(bearer(TENANT_TOKEN))).toEqual({ kind: 'forbidden', username: TENANT.username });
  });

  it('the granted user: allowed, asked as user, uid and groups for get /metrics', async () => {
    const reviewer = new FakeReviewer();
    const { guard } = guardWith(reviewer);
    expect(await guard.check(bearer(PROMETHEUS_TOKEN))).toEqual({ kind: 'allowed', username: PROMETHEUS.username });
    expect(reviewer.accessReviews).toEqual([{ user: PROMETHEUS, attributes: { path: '/metrics', verb: 'get' } }]);
  });

  it('a cached decision costs no review; an allowed one lasts a minute, a denied one 10 s', async () => {
    const reviewer = new FakeReviewer();
    const { guard, advance } = guardWith(reviewer);
    await guard.check(bearer(PROMETHEUS_TOKEN));
    await guard.check(bearer(TENANT_TOKEN));
    await guard.check(bearer('made-up'));
    expect(reviewer.tokenReviews).toHaveLength(3);

    advance(9_999);
    expect((await guard.check(bearer(PROMETHEUS_TOKEN))).kind).toBe('allowed');
    expect((await guard.check(bearer(TENANT_TOKEN))).kind).toBe('forbidden');
    expect((await guard.check(bearer('made-up'))).kind).toBe('unauthenticated');
    expect(reviewer.tokenReviews).toHaveLength(3);
    expect(reviewer.accessReviews).toHaveLength(2);

    // Denied decisions expire first...
    advance(1);
    await guard.check(bearer(TENANT_TOKEN));
    await guard.check(bearer('made-up'));
    expect(reviewer.tokenReviews).toEqual([PROMETHEUS_TOKEN, TENANT_TOKEN, 'made-up', TENANT_TOKEN, 'made-up']);
    await guard.check(bearer(PROMETHEUS_TOKEN));
    expect(reviewer.tokenReviews).toHaveLength(5);

    // ...and an allowed one after a minute: a revoked grant is seen within it.
    advance(50_000);
    reviewer.allowed.clear();
    expect((await guard.check(bearer(PROMETHEUS_TOKEN))).kind).toBe('forbidden');
    expect(reviewer.tokenReviews).toHaveLength(6);
  });

  it('never keeps the token: the cache is keyed by a keyed hash, different in each guard', async () => {
    const reviewer = new FakeReviewer();
    const a = guardWith(reviewer).guard;
    const b = guardWith(reviewer).guard;
    for (const guard of [a, b]) {
      await guard.check(bearer(PROMETHEUS_TOKEN));
      await guard.check(bearer(TENANT_TOKEN));
      await guard.check(bearer('made-up'));
    }
    const plainHashes = [PROMETHEUS_TOKEN, TENANT_TOKEN, 'made-up'].flatMap((t) => [
      createHash('sha256').update(t).digest('hex'),
      createHash('sha256').update(t).digest('base64url'),
    ]);
    for (const guard of [a, b]) {
      const entries = guard.entries();
      expect(entries).toHaveLength(3);
      const dump = JSON.stringify(entries);
      for (const token of [PROMETHEUS_TOKEN, TENANT_TOKEN, 'made-up', 'prometheus-token', 'tenant-token']) {
        expect(dump).not.toContain(token);
      }
      for (const [key] of entries) expect(plainHashes).not.toContain(key);
    }
    const keysOf = (g: MetricsAccessGuard) => new Set(g.entries().map(([k]) => k));
    const keysB = keysOf(b);
    for (const key of keysOf(a)) expect(keysB.has(key)).toBe(false);
  });

  it('keeps at most maxEntries decisions, the least recently used going first', async () => {
    const reviewer = new FakeReviewer();
    const { guard } = guardWith(reviewer, { maxEntries: 2 });
    await guard.check(bearer(PROMETHEUS_TOKEN));
    await guard.check(bearer(TENANT_TOKEN));
    await guard.check(bearer(PROMETHEUS_TOKEN)); // used again: the tenant's is now the oldest
    await guard.check(bearer('made-up'));
    expect(guard.entries()).toHaveLength(2);
    await guard.check(bearer(PROMETHEUS_TOKEN));
    expect(reviewer.tokenReviews.filter((t) => t === PROMETHEUS_TOKEN)).toHaveLength(1);
    await guard.check(bearer(TENANT_TOKEN));
    expect(reviewer.tokenReviews.filter((t) => t === TENANT_TOKEN)).toHaveLength(2);
  });

  it('requests with the same token at once share one review', async () => {
    const reviewer = new FakeReviewer();
    reviewer.hold = true;
    const { guard } = guardWith(reviewer);
    const checks = [1, 2, 3].map(() => guard.check(bearer(PROMETHEUS_TOKEN)));
    await new Promise((r) => setImmediate(r));
    expect(guard.reviewsInFlight()).toBe(1);
    reviewer.release();
    await new Promise((r) => setImmediate(r));
    reviewer.release();
    expect((await Promise.all(checks)).map((a) => a.kind)).toEqual(['allowed', 'allowed', 'allowed']);
    expect(reviewer.tokenReviews).toHaveLength(1);
    expect(reviewer.accessReviews).toHaveLength(1);
  });

  it('bounds the reviews under way: one more distinct token is answered unavailable at once', async () => {
    const reviewer = new FakeReviewer();
    reviewer.hold = true;
    const { guard } = guardWith(reviewer, { maxConcurrentReviews: 2 });
    const first = guard.check(bearer('flood-1'));
    const second = guard.check(bearer('flood-2'));
    expect(await guard.check(bearer(PROMETHEUS_TOKEN))).toEqual({
      kind: 'unavailable',
      message: 'too many access reviews under way; try again',
    });
    expect(reviewer.tokenReviews).toEqual(['flood-1', 'flood-2']);
    reviewer.hold = false;
    reviewer.release();
    await Promise.all([first, second]);
    expect(guard.reviewsInFlight()).toBe(0);
    expect((await guard.check(bearer(PROMETHEUS_TOKEN))).kind).toBe('allowed');
  });

  it('a failed or timed-out review: unavailable, not cached', async () => {
    const reviewer = new FakeReviewer();
    reviewer.fail = new Error('connect ECONNREFUSED');
    const { guard } = guardWith(reviewer);
    expect(await guard.check(bearer(PROMETHEUS_TOKEN))).toEqual({
      kind: 'unavailable',
      message: 'the access review could not be made; try again',
    });
    expect(guard.entries()).toEqual([]);
    reviewer.fail = undefined;
    expect((await guard.check(bearer(PROMETHEUS_TOKEN))).kind).toBe('allowed');
    expect(reviewer.tokenReviews).toHaveLength(2);

    const slow = new FakeReviewer();
    slow.hold = true;
    const timed = guardWith(slow, { reviewTimeoutMs: 20 }).guard;
    expect((await timed.check(bearer(PROMETHEUS_TOKEN))).kind).toBe('unavailable');
    expect(timed.reviewsInFlight()).toBe(0);
  });
});

describe('MetricsAccessGuard.middleware', () => {
  let server: http.Server | undefined;
  afterEach(async () => {
    await new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve()));
    server = undefined;
  });

  /** A node:http server answering 200 "metrics" behind the guard's middleware. */
  async function serve(guard: MetricsAccessGuard): Promise<string> {
    const middleware = guard.middleware();
    server = http.createServer((req, res) =>
      middleware(req, res, (err) => {
        res.writeHead(err === undefined ? 200 : 500);
        res.end(err === undefined ? 'metrics' : 'error');
      }),
    );
    await new Promise<void>((resolve) => server?.listen(0, '127.0.0.1', resolve));
    return `http://127.0.0.1:${(server.address() as AddressInfo).port}/metrics`;
  }

  it('answers 401, 401, 403 with JSON, and lets the allowed request through', async () => {
    const url = await serve(guardWith(new FakeReviewer()).guard);
    const get = async (token?: string) => {
      const res = await fetch(url, token === undefined ? {} : { headers: { Authorization: bearer(token) } });
      return { status: res.status, type: res.headers.get('content-type'), body: await res.text() };
    };
    const none = await get();
    expect(none.status).toBe(401);
    expect(none.type).toBe('application/json; charset=utf-8');
    expect(JSON.parse(none.body)).toEqual({
      error: 'unauthorized',
      message: 'a bearer token is required (Authorization: Bearer <token>)',
    });
    const bad = await get('made-up');
    expect(bad.status).toBe(401);
    expect(bad.body).not.toContain('made-up');
    const tenant = await get(TENANT_TOKEN);
    expect(tenant.status).toBe(403);
    expect(JSON.parse(tenant.body).error).toBe('forbidden');
    expect(tenant.body).not.toContain(TENANT_TOKEN);
    expect(await get(PROMETHEUS_TOKEN)).toMatchObject({ status: 200, body: 'metrics' });
  });
});
