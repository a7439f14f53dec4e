/**
 * Benchmark 7: the admission-policy engine with many tenants. `isolated` namespaces, each governed
 * by the policy and holding its own NodeIsolation parameter, then Pod CREATE latency through the
 * real API server with every create in one namespace vs spread round-robin over all of them,
 * interleaved per round: the per-request cost must not grow with the number of tenants (the
 * policy's parameter lookup is by namespace in the API server's informer).
 */
import { canonicalNodeIsolation } from '@kubeplus-isolation/spec';
import { forEachConcurrent, type RawApi } from './kube.js';
import { createPods } from './pod-create.js';
import { poolMandate } from './pods.js';
import { percentiles, type Summary, summarize } from './stats.js';

export interface PolicyScaleOptions {
  isolated: number;
  createConcurrency: number;
  rounds: number;
  creates: number;
  concurrency: number;
  /** The label the bench's policy binding selects. */
  label: string;
}

export interface PolicyScaleResult {
  isolated: number;
  createSeconds: number;
  creates: number;
  concurrency: number;
  oneP50: Summary;
  oneP99: Summary;
  spreadP50: Summary;
  spreadP99: Summary;
  /** spread / one, per round. */
  ratioP50: Summary;
  ratioP99: Summary;
  errors: string[];
}

export async function runPolicyScale(
  api: RawApi,
  opts: PolicyScaleOptions,
  log: (line: string) => void,
): Promise<PolicyScaleResult> {
  const run = Date.now().toString(36);
  const names: string[] = [];
  const t0 = process.hrtime.bigint();
  let done = 0;
  await forEachConcurrent(opts.isolated, opts.createConcurrency, async (i) => {
    const name = `policy-${run}-${i}`;
    await api.create('/api/v1/namespaces', {
      apiVersion: 'v1',
      kind: 'Namespace',
      metadata: { name, labels: { [opts.label]: 'true' } },
    });
    // The controller-manager would take minutes to create 5,000 default ServiceAccounts (its
    // client rate); Pods cannot be admitted without one, so it is created here (409: it won).
    const sa = await api.request('POST', `/api/v1/namespaces/${name}/serviceaccounts`, {
      apiVersion: 'v1',
      kind: 'ServiceAccount',
      metadata: { name: 'default' },
    });
    if (sa.status !== 201 && sa.status !== 409) throw new Error(`ServiceAccount ${name}/default: HTTP ${sa.status}`);
    await api.create(`/apis/isolation.kubeplus.io/v1alpha1/namespaces/${name}/nodeisolations`, {
      apiVersion: 'isolation.kubeplus.io/v1alpha1',
      kind: 'NodeIsolation',
      metadata: { name: 'node-isolation' },
      spec: JSON.parse(canonicalNodeIsolation(poolMandate(`pool-${i % 250}`))) as unknown,
    });
    names.push(name);
    if (++done % 1000 === 0) log(`  policy scale: ${done}/${opts.isolated} namespaces with their parameter`);
  });
  const createSeconds = Number(process.hrtime.bigint() - t0) / 1e9;
  names.sort();
  const errors: string[] = [];
  const one: { p50: number; p99: number }[] = [];
  const spread: { p50: number; p99: number }[] = [];
  // Warm-up of both paths, discarded.
  await createPods(api, names, opts.creates, opts.concurrency, errors);
  await createPods(api, names[0] as string, opts.creates, opts.concurrency, errors);
  for (let round = 0; round < opts.rounds; round++) {
    const order = round % 2 === 0 ? (['one', 'spread'] as const) : (['spread', 'one'] as const);
    for (const which of order) {
      const res = await createPods(
        api,
        which === 'one' ? (names[0] as string) : names,
        opts.creates,
        opts.concurrency,
        errors,
      );
      const p = percentiles(res.latencies);
      (which === 'one' ? one : spread).push({ p50: p.p50, p99: p.p99 });
    }
    log(`  policy scale: round ${round + 1}/${opts.rounds} done`);
  }
  return {
    isolated: names.length,
    createSeconds,
    creates: opts.creates,
    concurrency: opts.concurrency,
    oneP50: summarize(one.map((r) => r.p50)),
    oneP99: summarize(one.map((r) => r.p99)),
    spreadP50: summarize(spread.map((r) => r.p50)),
    spreadP99: summarize(spread.map((r) => r.p99)),
    ratioP50: summarize(spread.map((s, i) => s.p50 / (one[i]?.p50 ?? Number.NaN))),
    ratioP99: summarize(spread.map((s, i) => s.p99 / (one[i]?.p99 ?? Number.NaN))),
    errors,
  };
}
