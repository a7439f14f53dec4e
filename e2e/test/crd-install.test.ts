/**
 * installCrds (the harness's CRD install, every suite's and the demo's) returns only once what it
 * installed is served. Established is not enough: when a CRD's storage changes, the API server
 * re-creates its storage and, until its cache is filled again, answers requests for the CRD's
 * objects with 429 "storage is (re)initializing". A suite's very next request then failed
 * (agent-sandbox-upgrade.test.ts did, in a fresh-clone `make test`). On the real API server: a
 * test CRD's storage version flipped back and forth, each install followed at once by a list and
 * a create at the new storage version, which must never see a 429.
 */
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { type Cluster, connectE2eCluster, createTestNamespace, installCrds } from '@kubeplus-isolation/e2e';
import { ApiextensionsV1Api, CustomObjectsApi, type V1CustomResourceDefinition } from '@kubernetes/client-node';

const GROUP = 'crd-install.e2e.kubeplus.io';
const PLURAL = 'widgets';
const NAME = `${PLURAL}.${GROUP}`;
const FLIPS = 12;

function widgets(storage: 'v1' | 'v2'): V1CustomResourceDefinition {
  const schema = { openAPIV3Schema: { type: 'object', 'x-kubernetes-preserve-unknown-fields': true } };
  return {
    apiVersion: 'apiextensions.k8s.io/v1',
    kind: 'CustomResourceDefinition',
    metadata: { name: NAME },
    spec: {
      group: GROUP,
      scope: 'Namespaced',
      names: { plural: PLURAL, singular: 'widget', kind: 'Widget', listKind: 'WidgetList' },
      versions: (['v1', 'v2'] as const).map((name) => ({ name, served: true, storage: name === storage, schema })),
    },
  };
}

describe('e2e harness: installCrds returns once the CRD is served', () => {
  let cluster: Cluster;
  let ns: string;
  beforeAll(async () => {
    cluster = await connectE2eCluster();
    ns = await createTestNamespace(cluster.kc, 'e2e-crd-install');
  });
  afterAll(async () => {
    await cluster.kc.makeApiClient(ApiextensionsV1Api).deleteCustomResourceDefinition({ name: NAME });
  });

  test(`a storage version changed ${FLIPS} times: the request right after each install is served, never 429`, async () => {
    const custom = cluster.kc.makeApiClient(CustomObjectsApi);
    const answers: string[] = [];
    for (let i = 0; i < FLIPS; i++) {
      const version = i % 2 === 0 ? 'v2' : 'v1';
      await installCrds(cluster.kc, [widgets(version)]);
      const answer = await Promise.all([
        custom.listNamespacedCustomObject({ group: GROUP, version, plural: PLURAL, namespace: ns }),
        custom.createNamespacedCustomObject({
          group: GROUP,
          version,
          plural: PLURAL,
          namespace: ns,
          body: { apiVersion: `${GROUP}/${version}`, kind: 'Widget', metadata: { name: `w${i}` } },
        }),
      ]).then(
        () => 'served',
        (error: unknown) => `flip ${i} (${version}): ${(error as { code?: number }).code ?? error}`,
      );
      answers.push(answer);
    }
    expect(answers.filter((a) => a !== 'served')).toEqual([]);
  });
});
