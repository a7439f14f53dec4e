import { X509Certificate } from 'node:crypto';
import { describe, expect, it } from '@jest/globals';
import type { SecretContents } from '../../../src/controllers/webhook-certificates/execute.js';
import { leafInfo, splitPemBundle } from '../../../src/controllers/webhook-certificates/pki.js';
import type { CertificatePolicy } from '../../../src/controllers/webhook-certificates/policy.js';
import {
  type StoredSecret,
  trustedByAll,
  type WebhookCertificatesHooks,
  type WebhookCertificatesPort,
  WebhookCertificatesReconciler,
  type WebhookConfigurationLike,
} from '../../../src/controllers/webhook-certificates/reconciler.js';
import {
  CERTIFICATES_LABEL,
  DNS_NAMES_ANNOTATION,
  SECRET_ANNOTATION,
} from '../../../src/controllers/webhook-certificates/request.js';
import { readTlsState } from '../../../src/controllers/webhook-certificates/state.js';
import type { Clock } from '../../../src/runtime/clock.js';
import { captureLogger } from '../../runtime/fakes.js';

const S = 1_000;
const START = Date.UTC(2026, 0, 1);
const POLICY: CertificatePolicy = { caValidityMs: 240 * S, certValidityMs: 60 * S, propagationDelayMs: 10 * S };
const NAME = 'kubeplus-isolation-webhook';

function configuration(annotations: Record<string, string>, caBundle?: string): WebhookConfigurationLike {
  return {
    apiVersion: 'admissionregistration.k8s.io/v1',
    kind: 'MutatingWebhookConfiguration',
    metadata: { name: NAME, labels: { [CERTIFICATES_LABEL]: 'operator' }, annotations, resourceVersion: '1' },
    webhooks: [{ name: 'node-isolation.kubeplus.io', clientConfig: caBundle === undefined ? {} : { caBundle } }],
  };
}

const GOOD = {
  [SECRET_ANNOTATION]: 'kubeplus-isolation/hook-certs',
  [DNS_NAMES_ANNOTATION]: 'hook.kubeplus-isolation.svc,hook',
};

/** The API as the reconciler sees it: one Secret, one webhook configuration, and every write with its time. */
class World implements WebhookCertificatesPort {
  secret: StoredSecret | undefined = { data: {}, annotations: {}, resourceVersion: '1' };
  config: WebhookConfigurationLike;
  secretWrites: Array<{ at: number; contents: SecretContents }> = [];
  bundleWrites: Array<{ at: number; caBundle: string }> = [];
  constructor(
    private readonly clock: Clock,
    annotations: Record<string, string> = GOOD,
  ) {
    this.config = configuration(annotations);
  }
  async readSecret(): Promise<StoredSecret | undefined> {
    return this.secret && structuredClone(this.secret);
  }
  async writeSecret(_ns: string, _name: string, contents: SecretContents, previous: StoredSecret): Promise<void> {
    if (previous.resourceVersion !== this.secret?.resourceVersion)
      throw Object.assign(new Error('conflict'), { code: 409 });
    this.secret = { ...structuredClone(contents), resourceVersion: String(Number(previous.resourceVersion) + 1) };
    this.secretWrites.push({ at: this.clock.now(), contents: structuredClone(contents) });
  }
  async writeCaBundle(_c: WebhookConfigurationLike, caBundle: string): Promise<void> {
    this.config = configuration(this.config.metadata?.annotations ?? {}, caBundle);
    this.bundleWrites.push({ at: this.clock.now(), caBundle });
  }
}

function manualClock(): Clock & { t: number } {
  return {
    t: START,
    now() {
      return this.t;
    },
    schedule: () => () => {},
  };
}

function counting(): WebhookCertificatesHooks & { ca: number; serving: number } {
  return {
    ca: 0,
    serving: 0,
    issued(kind) {
      this[kind]++;
    },
    expiries() {},
    invalidConfiguration() {},
  };
}

function reconcilerFor(world: World, clock: Clock, hooks = counting()) {
  const log = captureLogger();
  const reconciler = new WebhookCertificatesReconciler({
    port: world,
    configurations: { get: () => world.config, list: () => [world.config] },
    policy: POLICY,
    hooks,
    clock,
    logger: log.logger,
  });
  return { reconciler, hooks, log };
}

/** The last value written at or before `t`. */
function asOf<T extends { at: number }>(writes: readonly T[], t: number): T | undefined {
  let found: T | undefined;
  for (const w of writes) if (w.at <= t) found = w;
  return found;
}

describe('WebhookCertificatesReconciler', () => {
  // API servers see a caBundle change up to 80% of the propagation delay late (the delay is
  // what they are given). Webhook Pods see a Secret change late too, and not only within the
  // delay: the kubelet refreshes a mounted Secret at its sync period plus up to 50% jitter, later
  // on a busy node. A Pod 1.8 delays late (18 s, still inside the third of a serving
  // certificate's life left when it is renewed) must serve nothing untrusted: a retired CA stays
  // in the bundle until it expires, not merely a delay after the serving certificate moved off it.
  it.each([
    { pods: 0.8, apiServers: 0.8 },
    { pods: 0.8, apiServers: 0 },
    { pods: 0, apiServers: 0.8 },
    { pods: 1.8, apiServers: 0.8 },
    { pods: 1.8, apiServers: 0 },
  ])(
    'through two CA lifetimes, every certificate a webhook Pod serves is trusted by the API server (lags: %o)',
    async (lags) => {
      const clock = manualClock();
      const world = new World(clock);
      const { reconciler, hooks } = reconcilerFor(world, clock);
      const podLag = lags.pods * POLICY.propagationDelayMs;
      const apiLag = lags.apiServers * POLICY.propagationDelayMs;
      const verdicts = new Map<string, string | undefined>();
      let due = START;
      let checked = 0;
      const end = START + 2.5 * POLICY.caValidityMs;
      for (clock.t = START; clock.t <= end; clock.t += S) {
        if (clock.t >= due) {
          const outcome = await reconciler.reconcile(NAME, new AbortController().signal);
          due = clock.t + (outcome?.requeueAfterMs ?? 0);
        }
        const first = world.secretWrites[0];
        if (first === undefined || clock.t < first.at + Math.max(podLag, apiLag)) continue; // node isolation starts once both have it
        const served = (asOf(world.secretWrites, clock.t - podLag) ?? first).contents.data['tls.crt'] ?? '';
        const bundle = Buffer.from(asOf(world.bundleWrites, clock.t - apiLag)?.caBundle ?? '', 'base64').toString();
        const key = `${served}|${bundle}`;
        if (!verdicts.has(key)) {
          const cert = new X509Certificate(served);
          verdicts.set(key, leafInfo(cert, undefined, splitPemBundle(bundle)).issuer);
        }
        const leaf = new X509Certificate(served);
        expect({ t: (clock.t - START) / S, trusted: verdicts.get(key) !== undefined }).toEqual({
          t: (clock.t - START) / S,
          trusted: true,
        });
        expect(leaf.validToDate.getTime()).toBeGreaterThan(clock.t);
        expect(leaf.validFromDate.getTime()).toBeLessThanOrEqual(clock.t);
        checked++;
      }
      expect(checked).toBeGreaterThan(500);
      // Bootstrap + a next CA in each of two rotations; serving certificates every 40 s or so.
      expect(hooks.ca).toBeGreaterThanOrEqual(3);
      expect(hooks.serving).toBeGreaterThanOrEqual(12);
      // The bundle never grows: a retired CA expires before the next CA after its successor is
      // due (2/3 of a CA lifetime), so at most two CAs are trusted at once.
      for (const w of world.bundleWrites) {
        expect(splitPemBundle(Buffer.from(w.caBundle, 'base64').toString()).length).toBeLessThanOrEqual(2);
      }
    },
  );

  it('writes nothing for an up-to-date pair and a configuration already trusting it', async () => {
    const clock = manualClock();
    const world = new World(clock);
    const { reconciler } = reconcilerFor(world, clock);
    await reconciler.reconcile(NAME, new AbortController().signal);
    const writes = world.secretWrites.length + world.bundleWrites.length;
    expect(writes).toBe(2);
    clock.t += 5 * S;
    const outcome = await reconciler.reconcile(NAME, new AbortController().signal);
    expect(world.secretWrites.length + world.bundleWrites.length).toBe(writes);
    // Due again when the certificate reaches 2/3 of its lifetime.
    expect(outcome?.requeueAfterMs).toBeGreaterThan(30 * S);
    expect(outcome?.requeueAfterMs).toBeLessThanOrEqual(40 * S);
  });

  it('carries on with the CA of a Secret seeded from the Helm-generated one (no new CA, caBundle unchanged)', async () => {
    const clock = manualClock();
    const seedWorld = new World(clock);
    await reconcilerFor(seedWorld, clock).reconciler.reconcile(NAME, new AbortController().signal);
    // What the chart seeds: the four keys, no annotations of the operator's.
    const seeded = seedWorld.secret?.data ?? {};
    const world = new World(clock);
    world.secret = { data: { ...seeded }, annotations: {}, resourceVersion: '7' };
    world.config = configuration(GOOD, Buffer.from(seeded['ca.crt'] ?? '').toString('base64'));
    const { reconciler, hooks } = reconcilerFor(world, clock);
    clock.t += 5 * S;
    await reconciler.reconcile(NAME, new AbortController().signal);
    expect(hooks.ca + hooks.serving).toBe(0);
    expect(world.bundleWrites).toEqual([]);
  });

  it('issues nothing for a labelled configuration that does not say for what, and says so once', async () => {
    const clock = manualClock();
    const world = new World(clock, { [SECRET_ANNOTATION]: 'not a reference' });
    const { reconciler, log } = reconcilerFor(world, clock);
    await reconciler.reconcile(NAME, new AbortController().signal);
    await reconciler.reconcile(NAME, new AbortController().signal);
    expect(world.secretWrites).toEqual([]);
    const errors = log.lines().filter((l) => l.level === 'error');
    expect(errors).toHaveLength(1);
    expect(errors[0]?.errors).toEqual([
      'isolation.kubeplus.io/certificates-secret must be <namespace>/<name>, got "not a reference"',
      'isolation.kubeplus.io/certificates-dns-names (or isolation.kubeplus.io/certificates-ip-addresses) must name at least one host',
    ]);
  });

  it('fails (and is retried) when the Secret does not exist, naming it', async () => {
    const clock = manualClock();
    const world = new World(clock);
    world.secret = undefined;
    const { reconciler } = reconcilerFor(world, clock);
    await expect(reconciler.reconcile(NAME, new AbortController().signal)).rejects.toThrow(
      'Secret kubeplus-isolation/hook-certs (named by webhook configuration kubeplus-isolation-webhook) does not exist',
    );
  });

  it('issues the serving certificate for the annotated names, verifiable with the bundle it writes', async () => {
    const clock = manualClock();
    const world = new World(clock);
    await reconcilerFor(world, clock).reconciler.reconcile(NAME, new AbortController().signal);
    const state = readTlsState(world.secret?.data ?? {}, world.secret?.annotations ?? {});
    expect(state.leaf?.dnsNames.sort()).toEqual(['hook', 'hook.kubeplus-isolation.svc']);
    expect(state.leaf?.keyMatches).toBe(true);
    expect(state.leaf?.issuer).toBe(state.signer?.fingerprint);
    expect(trustedByAll(world.config)).toEqual(new Set([state.signer?.fingerprint]));
    const leaf = new X509Certificate(world.secret?.data['tls.crt'] ?? '');
    expect(leaf.ca).toBe(false);
    expect(leaf.keyUsage).toEqual(['1.3.6.1.5.5.7.3.1']); // serverAuth only
  });
});
