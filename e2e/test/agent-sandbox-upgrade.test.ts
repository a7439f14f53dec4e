/**
 * Moving a cluster from Agent Sandbox v0.5.x (v1beta1 + the deprecated v1alpha1) to v1.0.x (v1beta1
 * only) with sandbox isolation in force, on the real API server with the real operator, as the
 * chart README's "Agent Sandbox versions" tells a platform team to do it:
 *
 * 1. a cluster whose Sandboxes were once stored at v1alpha1 (`status.storedVersions` lists it, as
 *    on a cluster that ran a release storing v1alpha1) cannot take v1.0's CRDs: the API server
 *    refuses a CRD that drops a stored version;
 * 2. the storage migration (every Sandbox re-written at v1beta1, then `storedVersions` set to
 *    `[v1beta1]`) is admitted by the policies, even for a Sandbox weaker than today's minimum: an
 *    UPDATE that keeps the class and the owners is not judged again;
 * 3. v1.0's CRDs then apply in place; v1alpha1 is gone (404), the existing Sandboxes are kept, and
 *    the same policies, untouched, still refuse a weak Sandbox and admit the tenant's own class.
 *
 * At every step a runc Sandbox is refused at every version served then: there is no ungoverned
 * window. Both releases' CRDs come from their pinned Go modules (e2e/README.md "Agent Sandbox
 * versions"), whichever release this run uses; the run's own CRDs are put back afterwards.
 */
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import {
  installCrds,
  isApiStatus,
  loadCrds,
  sandboxCrdsDir,
  sandboxCrdsDirOf,
  servedSandboxVersions,
} from '@kubeplus-isolation/e2e';
import { SANDBOX_ISOLATION_ANNOTATION } from '@kubeplus-isolation/spec';
import {
  ApiextensionsV1Api,
  CustomObjectsApi,
  type KubeConfig,
  type V1CustomResourceDefinition,
} from '@kubernetes/client-node';
import { uniqueName } from './support/names.js';
import {
  createAgent,
  expectedSandboxObjects,
  runtimeClassName,
  statusMessage,
  waitForOwned,
} from './support/operator.js';
import {
  createSandbox,
  denied,
  expectAllowed,
  getSandbox,
  type SandboxRef,
  type SandboxVersion,
  waitForAdmission,
} from './support/operator-sandbox.js';
import { operatorSuite } from './support/operator-suite.js';

const SANDBOX_CRD = 'sandboxes.agents.x-k8s.io';
const v05 = (): V1CustomResourceDefinition[] => loadCrds(sandboxCrdsDirOf('0.5'));
const v10 = (): V1CustomResourceDefinition[] => loadCrds(sandboxCrdsDirOf(''));

/** v0.5's CRDs, but the Sandbox CRD storing v1alpha1: what a cluster that ran such a release has. */
function storingAlpha(crds: V1CustomResourceDefinition[]): V1CustomResourceDefinition[] {
  return crds.map((crd) =>
    crd.metadata?.name !== SANDBOX_CRD
      ? crd
      : {
          ...crd,
          spec: {
            ...crd.spec,
            versions: crd.spec.versions.map((v) => ({ ...v, storage: v.name === 'v1alpha1' })),
          },
        },
  );
}

/**
 * The chart README's storage migration: v1beta1 storage again (v0.5 as shipped), every Sandbox
 * re-written at v1beta1, then `storedVersions` trimmed to it. Returns how many were re-written.
 */
async function migrateToBetaStorage(kc: KubeConfig): Promise<number> {
  await installCrds(kc, v05());
  const custom = kc.makeApiClient(CustomObjectsApi);
  const all = (await custom.listClusterCustomObject({
    group: 'agents.x-k8s.io',
    version: 'v1beta1',
    plural: 'sandboxes',
  })) as { items: { metadata: { name: string; namespace: string } }[] };
  let rewritten = 0;
  for (const item of all.items) {
    try {
      await custom.replaceNamespacedCustomObject({
        group: 'agents.x-k8s.io',
        version: 'v1beta1',
        plural: 'sandboxes',
        namespace: item.metadata.namespace,
        name: item.metadata.name,
        body: item,
      });
      rewritten++;
    } catch (error) {
      // Another suite's namespace being deleted: its Sandboxes go with it.
      if (!isApiStatus(error, 404) && !isApiStatus(error, 409)) throw error;
    }
  }
  const ext = kc.makeApiClient(ApiextensionsV1Api);
  const crd = await ext.readCustomResourceDefinition({ name: SANDBOX_CRD });
  await ext.replaceCustomResourceDefinitionStatus({
    name: SANDBOX_CRD,
    body: { ...crd, status: { ...crd.status, storedVersions: ['v1beta1'] } } as V1CustomResourceDefinition,
  });
  return rewritten;
}

describe('Agent Sandbox v0.5 → v1.0 with sandbox isolation in force', () => {
  const suite = operatorSuite({ name: 'as-upgrade', waitForServiceAccount: false });
  let kc: KubeConfig;
  beforeAll(() => {
    kc = suite.kc;
  });
  const storedVersions = async (): Promise<string[]> =>
    (await kc.makeApiClient(ApiextensionsV1Api).readCustomResourceDefinition({ name: SANDBOX_CRD })).status
      ?.storedVersions ?? [];
  afterAll(async () => {
    // The run's own release again, for the suites after this one. A test stopped midway can leave
    // v1alpha1 stored, which a release not serving it cannot drop: migrate first, as a user would.
    const own = loadCrds(sandboxCrdsDir());
    const served = new Set(servedSandboxVersions(own));
    if ((await storedVersions()).some((v) => !served.has(v))) await migrateToBetaStorage(kc);
    await installCrds(kc, own);
  });
  /** A runc Sandbox is refused, and the tenant's own class admitted, at every version `versions`. */
  const governed = async (ns: string, own: string, versions: readonly string[], what: string): Promise<void> => {
    for (const version of versions) {
      const ref: SandboxRef = { kind: 'Sandbox', version: version as SandboxVersion, namespace: ns, name: 'probe' };
      await waitForAdmission(kc, ref, 'runc', `a runc Sandbox at ${version} to be refused (${what})`, denied);
      await waitForAdmission(
        kc,
        ref,
        own,
        `the tenant's own class at ${version} to be admitted (${what})`,
        (a) => a.allowed,
      );
    }
  };

  test('stored versions first, then v1.0 in place: the policies refuse a weak Sandbox at every step and need no change', async () => {
    const ns = await suite.tenantNamespace('kpi-as-upgrade');
    const instance = uniqueName('upgrade-agent');
    const own = runtimeClassName(instance);

    // A cluster on v0.5 whose Sandboxes were stored at v1alpha1; one of them weaker than the
    // minimum the namespace gets later (written before it was isolated).
    await installCrds(kc, storingAlpha(v05()));
    expect(servedSandboxVersions(v05())).toEqual(['v1beta1', 'v1alpha1']);
    const legacy = expectAllowed(
      await createSandbox(kc, { kind: 'Sandbox', version: 'v1alpha1', namespace: ns, name: 'legacy-weak' }, 'runc'),
      'a runc Sandbox before the namespace is isolated',
    ).object;
    expect(await storedVersions()).toContain('v1alpha1');

    await createAgent(kc, ns, instance, {
      [SANDBOX_ISOLATION_ANNOTATION]: JSON.stringify({ minRuntimeClass: 'kata', enforce: true }),
    });
    await waitForOwned(kc, instance, expectedSandboxObjects(ns, instance, true));
    await governed(ns, own, ['v1beta1', 'v1alpha1'], 'v0.5, storing v1alpha1');
    const kept = expectAllowed(
      await createSandbox(kc, { kind: 'Sandbox', version: 'v1alpha1', namespace: ns, name: 'kept' }, own),
      "a v1alpha1 Sandbox of the tenant's own class",
    ).object;

    // 1. v1.0's CRDs are refused while v1alpha1 is a stored version.
    const refused = await installCrds(kc, v10()).then(
      () => undefined,
      (error: unknown) => error,
    );
    expect(isApiStatus(refused, 422)).toBe(true);
    expect(statusMessage(refused)).toMatch(/storedVersions/);
    await governed(ns, own, ['v1beta1', 'v1alpha1'], 'after the refused CRD update');

    // 2. The migration (migrateToBetaStorage). The policies admit the re-writes, the weak legacy
    // one included.
    expect(await migrateToBetaStorage(kc)).toBeGreaterThanOrEqual(2);
    expect(await storedVersions()).toEqual(['v1beta1']);
    await governed(ns, own, ['v1beta1', 'v1alpha1'], 'migrated, still v0.5');

    // 3. v1.0 in place: v1alpha1 gone, the Sandboxes kept, the same policies in force.
    await installCrds(kc, v10());
    await governed(ns, own, ['v1beta1'], 'v1.0');
    const alpha = await createSandbox(
      kc,
      { kind: 'Sandbox', version: 'v1alpha1', namespace: ns, name: 'alpha-after' },
      'runc',
      { dryRun: true },
    ).then(
      () => undefined,
      (error: unknown) => error,
    );
    expect(isApiStatus(alpha, 404)).toBe(true);
    for (const [name, before] of [
      ['legacy-weak', legacy],
      ['kept', kept],
    ] as const) {
      const now = await getSandbox(kc, { kind: 'Sandbox', version: 'v1beta1', namespace: ns, name });
      expect(now?.metadata.uid).toBe(before.metadata.uid);
      expect(now?.spec.podTemplate.spec.runtimeClassName).toBe(before.spec.podTemplate.spec.runtimeClassName);
    }
  });
});
