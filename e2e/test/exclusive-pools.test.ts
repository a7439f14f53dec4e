/**
 * Exclusive pools (issue 38), on the real API server: the real operator (`--exclusive-pools`)
 * writes every isolated namespace's pool into the ExclusivePools parameter, and the chart's
 * ValidatingAdmissionPolicy (deploy/kubeplus-isolation/files/exclusive-pools.yaml, bound as the
 * chart binds it) keeps every other namespace's Pods from selecting the pool's labels or
 * tolerating its taints.
 *
 * - Deny: a foreign Pod (from a namespace without isolation, and from another isolated tenant's)
 *   with the pool's nodeSelector, with `{operator: Exists}`, with an Exists on the taint key, with a
 *   required node-affinity term → refused, with a message naming what reaches the pool; the owner's
 *   Pods, Pods in an exempt namespace and Pods reaching no pool are admitted;
 * - spec.nodeName (a Pod that skips the scheduler and its taint check): a foreign Pod naming a node
 *   labelled with a pool's selector is refused (Deny) or warned about (Warn); the owner's is
 *   admitted; once the node is relabelled out of the pool (the operator rewrites the parameter
 *   from its Node cache) the same Pod is admitted;
 * - UPDATE judges only what it adds: a Pod admitted before its toleration reached any pool keeps
 *   being updated; adding a reaching toleration is refused;
 * - Warn (the chart's default actions, with Audit): the same Pod is admitted with the message as a
 *   Warning;
 * - the parameter follows the mandates: an instance's annotation changed (the old pool is free,
 *   the new one exclusive) and removed (its pool is free again);
 * - overlapping mandates (both pools tainted `dedicated`, one mandate tolerating the key with
 *   Exists): what a tenant's own mandate prescribes is not refused, anything beyond it is, and the
 *   operator reports the overlap with an ExclusivePoolsOverlap Warning Event on both instances;
 * - the chart's tamper guard: a tenant user whom RBAC lets write ExclusivePools can neither edit,
 *   delete nor plant one; an admin's edit is put back by the operator.
 */
import { join } from 'node:path';
import { isDeepStrictEqual } from 'node:util';
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { FAKE_NODE_LABEL, isApiStatus, loadKubeConfig, testPod, waitFor } from '@kubeplus-isolation/e2e';
import { NODE_ISOLATION_ANNOTATION } from '@kubeplus-isolation/spec';
import {
  CoreV1Api,
  CustomObjectsApi,
  type KubeConfig,
  RbacAuthorizationV1Api,
  type V1Pod,
} from '@kubernetes/client-node';
import {
  createPod,
  EXCLUSIVE_POOLS,
  type ExclusivePoolsInstall,
  type ExclusivePoolsParam,
  installExclusivePools,
  installExclusivePoolsGuard,
  type PodAdmission,
  patchPod,
  readExclusivePools,
} from './support/exclusive-pools.js';
import { uniqueName } from './support/names.js';
import { createAgent, mergePatch, patchAgent, statusMessage, waitForEvent } from './support/operator.js';
import { operatorSuite } from './support/operator-suite.js';

const mandate = (pool: string, taintKey = 'dedicated') => ({
  nodeSelector: { pool },
  tolerations: [{ key: taintKey, operator: 'Equal', value: pool, effect: 'NoSchedule' }],
});
const REFUSAL = /reaches a node pool that node isolation reserves for another namespace/;

const pod = (name: string, spec: Partial<NonNullable<V1Pod['spec']>>): V1Pod => testPod(name, spec);
const affinityTo = (key: string, value: string): Partial<NonNullable<V1Pod['spec']>> => ({
  affinity: {
    nodeAffinity: {
      requiredDuringSchedulingIgnoredDuringExecution: {
        nodeSelectorTerms: [{ matchExpressions: [{ key, operator: 'In', values: [value, 'elsewhere'] }] }],
      },
    },
  },
});

function refused(a: PodAdmission): string {
  if (a.allowed) throw new Error(`expected a refusal, the Pod was admitted (warnings: ${JSON.stringify(a.warnings)})`);
  expect(a.code).toBe(403);
  expect(a.message).toMatch(REFUSAL);
  return a.message;
}
function admitted(a: PodAdmission): string[] {
  if (!a.allowed) throw new Error(`expected the Pod admitted, it was refused: ${a.message}`);
  return a.warnings;
}

describe('exclusive pools: no Pod outside the owning namespace reaches a pool, on the real API server', () => {
  let policy: ExclusivePoolsInstall | undefined;
  let exempt = '';
  const suite = operatorSuite({
    name: 'op-xp',
    args: ['--exclusive-pools=true'],
    beforeOperator: async (s) => {
      exempt = await s.tenantNamespace('kpi-xp-exempt');
      policy = await installExclusivePools(s.kc, ['Deny'], [exempt]);
    },
    afterTeardown: async () => {
      await policy?.uninstall();
    },
  });
  let kc: KubeConfig;
  const poolA = uniqueName('pool-a');
  const poolB = uniqueName('pool-b');
  let teamA = '';
  let teamB = '';
  let outsider = '';

  const waitForParam = (what: string, ok: (p: ExclusivePoolsParam | undefined) => boolean) =>
    waitFor(
      `ExclusivePools ${what}`,
      async (observe) => {
        const p = await readExclusivePools(kc);
        observe(p?.spec ?? 'absent');
        return ok(p) ? { p } : undefined;
      },
      { timeoutMs: 30_000 },
    );
  const ownersOf = (p: ExclusivePoolsParam | undefined, pool: string): string[] | undefined =>
    p?.spec?.selectors?.[`pool=${pool}`]?.[0]?.owners;
  /** The policy reads its parameter from an informer: wait until a dry-run sees the pool. */
  const waitForRefusal = (namespace: string, spec: Partial<NonNullable<V1Pod['spec']>>) =>
    waitFor(
      `a dry-run Pod in ${namespace} to be refused`,
      async (observe) => {
        const a = await createPod(kc, namespace, pod('probe', spec), true);
        observe(a.allowed ? 'admitted' : a.message);
        return a.allowed ? undefined : a;
      },
      { timeoutMs: 30_000 },
    );

  beforeAll(async () => {
    kc = suite.kc;
    teamA = await suite.tenantNamespace('kpi-xp-team-a');
    teamB = await suite.tenantNamespace('kpi-xp-team-b');
    outsider = await suite.tenantNamespace('kpi-xp-outsider');
    await createAgent(kc, teamA, 'team-a', { [NODE_ISOLATION_ANNOTATION]: JSON.stringify(mandate(poolA)) });
    await createAgent(kc, teamB, 'team-b', { [NODE_ISOLATION_ANNOTATION]: JSON.stringify(mandate(poolB)) });
  });

  afterAll(async () => {
    await policy?.setActions(['Deny']).catch(() => undefined);
  });

  test('the operator writes every isolated namespace’s pool into the parameter', async () => {
    const { p } = await waitForParam(
      'to hold both tenants’ pools',
      (x) => isDeepStrictEqual(ownersOf(x, poolA), [teamA]) && isDeepStrictEqual(ownersOf(x, poolB), [teamB]),
    );
    expect(p?.spec?.selectors?.[`pool=${poolA}`]).toEqual([{ selector: { pool: poolA }, owners: [teamA] }]);
    expect(p?.spec?.taints).toHaveProperty('dedicated');
  });

  test('Deny: a foreign Pod from a namespace without isolation is refused, whichever way it reaches the pool', async () => {
    await waitForRefusal(outsider, { nodeSelector: { pool: poolA } });
    const bySelector = refused(await createPod(kc, outsider, pod('by-selector', { nodeSelector: { pool: poolA } })));
    expect(bySelector).toContain(`nodeSelector pool=${poolA}`);
    // The issue's Pod: the pool's label and a toleration of every taint.
    const issue = refused(
      await createPod(
        kc,
        outsider,
        pod('issue', { nodeSelector: { pool: poolA }, tolerations: [{ operator: 'Exists' }] }),
      ),
    );
    expect(issue).toContain('toleration {key: "", operator: Exists}');
    refused(await createPod(kc, outsider, pod('any-taint', { tolerations: [{ operator: 'Exists' }] })));
    const byKey = refused(
      await createPod(kc, outsider, pod('by-key', { tolerations: [{ key: 'dedicated', operator: 'Exists' }] })),
    );
    expect(byKey).toContain('toleration {key: "dedicated", operator: Exists}');
    refused(
      await createPod(
        kc,
        outsider,
        pod('by-value', {
          tolerations: [{ key: 'dedicated', operator: 'Equal', value: poolA, effect: 'NoSchedule' }],
        }),
      ),
    );
    const byAffinity = refused(await createPod(kc, outsider, pod('by-affinity', affinityTo('pool', poolA))));
    expect(byAffinity).toContain('required node-affinity term');
    // The message names what reaches, never the owner namespace.
    for (const m of [bySelector, issue, byKey, byAffinity]) expect(m).not.toContain(teamA);

    // Reaching nothing: another value of the key, another effect, an unrelated label.
    admitted(
      await createPod(
        kc,
        outsider,
        pod('elsewhere', {
          nodeSelector: { pool: 'elsewhere' },
          tolerations: [
            { key: 'dedicated', operator: 'Equal', value: 'elsewhere' },
            { key: 'dedicated', operator: 'Exists', effect: 'NoExecute' },
          ],
        }),
      ),
    );
  });

  test('Deny: another isolated tenant’s Pod is refused on team-a’s pool, and admitted on its own', async () => {
    refused(await createPod(kc, teamB, pod('b-exists', { tolerations: [{ operator: 'Exists' }] })));
    refused(await createPod(kc, teamB, pod('b-key', { tolerations: [{ key: 'dedicated', operator: 'Exists' }] })));
    refused(await createPod(kc, teamB, pod('b-selector', { nodeSelector: { pool: poolA } })));
    admitted(await createPod(kc, teamB, pod('b-own', mandate(poolB) as Partial<NonNullable<V1Pod['spec']>>)));
  });

  test('the owner’s Pods and an exempt namespace’s Pods are admitted', async () => {
    admitted(await createPod(kc, teamA, pod('a-own', mandate(poolA) as Partial<NonNullable<V1Pod['spec']>>)));
    admitted(await createPod(kc, teamA, pod('a-affinity', affinityTo('pool', poolA))));
    admitted(
      await createPod(
        kc,
        exempt,
        pod('agent', { nodeSelector: { pool: poolA }, tolerations: [{ operator: 'Exists' }] }),
      ),
    );
  });

  test('spec.nodeName: a foreign Pod naming a pool node is refused (Deny) or warned about (Warn), the owner’s admitted; relabelled out of the pool, the node is free', async () => {
    // A Node object carrying the pool's selector (no kubelet: admission is what is judged, and
    // every Pod here is a dry run, so none is bound to it).
    const core = kc.makeApiClient(CoreV1Api);
    const node = uniqueName('xp-node');
    await core.createNode({ body: { metadata: { name: node, labels: { pool: poolA, [FAKE_NODE_LABEL]: 'true' } } } });
    const onNode = { nodeName: node };
    try {
      await waitForRefusal(outsider, onNode);
      const m = refused(await createPod(kc, outsider, pod('by-node-name', onNode), true));
      expect(m).toContain(`spec.nodeName ${node} is a node of a node pool reserved for another namespace`);
      expect(m).not.toContain(teamA);
      // Another isolated tenant's Pod too; the owner's and an exempt namespace's are admitted.
      refused(await createPod(kc, teamB, pod('b-by-node-name', onNode), true));
      admitted(await createPod(kc, teamA, pod('a-by-node-name', onNode), true));
      admitted(await createPod(kc, exempt, pod('agent-by-node-name', onNode), true));
      // A node in no pool: admitted.
      admitted(await createPod(kc, outsider, pod('no-pool', { nodeName: uniqueName('no-such-node') }), true));

      // Warn + Audit: admitted with the refusal as a Warning.
      await policy?.setActions(['Warn', 'Audit']);
      const warned = await waitFor(
        'the binding to warn about the Pod naming a pool node',
        async (observe) => {
          const a = await createPod(kc, outsider, pod('warned-by-node-name', onNode), true);
          observe(a.allowed ? a.warnings : a.message);
          return a.allowed && a.warnings.length > 0 ? a : undefined;
        },
        { timeoutMs: 30_000 },
      );
      expect(admitted(warned).join('\n')).toContain(`spec.nodeName ${node} is a node of a node pool`);
      await policy?.setActions(['Deny']);
      await waitForRefusal(outsider, onNode);

      // Relabelled out of the pool: the operator rewrites the parameter, the Pod is admitted.
      await core.patchNode({ name: node, body: { metadata: { labels: { pool: 'elsewhere' } } } }, mergePatch);
      await waitForParam('to drop the relabelled node', (x) => x?.spec?.nodes !== undefined && !(node in x.spec.nodes));
      await waitFor(
        'the relabelled node to be free',
        async () => (await createPod(kc, outsider, pod('relabelled', onNode), true)).allowed,
        { timeoutMs: 30_000 },
      );
    } finally {
      await policy?.setActions(['Deny']);
      await core.deleteNode({ name: node }).catch((error: unknown) => {
        if (!isApiStatus(error, 404)) throw error;
      });
    }
  });

  test('UPDATE judges what it adds: a Pod admitted before its toleration reached a pool keeps working; adding a reaching toleration is refused', async () => {
    const lateKey = uniqueName('late').replace(/-/g, '.');
    const early = { key: lateKey, operator: 'Exists', effect: 'NoExecute' };
    const created = admitted(await createPod(kc, outsider, pod('early', { tolerations: [early] })));
    expect(created).toEqual([]);
    // Now a pool is tainted with that key.
    const teamC = await suite.tenantNamespace('kpi-xp-team-c');
    await createAgent(kc, teamC, 'team-c', {
      [NODE_ISOLATION_ANNOTATION]: JSON.stringify({
        nodeSelector: { pool: uniqueName('pool-c') },
        tolerations: [{ key: lateKey, operator: 'Equal', value: 'c', effect: 'NoExecute' }],
      }),
    });
    await waitForRefusal(outsider, { tolerations: [early] });
    // The running Pod is updated (a label) with its old toleration: admitted.
    admitted(await patchPod(kc, outsider, 'early', { metadata: { labels: { touched: 'yes' } } }));
    // Adding a toleration that reaches the pool: refused.
    const current = await kc.makeApiClient(CoreV1Api).readNamespacedPod({ namespace: outsider, name: 'early' });
    const added = refused(
      await patchPod(kc, outsider, 'early', {
        spec: { tolerations: [...(current.spec?.tolerations ?? []), { key: lateKey, operator: 'Equal', value: 'c' }] },
      }),
    );
    expect(added).toContain(`toleration {key: "${lateKey}", operator: Equal, value: "c"}`);
  });

  test('Warn + Audit: the foreign Pod is admitted with the refusal as a Warning', async () => {
    await policy?.setActions(['Warn', 'Audit']);
    const warned = await waitFor(
      'the binding to warn instead of deny',
      async (observe) => {
        const a = await createPod(
          kc,
          outsider,
          pod('warned', { nodeSelector: { pool: poolA }, tolerations: [{ operator: 'Exists' }] }),
          true,
        );
        observe(a.allowed ? a.warnings : a.message);
        return a.allowed && a.warnings.length > 0 ? a : undefined;
      },
      { timeoutMs: 30_000 },
    );
    expect(admitted(warned).join('\n')).toMatch(REFUSAL);
    await policy?.setActions(['Deny']);
    await waitForRefusal(outsider, { nodeSelector: { pool: poolA } });
  });

  test('the parameter follows the mandates: changed (old pool free, new exclusive) and removed (free again)', async () => {
    const poolA2 = uniqueName('pool-a2');
    await patchAgent(kc, teamA, 'team-a', {
      annotations: { [NODE_ISOLATION_ANNOTATION]: JSON.stringify(mandate(poolA2)) },
    });
    await waitForParam(
      'to move team-a to its new pool',
      (x) => ownersOf(x, poolA) === undefined && isDeepStrictEqual(ownersOf(x, poolA2), [teamA]),
    );
    await waitForRefusal(outsider, { nodeSelector: { pool: poolA2 } });
    await waitFor(
      'the old pool to be free',
      async () => (await createPod(kc, outsider, pod('old-pool', { nodeSelector: { pool: poolA } }), true)).allowed,
      { timeoutMs: 30_000 },
    );

    await patchAgent(kc, teamA, 'team-a', { annotations: { [NODE_ISOLATION_ANNOTATION]: null } });
    const { p } = await waitForParam('to drop team-a', (x) => ownersOf(x, poolA2) === undefined);
    expect(ownersOf(p, poolB)).toEqual([teamB]);
    await waitFor(
      'the removed pool to be free',
      async () => (await createPod(kc, outsider, pod('free', { nodeSelector: { pool: poolA2 } }), true)).allowed,
      { timeoutMs: 30_000 },
    );
    // team-b's pool stays exclusive.
    refused(await createPod(kc, outsider, pod('still-b', { nodeSelector: { pool: poolB } }), true));
  });

  test('overlapping mandates: what a tenant’s own mandate prescribes is not refused, anything beyond it is, and the overlap is reported on both instances', async () => {
    // team-b's pool is tainted dedicated=<pool-b>; team-d's mandate tolerates every `dedicated` taint.
    const poolD = uniqueName('pool-d');
    const teamD = await suite.tenantNamespace('kpi-xp-team-d');
    const mandateD = { nodeSelector: { pool: poolD }, tolerations: [{ key: 'dedicated', operator: 'Exists' }] };
    await createAgent(kc, teamD, 'team-d', { [NODE_ISOLATION_ANNOTATION]: JSON.stringify(mandateD) });
    await waitForParam('to hold team-d’s pool', (x) => isDeepStrictEqual(ownersOf(x, poolD), [teamD]));
    await waitForRefusal(outsider, { nodeSelector: { pool: poolD } });
    // Each tenant's Pods carry what its mandate prescribes (the webhook puts it there): admitted.
    admitted(await createPod(kc, teamD, pod('d-own', mandateD as Partial<NonNullable<V1Pod['spec']>>)));
    admitted(await createPod(kc, teamB, pod('b-own-again', mandate(poolB) as Partial<NonNullable<V1Pod['spec']>>)));
    // Beyond the mandate: judged as ever.
    refused(
      await createPod(
        kc,
        teamD,
        pod('d-any', { nodeSelector: { pool: poolD }, tolerations: [...mandateD.tolerations, { operator: 'Exists' }] }),
      ),
    );
    refused(await createPod(kc, teamD, pod('d-b', { nodeSelector: { pool: poolB } })));
    // The same toleration from any other namespace is foreign.
    refused(await createPod(kc, outsider, pod('o-key', { tolerations: [{ key: 'dedicated', operator: 'Exists' }] })));
    // The platform is told, on both instances (each mandate reaches the other's pool).
    const d = await waitForEvent(kc, teamD, 'team-d', 'ExclusivePoolsOverlap');
    expect(d.type).toBe('Warning');
    expect(d.message).toContain(`namespace(s) ${teamB}`);
    const b = await waitForEvent(kc, teamB, 'team-b', 'ExclusivePoolsOverlap');
    expect(b.message).toContain(`namespace(s) ${teamD}`);
  });

  test('the tamper guard: a tenant whom RBAC lets write ExclusivePools cannot edit, delete or plant one; an admin’s edit is put back', async () => {
    const remove = await installExclusivePoolsGuard(suite.cluster, suite.release);
    const user = uniqueName('xp-tenant');
    const rbac = kc.makeApiClient(RbacAuthorizationV1Api);
    const GUARDED = /ExclusivePools \S+ is kubeplus-isolation state: (UPDATE|DELETE|CREATE) is allowed only to/;
    const forbidden = async (what: string, call: () => Promise<unknown>): Promise<string> => {
      try {
        await call();
      } catch (error) {
        if (isApiStatus(error, 403)) return statusMessage(error);
        throw error;
      }
      throw new Error(`the tenant’s ${what} of the ExclusivePools parameter was allowed`);
    };
    try {
      // As if a platform had granted it: the guard, not RBAC, must be what refuses.
      await rbac.createClusterRole({
        body: {
          metadata: { name: user },
          rules: [
            {
              apiGroups: [EXCLUSIVE_POOLS.group],
              resources: [EXCLUSIVE_POOLS.plural],
              verbs: ['get', 'list', 'create', 'update', 'patch', 'delete'],
            },
          ],
        },
      });
      await rbac.createClusterRoleBinding({
        body: {
          metadata: { name: user },
          roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: user },
          subjects: [{ apiGroup: 'rbac.authorization.k8s.io', kind: 'User', name: user }],
        },
      });
      const cluster = suite.cluster;
      const cert = await cluster.issueClientCert(user, ['tenants']);
      const tenant = loadKubeConfig(
        cluster.writeKubeconfig(join(cluster.dir, `${user}.kubeconfig`), user, cert),
      ).makeApiClient(CustomObjectsApi);
      // Freeing every pool (the parameter replaced by one holding none) is what a tenant would try.
      const freed = async () => {
        const current = (await tenant.getClusterCustomObject({ ...EXCLUSIVE_POOLS })) as Record<string, unknown>;
        return { ...current, spec: { namespaces: 0, selectors: {}, taints: {}, anyKey: {}, mandated: {} } };
      };
      // RBAC allows it; the guard is in force once a dry run is refused by it.
      await waitFor(
        'the guard to refuse the tenant’s dry-run edit',
        async (observe) => {
          try {
            await tenant.replaceClusterCustomObject({ ...EXCLUSIVE_POOLS, body: await freed(), dryRun: 'All' });
            observe('allowed');
            return undefined;
          } catch (error) {
            observe(statusMessage(error));
            return isApiStatus(error, 403) && GUARDED.test(statusMessage(error)) ? true : undefined;
          }
        },
        { timeoutMs: 30_000 },
      );
      const body = await freed();
      expect(await forbidden('edit', () => tenant.replaceClusterCustomObject({ ...EXCLUSIVE_POOLS, body }))).toMatch(
        GUARDED,
      );
      expect(
        await forbidden('patch', () =>
          tenant.patchClusterCustomObject({ ...EXCLUSIVE_POOLS, body: { spec: { namespaces: 0 } } }, mergePatch),
        ),
      ).toMatch(GUARDED);
      expect(await forbidden('delete', () => tenant.deleteClusterCustomObject({ ...EXCLUSIVE_POOLS }))).toMatch(
        GUARDED,
      );
      expect(
        await forbidden('plant', () =>
          tenant.createClusterCustomObject({
            ...EXCLUSIVE_POOLS,
            body: {
              apiVersion: `${EXCLUSIVE_POOLS.group}/${EXCLUSIVE_POOLS.version}`,
              kind: 'ExclusivePools',
              metadata: { name: uniqueName('planted') },
              spec: { namespaces: 0, selectors: {}, taints: {}, anyKey: {} },
            },
          }),
        ),
      ).toMatch(GUARDED);
      // The parameter still keeps team-b's pool.
      refused(await createPod(kc, outsider, pod('still-kept', { nodeSelector: { pool: poolB } }), true));

      // An admin may edit it (the guard exempts admins), and the operator puts it back.
      await kc
        .makeApiClient(CustomObjectsApi)
        .patchClusterCustomObject({ ...EXCLUSIVE_POOLS, body: { spec: { namespaces: 999 } } }, mergePatch);
      await waitForParam(
        'the admin’s edit to be put back',
        (x) => x?.spec?.namespaces !== 999 && ownersOf(x, poolB) !== undefined,
      );
    } finally {
      await remove();
      for (const call of [
        () => rbac.deleteClusterRoleBinding({ name: user }),
        () => rbac.deleteClusterRole({ name: user }),
      ]) {
        await call().catch((error: unknown) => {
          if (!isApiStatus(error, 404)) throw error;
        });
      }
    }
  });
});
