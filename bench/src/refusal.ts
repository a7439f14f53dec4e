/**
 * Benchmark `refusal`: what refusal mode (chart global.nodeIsolation.refuseUnplaced, issue 38)
 * costs a Pod CREATE. Two setups on one control plane, interleaved in the same rotating rounds as
 * section 3 (`runRounds`), both in a namespace isolated for the real webhook (which places every
 * Pod, so every Pod is admitted):
 *   c  no refusal policy selects the namespace — the webhook engine as shipped, fail-open;
 *   r  the chart's refusal ValidatingAdmissionPolicy (deploy/kubeplus-isolation/files/node-isolation-refusal.yaml,
 *      as shipped, its binding narrowed to the bench's label) with the namespace's NodeIsolation
 *      parameter: every Pod judged against the mandate after the webhook placed it.
 * r/c is what refusal mode costs each Pod CREATE of an isolated namespace; the API server's own
 * ValidatingAdmissionPolicy plugin metric gives the time spent in the policy itself.
 */
import { waitFor } from '@kubeplus-isolation/e2e';
import { type KubeConfig, type KubernetesObject, KubernetesObjectApi } from '@kubernetes/client-node';
import { chartFileObjects } from './chart-files.js';
import type { RawApi } from './kube.js';
import { type BlockStats, createPods, podBody, roundRatio, runRounds } from './pod-create.js';
import { type Summary, summarize } from './stats.js';

export type RefusalSetup = 'c' | 'r';
export const REFUSAL_SETUPS: readonly RefusalSetup[] = ['c', 'r'];

/** The label the bench's refusal binding selects (beside the isolation label). */
export const REFUSAL_BENCH_LABEL = 'bench.kubeplus.io/refusal';
export const REFUSAL_POLICY = 'kubeplus-isolation-node-isolation-refusal';

export interface RefusalOptions {
  rounds: number;
  serialCreates: number;
  parallelCreates: number;
  concurrency: number;
  namespaces: Record<RefusalSetup, string>;
  /** The VAP plugin's admission duration sum (s) and count, Pod CREATEs only. */
  policyPluginTotals: () => Promise<{ sum: number; count: number }>;
}

export interface RefusalRatios {
  concurrency: number;
  rcP50: Summary;
  rcP99: Summary;
}

export interface RefusalPluginStats {
  concurrency: number;
  meanUs: Record<RefusalSetup, Summary>;
  /** Same-round r − c, µs. */
  rMinusCUs: Summary;
}

export interface RefusalResult {
  blocks: BlockStats<RefusalSetup>[];
  ratios: RefusalRatios[];
  policyPlugin: RefusalPluginStats[];
  /** The dry-run checks that proved the setup before measuring, as "what → outcome". */
  checks: string[];
  errors: string[];
}

/** The shipped refusal policy and binding, the binding narrowed to namespaces with the bench label. Pure. */
export function benchRefusalObjects(shipped: readonly KubernetesObject[]): KubernetesObject[] {
  return shipped
    .filter((o) => o.kind === 'ValidatingAdmissionPolicy' || o.kind === 'ValidatingAdmissionPolicyBinding')
    .map((o) => {
      if (o.kind !== 'ValidatingAdmissionPolicyBinding') return o;
      const b = structuredClone(o) as KubernetesObject & {
        spec: { matchResources: { namespaceSelector: { matchLabels?: Record<string, string> } } };
      };
      b.spec.matchResources.namespaceSelector.matchLabels = { [REFUSAL_BENCH_LABEL]: 'true' };
      return b;
    });
}

/** Same-round r/c ratios and plugin differences per concurrency. Pure. */
export function refusalStats(
  concurrencies: readonly number[],
  perRound: (setup: RefusalSetup, concurrency: number) => Parameters<typeof roundRatio>[0],
  perRoundPluginUs: (setup: RefusalSetup, concurrency: number) => readonly number[],
): Pick<RefusalResult, 'ratios' | 'policyPlugin'> {
  return {
    ratios: concurrencies.map((c) => ({
      concurrency: c,
      rcP50: roundRatio(perRound('r', c), perRound('c', c), 'p50'),
      rcP99: roundRatio(perRound('r', c), perRound('c', c), 'p99'),
    })),
    policyPlugin: concurrencies.map((c) => {
      const [cu, ru] = [perRoundPluginUs('c', c), perRoundPluginUs('r', c)];
      const n = Math.min(cu.length, ru.length);
      return {
        concurrency: c,
        meanUs: { c: summarize([...cu]), r: summarize([...ru]) },
        rMinusCUs: summarize(Array.from({ length: n }, (_, i) => (ru[i] as number) - (cu[i] as number))),
      };
    }),
  };
}

/**
 * Installs the refusal policy (narrowed binding) and proves it live with dry-run Pods: one in
 * `unparametrised` (the bench label, no NodeIsolation parameter) is refused; one in `namespace`
 * (its parameter written, the webhook placing its Pods) is admitted. Returns those checks.
 */
export async function installRefusalPolicy(
  kc: KubeConfig,
  api: RawApi,
  namespace: string,
  unparametrised: string,
): Promise<string[]> {
  const client = KubernetesObjectApi.makeApiClient(kc);
  const shipped = chartFileObjects('node-isolation-refusal.yaml');
  for (const obj of benchRefusalObjects(shipped)) await client.create(obj);
  const dryRun = (ns: string) => api.request('POST', `/api/v1/namespaces/${ns}/pods?dryRun=All`, podBody());
  await waitFor(
    `the refusal policy to refuse Pods of ${unparametrised} (labelled, no parameter)`,
    async (observe) => {
      const res = await dryRun(unparametrised);
      observe(`HTTP ${res.status}: ${res.body.slice(0, 300)}`);
      // 422: the API server's answer to parameterNotFoundAction Deny.
      return res.status === 422 && res.body.includes(REFUSAL_POLICY);
    },
    { timeoutMs: 60_000, intervalMs: 200 },
  );
  await waitFor(
    `the refusal policy to admit the webhook-placed Pods of ${namespace}`,
    async (observe) => {
      const res = await dryRun(namespace);
      observe(`HTTP ${res.status}: ${res.body.slice(0, 300)}`);
      return res.status === 201;
    },
    { timeoutMs: 60_000, intervalMs: 200 },
  );
  return [
    'a Pod of a namespace with the bench label and no NodeIsolation parameter → refused by the policy (the binding is live)',
    "a Pod of setup r's namespace (placed by the webhook, then judged against its parameter) → admitted",
  ];
}

export async function runRefusalBench(
  api: RawApi,
  opts: RefusalOptions,
  checks: string[],
  log: (line: string) => void,
): Promise<RefusalResult> {
  const errors: string[] = [];
  const pluginUs = new Map<string, number[]>();
  const data = await runRounds(
    {
      setups: REFUSAL_SETUPS,
      rounds: opts.rounds,
      serialCreates: opts.serialCreates,
      parallelCreates: opts.parallelCreates,
      concurrency: opts.concurrency,
      block: (setup, count, c) => createPods(api, opts.namespaces[setup], count, c, errors),
      aroundBlock: async (setup, c) => {
        const before = await opts.policyPluginTotals();
        return async () => {
          const after = await opts.policyPluginTotals();
          const key = `${setup}/${c}`;
          const meanUs = ((after.sum - before.sum) / (after.count - before.count || Number.NaN)) * 1e6;
          pluginUs.set(key, [...(pluginUs.get(key) ?? []), meanUs]);
        };
      },
      name: 'refusal',
    },
    log,
  );
  return {
    blocks: data.blocks,
    ...refusalStats(data.concurrencies, data.perRound, (s, c) => pluginUs.get(`${s}/${c}`) ?? []),
    checks,
    errors,
  };
}
