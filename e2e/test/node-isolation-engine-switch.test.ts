/**
 * Switching engines without a window (chart README, "Node-isolation engines"): webhook → both →
 * admission-policy, done the documented way with the real processes on the real control plane,
 * while Pods are created in an isolated namespace without pause. Every Pod the API server admitted
 * during the switch must carry the mandated nodeSelector and toleration, and Pods must have been
 * admitted in every phase (the switch was exercised, not slept through).
 */
import { beforeAll, expect, test } from '@jest/globals';
import {
  isApiStatus,
  type RunningOperator,
  type RunningWebhook,
  registerWebhook,
  startWebhook,
  testPod,
  unregisterWebhook,
  waitFor,
} from '@kubeplus-isolation/e2e';
import { NODE_ISOLATION_ANNOTATION, NODE_ISOLATION_ENABLED_LABEL } from '@kubeplus-isolation/spec';
import { CoreV1Api, CustomObjectsApi, type KubeConfig, type V1Pod } from '@kubernetes/client-node';
import { uniqueName } from './support/names.js';
import { waitForWebhookActive } from './support/node-isolation.js';
import { createAgent, waitForNamespace } from './support/operator.js';
import { operatorSuite } from './support/operator-suite.js';
import { installPolicyEngine, NODE_ISOLATION_PARAMS, type PolicyEngine } from './support/policy-engine.js';
import { describeIf, POLICY_ENGINE_SERVED, POLICY_ENGINE_WHY } from './support/versions.js';

type Phase = 'webhook' | 'both' | 'webhook-removed' | 'admission-policy';

describeIf(POLICY_ENGINE_SERVED, POLICY_ENGINE_WHY)(
  'node isolation: switching from the webhook to the admission-policy engine leaves no window',
  () => {
    let webhook: RunningWebhook | undefined;
    let policyEngine: PolicyEngine | undefined;
    let operator: RunningOperator | undefined;
    const webhookConfig = uniqueName('e2e-switch');
    const pool = uniqueName('switch-pool');
    const mandate = {
      nodeSelector: { pool },
      tolerations: [{ key: 'dedicated', operator: 'Equal', value: pool, effect: 'NoSchedule' }],
    };

    const startOperator = (engine: string): Promise<RunningOperator> =>
      suite.startOperator({ name: `switch-${engine}`, args: [`--node-isolation-engine=${engine}`] });

    const suite = operatorSuite({
      name: 'switch',
      startOperator: false,
      beforeOperator: async ({ cluster, kc }) => {
        webhook = await startWebhook(cluster);
        await registerWebhook(kc, { url: webhook.url, caPem: webhook.caPem, name: webhookConfig });
        operator = await startOperator('webhook');
      },
      afterTeardown: async ({ kc }) => {
        await unregisterWebhook(kc, webhookConfig);
        await webhook?.stop();
        await policyEngine?.uninstall();
      },
    });
    let kc: KubeConfig;
    beforeAll(() => {
      kc = suite.kc;
    });

    test('Pods created continuously through webhook → both → admission-policy are all isolated', async () => {
      const ns = await suite.tenantNamespace('kpi-switch-tenant');
      await createAgent(kc, ns, uniqueName('switch-agent'), { [NODE_ISOLATION_ANNOTATION]: JSON.stringify(mandate) });
      await waitForNamespace(
        kc,
        ns,
        'to be isolated',
        (n) => n?.metadata?.labels?.[NODE_ISOLATION_ENABLED_LABEL] === 'true',
      );
      await waitForWebhookActive(kc, ns, mandate.nodeSelector);

      // The load: Pods created back to back for the whole switch, each remembered with its phase.
      const core = kc.makeApiClient(CoreV1Api);
      let phase: Phase = 'webhook';
      let running = true;
      const admitted: { phase: Phase; pod: V1Pod }[] = [];
      const failures: string[] = [];
      const load = (async () => {
        for (let i = 0; running; i++) {
          const at = phase;
          try {
            admitted.push({
              phase: at,
              pod: await core.createNamespacedPod({ namespace: ns, body: testPod(`p-${i}`) }),
            });
          } catch (error) {
            failures.push(`${at} p-${i}: ${String(error)}`);
          }
        }
      })();
      const phaseHasPods = (p: Phase, n = 5): Promise<boolean> =>
        waitFor(`${n} Pods admitted in phase ${p}`, async () => admitted.filter((a) => a.phase === p).length >= n, {
          timeoutMs: 30_000,
          intervalMs: 50,
        });

      try {
        await phaseHasPods('webhook');
        // 1. both: the chart's policy engine, and the operator writing every parameter.
        policyEngine = await installPolicyEngine(kc);
        await operator?.stop();
        operator = await startOperator('both');
        phase = 'both';
        await waitFor(
          `NodeIsolation ${ns}/${NODE_ISOLATION_PARAMS.name} to be written`,
          async () => {
            try {
              return await kc.makeApiClient(CustomObjectsApi).getNamespacedCustomObject({
                group: NODE_ISOLATION_PARAMS.group,
                version: NODE_ISOLATION_PARAMS.version,
                plural: NODE_ISOLATION_PARAMS.plural,
                namespace: ns,
                name: NODE_ISOLATION_PARAMS.name,
              });
            } catch (error) {
              if (isApiStatus(error, 404)) return undefined;
              throw error;
            }
          },
          { timeoutMs: 30_000 },
        );
        await phaseHasPods('both');
        // 2. the webhook goes (its configuration first, then the process: calls still in flight fail open).
        await unregisterWebhook(kc, webhookConfig);
        await webhook?.stop();
        webhook = undefined;
        phase = 'webhook-removed';
        await phaseHasPods('webhook-removed');
        // 3. the operator on the policy engine alone.
        await operator?.stop();
        operator = await startOperator('admission-policy');
        phase = 'admission-policy';
        await phaseHasPods('admission-policy');
      } finally {
        running = false;
        await load;
      }

      expect(failures).toEqual([]);
      const unisolated = admitted.filter(
        ({ pod }) =>
          pod.spec?.nodeSelector?.pool !== pool ||
          !(pod.spec?.tolerations ?? []).some((t) => t.key === 'dedicated' && t.value === pool),
      );
      expect(unisolated.map((a) => `${a.phase} ${a.pod.metadata?.name}`)).toEqual([]);
      // Never duplicated, whichever engines applied it.
      for (const { pod } of admitted) {
        expect((pod.spec?.tolerations ?? []).filter((t) => t.key === 'dedicated')).toHaveLength(1);
      }
    });
  },
);
