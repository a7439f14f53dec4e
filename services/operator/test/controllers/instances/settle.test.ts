/**
 * Settling the tenant namespace (issue 35): the pure plan (desired/settle.ts) and the Settler's
 * I/O (controllers/instances/settle.ts) on the fake cluster, after a real reconcile.
 */
import { beforeEach, describe, expect, it } from '@jest/globals';
import { Settler } from '../../../src/controllers/instances/settle.js';
import { planSettle, probeInEffect, SETTLE_PATCH } from '../../../src/desired/settle.js';
import {
  cluster,
  freshCluster,
  KATA_ADVISORY,
  KATA_ENFORCE,
  NODE,
  NODE_SPEC,
  reconciler,
  SANDBOX,
} from './reconciler-harness.js';

const SETTLED = 'kubeplus.io/isolation-settled';
const KUBEPLUS: Readonly<Record<string, string>> = Object.freeze({ managedby: 'kubeplus' });
/** KubePlus's release-name annotation for the harness's Kind (`Agent`): the namespace was created for instance `name`. */
const createdFor = (name: string) => ({ 'meta.helm.sh/release-name': `"agent-${name}"` });
const NO_LOG = { debug() {}, info() {}, warn() {} };
const settler = () => new Settler({ platformNamespace: 'kubeplus', logger: NO_LOG, probeRetryMs: 100 });
const SANDBOX_KIND = { group: 'agents.x-k8s.io', version: 'v1beta1', kind: 'Sandbox', plural: 'sandboxes' };
const VAP_DENIAL = {
  allowed: false as const,
  code: 422,
  message: `sandboxes.agents.x-k8s.io "p" is forbidden: ValidatingAdmissionPolicy 'kubeplus-isolation-sandbox' with binding 'kubeplus-isolation-sandbox' denied request: the runtime class is unset; this namespace requires a sandbox runtime (kubeplus.io/sandbox-isolation)`,
};
/** A platform's own policy (managed GKE's `secure-sandbox-policy`, imitated): it refuses the probe too, but proves nothing about ours. */
const PLATFORM_DENIAL = {
  allowed: false as const,
  code: 422,
  message: `sandboxes.agents.x-k8s.io "p" is forbidden: ValidatingAdmissionPolicy 'secure-sandbox-policy' with binding 'secure-sandbox-policy-binding' denied request: runtimeClassName must be gvisor`,
};

beforeEach(freshCluster);

describe('planSettle (pure)', () => {
  const instance = (annotations: Record<string, string>) =>
    ({ name: 't1', namespace: 'kubeplus', annotations }) as unknown as Parameters<typeof planSettle>[0]['instance'];
  const ns = (labels: Record<string, string>, annotations: Record<string, string> = {}) => ({
    name: 't1',
    labels,
    annotations,
  });

  it('an instance asking for nothing settles its KubePlus namespace at once', () => {
    expect(
      planSettle({ instance: instance({}), tenant: 't1', namespace: ns(KUBEPLUS), protectedNamespaces: [] }),
    ).toEqual({
      action: 'settle',
      patch: SETTLE_PATCH,
    });
  });

  it.each([
    ['default', 'protected'],
    ['kube-system', 'protected'],
    ['kube-anything', 'protected'],
    ['kubeplus', 'protected'],
  ])('never settles %s', (tenant, reason) => {
    expect(
      planSettle({ instance: instance({}), tenant, namespace: ns(KUBEPLUS), protectedNamespaces: ['kubeplus'] }),
    ).toEqual({ action: 'skip', reason });
  });

  it('skips a namespace not KubePlus’s, one already settled, a missing one, an invalid annotation', () => {
    const p = (namespace: ReturnType<typeof ns> | undefined, a: Record<string, string> = {}) =>
      planSettle({ instance: instance(a), tenant: 't1', namespace, protectedNamespaces: [] });
    expect(p(ns({}))).toEqual({ action: 'skip', reason: 'not-kubeplus' });
    expect(p(ns({ ...KUBEPLUS, [SETTLED]: 'true' }))).toEqual({ action: 'skip', reason: 'settled' });
    expect(p(undefined)).toEqual({ action: 'skip', reason: 'missing' });
    expect(p(ns(KUBEPLUS), { [NODE]: '{' })).toEqual({ action: 'skip', reason: 'invalid-annotation' });
    expect(p(ns(KUBEPLUS), { [SANDBOX]: '{"minRuntimeClass":"nope"}' })).toEqual({
      action: 'skip',
      reason: 'invalid-annotation',
    });
  });

  it('waits for node isolation keys, then probes for a sandbox policy', () => {
    const a = { [NODE]: NODE_SPEC, [SANDBOX]: KATA_ENFORCE };
    const p = (namespace: ReturnType<typeof ns>) =>
      planSettle({ instance: instance(a), tenant: 't1', namespace, protectedNamespaces: [] });
    expect(p(ns(KUBEPLUS))).toEqual({ action: 'wait', reason: 'node-isolation-pending' });
    expect(
      p(
        ns(
          { ...KUBEPLUS, 'kubeplus.io/node-isolation-enabled': 'true' },
          { 'kubeplus.io/node-isolation-resolved': '{}' },
        ),
      ),
    ).toEqual({ action: 'probe', enforce: true, patch: SETTLE_PATCH });
  });

  it('probeInEffect: a ValidatingAdmissionPolicy refusal (enforce), a defaulted runtime class (advisory)', () => {
    expect(probeInEffect(VAP_DENIAL, true, true)).toBe(true);
    expect(probeInEffect({ allowed: true, object: {} }, true, true)).toBe(false);
    expect(probeInEffect({ allowed: false, code: 403, message: 'cannot create resource' }, true, true)).toBe(false);
    expect(probeInEffect({ notServed: true }, true, true)).toBe(true);
    const defaulted = { spec: { podTemplate: { spec: { runtimeClassName: 'kubeplus-sandbox-t1' } } } };
    expect(probeInEffect({ allowed: true, object: defaulted }, false, true)).toBe(true);
    expect(probeInEffect({ allowed: true, object: {} }, false, true)).toBe(false);
    expect(probeInEffect({ allowed: true, object: {} }, false, false)).toBe(true);
  });

  it("probeInEffect: a platform policy's refusal is not proof that the instance's policy is in force (enforce)", () => {
    expect(probeInEffect(PLATFORM_DENIAL, true, true)).toBe(false);
    // Nor a refusal that merely quotes the annotation's key from elsewhere (a webhook, an RBAC message).
    expect(
      probeInEffect(
        {
          allowed: false,
          code: 403,
          message: 'admission webhook "x" denied the request: kubeplus.io/sandbox-isolation',
        },
        true,
        true,
      ),
    ).toBe(false);
  });
});

describe('Settler after a reconcile (fake cluster)', () => {
  it('an instance in its own KubePlus namespace asking for nothing: the namespace is settled', async () => {
    cluster.putNamespace('tenant-x', { ...KUBEPLUS });
    const key = cluster.putInstance({ name: 'x', namespace: 'tenant-x', annotations: {} });
    await reconciler().reconcile(key);
    expect(await settler().settle(cluster, key)).toEqual({});
    expect(cluster.namespaces.get('tenant-x')?.labels[SETTLED]).toBe('true');
  });

  it('a namespace not labeled managedby=kubeplus is never written', async () => {
    const key = cluster.putInstance({ name: 'x', namespace: 'team-a', annotations: {} });
    const before = cluster.writeCount();
    await settler().settle(cluster, key);
    expect(cluster.writeCount()).toBe(before);
  });

  it('a namespace the tenant guard refuses is never settled: one not created for the instance, the release’s own', async () => {
    // KubePlus labels an existing namespace managedby=kubeplus too; this one has no release name of
    // this instance, so the reconciler refuses it (tenant.ts) and the hold must not be ended for it.
    cluster.putNamespace('squat', { ...KUBEPLUS });
    const squat = cluster.putInstance({ name: 'squat', namespace: 'kubeplus', annotations: {} });
    cluster.putNamespace('kpi-system', { ...KUBEPLUS });
    const release = cluster.putInstance({ name: 'x', namespace: 'kpi-system', annotations: {} });
    const before = cluster.writeCount();
    const s = new Settler({ platformNamespace: 'kubeplus', releaseNamespace: 'kpi-system', logger: NO_LOG });
    expect(await s.settle(cluster, squat)).toEqual({});
    expect(await s.settle(cluster, release)).toEqual({});
    expect(cluster.writeCount()).toBe(before);
    expect(cluster.namespaces.get('squat')?.labels[SETTLED]).toBeUndefined();
    expect(cluster.namespaces.get('kpi-system')?.labels[SETTLED]).toBeUndefined();
  });

  it('node isolation and an enforced sandbox policy: settled only once the probe is refused by the policy', async () => {
    cluster.putNamespace('t1', { ...KUBEPLUS }, createdFor('t1'));
    cluster.kinds.push(SANDBOX_KIND);
    const key = cluster.putInstance({
      name: 't1',
      namespace: 'kubeplus',
      annotations: { [NODE]: NODE_SPEC, [SANDBOX]: KATA_ENFORCE },
    });
    await reconciler().reconcile(key);
    cluster.probeAnswers.push({ allowed: true, object: {} }, VAP_DENIAL);
    const s = settler();
    expect(await s.settle(cluster, key)).toEqual({ requeueAfterMs: 100 });
    expect(cluster.namespaces.get('t1')?.labels[SETTLED]).toBeUndefined();
    expect(await s.settle(cluster, key)).toEqual({});
    expect(cluster.namespaces.get('t1')?.labels[SETTLED]).toBe('true');
    expect(cluster.probes).toHaveLength(2);
    expect(cluster.probes[0]).toMatchObject({
      apiVersion: 'agents.x-k8s.io/v1beta1',
      kind: 'Sandbox',
      metadata: { namespace: 't1' },
    });
    // Settled: a later resync costs no probe and no write.
    const writes = cluster.writeCount();
    await s.settle(cluster, key);
    expect(cluster.probes).toHaveLength(2);
    expect(cluster.writeCount()).toBe(writes);
  });

  it('a probe that keeps being admitted is requeued ever later (capped), not every 250 ms', async () => {
    cluster.putNamespace('t3', { ...KUBEPLUS }, createdFor('t3'));
    cluster.kinds.push(SANDBOX_KIND);
    const key = cluster.putInstance({ name: 't3', namespace: 'kubeplus', annotations: { [SANDBOX]: KATA_ENFORCE } });
    await reconciler().reconcile(key);
    const s = settler();
    const delays: (number | undefined)[] = [];
    for (let i = 0; i < 36; i++) {
      cluster.probeAnswers.push({ allowed: true, object: {} });
      delays.push((await s.settle(cluster, key)).requeueAfterMs);
    }
    // 1.25× per probe from 100 ms: fine-grained while the hold still waits, then capped at 30 s.
    expect(delays.slice(0, 6)).toEqual([100, 125, 156, 195, 244, 305]);
    expect(delays.every((d, i) => i === 0 || (d ?? 0) >= (delays[i - 1] ?? 0))).toBe(true);
    expect(delays.slice(-3)).toEqual([30000, 30000, 30000]);
    expect(cluster.namespaces.get('t3')?.labels[SETTLED]).toBeUndefined();
  });

  it('node isolation not written after the reconcile (e.g. refused): not settled, and no requeue', async () => {
    cluster.putNamespace('t4', { ...KUBEPLUS });
    const key = cluster.putInstance({ name: 't4', namespace: 'kubeplus', annotations: { [NODE]: NODE_SPEC } });
    expect(await settler().settle(cluster, key)).toEqual({});
    expect(cluster.namespaces.get('t4')?.labels[SETTLED]).toBeUndefined();
  });

  it('advisory mode waits for the defaulting policy', async () => {
    cluster.putNamespace('t2', { ...KUBEPLUS }, createdFor('t2'));
    cluster.kinds.push(SANDBOX_KIND);
    const key = cluster.putInstance({ name: 't2', namespace: 'kubeplus', annotations: { [SANDBOX]: KATA_ADVISORY } });
    await reconciler().reconcile(key);
    cluster.probeAnswers.push({
      allowed: true,
      object: { spec: { podTemplate: { spec: { runtimeClassName: 'rc' } } } },
    });
    expect(await settler().settle(cluster, key)).toEqual({});
    expect(cluster.namespaces.get('t2')?.labels[SETTLED]).toBe('true');
  });
});
