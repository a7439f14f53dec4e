/**
 * Benchmark `sandbox-pods`: what governing Pods with the sandbox policy costs. Since the sandbox
 * policies also match core Pods (services/operator/src/desired/sandbox-policy.ts,
 * `SANDBOX_POD_CONDITION`), every Pod CREATE in a governed namespace reaches the policy, whose
 * matchCondition lets through only Pods that are or can become a Sandbox's Pod. Three setups on
 * one control plane, measured side by side in the same rotating rounds as section 3 (`runRounds`):
 *   a  plain namespace: no binding selects it — the baseline;
 *   g  a namespace bound by the real enforce policy for minimum kata (`desiredSandboxPolicy`,
 *      created as the operator creates it, with the platform RuntimeClass the Pods name); the
 *      Pods are ordinary (no owner, no adoption label): the matchCondition says no — what the Pod
 *      rule costs every other Pod of a governed namespace;
 *   h  the same namespace, the Pods labelled `agents.x-k8s.io/adoptable`: selected, validated and
 *      admitted (their class is allowed) — what judging a Pod costs, i.e. what governing EVERY
 *      Pod of the namespace would cost per Pod.
 * Every setup's Pods name the same platform RuntimeClass, so the RuntimeClass admission plugin
 * does the same work in all three; h's Pods differ from g's only by the label.
 */
import { waitFor } from '@kubeplus-isolation/e2e';
import { ADOPTABLE_LABEL } from '@kubeplus-isolation/operator/dist/desired/agent-sandbox.js';
import { desiredSandboxPolicy } from '@kubeplus-isolation/operator/dist/desired/sandbox-policy.js';
import { type KubeConfig, type KubernetesObject, KubernetesObjectApi } from '@kubernetes/client-node';
import { createRuntimeClass, type RawApi } from './kube.js';
import { type BlockStats, createPods, podBody, roundRatio, runRounds } from './pod-create.js';
import { type Summary, summarize } from './stats.js';

/** The label h's Pods carry (the operator's): one that lets the Agent Sandbox controller adopt a Pod. */
export { ADOPTABLE_LABEL };

export type SandboxPodSetup = 'a' | 'g' | 'h';
export const SANDBOX_POD_SETUPS: readonly SandboxPodSetup[] = ['a', 'g', 'h'];

/** The platform RuntimeClass every setup's Pods name: no ownership markers, handler kata (meets the minimum). */
export const PLATFORM_RUNTIME_CLASS = { name: 'bench-kata', handler: 'kata' } as const;

/** The minimum the bench's instance asks for (enforce mode). */
export const BENCH_MIN_RUNTIME_CLASS = 'kata' as const;

/** The instance whose policy governs the g/h namespace (as if annotated kubeplus.io/sandbox-isolation). */
const BENCH_INSTANCE = {
  group: 'apps.bench.kubeplus.io',
  kind: 'BenchApp',
  namespace: 'kubeplus',
  name: 'bench-sandbox-pods',
  uid: '00000000-0000-4000-8000-000000000021',
};

/**
 * The objects the operator would create for one instance with
 * `kubeplus.io/sandbox-isolation: {"minRuntimeClass":"kata","enforce":true}` whose tenant
 * namespace is `namespace`, in a cluster holding only the platform RuntimeClass: its own
 * RuntimeClass, the enforcing ValidatingAdmissionPolicy and its binding. Pure.
 */
export function benchSandboxPolicy(namespace: string): ReturnType<typeof desiredSandboxPolicy> {
  return desiredSandboxPolicy({
    instance: BENCH_INSTANCE,
    tenantNamespace: namespace,
    spec: { minRuntimeClass: BENCH_MIN_RUNTIME_CLASS, enforce: true },
    runtimeClasses: [{ ...PLATFORM_RUNTIME_CLASS, generated: false }],
    mutatingPolicyApiVersion: undefined,
  });
}

/** The Pod each setup creates: the same Pod on the platform class; h's adds the adoption label. */
export function sandboxPodBody(setup: SandboxPodSetup): unknown {
  return podBody({
    runtimeClassName: PLATFORM_RUNTIME_CLASS.name,
    ...(setup === 'h' && { labels: { [ADOPTABLE_LABEL]: 'true' } }),
  });
}

export interface SandboxPodsOptions {
  rounds: number;
  serialCreates: number;
  parallelCreates: number;
  concurrency: number;
  /** a: the plain namespace; g and h: the governed one (the same). */
  namespaces: Record<SandboxPodSetup, string>;
  /**
   * The API server's apiserver_admission_controller_admission_duration_seconds sum (s) and count
   * for the ValidatingAdmissionPolicy plugin, Pod CREATEs only (read before and after each block).
   */
  policyPluginTotals: () => Promise<{ sum: number; count: number }>;
}

/** Mean time per Pod CREATE in the ValidatingAdmissionPolicy admission plugin, by its own metric. */
export interface PolicyPluginStats {
  concurrency: number;
  /** Per-round mean µs of each setup's block, summarized over rounds. */
  meanUs: Record<SandboxPodSetup, Summary>;
  /** Same-round differences g − a and h − a, µs. */
  gMinusAUs: Summary;
  hMinusAUs: Summary;
}

export interface SandboxPodsRatios {
  concurrency: number;
  /** The Pod rule's cost to a Pod it does not select: governed namespace, ordinary Pod vs plain. */
  gaP50: Summary;
  gaP99: Summary;
  /** A judged Pod vs plain: what governing every Pod would cost per Pod. */
  haP50: Summary;
  haP99: Summary;
  /** A judged Pod vs an unselected one in the same namespace: the validation alone. */
  hgP50: Summary;
  hgP99: Summary;
}

export interface SandboxPodsResult {
  blocks: BlockStats<SandboxPodSetup>[];
  ratios: SandboxPodsRatios[];
  /** Absent in results from before it was measured. */
  policyPlugin?: PolicyPluginStats[];
  /** What the policy was: its name, minimum, allowed classes and the matchCondition's name. */
  policy: { name: string; minRuntimeClass: string; allowedRuntimeClasses: string[]; matchCondition: string };
  /** The dry-run checks that proved the setup before measuring, as "what → outcome". */
  checks: string[];
  errors: string[];
}

/** Same-round ratios of g and h against a (and h against g), per concurrency. Pure. */
export function sandboxPodRatios(
  concurrencies: readonly number[],
  perRound: (setup: SandboxPodSetup, concurrency: number) => Parameters<typeof roundRatio>[0],
): SandboxPodsRatios[] {
  return concurrencies.map((c) => {
    const [a, g, h] = [perRound('a', c), perRound('g', c), perRound('h', c)];
    return {
      concurrency: c,
      gaP50: roundRatio(g, a, 'p50'),
      gaP99: roundRatio(g, a, 'p99'),
      haP50: roundRatio(h, a, 'p50'),
      haP99: roundRatio(h, a, 'p99'),
      hgP50: roundRatio(h, g, 'p50'),
      hgP99: roundRatio(h, g, 'p99'),
    };
  });
}

/**
 * Per-round mean µs per Pod CREATE in the policy plugin, keyed `setup/concurrency`, into the
 * per-concurrency summaries and same-round differences. Pure.
 */
export function policyPluginStats(
  concurrencies: readonly number[],
  perRoundMeanUs: (setup: SandboxPodSetup, concurrency: number) => readonly number[],
): PolicyPluginStats[] {
  return concurrencies.map((c) => {
    const [a, g, h] = [perRoundMeanUs('a', c), perRoundMeanUs('g', c), perRoundMeanUs('h', c)];
    const minus = (x: readonly number[]): Summary =>
      summarize(x.slice(0, a.length).map((v, i) => v - (a[i] as number)));
    return {
      concurrency: c,
      meanUs: { a: summarize([...a]), g: summarize([...g]), h: summarize([...h]) },
      gMinusAUs: minus(g),
      hMinusAUs: minus(h),
    };
  });
}

export async function runSandboxPodsBench(
  api: RawApi,
  opts: SandboxPodsOptions,
  meta: Pick<SandboxPodsResult, 'policy' | 'checks'>,
  log: (line: string) => void,
): Promise<SandboxPodsResult> {
  const errors: string[] = [];
  const pluginUs = new Map<string, number[]>();
  const bodies = Object.fromEntries(SANDBOX_POD_SETUPS.map((s) => [s, sandboxPodBody(s)])) as Record<
    SandboxPodSetup,
    unknown
  >;
  const data = await runRounds(
    {
      setups: SANDBOX_POD_SETUPS,
      rounds: opts.rounds,
      serialCreates: opts.serialCreates,
      parallelCreates: opts.parallelCreates,
      concurrency: opts.concurrency,
      block: (setup, count, c) => createPods(api, opts.namespaces[setup], count, c, errors, bodies[setup]),
      aroundBlock: async (setup, c) => {
        const before = await opts.policyPluginTotals();
        return async () => {
          const after = await opts.policyPluginTotals();
          const key = `${setup}/${c}`;
          const meanUs = ((after.sum - before.sum) / (after.count - before.count || Number.NaN)) * 1e6;
          pluginUs.set(key, [...(pluginUs.get(key) ?? []), meanUs]);
        };
      },
      name: 'sandbox pods',
    },
    log,
  );
  return {
    blocks: data.blocks,
    ratios: sandboxPodRatios(data.concurrencies, data.perRound),
    policyPlugin: policyPluginStats(data.concurrencies, (s, c) => pluginUs.get(`${s}/${c}`) ?? []),
    ...meta,
    errors,
  };
}

/**
 * Creates the platform RuntimeClass and `benchSandboxPolicy(namespace)`'s objects (RuntimeClass,
 * policy, binding) as the operator does (plain creates, in its apply order), then proves with
 * dry-run Pods in `namespace` that the policy governs what it should: a Pod labelled adoptable
 * without a runtime class is denied (retried until the API server has loaded the policy), the
 * same Pod on the platform class (setup h) and an ordinary Pod without any class (not selected)
 * are admitted, as is setup g's Pod. Returns what the report says about the setup.
 */
export async function installSandboxPodPolicy(
  kc: KubeConfig,
  api: RawApi,
  namespace: string,
): Promise<Pick<SandboxPodsResult, 'policy' | 'checks'>> {
  const client = KubernetesObjectApi.makeApiClient(kc);
  const desired = benchSandboxPolicy(namespace);
  await createRuntimeClass(kc, PLATFORM_RUNTIME_CLASS);
  for (const obj of desired.objects) await client.create(obj as unknown as KubernetesObject);
  const policy = desired.objects.find((o) => o.kind === 'ValidatingAdmissionPolicy') as
    | (KubernetesObject & { spec: { matchConditions: { name: string }[] } })
    | undefined;
  if (!policy?.metadata?.name) throw new Error('desiredSandboxPolicy returned no ValidatingAdmissionPolicy');

  const path = `/api/v1/namespaces/${namespace}/pods?dryRun=All`;
  const dryRun = (body: unknown) => api.request('POST', path, body);
  const checks: string[] = [];
  const adoptableNoClass = podBody({ labels: { [ADOPTABLE_LABEL]: 'true' } });
  await waitFor(
    `the sandbox policy to deny an adoptable Pod without a runtime class in ${namespace}`,
    async (observe) => {
      const res = await dryRun(adoptableNoClass);
      observe(`HTTP ${res.status}: ${res.body.slice(0, 300)}`);
      return res.status !== 201 && res.body.includes(`requires sandbox runtime ${BENCH_MIN_RUNTIME_CLASS}`);
    },
    { timeoutMs: 30_000, intervalMs: 200 },
  );
  checks.push(`a Pod labelled ${ADOPTABLE_LABEL} without a runtime class → denied by the policy`);
  const mustAdmit: [string, unknown][] = [
    ['an ordinary Pod without a runtime class (not selected)', podBody()],
    [`setup g's Pod (ordinary, class ${PLATFORM_RUNTIME_CLASS.name})`, sandboxPodBody('g')],
    [
      `setup h's Pod (labelled ${ADOPTABLE_LABEL}, class ${PLATFORM_RUNTIME_CLASS.name}: judged, allowed)`,
      sandboxPodBody('h'),
    ],
  ];
  for (const [what, body] of mustAdmit) {
    const res = await dryRun(body);
    if (res.status !== 201)
      throw new Error(`dry-run ${what} in ${namespace}: HTTP ${res.status}: ${res.body.slice(0, 300)}`);
    checks.push(`${what} → admitted`);
  }
  return {
    policy: {
      name: policy.metadata.name,
      minRuntimeClass: BENCH_MIN_RUNTIME_CLASS,
      allowedRuntimeClasses: desired.allowedRuntimeClasses,
      matchCondition: policy.spec.matchConditions.map((c) => c.name).join(', '),
    },
    checks,
  };
}
