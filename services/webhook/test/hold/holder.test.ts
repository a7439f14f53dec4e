import { afterEach, describe, expect, it, jest } from '@jest/globals';
import { parseAdmissionReview } from '../../src/admission/review.js';
import { holdAdmit } from '../../src/hold/hold-admit.js';
import { Holder, type HoldOutcome, holdRefusalMessage } from '../../src/hold/holder.js';
import { holdVerdict, SettleCache, settleViewOf, slimKubePlusNamespace } from '../../src/hold/settle-cache.js';
import { decodePatch, review, TEAM_A_ANNOTATION } from '../helpers/fixtures.js';

const NOW = Date.parse('2026-12-07T02:00:00Z');
const WINDOW = 300_000;

function kubeplusNamespace(
  name: string,
  o: { settled?: boolean; release?: boolean; ageMs?: number; isolated?: boolean; rv?: string } = {},
) {
  const labels: Record<string, string> = { managedby: 'kubeplus', 'kubernetes.io/metadata.name': name, other: 'x' };
  if (o.settled) labels['kubeplus.io/isolation-settled'] = 'true';
  if (o.isolated) labels['kubeplus.io/node-isolation-enabled'] = 'true';
  const annotations: Record<string, string> = { unrelated: 'y'.repeat(1000) };
  if (o.release ?? true) annotations['meta.helm.sh/release-name'] = '"agent-t1"';
  if (o.isolated) annotations['kubeplus.io/node-isolation-resolved'] = TEAM_A_ANNOTATION;
  return {
    metadata: {
      name,
      resourceVersion: o.rv ?? '1',
      creationTimestamp: new Date(NOW - (o.ageMs ?? 1_000)).toISOString(),
      labels,
      annotations,
    },
  };
}

const podRequest = (namespace: string, dryRun = false) => {
  const parsed = parseAdmissionReview(review({ namespace, dryRun }));
  if (!parsed.ok) throw new Error(parsed.message);
  return parsed.request;
};

const sandboxRequest = (namespace: string) => {
  const parsed = parseAdmissionReview(
    review({
      namespace,
      kind: { group: 'agents.x-k8s.io', version: 'v1beta1', kind: 'Sandbox' },
      resource: { group: 'agents.x-k8s.io', version: 'v1beta1', resource: 'sandboxes' },
      object: { apiVersion: 'agents.x-k8s.io/v1beta1', kind: 'Sandbox', metadata: { name: 's' } },
    }),
  );
  if (!parsed.ok) throw new Error(parsed.message);
  return parsed.request;
};

describe('settle view and verdict (pure)', () => {
  it('keeps only what the hold reads', () => {
    const slim = slimKubePlusNamespace(kubeplusNamespace('t1', { isolated: true }));
    expect(slim.metadata.labels).toEqual({ managedby: 'kubeplus', 'kubeplus.io/node-isolation-enabled': 'true' });
    expect(slim.metadata.annotations).toEqual({
      'kubeplus.io/node-isolation-resolved': TEAM_A_ANNOTATION,
      'meta.helm.sh/release-name': '',
    });
    expect(slim.metadata.creationTimestamp).toBeDefined();
  });

  it.each([
    [{}, 'hold'],
    [{ settled: true }, 'settled'],
    [{ release: false }, 'not_release'],
    [{ ageMs: WINDOW }, 'too_old'],
    [{ ageMs: WINDOW - 1 }, 'hold'],
  ] as const)('%j → %s', (o, verdict) => {
    expect(holdVerdict(settleViewOf(slimKubePlusNamespace(kubeplusNamespace('t', o))), NOW, WINDOW)).toBe(verdict);
  });

  it('a namespace without a readable creationTimestamp is never held', () => {
    const ns = kubeplusNamespace('t');
    ns.metadata.creationTimestamp = 'yesterday';
    expect(holdVerdict(settleViewOf(ns), NOW, WINDOW)).toBe('too_old');
  });
});

describe('Holder', () => {
  jest.useFakeTimers({ now: NOW, doNotFake: ['performance'] });
  const outcomes: HoldOutcome[] = [];
  const make = (o: { maxHeld?: number; timeoutMs?: number } = {}) => {
    const cache = new SettleCache();
    const holder = new Holder(cache, {
      timeoutMs: o.timeoutMs ?? 25_000,
      windowMs: WINDOW,
      maxHeld: o.maxHeld ?? 4,
      now: () => Date.now(),
      onOutcome: (outcome) => outcomes.push(outcome),
    });
    return { cache, holder };
  };
  afterEach(() => {
    outcomes.length = 0;
  });

  it('answers at once (no Promise) for a settled, unstamped or old namespace, and a dry run', () => {
    const { cache, holder } = make();
    cache.upsert(kubeplusNamespace('settled', { settled: true }));
    cache.upsert(kubeplusNamespace('plain', { release: false }));
    cache.upsert(kubeplusNamespace('old', { ageMs: 3_600_000 }));
    cache.upsert(kubeplusNamespace('young'));
    for (const ns of ['settled', 'plain', 'old']) expect(holder.admit(ns, false)).not.toBeInstanceOf(Promise);
    expect(holder.admit('young', true)).not.toBeInstanceOf(Promise);
    expect(outcomes).toEqual(['settled', 'not_release', 'too_old', 'dry_run']);
    expect(holder.held).toBe(0);
  });

  it('holds a young stamped namespace until the event that settles it, then answers with that view', async () => {
    const { cache, holder } = make();
    cache.upsert(kubeplusNamespace('t1'));
    const pending = holder.admit('t1', false);
    expect(pending).toBeInstanceOf(Promise);
    expect(holder.held).toBe(1);
    cache.upsert(kubeplusNamespace('t1', { isolated: true, rv: '2' })); // labeled, not settled: still held
    expect(holder.held).toBe(1);
    cache.upsert(kubeplusNamespace('t1', { isolated: true, settled: true, rv: '3' }));
    const answer = await pending;
    expect(answer).toMatchObject({ kind: 'proceed', outcome: 'released' });
    expect(answer.kind === 'proceed' && answer.view?.isolation?.state).toBe('valid');
    expect(holder.held).toBe(0);
  });

  it('holds a namespace the informer has not delivered yet, until it is delivered settled', async () => {
    const { cache, holder } = make();
    const pending = holder.admit('late', false);
    cache.upsert(kubeplusNamespace('late', { settled: true }));
    await expect(pending).resolves.toMatchObject({ kind: 'proceed', outcome: 'released' });
  });

  it('refuses with the exact retryable message when the hold times out', async () => {
    const { cache, holder } = make({ timeoutMs: 1_000 });
    cache.upsert(kubeplusNamespace('t2'));
    const pending = holder.admit('t2', false);
    jest.advanceTimersByTime(1_000);
    await expect(pending).resolves.toEqual({
      kind: 'refuse',
      outcome: 'timeout',
      message:
        'namespace t2 is not yet settled by kubeplus-isolation (its isolation is not yet in effect); the request can be retried',
    });
    expect(holder.held).toBe(0);
  });

  it('refuses at once beyond maxHeld, and refuses every held request at shutdown', async () => {
    const { cache, holder } = make({ maxHeld: 2 });
    cache.upsert(kubeplusNamespace('t3'));
    const a = holder.admit('t3', false);
    const b = holder.admit('t3', false);
    expect(holder.admit('t3', false)).toEqual({
      kind: 'refuse',
      outcome: 'over_capacity',
      message: holdRefusalMessage('t3', 'over_capacity'),
    });
    holder.close();
    await expect(a).resolves.toMatchObject({ kind: 'refuse', outcome: 'shutdown' });
    await expect(b).resolves.toMatchObject({ kind: 'refuse', outcome: 'shutdown' });
    expect(holder.admit('t3', false)).toMatchObject({ kind: 'refuse', outcome: 'shutdown' });
  });

  it('a held request ends when the namespace is gone or loses its release name', async () => {
    const { cache, holder } = make();
    cache.upsert(kubeplusNamespace('gone'));
    cache.upsert(kubeplusNamespace('unstamped'));
    const gone = holder.admit('gone', false);
    const unstamped = holder.admit('unstamped', false);
    cache.remove({ metadata: { name: 'gone' } });
    cache.upsert(kubeplusNamespace('unstamped', { release: false, rv: '2' }));
    await expect(gone).resolves.toMatchObject({ kind: 'proceed', outcome: 'namespace_gone' });
    await expect(unstamped).resolves.toMatchObject({ kind: 'proceed', outcome: 'released_not_held' });
  });

  it('--hold-timeout=0 never holds', () => {
    const { cache, holder } = make({ timeoutMs: 0 });
    cache.upsert(kubeplusNamespace('t4'));
    expect(holder.admit('t4', false)).toMatchObject({ kind: 'proceed', outcome: 'disabled' });
  });
});

describe('holdAdmit', () => {
  jest.useFakeTimers({ now: NOW, doNotFake: ['performance'] });
  const make = () => {
    const cache = new SettleCache();
    return {
      cache,
      holder: new Holder(cache, { timeoutMs: 1_000, windowMs: WINDOW, maxHeld: 8, now: () => Date.now() }),
    };
  };

  it('a released Pod gets the placement its namespace carries now', async () => {
    const { cache, holder } = make();
    cache.upsert(kubeplusNamespace('t5'));
    const pending = holdAdmit(podRequest('t5'), holder);
    cache.upsert(kubeplusNamespace('t5', { isolated: true, settled: true, rv: '2' }));
    const outcome = await pending;
    expect(outcome.result).toBe('patched');
    expect(decodePatch(outcome.review.response.patch ?? '')).toEqual(
      expect.arrayContaining([expect.objectContaining({ path: '/spec/nodeSelector' })]),
    );
  });

  it('a released Pod of a namespace without node isolation is admitted unchanged, without a warning', async () => {
    const { cache, holder } = make();
    cache.upsert(kubeplusNamespace('t6'));
    const pending = holdAdmit(podRequest('t6'), holder);
    cache.upsert(kubeplusNamespace('t6', { settled: true, rv: '2' }));
    const outcome = await pending;
    expect(outcome.result).toBe('unchanged');
    expect(outcome.review.response).toEqual({ uid: expect.any(String), allowed: true });
  });

  it('a Sandbox held past the timeout is refused with 403 and the message', async () => {
    const { cache, holder } = make();
    cache.upsert(kubeplusNamespace('t7'));
    const pending = holdAdmit(sandboxRequest('t7'), holder);
    jest.advanceTimersByTime(1_000);
    const outcome = await pending;
    expect(outcome.result).toBe('refused');
    expect(outcome.review.response).toEqual({
      uid: expect.any(String),
      allowed: false,
      status: { code: 403, reason: 'Forbidden', message: holdRefusalMessage('t7', 'timeout') },
    });
  });

  it('anything but a Pod or Sandbox CREATE is skipped at once', () => {
    const { holder } = make();
    const parsed = parseAdmissionReview(review({ namespace: 't8', operation: 'UPDATE' }));
    if (!parsed.ok) throw new Error(parsed.message);
    expect(holdAdmit(parsed.request, holder)).toMatchObject({ result: 'skipped' });
  });
});

describe('holdAdmit: SandboxTemplates are held too', () => {
  it('a SandboxTemplate CREATE in an unsettled namespace is held', () => {
    const cache = new SettleCache();
    const holder = new Holder(cache, { timeoutMs: 1_000, windowMs: WINDOW, maxHeld: 8, now: () => NOW });
    cache.upsert(kubeplusNamespace('t9'));
    const parsed = parseAdmissionReview(
      review({
        namespace: 't9',
        kind: { group: 'extensions.agents.x-k8s.io', version: 'v1alpha1', kind: 'SandboxTemplate' },
        resource: { group: 'extensions.agents.x-k8s.io', version: 'v1alpha1', resource: 'sandboxtemplates' },
        object: { kind: 'SandboxTemplate', metadata: { name: 't' } },
      }),
    );
    if (!parsed.ok) throw new Error(parsed.message);
    expect(holdAdmit(parsed.request, holder)).toBeInstanceOf(Promise);
    holder.close();
  });
});
