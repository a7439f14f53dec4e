/**
 * Benchmark `strength`: the cost of a stronger runtime on the real node (issue 22). One real node
 * (e2e harness: kubelet + containerd with runc and gVisor's runsc, systrap platform) with the
 * upstream Agent Sandbox controller; four setups, one object at a time, measured side by side in
 * rounds whose order rotates, after a discarded warm-up round:
 *   pod-runc        a Pod on RuntimeClass `runc` (handler runc);
 *   pod-gvisor      the same Pod on the platform RuntimeClass `gvisor` (handler runsc);
 *   sandbox-runc    an Agent Sandbox whose Pod template names `runc`;
 *   sandbox-gvisor  the same Sandbox naming `gvisor`.
 * Each time runs from just before the client's CREATE to the first watch event showing the
 * milestone (a watch opened before the CREATE, not polling). Between measurements the object is
 * deleted and its Pods are waited out, so every start finds the node idle.
 */
import { performance } from 'node:perf_hooks';
import { waitFor } from '@kubeplus-isolation/e2e';
import { type KubeConfig, Watch } from '@kubernetes/client-node';
import type { RawApi } from './kube.js';
import { rotation } from './pod-create.js';
import { type Summary, summarize } from './stats.js';

export type StrengthSetup = 'pod-runc' | 'pod-gvisor' | 'sandbox-runc' | 'sandbox-gvisor';
export const STRENGTH_SETUPS: readonly StrengthSetup[] = ['pod-runc', 'pod-gvisor', 'sandbox-runc', 'sandbox-gvisor'];

/** What each setup times, from the CREATE: its response, then the status milestones seen through the watch. */
export const STRENGTH_MILESTONES = {
  pod: ['created', 'running', 'started'],
  sandbox: ['created', 'ready'],
} as const;
export type StrengthMilestone = (typeof STRENGTH_MILESTONES)[keyof typeof STRENGTH_MILESTONES][number];

/** The RuntimeClass the bench creates for runc (the harness installs only the platform's `gvisor`). */
export const RUNC_RUNTIME_CLASS = { name: 'runc', handler: 'runc' } as const;
/** The static pause image the real node imports (no pull). */
export const STRENGTH_IMAGE = 'kubeplus-isolation.local/pause:1';

export const kindOf = (setup: StrengthSetup): 'pod' | 'sandbox' => (setup.startsWith('pod-') ? 'pod' : 'sandbox');
export const isGvisor = (setup: StrengthSetup): boolean => setup.endsWith('-gvisor');

/**
 * The rounds in the order they run: a warm-up (index 0, discarded) then `rounds` measured ones,
 * round r starting with setup r mod 4 (the warm-up in round 1's order). Pure.
 */
export function strengthSchedule(rounds: number): { round: number; warmup: boolean; order: StrengthSetup[] }[] {
  return Array.from({ length: rounds + 1 }, (_, i) => ({
    round: i,
    warmup: i === 0,
    order: rotation(STRENGTH_SETUPS, Math.max(i - 1, 0)),
  }));
}

/** The Pod spec every setup runs (a Pod's own, a Sandbox's template): pause, no pull, quick to stop. */
export function strengthPodSpec(runtimeClassName: string): Record<string, unknown> {
  return {
    runtimeClassName,
    terminationGracePeriodSeconds: 0,
    containers: [{ name: 'main', image: STRENGTH_IMAGE, imagePullPolicy: 'Never' }],
  };
}

/** The object a setup creates, named `name`. Pure. */
export function strengthBody(setup: StrengthSetup, name: string, gvisorClass: string): unknown {
  const runtimeClassName = isGvisor(setup) ? gvisorClass : RUNC_RUNTIME_CLASS.name;
  if (kindOf(setup) === 'pod')
    return { apiVersion: 'v1', kind: 'Pod', metadata: { name }, spec: strengthPodSpec(runtimeClassName) };
  return {
    apiVersion: 'agents.x-k8s.io/v1beta1',
    kind: 'Sandbox',
    metadata: { name },
    spec: { podTemplate: { spec: strengthPodSpec(runtimeClassName) } },
  };
}

interface ObjectLike {
  status?: {
    phase?: string;
    conditions?: { type: string; status: string }[];
    containerStatuses?: { started?: boolean }[];
  };
}

/** Whether `obj` (a setup's object as a watch event carries it) has reached `milestone`. Pure. */
export function reached(kind: 'pod' | 'sandbox', milestone: StrengthMilestone, obj: ObjectLike): boolean {
  if (kind === 'pod') {
    if (milestone === 'running') return obj.status?.phase === 'Running';
    if (milestone === 'started') {
      const cs = obj.status?.containerStatuses ?? [];
      return cs.length > 0 && cs.every((c) => c.started === true);
    }
    return false;
  }
  return (
    milestone === 'ready' && obj.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True') === true
  );
}

/** Per setup, per milestone: the measured rounds' times in ms, in round order. */
export type StrengthSamples = Partial<Record<StrengthSetup, Partial<Record<StrengthMilestone, number[]>>>>;

export interface StrengthRow {
  kind: 'pod' | 'sandbox';
  milestone: StrengthMilestone;
  runc: Summary;
  gvisor: Summary;
  /** Same-round runsc/runc, summarized over the rounds both measured. */
  ratio: Summary;
}

/** Per kind and milestone: each runtime's summary over rounds and the same-round ratio gVisor/runc. Pure. */
export function strengthRows(samples: StrengthSamples): StrengthRow[] {
  const rows: StrengthRow[] = [];
  for (const kind of ['pod', 'sandbox'] as const) {
    for (const milestone of STRENGTH_MILESTONES[kind]) {
      const runc = samples[`${kind}-runc`]?.[milestone] ?? [];
      const gvisor = samples[`${kind}-gvisor`]?.[milestone] ?? [];
      if (runc.length === 0 || gvisor.length === 0) continue;
      const n = Math.min(runc.length, gvisor.length);
      const ratios = Array.from({ length: n }, (_, i) => (gvisor[i] as number) / (runc[i] as number));
      rows.push({ kind, milestone, runc: summarize(runc), gvisor: summarize(gvisor), ratio: summarize(ratios) });
    }
  }
  return rows;
}

export interface StrengthResult {
  /** Measured rounds (the warm-up excluded). */
  rounds: number;
  runtimeClasses: { runc: { name: string; handler: string }; gvisor: { name: string; handler: string } };
  /** The controller's version as its image names it. */
  agentSandboxImage?: string;
  /** The order of each measured round. */
  orders: StrengthSetup[][];
  samples: StrengthSamples;
  rows: StrengthRow[];
}

export interface StrengthOptions {
  kc: KubeConfig;
  api: RawApi;
  namespace: string;
  rounds: number;
  gvisorClass: string;
  /** How long one start may take before the measurement fails. */
  timeoutMs?: number;
}

const PATHS = {
  pod: (ns: string) => `/api/v1/namespaces/${ns}/pods`,
  sandbox: (ns: string) => `/apis/agents.x-k8s.io/v1beta1/namespaces/${ns}/sandboxes`,
};

/**
 * Opens a watch on the object `name` at `path`, then CREATEs `body` and resolves with the ms from
 * just before the CREATE to its response (`created`) and to the first event showing each milestone.
 */
async function timeStart(
  opts: StrengthOptions,
  setup: StrengthSetup,
  name: string,
): Promise<Partial<Record<StrengthMilestone, number>>> {
  const kind = kindOf(setup);
  const path = PATHS[kind](opts.namespace);
  const wanted = STRENGTH_MILESTONES[kind].filter((m) => m !== 'created');
  const times: Partial<Record<StrengthMilestone, number>> = {};
  let t0 = Number.NaN;
  let last: unknown;
  let settle: (error?: Error) => void = () => undefined;
  const done = new Promise<void>((resolve, reject) => {
    settle = (error) => (error ? reject(error) : resolve());
  });
  const watch = await new Watch(opts.kc).watch(
    path,
    { fieldSelector: `metadata.name=${name}` },
    (type, obj: ObjectLike) => {
      const at = performance.now();
      last = obj.status;
      if (type !== 'ADDED' && type !== 'MODIFIED') return;
      for (const m of wanted) if (times[m] === undefined && reached(kind, m, obj)) times[m] = at - t0;
      if (wanted.every((m) => times[m] !== undefined)) settle();
    },
    (err) => settle(err ? new Error(`watch ${path}: ${String(err)}`) : new Error(`watch ${path} closed early`)),
  );
  const timeoutMs = opts.timeoutMs ?? 120_000;
  const timer = setTimeout(
    () =>
      settle(
        new Error(
          `${setup} ${name}: not ${wanted.join('+')} after ${timeoutMs} ms; last status ${JSON.stringify(last)}`,
        ),
      ),
    timeoutMs,
  );
  try {
    t0 = performance.now();
    const res = await opts.api.request('POST', path, strengthBody(setup, name, opts.gvisorClass));
    if (res.status !== 201) throw new Error(`create ${setup} ${name}: HTTP ${res.status}: ${res.body.slice(0, 300)}`);
    times.created = performance.now() - t0;
    await done;
    return times;
  } finally {
    clearTimeout(timer);
    watch.abort();
  }
}

/** Deletes the object and waits until it and every Pod of the namespace are gone (the node idle again). */
async function removeAndWait(opts: StrengthOptions, setup: StrengthSetup, name: string): Promise<void> {
  const path = `${PATHS[kindOf(setup)](opts.namespace)}/${name}`;
  // Graceful (no grace-period override): the Pod leaves the API only once the kubelet stopped it.
  const res = await opts.api.request('DELETE', path, { propagationPolicy: 'Foreground' });
  if (res.status !== 200 && res.status !== 202 && res.status !== 404)
    throw new Error(`delete ${path}: HTTP ${res.status}: ${res.body.slice(0, 300)}`);
  await waitFor(
    `${path} and the Pods of ${opts.namespace} to be gone`,
    async (observe) => {
      const obj = await opts.api.request('GET', path);
      const pods = JSON.parse((await opts.api.request('GET', PATHS.pod(opts.namespace))).body) as {
        items?: { metadata: { name: string } }[];
      };
      observe({ object: obj.status, pods: pods.items?.map((p) => p.metadata.name) });
      return obj.status === 404 && (pods.items ?? []).length === 0;
    },
    { timeoutMs: 120_000, intervalMs: 200 },
  );
}

/** Runs strengthSchedule(rounds): each setup once per round, one at a time, deleted and waited out before the next. */
export async function runStrengthBench(
  opts: StrengthOptions,
  meta: Pick<StrengthResult, 'runtimeClasses' | 'agentSandboxImage'>,
  log: (line: string) => void,
): Promise<StrengthResult> {
  const samples: StrengthSamples = {};
  const orders: StrengthSetup[][] = [];
  for (const { round, warmup, order } of strengthSchedule(opts.rounds)) {
    if (!warmup) orders.push(order);
    for (const setup of order) {
      const name = `${setup}-${round}`;
      const times = await timeStart(opts, setup, name);
      await removeAndWait(opts, setup, name);
      log(
        `strength ${warmup ? 'warm-up' : `round ${round}/${opts.rounds}`} ${setup}: ${Object.entries(times)
          .map(([m, ms]) => `${m} ${Math.round(ms as number)} ms`)
          .join(', ')}`,
      );
      if (warmup) continue;
      const bySetup = samples[setup] ?? {};
      for (const [m, ms] of Object.entries(times) as [StrengthMilestone, number][])
        bySetup[m] = [...(bySetup[m] ?? []), ms];
      samples[setup] = bySetup;
    }
  }
  return { rounds: opts.rounds, ...meta, orders, samples, rows: strengthRows(samples) };
}
