/**
 * Benchmark `exclusive-pools`: what the exclusive-pools policy costs a Pod CREATE, and whether
 * that grows with the number of mandates (issue 38). The chart's policy
 * (deploy/kubeplus-isolation/files/exclusive-pools.yaml) and CRD, and two parameters planned by the
 * operator's own planner (`exclusivePoolsSpec`): one of 1 mandate and one of 1,000 (typical
 * mandates: a pool label, `kubernetes.io/os: linux` and a dedicated toleration each). Three setups
 * on one control plane, in the same rotating rounds as section 3 (`runRounds`):
 *   a     a namespace no binding selects: the baseline;
 *   x1    a namespace bound to the policy with the 1-mandate parameter;
 *   x1000 a namespace bound to it with the 1,000-mandate parameter.
 * Every setup creates the same Pod, with a nodeSelector of two pairs and a toleration (plus the
 * two DefaultTolerationSeconds adds) that reach no pool: admitted after every lookup is made, the
 * policy's full cost.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { repoRoot, waitFor } from '@kubeplus-isolation/e2e';
import {
  exclusivePoolsObject,
  exclusivePoolsSpec,
  type Mandate,
  specBytes,
} from '@kubeplus-isolation/operator/dist/desired/exclusive-pools.js';
import {
  ApiextensionsV1Api,
  type KubeConfig,
  type KubernetesObject,
  KubernetesObjectApi,
  loadAllYaml,
} from '@kubernetes/client-node';
import type { RawApi } from './kube.js';
import { type BlockStats, createPods, podBody, roundRatio, runRounds } from './pod-create.js';
import type { Summary } from './stats.js';

export type ExclusivePoolsSetup = 'a' | 'x1' | 'x1000';
export const EXCLUSIVE_POOLS_SETUPS: readonly ExclusivePoolsSetup[] = ['a', 'x1', 'x1000'];
const POLICY = 'kubeplus-isolation-exclusive-pools';

/** `n` typical mandates, tenant-0000 … (pure). */
export function benchMandates(n: number): Mandate[] {
  return Array.from({ length: n }, (_, i) => {
    const ns = `tenant-${String(i).padStart(4, '0')}`;
    return {
      namespace: ns,
      spec: {
        nodeSelector: { pool: `${ns}-pool`, 'kubernetes.io/os': 'linux' },
        tolerations: [{ key: 'dedicated', operator: 'Equal', value: `${ns}-pool`, effect: 'NoSchedule' }],
      },
    };
  });
}

/** The Pod every setup creates: it asks for a pool and tolerates a taint no mandate names. */
export function exclusivePoolsPodBody(): unknown {
  const body = podBody() as { spec: Record<string, unknown> };
  body.spec.nodeSelector = { pool: 'elsewhere', 'kubernetes.io/os': 'linux' };
  body.spec.tolerations = [{ key: 'dedicated', operator: 'Equal', value: 'elsewhere', effect: 'NoSchedule' }];
  return body;
}

export interface ExclusivePoolsRatios {
  concurrency: number;
  x1aP50: Summary;
  x1aP99: Summary;
  x1000aP50: Summary;
  x1000aP99: Summary;
  x1000x1P50: Summary;
  x1000x1P99: Summary;
}

export interface ExclusivePoolsBenchResult {
  blocks: BlockStats<ExclusivePoolsSetup>[];
  ratios: ExclusivePoolsRatios[];
  /** The parameters' sizes (JSON of the spec), bytes. */
  parameterBytes: { x1: number; x1000: number };
  checks: string[];
  errors: string[];
}

export interface ExclusivePoolsBenchOptions {
  rounds: number;
  serialCreates: number;
  parallelCreates: number;
  concurrency: number;
  namespaces: Record<ExclusivePoolsSetup, string>;
}

/**
 * Installs the CRD and the policy from the chart's file, the two parameters and one binding per
 * parameter (each selecting its namespace by name), then proves with dry-runs that each bound
 * namespace refuses a Pod reaching one of its pools and admits the bench's Pod.
 */
export async function installExclusivePoolsBench(
  kc: KubeConfig,
  api: RawApi,
  namespaces: Record<ExclusivePoolsSetup, string>,
): Promise<Pick<ExclusivePoolsBenchResult, 'parameterBytes' | 'checks'>> {
  const client = KubernetesObjectApi.makeApiClient(kc);
  const text = readFileSync(join(repoRoot(), 'deploy', 'kubeplus-isolation', 'files', 'exclusive-pools.yaml'), 'utf8');
  const objects = (loadAllYaml(text) as (KubernetesObject | null)[]).filter((o): o is KubernetesObject => o !== null);
  for (const obj of objects) {
    await client.create(obj);
    if (obj.kind === 'CustomResourceDefinition') {
      await waitFor(
        'the ExclusivePools CRD to be established',
        async () => {
          const crd = await kc
            .makeApiClient(ApiextensionsV1Api)
            .readCustomResourceDefinition({ name: obj.metadata?.name ?? '' });
          return crd.status?.conditions?.some((c) => c.type === 'Established' && c.status === 'True') === true;
        },
        { timeoutMs: 30_000 },
      );
    }
  }
  const sizes = { x1: 0, x1000: 0 };
  const checks: string[] = [];
  for (const [setup, n] of [
    ['x1', 1],
    ['x1000', 1000],
  ] as const) {
    const spec = exclusivePoolsSpec(benchMandates(n));
    sizes[setup] = specBytes(spec);
    const param = exclusivePoolsObject(spec, {});
    param.metadata.name = `bench-${setup}`;
    await client.create(param as unknown as KubernetesObject);
    await client.create({
      apiVersion: 'admissionregistration.k8s.io/v1',
      kind: 'ValidatingAdmissionPolicyBinding',
      metadata: { name: `bench-${setup}` },
      spec: {
        policyName: POLICY,
        validationActions: ['Deny'],
        paramRef: { name: `bench-${setup}`, parameterNotFoundAction: 'Deny' },
        matchResources: {
          namespaceSelector: {
            matchExpressions: [{ key: 'kubernetes.io/metadata.name', operator: 'In', values: [namespaces[setup]] }],
          },
        },
      },
    } as KubernetesObject);
    const path = `/api/v1/namespaces/${namespaces[setup]}/pods?dryRun=All`;
    const last = `tenant-${String(n - 1).padStart(4, '0')}`;
    const reaching = podBody() as { spec: Record<string, unknown> };
    reaching.spec.nodeSelector = { pool: `${last}-pool`, 'kubernetes.io/os': 'linux' };
    await waitFor(
      `the policy to refuse a Pod on ${last}'s pool in ${namespaces[setup]}`,
      async (observe) => {
        const res = await api.request('POST', path, reaching);
        observe(`HTTP ${res.status}: ${res.body.slice(0, 300)}`);
        return res.status === 403 && res.body.includes('reserved for another namespace');
      },
      { timeoutMs: 30_000, intervalMs: 200 },
    );
    checks.push(`${setup} (${n} mandate${n === 1 ? '' : 's'}): a Pod selecting ${last}'s pool → refused`);
    const res = await api.request('POST', path, exclusivePoolsPodBody());
    if (res.status !== 201)
      throw new Error(`dry-run bench Pod in ${namespaces[setup]}: HTTP ${res.status}: ${res.body.slice(0, 300)}`);
    checks.push(`${setup}: the bench's Pod (reaching no pool) → admitted`);
  }
  return { parameterBytes: sizes, checks };
}

export async function runExclusivePoolsBench(
  api: RawApi,
  opts: ExclusivePoolsBenchOptions,
  meta: Pick<ExclusivePoolsBenchResult, 'parameterBytes' | 'checks'>,
  log: (line: string) => void,
): Promise<ExclusivePoolsBenchResult> {
  const errors: string[] = [];
  const body = exclusivePoolsPodBody();
  const data = await runRounds(
    {
      setups: EXCLUSIVE_POOLS_SETUPS,
      rounds: opts.rounds,
      serialCreates: opts.serialCreates,
      parallelCreates: opts.parallelCreates,
      concurrency: opts.concurrency,
      block: (setup, count, c) => createPods(api, opts.namespaces[setup], count, c, errors, body),
      name: 'exclusive pools',
    },
    log,
  );
  const ratios = data.concurrencies.map((c) => {
    const [a, x1, x1000] = [data.perRound('a', c), data.perRound('x1', c), data.perRound('x1000', c)];
    return {
      concurrency: c,
      x1aP50: roundRatio(x1, a, 'p50'),
      x1aP99: roundRatio(x1, a, 'p99'),
      x1000aP50: roundRatio(x1000, a, 'p50'),
      x1000aP99: roundRatio(x1000, a, 'p99'),
      x1000x1P50: roundRatio(x1000, x1, 'p50'),
      x1000x1P99: roundRatio(x1000, x1, 'p99'),
    };
  });
  return { blocks: data.blocks, ratios, ...meta, errors };
}
