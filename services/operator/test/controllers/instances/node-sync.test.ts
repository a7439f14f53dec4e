/**
 * InstanceReconciler, node isolation (node-sync.ts): the namespace label and resolved annotation,
 * conflicts over a namespace, and the admission-policy engine’s NodeIsolation parameter.
 */
import { beforeEach, describe, expect, it } from '@jest/globals';
import type { InstanceReconciler } from '../../../src/controllers/instances/reconciler.js';
import {
  cleanUpOrphans,
  cluster,
  conflicts,
  freshCluster,
  INSTANCE,
  NODE,
  NODE_SPEC,
  RESOLVED,
  reconciler,
  teamA,
} from './reconciler-harness.js';

beforeEach(freshCluster);

describe('acceptance: changes are applied in place', () => {
  it('a changed node isolation rewrites only the resolved annotation', async () => {
    const r = reconciler();
    const key = teamA({ [NODE]: NODE_SPEC });
    await r.reconcile(key);
    const before = cluster.writeCount();
    teamA({ [NODE]: '{"nodeSelector":{"pool":"b"}}' });
    await r.reconcile(key);
    expect(cluster.writes.slice(before)).toEqual([{ op: 'patchNamespace', target: 'team-a' }]);
    expect(cluster.namespaces.get('team-a')?.annotations['kubeplus.io/node-isolation-resolved']).toBe(
      '{"nodeSelector":{"pool":"b"},"tolerations":[]}',
    );
  });
});

describe('conflicts with other instances', () => {
  it('a namespace another instance isolates: Warning Event, no takeover', async () => {
    const r = reconciler();
    await r.reconcile(cluster.putInstance({ name: 'first', namespace: 'team-a', annotations: { [NODE]: NODE_SPEC } }));
    const second = cluster.putInstance({
      name: 'second',
      namespace: 'team-a',
      annotations: { [NODE]: '{"nodeSelector":{"x":"y"}}' },
    });
    const result = await r.reconcile(second);
    expect(result.requeueAfterMs).toBe(60_000);
    expect(cluster.namespaces.get('team-a')?.annotations['kubeplus.io/node-isolation-resolved']).toBe(RESOLVED);
    expect(cluster.events.at(-1)).toMatchObject({ type: 'Warning', reason: 'NodeIsolationConflict' });
  });
});

describe('the admission-policy engine’s NodeIsolation parameter (nodeIsolationParams)', () => {
  const PARAMS = 'NodeIsolation';
  const withParams = (): InstanceReconciler => reconciler({ nodeIsolationParams: true });

  it('is written into the isolated namespace with the canonical mandate and the owner markers; an up-to-date instance costs no write', async () => {
    const key = teamA({ [NODE]: NODE_SPEC });
    await withParams().reconcile(key);
    const param = cluster.stored(PARAMS, 'node-isolation', 'team-a');
    expect(param).toMatchObject({
      apiVersion: 'isolation.kubeplus.io/v1alpha1',
      kind: 'NodeIsolation',
      metadata: {
        name: 'node-isolation',
        namespace: 'team-a',
        labels: { 'app.kubernetes.io/managed-by': 'kubeplus-isolation' },
        annotations: { 'kubeplus.io/owner': `cloudark.io/Agent/team-a/${INSTANCE}` },
      },
      spec: JSON.parse(RESOLVED),
    });
    const writes = cluster.writeCount();
    await withParams().reconcile(key);
    expect(cluster.writeCount()).toBe(writes);
  });

  it('is written before the label goes on an existing namespace (no window in which the policy selects it without its parameter)', async () => {
    const key = teamA({ [NODE]: NODE_SPEC });
    await withParams().reconcile(key);
    const order = cluster.writes.map((w) => `${w.op} ${w.target}`);
    const param = order.findIndex((w) => w.includes('NodeIsolation'));
    const label = order.findIndex((w) => w.startsWith('patchNamespace'));
    expect({ param: param >= 0, label: label >= 0 }).toEqual({ param: true, label: true });
    expect(param).toBeLessThan(label);
  });

  // Refusal mode (issue 38) refuses every Pod of a labelled namespace without its parameter
  // (parameterNotFoundAction Deny): the label must go before the parameter, whichever way.
  const labelGoesBeforeParam = (since: number): void => {
    const order = cluster.writes.slice(since).map((w) => `${w.op} ${w.target}`);
    const param = order.findIndex((w) => w.includes('NodeIsolation'));
    const label = order.findIndex((w) => w.startsWith('patchNamespace'));
    expect({ param: param >= 0, label: label >= 0 }).toEqual({ param: true, label: true });
    expect(label).toBeLessThan(param);
  };

  it('is deleted only after the label went, when the annotation is removed', async () => {
    const key = teamA({ [NODE]: NODE_SPEC });
    await withParams().reconcile(key);
    const since = cluster.writeCount();
    teamA({});
    await withParams().reconcile(key);
    labelGoesBeforeParam(since);
  });

  it('is deleted only after the label went, when the instance is deleted', async () => {
    const key = teamA({ [NODE]: NODE_SPEC });
    await withParams().reconcile(key);
    const since = cluster.writeCount();
    cluster.deleteInstance(key);
    await cleanUpOrphans({ nodeIsolationParams: true });
    labelGoesBeforeParam(since);
  });

  it('follows a changed mandate, stays while the annotation is invalid, and goes with the annotation', async () => {
    const key = teamA({ [NODE]: NODE_SPEC });
    await withParams().reconcile(key);
    teamA({ [NODE]: JSON.stringify({ nodeSelector: { pool: 'other' } }) });
    await withParams().reconcile(key);
    expect(cluster.stored(PARAMS, 'node-isolation', 'team-a')?.spec).toEqual({
      nodeSelector: { pool: 'other' },
      tolerations: [],
    });
    teamA({ [NODE]: '{"nodeSelector": 5}' });
    await withParams().reconcile(key);
    expect(cluster.stored(PARAMS, 'node-isolation', 'team-a')?.spec).toEqual({
      nodeSelector: { pool: 'other' },
      tolerations: [],
    });
    teamA({});
    await withParams().reconcile(key);
    expect(cluster.stored(PARAMS, 'node-isolation', 'team-a')).toBeUndefined();
  });

  it('is deleted with the instance, and never written without the engine', async () => {
    const key = teamA({ [NODE]: NODE_SPEC });
    await withParams().reconcile(key);
    cluster.deleteInstance(key);
    await cleanUpOrphans({ nodeIsolationParams: true });
    expect(cluster.storedOfKind(PARAMS)).toEqual([]);
    const other = teamA({ [NODE]: NODE_SPEC });
    await reconciler().reconcile(other);
    expect(cluster.storedOfKind(PARAMS)).toEqual([]);
  });

  it('is not written into a namespace another instance isolates', async () => {
    cluster.putInstance({ name: 'first', namespace: 'team-a', annotations: { [NODE]: NODE_SPEC } });
    await withParams().reconcile(
      cluster.putInstance({ name: 'first', namespace: 'team-a', annotations: { [NODE]: NODE_SPEC } }),
    );
    const second = teamA({ [NODE]: JSON.stringify({ nodeSelector: { pool: 'mine' } }) });
    await withParams().reconcile(second);
    expect(cluster.storedOfKind(PARAMS).map((p) => p.metadata.annotations?.['kubeplus.io/owner'])).toEqual([
      'cloudark.io/Agent/team-a/first',
    ]);
    expect(cluster.stored(PARAMS, 'node-isolation', 'team-a')?.spec).toEqual(JSON.parse(RESOLVED));
  });

  it('a parameter someone else wrote is not taken over: Warning Event, conflict metric, requeue', async () => {
    cluster.putNamespace('team-a');
    const theirs = {
      apiVersion: 'isolation.kubeplus.io/v1alpha1',
      kind: 'NodeIsolation' as const,
      metadata: { name: 'node-isolation', namespace: 'team-a' },
      spec: { nodeSelector: { pool: 'theirs' } },
    };
    await cluster.createObject(theirs);
    const result = await withParams().reconcile(teamA({ [NODE]: NODE_SPEC }));
    expect(result.requeueAfterMs).toBe(60_000);
    expect(cluster.stored(PARAMS, 'node-isolation', 'team-a')?.spec).toEqual(theirs.spec);
    const warning = cluster.events.find((e) => e.reason === 'NodeIsolationConflict');
    expect(warning?.type).toBe('Warning');
    expect(warning?.message).toContain('NodeIsolation/team-a/node-isolation belongs to');
    expect(conflicts.map(([c]) => c)).toContain('Namespace');
  });
});
