/**
 * The operator in refusal mode (issue 38; `--node-isolation-refusal`, the chart's
 * global.nodeIsolation.refuseUnplaced) under the webhook engine, on the real control plane with the
 * chart's refusal policy (files/node-isolation-params-crd.yaml + files/node-isolation-refusal.yaml):
 *
 * - it writes each isolated namespace's NodeIsolation parameter although the engine is the webhook;
 * - the refusal policy refuses every Pod of a labelled namespace without its parameter
 *   (parameterNotFoundAction Deny), so the operator must write the parameter before the label and
 *   delete it only after the label went: Pods created back to back while isolation is applied,
 *   removed, applied again and the instance deleted are never refused for a missing parameter.
 *
 * No webhook runs here: the probe Pods bring the mandate themselves, so only a missing parameter
 * could refuse them, and a Pod without it is refused once the parameter is there.
 */
import { beforeAll, describe, expect, test } from '@jest/globals';
import { isApiStatus, testPod, waitFor } from '@kubeplus-isolation/e2e';
import { NODE_ISOLATION_ANNOTATION, NODE_ISOLATION_ENABLED_LABEL } from '@kubeplus-isolation/spec';
import { CoreV1Api, CustomObjectsApi, type KubeConfig } from '@kubernetes/client-node';
import { uniqueName } from './support/names.js';
import { poolMandate } from './support/node-isolation.js';
import { createAgent, deleteAgent, patchAgent, statusMessage, waitForNamespace } from './support/operator.js';
import { operatorSuite } from './support/operator-suite.js';
import {
  chartFileObjects,
  installPolicyEngine,
  NODE_ISOLATION_PARAMS as PARAMS,
  type PolicyEngine,
} from './support/policy-engine.js';

const REFUSAL = 'kubeplus-isolation-node-isolation-refusal';

describe('operator: refusal mode under the webhook engine, on the real control plane', () => {
  let refusal: PolicyEngine | undefined;
  const suite = operatorSuite({
    name: 'op-nir',
    args: ['--node-isolation-engine=webhook', '--node-isolation-refusal=true'],
    // The chart's part, before the operator (its cache of NodeIsolation objects must sync first).
    beforeOperator: async ({ kc }) => {
      refusal = await installPolicyEngine(
        kc,
        chartFileObjects('node-isolation-params-crd.yaml', 'node-isolation-refusal.yaml'),
      );
    },
    afterTeardown: async () => {
      await refusal?.uninstall();
    },
  });
  let kc: KubeConfig;
  let core: CoreV1Api;
  const mandate = poolMandate(uniqueName('pool'));
  const placed = () =>
    testPod('placed', { nodeSelector: { ...mandate.nodeSelector }, tolerations: mandate.tolerations });

  /** Dry-run Pods carrying the mandate, back to back, until stopped: every refusal's message. */
  const probeLoop = (namespace: string) => {
    let stop = false;
    const refusals: string[] = [];
    let probes = 0;
    const done = (async () => {
      while (!stop) {
        try {
          await core.createNamespacedPod({ namespace, body: placed(), dryRun: 'All' });
        } catch (error) {
          if (!isApiStatus(error, 422) && !isApiStatus(error, 403)) throw error;
          refusals.push(statusMessage(error));
        }
        probes++;
      }
    })();
    return {
      stop: async () => {
        stop = true;
        await done;
        return { refusals, probes };
      },
    };
  };

  const paramExists = async (namespace: string): Promise<boolean> => {
    try {
      await kc.makeApiClient(CustomObjectsApi).getNamespacedCustomObject({ ...PARAMS, namespace });
      return true;
    } catch (error) {
      if (isApiStatus(error, 404)) return false;
      throw error;
    }
  };
  const labelled = (n: { metadata?: { labels?: Record<string, string> } } | undefined) =>
    n?.metadata?.labels?.[NODE_ISOLATION_ENABLED_LABEL] === 'true';

  beforeAll(() => {
    kc = suite.kc;
    core = kc.makeApiClient(CoreV1Api);
  });

  test('it writes the parameter under the webhook engine, and a labelled namespace is never without it: apply, remove, apply, delete', async () => {
    const ns = await suite.tenantNamespace('kpi-op-nir');
    const name = uniqueName('agent-r');
    const loop = probeLoop(ns);
    try {
      await createAgent(kc, ns, name, { [NODE_ISOLATION_ANNOTATION]: JSON.stringify(mandate) });
      await waitForNamespace(kc, ns, 'to be labelled', labelled);
      expect(await paramExists(ns)).toBe(true);
      // The parameter decides: a Pod without the mandate is refused (no webhook here), naming it.
      const refusedMessage = await waitFor(
        'the refusal policy to judge a Pod without the mandate against the operator-written parameter',
        async (observe) => {
          try {
            await core.createNamespacedPod({ namespace: ns, body: testPod('bare'), dryRun: 'All' });
            observe('admitted');
            return undefined;
          } catch (error) {
            observe(statusMessage(error));
            return isApiStatus(error, 403) ? statusMessage(error) : undefined;
          }
        },
        { timeoutMs: 30_000 },
      );
      expect(refusedMessage).toContain(`nodeSelector pool=${mandate.nodeSelector.pool}`);

      await patchAgent(kc, ns, name, { annotations: { [NODE_ISOLATION_ANNOTATION]: null } });
      await waitForNamespace(kc, ns, 'to lose its label', (n) => !labelled(n));
      await waitFor('the parameter to be deleted', async () => !(await paramExists(ns)), { timeoutMs: 30_000 });

      await patchAgent(kc, ns, name, { annotations: { [NODE_ISOLATION_ANNOTATION]: JSON.stringify(mandate) } });
      await waitForNamespace(kc, ns, 'to be labelled again', labelled);
      await deleteAgent(kc, ns, name);
      await waitForNamespace(kc, ns, 'to lose its label with the instance', (n) => !labelled(n));
      await waitFor('the parameter to be deleted with the instance', async () => !(await paramExists(ns)), {
        timeoutMs: 30_000,
      });
    } finally {
      const { refusals, probes } = await loop.stop();
      expect(probes).toBeGreaterThan(10);
      expect(refusals.filter((m) => m.includes(REFUSAL))).toEqual([]);
      expect(refusals).toEqual([]);
    }
  });
});
