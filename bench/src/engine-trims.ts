import { isDeepStrictEqual } from 'node:util';
import { type ControlPlane, createTestNamespace, waitFor } from '@kubeplus-isolation/e2e';
import { canonicalNodeIsolation } from '@kubeplus-isolation/spec';
import { type KubernetesObject, KubernetesObjectApi } from '@kubernetes/client-node';
import { policyEngineFileObjects } from './chart-files.js';
import {
  APPLY_CONFIGURATION_PROBES,
  applyConfigurationPolicy,
  engineVariant,
  VARIANTS,
  type Variant,
} from './engine-variants.js';
import { createNodeIsolationParam, type RawApi } from './kube.js';
import { type BlockStats, createPods, podBody, roundRatio, runRounds } from './pod-create.js';
import { poolMandate } from './pods.js';
import type { Summary } from './stats.js';
import { installTrivialPolicy } from './trivial-policy.js';

export type TrimSetup = 'a' | Variant | 'f';

export interface TrimRatio {
  setup: Variant;
  concurrency: number;
  /** Same-round ratios to f and to e, p50 and p99. */
  toF: { p50: Summary; p99: Summary };
  toE: { p50: Summary; p99: Summary };
}

export interface ApplyConfigurationAnswer {
  name: string;
  expression: string;
  /** Of the dry-run Pod CREATE (201: the policy ran and the Pod was admitted). */
  status: number;
  message: string;
  /** The Pod's nodeSelector and tolerations as stored, when admitted. */
  stored?: unknown;
}

export interface EngineTrimsResult {
  blocks: BlockStats<TrimSetup>[];
  ratios: TrimRatio[];
  /** The API server's answers to ApplyConfiguration forms of the merge (a dry-run Pod's CREATE, policy bound). */
  applyConfiguration: ApplyConfigurationAnswer[];
  /** Probe Pods checked per variant before measuring. */
  probes: number;
  errors: string[];
}

const LABEL_PREFIX = 'bench.kubeplus.io/engine-';
const TRIVIAL_LABEL = 'bench.kubeplus.io/engine-trims-trivial';

function shippedEngine(): KubernetesObject[] {
  return policyEngineFileObjects();
}

/** Probe Pods: no fields, a foreign selector key and a conflicting one, the mandated toleration already present (operator empty = Equal), a near miss. */
function probePods(pool: string): unknown[] {
  const base = podBody() as { spec: Record<string, unknown> };
  const spec = (extra: Record<string, unknown>) => ({ ...base, spec: { ...base.spec, ...extra } });
  return [
    spec({}),
    spec({ nodeSelector: { disk: 'ssd', pool: 'other' } }),
    spec({ tolerations: [{ key: 'dedicated', value: pool, effect: 'NoSchedule' }] }),
    spec({
      tolerations: [
        { key: 'dedicated', operator: 'Equal', value: pool, effect: 'NoExecute', tolerationSeconds: 5 },
        { key: 'dedicated', operator: 'Exists', effect: 'NoSchedule' },
      ],
    }),
  ];
}

async function dryRun(api: RawApi, namespace: string, pod: unknown): Promise<unknown> {
  const res = await api.request('POST', `/api/v1/namespaces/${namespace}/pods?dryRun=All`, pod);
  if (res.status !== 201) throw new Error(`dry-run Pod in ${namespace}: HTTP ${res.status}: ${res.body.slice(0, 300)}`);
  const stored = JSON.parse(res.body) as { spec: { nodeSelector?: unknown; tolerations?: unknown } };
  return { nodeSelector: stored.spec.nodeSelector, tolerations: stored.spec.tolerations };
}

export async function runEngineTrims(
  cp: ControlPlane,
  api: RawApi,
  opts: { rounds: number; serialCreates: number; parallelCreates: number; concurrency: number },
  log: (line: string) => void,
): Promise<EngineTrimsResult> {
  const client = KubernetesObjectApi.makeApiClient(cp.kc);
  const shipped = shippedEngine();
  const pool = 'bench-trims-pool';
  const mandate = poolMandate(pool);
  const crd = shipped.find((o) => o.kind === 'CustomResourceDefinition');
  if (crd !== undefined) {
    try {
      await client.create(crd);
    } catch (error) {
      if ((error as { code?: number }).code !== 409) throw error;
    }
  }
  const namespaces = new Map<TrimSetup, string>();
  namespaces.set('a', await createTestNamespace(cp.kc, 'bench-trims-plain'));
  for (const variant of VARIANTS) {
    const label = `${LABEL_PREFIX}${variant.replace('+', '-')}`;
    const ns = await createTestNamespace(cp.kc, `bench-trims-${variant.replace('+', '-')}`, {
      labels: { [label]: 'true' },
    });
    namespaces.set(variant, ns);
    for (const obj of engineVariant(shipped, variant, label, mandate)) await client.create(obj);
    await createNodeIsolationParam(api, ns, mandate);
  }
  namespaces.set('f', await createTestNamespace(cp.kc, 'bench-trims-trivial', { labels: { [TRIVIAL_LABEL]: 'true' } }));
  await installTrivialPolicy(cp.kc, { name: 'kubeplus-bench-engine-trivial', label: TRIVIAL_LABEL, pool });

  // Every variant gives every probe Pod what e gives it (and e gives it the mandate).
  const probes = probePods(pool);
  const nsOf = (s: TrimSetup): string => namespaces.get(s) as string;
  for (const [i, pod] of probes.entries()) {
    let expected: unknown;
    await waitFor(
      `probe Pod ${i} to be patched in e's namespace`,
      async (observe) => {
        expected = await dryRun(api, nsOf('e'), pod);
        observe(expected);
        return (expected as { nodeSelector?: Record<string, string> }).nodeSelector?.pool === pool;
      },
      { timeoutMs: 30_000, intervalMs: 200 },
    );
    for (const variant of VARIANTS) {
      await waitFor(
        `probe Pod ${i} in ${variant}'s namespace to come back as in e's`,
        async (observe) => {
          const got = await dryRun(api, nsOf(variant), pod);
          observe({ got, expected });
          return isDeepStrictEqual(got, expected);
        },
        { timeoutMs: 30_000, intervalMs: 200 },
      );
    }
  }
  log(`  engine trims: ${probes.length} probe Pods give the same result in every variant's namespace`);

  const applyConfiguration = await probeApplyConfiguration(cp, api, client, mandate);
  for (const a of applyConfiguration)
    log(`  engine trims: ApplyConfiguration ${a.name}: HTTP ${a.status} ${a.message.slice(0, 200)}`);

  const setups: TrimSetup[] = ['a', ...VARIANTS, 'f'];
  const errors: string[] = [];
  const data = await runRounds(
    {
      setups,
      rounds: opts.rounds,
      serialCreates: opts.serialCreates,
      parallelCreates: opts.parallelCreates,
      concurrency: opts.concurrency,
      block: (setup, count, c) => createPods(api, nsOf(setup), count, c, errors),
      name: 'engine trims',
    },
    log,
  );
  const ratios: TrimRatio[] = [];
  for (const c of data.concurrencies) {
    for (const variant of VARIANTS) {
      const v = data.perRound(variant, c);
      const f = data.perRound('f', c);
      const e = data.perRound('e', c);
      ratios.push({
        setup: variant,
        concurrency: c,
        toF: { p50: roundRatio(v, f, 'p50'), p99: roundRatio(v, f, 'p99') },
        toE: { p50: roundRatio(v, e, 'p50'), p99: roundRatio(v, e, 'p99') },
      });
    }
  }
  return { blocks: data.blocks, ratios, applyConfiguration, probes: probes.length, errors };
}

/**
 * Each ApplyConfiguration form bound in turn to a namespace of its own (with the parameter), and a
 * dry-run Pod carrying a selector and a toleration created there: the answer says whether the
 * form can carry the merge. The policy and binding are deleted after.
 */
async function probeApplyConfiguration(
  cp: ControlPlane,
  api: RawApi,
  client: KubernetesObjectApi,
  mandate: ReturnType<typeof poolMandate>,
): Promise<ApplyConfigurationAnswer[]> {
  const label = `${LABEL_PREFIX}applyconfiguration`;
  const ns = await createTestNamespace(cp.kc, 'bench-trims-applyconfiguration', { labels: { [label]: 'true' } });
  const param = await api.request('POST', `/apis/isolation.kubeplus.io/v1alpha1/namespaces/${ns}/nodeisolations`, {
    apiVersion: 'isolation.kubeplus.io/v1alpha1',
    kind: 'NodeIsolation',
    metadata: { name: 'node-isolation' },
    spec: JSON.parse(canonicalNodeIsolation(mandate)) as unknown,
  });
  if (param.status !== 201)
    throw new Error(`NodeIsolation in ${ns}: HTTP ${param.status}: ${param.body.slice(0, 300)}`);
  const pod = {
    ...(podBody() as { spec: Record<string, unknown> }),
  } as { spec: Record<string, unknown> };
  pod.spec = {
    ...pod.spec,
    nodeSelector: { disk: 'ssd' },
    tolerations: [{ key: 'a', operator: 'Exists', effect: 'NoSchedule' }],
  };
  const answers: ApplyConfigurationAnswer[] = [];
  for (const { name, expression } of APPLY_CONFIGURATION_PROBES) {
    const policyName = `kubeplus-bench-applyconfiguration-${name}`;
    const policy = applyConfigurationPolicy(policyName, expression);
    const binding = {
      apiVersion: 'admissionregistration.k8s.io/v1',
      kind: 'MutatingAdmissionPolicyBinding',
      metadata: { name: policyName },
      spec: {
        policyName,
        paramRef: { name: 'node-isolation', parameterNotFoundAction: 'Deny' },
        matchResources: { namespaceSelector: { matchLabels: { [label]: 'true' } } },
      },
    } as KubernetesObject;
    await client.create(policy);
    await client.create(binding);
    let answer: ApplyConfigurationAnswer = { name, expression, status: 0, message: '' };
    // Until the policy takes effect: the Pod comes back changed, or refused by this policy.
    await waitFor(
      `ApplyConfiguration probe ${name} to take effect`,
      async (observe) => {
        const res = await api.request('POST', `/api/v1/namespaces/${ns}/pods?dryRun=All`, pod);
        const body = JSON.parse(res.body) as {
          message?: string;
          spec?: { nodeSelector?: unknown; tolerations?: unknown };
        };
        answer = {
          name,
          expression,
          status: res.status,
          message: body.message ?? '',
          ...(res.status === 201 && {
            stored: { nodeSelector: body.spec?.nodeSelector, tolerations: body.spec?.tolerations },
          }),
        };
        observe(answer);
        return res.status !== 201
          ? answer.message.includes(policyName)
          : !isDeepStrictEqual(body.spec?.nodeSelector, { disk: 'ssd' });
      },
      { timeoutMs: 30_000, intervalMs: 300 },
    );
    answers.push(answer);
    await client.delete(binding);
    await client.delete(policy);
  }
  // The policies are gone from the API server's view before the measured rounds begin.
  await waitFor(
    'the ApplyConfiguration probes to stop applying',
    async () => (await api.request('POST', `/api/v1/namespaces/${ns}/pods?dryRun=All`, pod)).status === 201,
    { timeoutMs: 30_000, intervalMs: 300 },
  );
  return answers;
}
