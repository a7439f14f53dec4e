/**
 * The two node-isolation engines agree, proven on the real API server rather than assumed: the
 * admission-policy engine the chart ships (deploy/kubeplus-isolation/files/node-isolation-engine.yaml:
 * one MutatingAdmissionPolicy parameterised by a NodeIsolation object in the Pod's namespace) and
 * the webhook's patch builder (services/webhook/src/admission/patch.ts). For generated Pods — absent, null and empty
 * fields, conflicting selector keys, keys with `/`, an identical toleration already present, the
 * same key with another value, Exists tolerations, hundreds of tolerations — a server-side dry-run
 * CREATE in a namespace the policy governs must store exactly the nodeSelector and tolerations that
 * the webhook's patch yields when applied to what the webhook would receive: the same Pod as the
 * API server admits it in a namespace nothing of ours mutates (its built-in mutating plugins, e.g.
 * DefaultTolerationSeconds, run before any webhook or policy).
 */

import { afterAll, beforeAll, expect, test } from '@jest/globals';
import { type Cluster, connectE2eCluster, createTestNamespace, deleteNamespace } from '@kubeplus-isolation/e2e';
import { NODE_ISOLATION_ENABLED_LABEL } from '@kubeplus-isolation/spec';
import { CoreV1Api, type KubeConfig, type V1Pod } from '@kubernetes/client-node';
import fc from 'fast-check';
import jsonpatch from 'fast-json-patch';
import { buildNodeIsolationPatch } from '../../services/webhook/src/admission/patch.js';
import {
  installPolicyEngine,
  type PolicyEngine,
  waitForPolicyResult,
  writeNodeIsolationParameter,
} from './support/policy-engine.js';
import { describeIf, POLICY_ENGINE_SERVED, POLICY_ENGINE_WHY } from './support/versions.js';

type NodeIsolationSpec = Parameters<typeof buildNodeIsolationPatch>[1];
type Toleration = NodeIsolationSpec['tolerations'][number];

/** The mandate as the operator writes it: the canonical spec (deduplicated, normalized tolerations). */
const MANDATE: NodeIsolationSpec = {
  nodeSelector: { pool: 'team-a-pool', 'kubeplus.io/tier': 'gold' },
  tolerations: [
    { key: 'dedicated', operator: 'Equal', value: 'team-a-pool', effect: 'NoSchedule' },
    { key: 'spot', operator: 'Exists', effect: 'NoExecute', tolerationSeconds: 30 },
  ],
};

type PodSpecFields = { nodeSelector?: Record<string, string> | null; tolerations?: Toleration[] | null };

/** Valid tolerations (the API server validates Pods): Exists has no value; an empty key needs Exists. */
const toleration: fc.Arbitrary<Toleration> = fc.oneof(
  fc.constant({ key: 'dedicated', operator: 'Equal', value: 'team-a-pool', effect: 'NoSchedule' } as Toleration),
  fc.constant({ key: 'dedicated', value: 'team-a-pool', effect: 'NoSchedule' } as Toleration), // operator empty = Equal
  fc.constant({ key: 'dedicated', operator: 'Equal', value: 'team-b-pool', effect: 'NoSchedule' } as Toleration),
  fc.constant({ key: 'dedicated', operator: 'Exists', effect: 'NoSchedule' } as Toleration),
  fc.constant({ key: 'spot', operator: 'Exists', effect: 'NoExecute', tolerationSeconds: 30 } as Toleration),
  fc.constant({ key: 'spot', operator: 'Exists', effect: 'NoExecute', tolerationSeconds: 31 } as Toleration),
  fc.constant({ key: 'spot', operator: 'Exists', effect: 'NoExecute' } as Toleration),
  fc.constant({ operator: 'Exists' } as Toleration),
  fc
    .record({ key: fc.constantFrom('a', 'b', 'example.com/x'), value: fc.constantFrom('1', '2', '') })
    .map((t) => ({ ...t, operator: 'Equal', effect: 'PreferNoSchedule' }) as Toleration),
);

const selector: fc.Arbitrary<Record<string, string>> = fc.dictionary(
  fc.constantFrom('pool', 'kubeplus.io/tier', 'kubernetes.io/hostname', 'disk', 'example.com/zone'),
  fc.constantFrom('team-a-pool', 'team-b-pool', 'gold', 'ssd', 'node-a'),
  { maxKeys: 5 },
);

const fields: fc.Arbitrary<PodSpecFields> = fc.record(
  {
    nodeSelector: fc.oneof(fc.constant(null), fc.constant({}), selector),
    tolerations: fc.oneof(
      fc.constant(null),
      fc.constant<Toleration[]>([]),
      fc.array(toleration, { maxLength: 6 }),
      fc.array(toleration, { minLength: 150, maxLength: 250 }),
    ),
  },
  { requiredKeys: [] },
);

function podBody(name: string, f: PodSpecFields): V1Pod {
  const spec: Record<string, unknown> = { containers: [{ name: 'c', image: 'registry.k8s.io/pause:3.10' }] };
  if ('nodeSelector' in f) spec.nodeSelector = f.nodeSelector;
  if ('tolerations' in f) spec.tolerations = f.tolerations;
  return { apiVersion: 'v1', kind: 'Pod', metadata: { name }, spec } as unknown as V1Pod;
}

/** What the API server stores of the two fields node isolation owns. */
function owned(pod: V1Pod): { nodeSelector: unknown; tolerations: unknown } {
  return { nodeSelector: pod.spec?.nodeSelector ?? null, tolerations: pod.spec?.tolerations ?? null };
}

describeIf(POLICY_ENGINE_SERVED, POLICY_ENGINE_WHY)(
  'node isolation: the admission-policy engine applies exactly the webhook’s patch (real API server)',
  () => {
    let cluster: Cluster;
    let kc: KubeConfig;
    let governed = '';
    let plain = '';
    let engine: PolicyEngine | undefined;

    const dryRun = async (namespace: string, body: V1Pod): Promise<V1Pod> =>
      kc.makeApiClient(CoreV1Api).createNamespacedPod({ namespace, body, dryRun: 'All' });

    beforeAll(async () => {
      cluster = await connectE2eCluster();
      kc = cluster.kc;
      engine = await installPolicyEngine(kc);
      expect(engine.objects.map((o) => o.kind).sort()).toEqual([
        'CustomResourceDefinition',
        'MutatingAdmissionPolicy',
        'MutatingAdmissionPolicyBinding',
        // The cap on a Pod's tolerations that bounds the policy's CEL cost (node-isolation-engine-cost.test.ts).
        'ValidatingAdmissionPolicy',
        'ValidatingAdmissionPolicyBinding',
      ]);
      governed = await createTestNamespace(kc, 'kpi-engine-policy', {
        labels: { [NODE_ISOLATION_ENABLED_LABEL]: 'true' },
      });
      plain = await createTestNamespace(kc, 'kpi-engine-plain');
      await writeNodeIsolationParameter(kc, governed, MANDATE);
      await waitForPolicyResult(kc, governed, MANDATE.nodeSelector);
    });

    afterAll(async () => {
      await Promise.all([governed, plain].filter(Boolean).map((ns) => deleteNamespace(kc, ns)));
      await engine?.uninstall();
    });

    test('property: for generated Pods, the policy stores what the webhook’s patch stores', async () => {
      let n = 0;
      await fc.assert(
        fc.asyncProperty(fields, async (f) => {
          const name = `p-${n++}`;
          const body = podBody(name, f);
          const viaPolicy = owned(await dryRun(governed, structuredClone(body)));
          // What the webhook receives: the Pod after the API server's built-in mutating plugins
          // (DefaultTolerationSeconds appends its tolerations before any webhook or policy runs).
          const seen = await dryRun(plain, structuredClone(body));
          const patch = buildNodeIsolationPatch(structuredClone(seen), MANDATE);
          const viaWebhook = owned(
            jsonpatch.applyPatch(structuredClone(seen), patch, true, false).newDocument as V1Pod,
          );
          expect(viaPolicy).toEqual(viaWebhook);
        }),
        { numRuns: 120, seed: 20261201, endOnFailure: true },
      );
    });

    test('a Pod that already complies is stored unchanged; the policy is idempotent under reinvocation', async () => {
      const compliant = podBody('compliant', {
        nodeSelector: { ...MANDATE.nodeSelector, disk: 'ssd' },
        tolerations: [{ key: 'other', operator: 'Exists', effect: 'NoSchedule' }, ...MANDATE.tolerations],
      });
      const stored = owned(await dryRun(governed, structuredClone(compliant)));
      const reference = owned(await dryRun(plain, structuredClone(compliant)));
      expect(stored).toEqual(reference);
      expect(buildNodeIsolationPatch(compliant, MANDATE)).toEqual([]);
    });
  },
);
