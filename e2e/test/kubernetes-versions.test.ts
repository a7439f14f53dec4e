/**
 * What each Kubernetes minor of the version matrix proves at the API level (e2e/README.md
 * "Kubernetes versions"; `make test-matrix`, and `make test` on the oldest and the newest):
 *
 * - the control plane really is the minor asked for (KUBEPLUS_ISOLATION_K8S): the API server and
 *   kubectl report it, and it serves the admission-policy APIs upstream documents for it;
 * - advisory sandbox isolation on this minor as a user gets it: where MutatingAdmissionPolicy is
 *   served, an unset runtime class is defaulted; where it is not, the operator's documented
 *   fallback (a MutatingAdmissionPolicyUnavailable Warning Event on the instance, the warn-only
 *   policy, nothing defaulted, nothing refused, nothing broken);
 * - on 1.34 and 1.35 both ways: with MutatingAdmissionPolicy v1beta1 enabled on the API server
 *   (runtime-config + feature gate, a control plane of this suite's own), defaulting through v1beta1;
 * - below the floor (1.29), `helm install` refuses with the chart's kubeVersion message.
 *
 * Enforce mode, node isolation and the chart run on every minor in the other API-level suites; the
 * chart's `helm test` on a real node of each minor is kubernetes-versions-node.test.ts.
 */
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import {
  type Cluster,
  type ControlPlane,
  compareMinors,
  connectE2eCluster,
  createTestNamespace,
  deleteNamespace,
  FLOOR_MINOR,
  installSandboxCrds,
  MUTATING_POLICY_BETA_ARGS,
  minorOf,
  nodeMinor,
  policyApiSupport,
  type RunningOperator,
  repoRoot,
  requestedMinor,
  servedPolicyApis,
  startControlPlane,
  startOperator,
} from '@kubeplus-isolation/e2e';
import { SANDBOX_ISOLATION_ANNOTATION } from '@kubeplus-isolation/spec';
import type { KubeConfig } from '@kubernetes/client-node';
import { uniqueName } from './support/names.js';
import {
  createAgent,
  deleteAgentsAndCrd,
  ensureAgentCrd,
  expectedSandboxObjects,
  policyName,
  runtimeClassName,
  waitForEvent,
  waitForOwned,
} from './support/operator.js';
import { createSandbox, expectAllowed, waitForAdmission } from './support/operator-sandbox.js';
import { SHARED_MINOR, testIf } from './support/versions.js';

const run = promisify(execFile);
const CHART = join(repoRoot(), 'deploy', 'kubeplus-isolation');
const ADVISORY = JSON.stringify({ minRuntimeClass: 'kata', enforce: false });

// The minor is read at load time (support/versions.ts), so a case that does not apply is reported as skipped, and why.
const minor = SHARED_MINOR;
const belowFloor = compareMinors(minor, FLOOR_MINOR) < 0;

let cluster: Cluster;
beforeAll(async () => {
  cluster = await connectE2eCluster();
});

/**
 * Advisory mode on `kc`'s cluster, serving `mutating` (or no) MutatingAdmissionPolicy version:
 * defaulted where served, the documented fallback where not.
 */
async function proveAdvisory(c: Cluster, kc: KubeConfig, label: string): Promise<void> {
  const served = await servedPolicyApis(kc);
  await ensureAgentCrd(kc);
  const namespaces: string[] = [];
  let operator: RunningOperator | undefined;
  try {
    const lease = await createTestNamespace(kc, 'kpi-versions-system', { waitForServiceAccount: false });
    namespaces.push(lease);
    const operatorName = uniqueName(`versions-${label}`);
    operator = await startOperator(c, {
      name: `operator-${operatorName}`,
      leaderElection: { namespace: lease, id: uniqueName('versions'), identity: operatorName, lease: 'fast' },
    });
    const ns = await createTestNamespace(kc, 'kpi-versions-advisory', { waitForServiceAccount: false });
    namespaces.push(ns);
    const name = uniqueName('advisory-agent');
    const own = runtimeClassName(name);
    await createAgent(kc, ns, name, { [SANDBOX_ISOLATION_ANNOTATION]: ADVISORY });
    const owned = await waitForOwned(
      kc,
      name,
      expectedSandboxObjects(ns, name, false, { mutatingPolicy: served.mutating !== undefined }),
    );
    const map = owned.find((o) => o.kind === 'MutatingAdmissionPolicy');

    if (served.mutating !== undefined) {
      expect(map?.apiVersion).toBe(served.mutating);
      await waitForAdmission(
        kc,
        { kind: 'Sandbox', version: 'v1beta1', namespace: ns, name: 'probe' },
        undefined,
        `to be defaulted to ${own}`,
        (a) => (a.allowed ? a.object.spec.podTemplate.spec.runtimeClassName === own : false),
      );
    } else {
      const event = await waitForEvent(kc, ns, name, 'MutatingAdmissionPolicyUnavailable');
      expect(event.type).toBe('Warning');
      expect(event.message).toContain(
        'the cluster serves no MutatingAdmissionPolicy API, so an unset runtimeClassName is not defaulted',
      );
      // The warn-only policy is in force: a weaker class is admitted, with the warning kubectl prints.
      await waitForAdmission(
        kc,
        { kind: 'Sandbox', version: 'v1beta1', namespace: ns, name: 'probe' },
        'runc',
        'to be admitted with a warning',
        (a) => a.allowed && a.warnings.length > 0,
      );
      const weak = expectAllowed(
        await createSandbox(kc, { kind: 'Sandbox', version: 'v1beta1', namespace: ns, name: 'weak' }, 'runc'),
        'a runc Sandbox in advisory mode',
      );
      expect(weak.warnings.join('\n')).toContain(`ValidatingAdmissionPolicy '${policyName(ns, name, 'advisory')}'`);
    }
    // Unset: defaulted where served, kept unset (and admitted) where not.
    const unset = expectAllowed(
      await createSandbox(kc, { kind: 'Sandbox', version: 'v1beta1', namespace: ns, name: 'unset' }, undefined),
      'a Sandbox without a runtime class in advisory mode',
    );
    expect(unset.object.spec.podTemplate.spec.runtimeClassName).toBe(served.mutating !== undefined ? own : undefined);
  } finally {
    await deleteAgentsAndCrd(kc);
    await operator?.stop();
    await Promise.all(namespaces.map((n) => deleteNamespace(kc, n)));
  }
}

describe('the control plane of this minor', () => {
  test('is the minor asked for: the API server and kubectl report it', async () => {
    expect(minor).toBe(requestedMinor() ?? nodeMinor());
    const { stdout } = await run(join(cluster.state.assetsDir, 'kubectl'), [
      '--kubeconfig',
      cluster.kubeconfigPath,
      'version',
      '-o',
      'json',
    ]);
    const v = JSON.parse(stdout) as { clientVersion: { gitVersion: string }; serverVersion: { gitVersion: string } };
    expect(v.serverVersion.gitVersion).toBe(cluster.state.kubernetesVersion);
    expect(minorOf(v.clientVersion.gitVersion)).toBe(minor);
  });

  test('serves the admission-policy APIs upstream documents for it (default API configuration)', async () => {
    const want = policyApiSupport(minor);
    const served = await servedPolicyApis(cluster.kc);
    expect(served.validatingV1).toBe(want.validatingV1);
    expect(served.mutating).toBe(want.mutatingV1 ? 'admissionregistration.k8s.io/v1' : undefined);
  });
});

describe('advisory sandbox isolation on this minor, as installed by default', () => {
  testIf(!belowFloor, `below the chart's floor ${FLOOR_MINOR}`)(
    'defaults an unset runtime class where MutatingAdmissionPolicy is served; else the documented fallback: a Warning Event, the warn-only policy, nothing defaulted or refused',
    async () => {
      await proveAdvisory(cluster, cluster.kc, 'default');
    },
  );
});

describe('advisory sandbox isolation with MutatingAdmissionPolicy v1beta1 enabled (1.34, 1.35)', () => {
  let beta: ControlPlane | undefined;
  afterAll(async () => {
    await beta?.stop();
  });

  testIf(
    policyApiSupport(minor).mutatingV1beta1OptIn,
    'MutatingAdmissionPolicy v1beta1 is opt-in on 1.34 and 1.35 only',
  )(
    'the API server started with the beta API and feature gate serves v1beta1, and the operator defaults through it',
    async () => {
      beta = await startControlPlane({
        extraArgs: { 'kube-apiserver': MUTATING_POLICY_BETA_ARGS },
        log: (m) => process.stderr.write(`[versions-beta] ${m}\n`),
      });
      await installSandboxCrds(beta.kc);
      expect((await servedPolicyApis(beta.kc)).mutating).toBe('admissionregistration.k8s.io/v1beta1');
      await proveAdvisory(beta, beta.kc, 'beta');
    },
  );
});

describe('helm and the chart floor', () => {
  test("below the floor helm install refuses with the chart's kubeVersion; at or above it, the chart renders against this API server", async () => {
    const helm = join(cluster.state.assetsDir, 'helm');
    const args = [
      '--kubeconfig',
      cluster.kubeconfigPath,
      'install',
      uniqueName('kpi'),
      CHART,
      '--namespace',
      'default',
      '--dry-run=server',
    ];
    if (belowFloor) {
      const refused = await run(helm, args).then(
        () => '',
        (e: Error & { stderr?: string }) => e.stderr ?? e.message,
      );
      expect(refused).toContain(
        `chart requires kubeVersion: >=${FLOOR_MINOR}.0-0 which is incompatible with Kubernetes ${cluster.state.kubernetesVersion}`,
      );
    } else {
      const { stdout } = await run(helm, args, { maxBuffer: 16 << 20 });
      expect(stdout).toContain('kind: ValidatingAdmissionPolicy');
    }
  });
});
