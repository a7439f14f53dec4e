/**
 * Refusal mode (issue 38; chart global.nodeIsolation.refuseUnplaced): the chart's
 * ValidatingAdmissionPolicy (deploy/kubeplus-isolation/files/node-isolation-refusal.yaml, with the
 * NodeIsolation CRD of files/node-isolation-params-crd.yaml) on the real API server, with the real
 * webhook registered as the chart registers it (failurePolicy Ignore), stopped and started again:
 *
 * - while the webhook answers, Pods are placed and admitted: the policy judges the Pod after it;
 * - while it does not, a bare Pod is refused with a message naming the namespace, what is missing
 *   and why; a Deployment's Pods are refused, and once the webhook is back the ReplicaSet's retries
 *   create them placed;
 * - a labelled namespace without its NodeIsolation parameter refuses every Pod
 *   (parameterNotFoundAction Deny), which the operator's write order never lets an isolated
 *   namespace be (services/operator test node-sync.test.ts, uninstall/plan.test.ts).
 *
 * A ValidatingAdmissionPolicy v1 is served from 1.30: this suite runs on every supported minor.
 * Refusal off is the design's fail-open, node-isolation-fail-open.test.ts.
 */
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import {
  type Cluster,
  connectE2eCluster,
  deleteNamespace,
  type FakeNodes,
  isApiStatus,
  type RunningWebhook,
  registerWebhook,
  startFakeNodes,
  startWebhook,
  testPod,
  unregisterWebhook,
  waitFor,
  waitForPodBound,
} from '@kubeplus-isolation/e2e';
import { canonicalNodeIsolation, type NodeIsolationSpec } from '@kubeplus-isolation/spec';
import { AppsV1Api, CoreV1Api, type KubeConfig, type V1Pod } from '@kubernetes/client-node';
import { uniqueName } from './support/names.js';
import { createIsolatedNamespace, placement, poolMandate, waitForWebhookActive } from './support/node-isolation.js';
import { statusMessage } from './support/operator.js';
import {
  chartFileObjects,
  installPolicyEngine,
  type PolicyEngine,
  writeNodeIsolationParameter,
} from './support/policy-engine.js';

const REFUSAL = 'kubeplus-isolation-node-isolation-refusal';

/**
 * The Status message of a refused CREATE; fails if it was admitted or failed otherwise. The
 * policy's validations answer 403 (reason Forbidden); a missing parameter, 422 (the API server's
 * own answer to parameterNotFoundAction Deny).
 */
async function refused(call: Promise<unknown>, code: 403 | 422 = 403): Promise<string> {
  try {
    await call;
  } catch (error) {
    if (isApiStatus(error, code)) return statusMessage(error);
    throw error;
  }
  throw new Error(`expected the CREATE to be refused (${code}), but it was admitted`);
}

describe('node isolation, refusal mode: a Pod lacking its mandate is refused, through a webhook outage', () => {
  let cluster: Cluster;
  let kc: KubeConfig;
  let core: CoreV1Api;
  let webhook: RunningWebhook | undefined;
  let webhookPort = 0;
  let nodes: FakeNodes | undefined;
  let refusal: PolicyEngine | undefined;
  const pool = uniqueName('team-r-pool');
  const mandate = poolMandate(pool);
  const pinned = uniqueName('rf-pool-node');
  const free = uniqueName('rf-free-node');
  const configName = uniqueName('e2e-node-isolation-refusal');
  let ns = '';
  let unparametrised = '';

  beforeAll(async () => {
    cluster = await connectE2eCluster();
    kc = cluster.kc;
    core = kc.makeApiClient(CoreV1Api);
    refusal = await installPolicyEngine(
      kc,
      chartFileObjects('node-isolation-params-crd.yaml', 'node-isolation-refusal.yaml'),
    );
    webhook = await startWebhook(cluster);
    webhookPort = Number(new URL(webhook.url).port);
    nodes = await startFakeNodes(kc, [pinned, free]);
    await nodes.taint(pinned, { key: 'dedicated', value: pool, effect: 'NoSchedule' });
    await nodes.label(pinned, { pool });
    // As the operator writes it with refusal on: the parameter, then the label (here at once).
    ns = await createIsolatedNamespace(kc, 'e2e-ni-refusal', mandate);
    await writeNodeIsolationParameter(kc, ns, JSON.parse(canonicalNodeIsolation(mandate as NodeIsolationSpec)));
    unparametrised = await createIsolatedNamespace(kc, 'e2e-ni-refusal-noparam', mandate);
    await registerWebhook(kc, { url: webhook.url, caPem: webhook.caPem, name: configName });
    await waitForWebhookActive(kc, ns, mandate.nodeSelector);
    // The policy, its binding and the parameter load asynchronously: until the policy is active
    // the parameterless namespace admits; until the parameter is seen, the other one refuses.
    await waitFor(
      'the refusal policy to refuse Pods of a labelled namespace without its parameter',
      async (observe) => {
        try {
          await core.createNamespacedPod({ namespace: unparametrised, body: testPod('probe'), dryRun: 'All' });
          observe('admitted');
          return false;
        } catch (error) {
          observe(statusMessage(error));
          if (isApiStatus(error, 422)) return statusMessage(error).includes(REFUSAL);
          throw error;
        }
      },
      { timeoutMs: 60_000, intervalMs: 250 },
    );
    await waitFor(
      `the refusal policy to admit a placed Pod of ${ns}`,
      async (observe) => {
        try {
          await core.createNamespacedPod({ namespace: ns, body: testPod('probe'), dryRun: 'All' });
          return true;
        } catch (error) {
          observe(statusMessage(error));
          if (isApiStatus(error, 403)) return false;
          throw error;
        }
      },
      { timeoutMs: 60_000, intervalMs: 250 },
    );
  });

  afterAll(async () => {
    await unregisterWebhook(kc, configName);
    for (const name of [ns, unparametrised]) if (name) await deleteNamespace(kc, name);
    await refusal?.uninstall();
    await nodes?.stop();
    await webhook?.stop();
  });

  test('while the webhook answers, Pods are placed and admitted (the policy judges them after it)', async () => {
    await core.createNamespacedPod({ namespace: ns, body: testPod('while-up') });
    const pod = await waitForPodBound(kc, ns, 'while-up');
    expect(placement(pod)).toMatchObject({ nodeName: pinned, nodeSelector: mandate.nodeSelector });
  });

  test('a labelled namespace without its NodeIsolation parameter refuses every Pod (parameterNotFoundAction Deny)', async () => {
    const message = await refused(core.createNamespacedPod({ namespace: unparametrised, body: testPod('any') }), 422);
    expect(message).toContain(`ValidatingAdmissionPolicy '${REFUSAL}'`);
    expect(message).toContain('no params found for policy binding with `Deny` parameterNotFoundAction');
  });

  test('with the webhook down, a bare Pod is refused, told which namespace, what is missing and why', async () => {
    await webhook?.stop();
    webhook = undefined;
    const message = await refused(core.createNamespacedPod({ namespace: ns, body: testPod('while-down') }));
    expect(message).toContain(`ValidatingAdmissionPolicy '${REFUSAL}'`);
    expect(message).toContain(`Pod ${ns}/while-down is refused: namespace ${ns} is node-isolated`);
    expect(message).toContain(`nodeSelector pool=${pool}; tolerations dedicated=${pool}:NoSchedule`);
    expect(message).toContain('refusal mode (global.nodeIsolation.refuseUnplaced)');
    expect(message).toContain('its Pods are created, placed, once the webhook answers again');
    // A Pod that brings its own placement is admitted: only what lacks the mandate is refused.
    await core.createNamespacedPod({
      namespace: ns,
      body: testPod('self-placed', { nodeSelector: { ...mandate.nodeSelector }, tolerations: mandate.tolerations }),
    });
    const placed = await waitForPodBound(kc, ns, 'self-placed');
    expect(placed.spec?.nodeName).toBe(pinned);
    // Partly placed: only the missing part is named.
    expect(
      await refused(
        core.createNamespacedPod({
          namespace: ns,
          body: testPod('selector-only', { nodeSelector: { ...mandate.nodeSelector, app: 'x' } }),
        }),
      ),
    ).toContain(`lacks its mandated placement after admission (tolerations dedicated=${pool}:NoSchedule)`);
  });

  test("a Deployment's Pods are refused while the webhook is down, and arrive placed once it answers again", async () => {
    expect(webhook).toBeUndefined();
    const apps = kc.makeApiClient(AppsV1Api);
    const name = 'retried';
    const labels = { app: name };
    await apps.createNamespacedDeployment({
      namespace: ns,
      body: {
        metadata: { name },
        spec: {
          replicas: 2,
          selector: { matchLabels: labels },
          template: { metadata: { labels }, spec: testPod(name).spec as NonNullable<V1Pod['spec']> },
        },
      },
    });
    const failure = await waitFor(
      `the ReplicaSet of Deployment ${name} to report its refused Pods`,
      async (observe) => {
        const sets = await apps.listNamespacedReplicaSet({ namespace: ns, labelSelector: `app=${name}` });
        const condition = sets.items[0]?.status?.conditions?.find((c) => c.type === 'ReplicaFailure');
        observe(condition ?? sets.items.length);
        return condition?.status === 'True' ? condition.message : undefined;
      },
      { timeoutMs: 60_000, intervalMs: 500 },
    );
    expect(failure).toContain(REFUSAL);
    expect(failure).toContain(`nodeSelector pool=${pool}`);
    const ofDeployment = async (): Promise<V1Pod[]> =>
      (await core.listNamespacedPod({ namespace: ns, labelSelector: `app=${name}` })).items;
    expect(await ofDeployment()).toEqual([]);

    // The webhook is back (same address, same CA): the ReplicaSet controller's retries succeed.
    webhook = await startWebhook(cluster, { port: webhookPort });
    const pods = await waitFor(
      `Deployment ${name}'s Pods to be created and bound once the webhook answers`,
      async (observe) => {
        const items = await ofDeployment();
        observe(items.map((p) => `${p.metadata?.name}@${p.spec?.nodeName ?? '-'}`));
        return items.length === 2 && items.every((p) => p.spec?.nodeName) ? items : undefined;
      },
      { timeoutMs: 180_000, intervalMs: 1_000 },
    );
    for (const pod of pods) {
      expect(placement(pod)).toMatchObject({ nodeName: pinned, nodeSelector: mandate.nodeSelector });
    }
  });
});
