/**
 * The tenant-namespace guard in the reconciler (issue 35; the decision itself:
 * packages/spec decideTenantNamespace): a refused namespace is never labelled or annotated, the
 * instance gets one TenantNamespaceRefused Warning per standing condition, the refusal is
 * counted by reason, and keys an older release wrote where they do not belong are removed.
 */
import { beforeEach, describe, expect, it } from '@jest/globals';
import { ConditionWarnings } from '../../../src/controllers/instances/condition-warnings.js';
import { TenantRefusals } from '../../../src/controllers/instances/tenant-refusals.js';
import {
  cluster,
  freshCluster,
  KATA_ENFORCE,
  NODE,
  NODE_SPEC,
  reasons,
  reconciler,
  SANDBOX,
} from './reconciler-harness.js';

beforeEach(freshCluster);

const KUBEPLUS_RELEASE = 'meta.helm.sh/release-name';

function refusalMessages(): string[] {
  return cluster.events.filter((e) => e.reason === 'TenantNamespaceRefused').map((e) => e.message);
}

describe('refusals', () => {
  it.each([
    ['kube-system', 'system-namespace'],
    ['default', 'system-namespace'],
    ['kubeplus-system', 'release-namespace'],
    ['kubeplus', 'platform-namespace'],
  ] as const)(
    'an instance named %s in the platform namespace: refused (%s), nothing written to it',
    async (name, reason) => {
      cluster.putNamespace(name, { keep: 'me' });
      const before = JSON.stringify(cluster.namespaces.get(name));
      const refusals = new TenantRefusals();
      // One memo for every reconcile, as the operator's setup shares it.
      const conditionWarnings = new ConditionWarnings();
      const key = cluster.putInstance({
        name,
        namespace: 'kubeplus',
        annotations: { [NODE]: NODE_SPEC, [SANDBOX]: KATA_ENFORCE },
      });
      const r = () => reconciler({ releaseNamespace: 'kubeplus-system', tenantRefusals: refusals, conditionWarnings });
      await r().reconcile(key);
      await r().reconcile(key);
      expect(JSON.stringify(cluster.namespaces.get(name))).toBe(before);
      expect(cluster.writes.filter((w) => w.op.includes('Namespace'))).toEqual([]);
      // Its sandbox policies would bind that namespace: none is written either.
      expect(cluster.objects.size).toBe(0);
      expect(refusalMessages()).toHaveLength(1); // a standing condition: announced once
      expect(cluster.events.find((e) => e.reason === 'TenantNamespaceRefused')?.type).toBe('Warning');
      expect(refusals.counts()[reason]).toBe(1);
    },
  );

  it('an instance living in a system namespace is refused too', async () => {
    const key = cluster.putInstance({ name: 'x', namespace: 'kube-public', annotations: { [NODE]: NODE_SPEC } });
    await reconciler().reconcile(key);
    expect(refusalMessages()[0]).toContain('lives in namespace kube-public');
  });

  it('an existing namespace not created for the instance: refused, saying what it lacks; isolated once it was created for it', async () => {
    cluster.putNamespace('team-b', { team: 'b' });
    const refusals = new TenantRefusals();
    const key = cluster.putInstance({ name: 'team-b', namespace: 'kubeplus', annotations: { [NODE]: NODE_SPEC } });
    await reconciler({ tenantRefusals: refusals }).reconcile(key);
    expect(cluster.namespaces.get('team-b')?.labels).toEqual({ team: 'b' });
    expect(refusalMessages()[0]).toContain(`${KUBEPLUS_RELEASE}=agent-team-b`);
    expect(refusals.counts()['not-created-for-instance']).toBe(1);
    // Deleted and created again by KubePlus for this instance (its release name, no older than the instance).
    cluster.namespaces.delete('team-b');
    cluster.putNamespace('team-b', {}, { [KUBEPLUS_RELEASE]: '"agent-team-b"' });
    await reconciler({ tenantRefusals: refusals }).reconcile(key);
    expect(cluster.namespaces.get('team-b')?.labels['kubeplus.io/node-isolation-enabled']).toBe('true');
    expect(refusals.counts()['not-created-for-instance']).toBe(0);
  });

  it('a namespace KubePlus stamped that is older than the instance by more than 30 s is refused', async () => {
    cluster.putNamespace('team-b', {}, { [KUBEPLUS_RELEASE]: '"agent-team-b"' }, '2026-11-29T17:59:29Z');
    const key = cluster.putInstance({ name: 'team-b', namespace: 'kubeplus', annotations: { [NODE]: NODE_SPEC } });
    await reconciler().reconcile(key);
    expect(cluster.namespaces.get('team-b')?.labels).toEqual({});
    expect(refusalMessages()[0]).toContain('existed before');
  });

  it('a refused instance forgotten on deletion: the gauge drops it', async () => {
    const refusals = new TenantRefusals();
    const key = cluster.putInstance({ name: 'kube-system', namespace: 'kubeplus', annotations: { [NODE]: NODE_SPEC } });
    await reconciler({ tenantRefusals: refusals }).reconcile(key);
    expect(refusals.counts()['system-namespace']).toBe(1);
    cluster.deleteInstance(key);
    await reconciler({ tenantRefusals: refusals }).reconcile(key);
    await reconciler({ tenantRefusals: refusals }).reconcile(key);
    expect(cluster.instance(key)).toBeUndefined();
    expect(refusals.counts()['system-namespace']).toBe(0);
  });
});

describe('releasing what an older release claimed', () => {
  const owned = (identity: string) => ({
    labels: { 'kubeplus.io/node-isolation-enabled': 'true', 'kubeplus.io/owner-uid': 'u1', team: 'x' },
    annotations: { 'kubeplus.io/node-isolation-resolved': '{}', 'kubeplus.io/owner': identity, keep: 'y' },
  });

  it("the instance's own namespace, claimed while the platform namespace was wrong, is released; its tenant isolated", async () => {
    const { labels, annotations } = owned('cloudark.io/Agent/kubeplus/shop');
    cluster.putNamespace('kubeplus', labels, annotations);
    cluster.putNamespace('shop', {}, { [KUBEPLUS_RELEASE]: '"agent-shop"' });
    const key = cluster.putInstance({ name: 'shop', namespace: 'kubeplus', annotations: { [NODE]: NODE_SPEC } });
    await reconciler().reconcile(key);
    expect(cluster.namespaces.get('kubeplus')?.labels).toEqual({ team: 'x' });
    expect(cluster.namespaces.get('kubeplus')?.annotations).toEqual({ keep: 'y' });
    expect(cluster.namespaces.get('shop')?.labels['kubeplus.io/node-isolation-enabled']).toBe('true');
    expect(reasons()).toContain('TenantNamespaceReleased');
  });

  it('a refused namespace an older release claimed for this instance is released; another instance’s keys are not touched', async () => {
    const { labels, annotations } = owned('cloudark.io/Agent/kubeplus/kube-system');
    cluster.putNamespace('kube-system', labels, annotations);
    const key = cluster.putInstance({ name: 'kube-system', namespace: 'kubeplus', annotations: { [NODE]: NODE_SPEC } });
    await reconciler().reconcile(key);
    expect(cluster.namespaces.get('kube-system')?.labels).toEqual({ team: 'x' });
    // Another instance's claim stays (its own reconcile decides about it).
    const other = owned('cloudark.io/Agent/kubeplus/someone-else');
    cluster.putNamespace('team-z', other.labels, other.annotations);
    const z = cluster.putInstance({ name: 'team-z', namespace: 'kubeplus', annotations: { [NODE]: NODE_SPEC } });
    await reconciler().reconcile(z);
    expect(cluster.namespaces.get('team-z')?.labels).toEqual(other.labels);
  });
});
