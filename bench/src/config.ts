/** Benchmark parameters: environment variables with the numbers as defaults. */
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import {
  SANDBOX_POLICY_LAYOUTS,
  type SandboxPolicyLayout,
} from '@kubeplus-isolation/operator/dist/desired/sandbox-policy.js';

/** The webhook image's Dockerfile (from bench/src or bench/dist alike). */
export const WEBHOOK_DOCKERFILE = fileURLToPath(new URL('../../services/webhook/Dockerfile', import.meta.url));
/** The operator image's Dockerfile. */
export const OPERATOR_DOCKERFILE = fileURLToPath(new URL('../../services/operator/Dockerfile', import.meta.url));

function int(name: string, fallback: number): number {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return fallback;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < 0) throw new Error(`${name}=${raw}: expected a non-negative integer`);
  return n;
}

/** A comma-separated list of positive integers (`1000,5000,10000`), in the order given. */
export function intList(name: string, raw: string | undefined, fallback: readonly number[]): number[] {
  if (raw === undefined || raw.trim() === '') return [...fallback];
  return raw.split(',').map((part) => {
    const n = Number(part.trim());
    if (!Number.isInteger(n) || n <= 0)
      throw new Error(`${name}=${raw}: expected positive integers separated by commas`);
    return n;
  });
}

/** The operator scale points of a config (results written before the points held one number). */
export function operatorPoints(instances: number | readonly number[]): readonly number[] {
  return typeof instances === 'number' ? [instances] : instances;
}

export const SECTIONS = [
  'patch',
  'webhook',
  'podcreate',
  'engine-trims',
  'chart',
  'scale-operator',
  'scale-webhook',
  'scale-policy',
  'sandbox-pods',
  'refusal',
  'exclusive-pools',
  'strength',
] as const;
export type Section = (typeof SECTIONS)[number];

export interface BenchConfig {
  sections: Section[];
  rounds: number;
  patchTimeMs: number;
  loadSeconds: number;
  loadConnections: number;
  /** Seconds of load on a CPU-profiled webhook (0: no profile). */
  profileSeconds: number;
  podSerial: number;
  podParallel: number;
  podConcurrency: number;
  chainReplicas: number;
  scaleNamespaces: number;
  scaleIsolated: number;
  /**
   * The webhook's larger scale point: namespaces in all (the first step's included, as many more
   * created, the same share isolated); not above scaleNamespaces: no second step. Absent in
   * results written before it existed.
   */
  scaleLargeNamespaces?: number;
  /** The operator scale points: one run, on its own control plane, per count (a number in older results). */
  operatorInstances: number | readonly number[];
  /** Per point. */
  operatorTimeoutSeconds: number;
  /**
   * Each operator point runs once per entry, in this order: true, the instances carry both
   * annotations; false, node isolation only, so that the pair shows what the per-instance sandbox
   * objects (RuntimeClass, policy, binding) cost (BENCH_OPERATOR_SANDBOX, e.g. `0,1`). Absent in
   * older results: [true].
   */
  operatorSandbox?: readonly boolean[];
  /**
   * The operator's --sandbox-policy-layout for every point (BENCH_OPERATOR_SANDBOX_LAYOUT):
   * per-instance (a policy and binding per instance) or shared (one policy for the cluster, a
   * binding and a SandboxIsolation parameter per instance). Absent in older results: per-instance.
   */
  operatorSandboxLayout?: SandboxPolicyLayout;
  /** NODE_OPTIONS of the operator (the image's unless BENCH_OPERATOR_NODE_OPTIONS). Absent in older results. */
  operatorNodeOptions?: string;
  /** --concurrency for the operator; undefined: its own default. */
  operatorConcurrency: number | undefined;
  /** NODE_OPTIONS for the webhook processes; empty: none. */
  webhookNodeOptions: string;
  /**
   * Where webhookNodeOptions came from: the image's Dockerfile (the default) or
   * BENCH_WEBHOOK_NODE_OPTIONS. Absent in results written before the image's were the default.
   */
  webhookNodeOptionsFrom?: 'image' | 'env';
  /**
   * glibc malloc tunables (`MALLOC_*`) the webhook image sets with ENV, passed to the webhook
   * processes as the image does. Absent in results written before they were passed.
   */
  webhookMallocEnv?: Record<string, string>;
  outDir: string;
  /** Where the raw results go (and are read from with reportOnly), relative to the repo root. */
  resultsFile: string;
  reportOnly: boolean;
  /**
   * BENCH_MERGE=1: merge this run's sections into the existing results file instead of
   * replacing it, so the report keeps the other sections' figures (results.ts, mergeResults).
   */
  merge?: boolean;
}

/** Documented in bench/README.md. */
export function loadConfig(): BenchConfig {
  const only = (process.env.BENCH_ONLY ?? '')
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  for (const s of only) {
    if (!(SECTIONS as readonly string[]).includes(s)) {
      throw new Error(`BENCH_ONLY: unknown section ${s} (sections: ${SECTIONS.join(', ')})`);
    }
  }
  return {
    sections: only.length > 0 ? (only as Section[]) : [...SECTIONS],
    rounds: Math.max(1, int('BENCH_ROUNDS', 5)),
    patchTimeMs: int('BENCH_PATCH_TIME_MS', 250),
    loadSeconds: Math.max(1, int('BENCH_LOAD_SECONDS', 5)),
    loadConnections: Math.max(1, int('BENCH_LOAD_CONNECTIONS', 16)),
    profileSeconds: int('BENCH_PROFILE_SECONDS', 8),
    podSerial: Math.max(1, int('BENCH_POD_SERIAL', 150)),
    podParallel: Math.max(1, int('BENCH_POD_PARALLEL', 480)),
    podConcurrency: Math.max(2, int('BENCH_POD_CONCURRENCY', 32)),
    chainReplicas: Math.max(1, int('BENCH_CHAIN_REPLICAS', 30)),
    scaleNamespaces: int('BENCH_SCALE_NAMESPACES', 10_000),
    scaleIsolated: int('BENCH_SCALE_ISOLATED', 5_000),
    scaleLargeNamespaces: int('BENCH_SCALE_LARGE_NAMESPACES', 50_000),
    operatorInstances: intList(
      'BENCH_OPERATOR_INSTANCES',
      process.env.BENCH_OPERATOR_INSTANCES,
      [1_000, 5_000, 10_000],
    ),
    operatorTimeoutSeconds: Math.max(10, int('BENCH_OPERATOR_TIMEOUT_S', 900)),
    operatorSandbox: sandboxModes(process.env.BENCH_OPERATOR_SANDBOX),
    operatorSandboxLayout: sandboxLayout(process.env.BENCH_OPERATOR_SANDBOX_LAYOUT),
    operatorNodeOptions:
      process.env.BENCH_OPERATOR_NODE_OPTIONS?.trim() ??
      dockerfileEnv(readFileSync(OPERATOR_DOCKERFILE, 'utf8')).get('NODE_OPTIONS') ??
      '',
    operatorConcurrency: process.env.BENCH_OPERATOR_CONCURRENCY
      ? Math.max(1, int('BENCH_OPERATOR_CONCURRENCY', 2))
      : undefined,
    ...webhookNodeOptions(),
    webhookMallocEnv: webhookMallocEnv(),
    outDir: process.env.BENCH_OUT_DIR ?? 'docs',
    resultsFile: process.env.BENCH_RESULTS ?? 'bench/results/latest.json',
    reportOnly: process.env.BENCH_REPORT_ONLY === '1',
    merge: process.env.BENCH_MERGE === '1',
  };
}

/** BENCH_WEBHOOK_NODE_OPTIONS if set (even empty: none), else what the webhook image sets. */
function webhookNodeOptions(): Pick<BenchConfig, 'webhookNodeOptions' | 'webhookNodeOptionsFrom'> {
  const env = process.env.BENCH_WEBHOOK_NODE_OPTIONS;
  if (env !== undefined) return { webhookNodeOptions: env.trim(), webhookNodeOptionsFrom: 'env' };
  const image = dockerfileEnv(readFileSync(WEBHOOK_DOCKERFILE, 'utf8')).get('NODE_OPTIONS') ?? '';
  return { webhookNodeOptions: image, webhookNodeOptionsFrom: 'image' };
}

/** The image's `MALLOC_*` ENV (glibc malloc tunables, e.g. MALLOC_ARENA_MAX). */
/** BENCH_OPERATOR_SANDBOX: comma-separated 1 (both annotations) and 0 (node isolation only); unset: 1. */
export function sandboxModes(raw: string | undefined): boolean[] {
  const items = (raw ?? '')
    .split(',')
    .map((x) => x.trim())
    .filter((x) => x !== '');
  if (items.length === 0) return [true];
  return items.map((x) => {
    if (x !== '0' && x !== '1') throw new Error(`BENCH_OPERATOR_SANDBOX: "${x}" is neither 0 nor 1`);
    return x === '1';
  });
}

/** BENCH_OPERATOR_SANDBOX_LAYOUT: per-instance or shared; unset: shared. */
export function sandboxLayout(raw: string | undefined): SandboxPolicyLayout {
  const value = (raw ?? '').trim();
  if (value === '') return 'shared';
  const layout = SANDBOX_POLICY_LAYOUTS.find((l) => l === value);
  if (layout === undefined) {
    throw new Error(`BENCH_OPERATOR_SANDBOX_LAYOUT: "${value}" is not one of ${SANDBOX_POLICY_LAYOUTS.join(', ')}`);
  }
  return layout;
}

function webhookMallocEnv(): Record<string, string> {
  const image = dockerfileEnv(readFileSync(WEBHOOK_DOCKERFILE, 'utf8'));
  return Object.fromEntries([...image].filter(([k]) => k.startsWith('MALLOC_')));
}

/**
 * The environment a Dockerfile's final stage sets with ENV: `ENV K=v K2="v 2"` (quotes and
 * backslash escapes) and the legacy `ENV K v`, across line continuations; comment lines are
 * dropped first, as Docker does. Build arguments (`$VAR`) are not expanded.
 */
export function dockerfileEnv(dockerfile: string): Map<string, string> {
  const lines = dockerfile.split(/\r?\n/).filter((l) => !/^\s*#/.test(l));
  const instructions = lines
    .join('\n')
    .replace(/\\[ \t]*\n/g, ' ')
    .split('\n')
    .map((l) => l.trim())
    .filter(Boolean);
  let env = new Map<string, string>();
  for (const line of instructions) {
    const m = /^(\S+)\s*(.*)$/.exec(line);
    const op = m?.[1]?.toUpperCase();
    const args = m?.[2] ?? '';
    if (op === 'FROM') env = new Map();
    if (op !== 'ENV') continue;
    const words = shellWords(args);
    if (words[0]?.includes('=')) {
      for (const w of words) {
        const eq = w.indexOf('=');
        if (eq > 0) env.set(w.slice(0, eq), w.slice(eq + 1));
      }
    } else if (words[0] !== undefined) {
      env.set(words[0], args.slice(args.indexOf(words[0]) + words[0].length).trim());
    }
  }
  return env;
}

/** Whitespace-separated words, with "..." and '...' quoting and backslash escapes removed. */
function shellWords(text: string): string[] {
  const words: string[] = [];
  let word: string | undefined;
  let quote: '"' | "'" | undefined;
  for (let i = 0; i < text.length; i++) {
    const c = text[i] as string;
    if (quote !== undefined) {
      if (c === quote) quote = undefined;
      else if (c === '\\' && quote === '"' && i + 1 < text.length) word = (word ?? '') + text[++i];
      else word = (word ?? '') + c;
    } else if (/\s/.test(c)) {
      if (word !== undefined) words.push(word);
      word = undefined;
    } else if (c === '"' || c === "'") {
      quote = c;
      word ??= '';
    } else if (c === '\\' && i + 1 < text.length) {
      word = (word ?? '') + text[++i];
    } else {
      word = (word ?? '') + c;
    }
  }
  if (word !== undefined) words.push(word);
  return words;
}
