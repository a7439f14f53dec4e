/** Benchmark parameters: environment variables with the numbers as defaults. */

function int(name: string, fallback: number): number {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return fallback;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < 0) throw new Error(`${name}=${raw}: expected a non-negative integer`);
  return n;
}

export const SECTIONS = ['patch', 'webhook', 'podcreate', 'chart', 'scale-operator', 'scale-webhook'] as const;
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
  operatorInstances: number;
  operatorTimeoutSeconds: number;
  /** --concurrency for the operator; undefined: its own default. */
  operatorConcurrency: number | undefined;
  /** NODE_OPTIONS for the webhook processes (e.g. the image's V8 flags); empty: none. */
  webhookNodeOptions: string;
  outDir: string;
  /** Where the raw results go (and are read from with reportOnly), relative to the repo root. */
  resultsFile: string;
  reportOnly: boolean;
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
    operatorInstances: int('BENCH_OPERATOR_INSTANCES', 1_000),
    operatorTimeoutSeconds: Math.max(10, int('BENCH_OPERATOR_TIMEOUT_S', 240)),
    operatorConcurrency: process.env.BENCH_OPERATOR_CONCURRENCY
      ? Math.max(1, int('BENCH_OPERATOR_CONCURRENCY', 2))
      : undefined,
    webhookNodeOptions: process.env.BENCH_WEBHOOK_NODE_OPTIONS ?? '',
    outDir: process.env.BENCH_OUT_DIR ?? 'docs',
    resultsFile: process.env.BENCH_RESULTS ?? 'bench/results/latest.json',
    reportOnly: process.env.BENCH_REPORT_ONLY === '1',
  };
}
