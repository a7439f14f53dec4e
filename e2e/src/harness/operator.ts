/**
 * The one operator launcher: services/operator/dist/main.js (or another build's) against a cluster,
 * on loopback, with its leader election and Lease timings as a preset, ready once its /readyz is
 * 200 (every informer synced). Every suite, the demo and the benchmark start the operator here.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Cluster } from './cluster.js';
import { type MetricSample, scrapeMetrics, sumMetric } from './metrics.js';
import { repoRoot } from './repo.js';
import { type RunningService, type ServiceOptions, startService } from './services.js';
import { FatalWaitError, waitFor } from './wait.js';

/** Leader-election timings, in seconds (the operator's flags of the same names). */
export interface LeaseTimings {
  durationS: number;
  renewDeadlineS: number;
  retryPeriodS: number;
  drainTimeoutS?: number;
  shutdownTimeoutS?: number;
}

/**
 * Timings valid under the operator's rules (lease > renew deadline > 1.2 × retry; shutdown >
 * drain + renew deadline). The renew deadline stays at 3 s so a loaded 2-core machine does not
 * lose the Lease.
 */
export const LEASE_PRESETS = {
  /** A SIGKILLed leader is replaced within about 4 s + 2.2 × 1 s. */
  fast: { durationS: 4, renewDeadlineS: 3, retryPeriodS: 1 },
  /** For the fault suites: a standby takes over at most ~4.5 s after the leader's last renewal, and a stop is quick. */
  failover: { durationS: 4, renewDeadlineS: 3, retryPeriodS: 0.5, drainTimeoutS: 1, shutdownTimeoutS: 5 },
} as const satisfies Record<string, LeaseTimings>;

/** `default`: the operator's own timings (no flags); a preset's name; or timings of the suite's own. */
export type LeasePreset = 'default' | keyof typeof LEASE_PRESETS | LeaseTimings;

export interface LeaderElection {
  /** The Lease's namespace (`--leader-election-namespace`). */
  namespace: string;
  /** The Lease's name (`--leader-election-id`). */
  id: string;
  /** `--leader-election-identity`; default: the operator's ($POD_NAME, else the host name, plus a UUID). */
  identity?: string;
  /** Default `default`. */
  lease?: LeasePreset;
}

export interface OperatorOptions {
  /** Log name: the output goes to `<cluster dir>/logs/<name>.log` (default `operator`). */
  name?: string;
  /** Another build's main.js instead of this checkout's, e.g. a previous version's (upgrade tests). */
  entry?: string;
  /** Default: the cluster's admin kubeconfig. */
  kubeconfigPath?: string;
  /** A Lease; `false`: `--leader-elect=false` (one replica, reconciling unconditionally); absent: the operator's defaults. */
  leaderElection?: LeaderElection | false;
  /** Flags appended after the launcher's, so they override them. */
  args?: readonly string[];
  env?: NodeJS.ProcessEnv;
  /** Polled until 200 before the operator's own /readyz (e.g. a port the caller chose with --metrics-port). */
  readiness?: ServiceOptions['readiness'];
  /** How long to wait for /readyz (default 60 s). */
  readyTimeoutMs?: number;
}

/** One JSON log line of the operator. */
export interface LogLine {
  ts: string;
  level: string;
  msg: string;
  [field: string]: unknown;
}

export interface RunningOperator extends RunningService {
  /** Its Lease holder identity when the launcher set one (`--leader-election-identity`). */
  readonly identity: string;
  /** http://127.0.0.1:<port>: /metrics, /healthz, /readyz. */
  readonly baseUrl: string;
  readonly metricsUrl: string;
  readonly readyzUrl: string;
  /** Parsed JSON log lines; with `since` (a `logMark()`), only the later ones. */
  logLines(since?: number): LogLine[];
  logMark(): number;
  metrics(): Promise<MetricSample[]>;
  /** Sum of a metric's samples (with these labels) from a fresh scrape. */
  metric(name: string, labels?: Record<string, string>): Promise<number>;
  /** Waits for a `reconciled` line of the instances controller for `key` after `since`. */
  waitReconciled(key: string, since: number, timeoutMs?: number): Promise<LogLine>;
}

/** The flags of `lease` (none for `default`). */
export function leaseFlags(lease: LeasePreset = 'default'): string[] {
  if (lease === 'default') return [];
  const t: LeaseTimings = typeof lease === 'string' ? LEASE_PRESETS[lease] : lease;
  const d = (s: number): string => (Number.isInteger(s) ? `${s}s` : `${Math.round(s * 1000)}ms`);
  return [
    `--lease-duration=${d(t.durationS)}`,
    `--renew-deadline=${d(t.renewDeadlineS)}`,
    `--retry-period=${d(t.retryPeriodS)}`,
    ...(t.drainTimeoutS === undefined ? [] : [`--drain-timeout=${d(t.drainTimeoutS)}`]),
    ...(t.shutdownTimeoutS === undefined ? [] : [`--shutdown-timeout=${d(t.shutdownTimeoutS)}`]),
  ];
}

/** The launcher's flags, before the caller's `args`. */
export function operatorFlags(kubeconfigPath: string, election: OperatorOptions['leaderElection']): string[] {
  const leader =
    election === undefined
      ? []
      : election === false
        ? ['--leader-elect=false']
        : [
            '--leader-elect=true',
            `--leader-election-namespace=${election.namespace}`,
            `--leader-election-id=${election.id}`,
            ...(election.identity === undefined ? [] : [`--leader-election-identity=${election.identity}`]),
            ...leaseFlags(election.lease),
          ];
  return [`--kubeconfig=${kubeconfigPath}`, ...leader, '--metrics-port=0', '--bind-address=127.0.0.1'];
}

function readLog(path: string): LogLine[] {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch {
    return [];
  }
  const lines: LogLine[] = [];
  for (const raw of text.split('\n')) {
    if (!raw.startsWith('{')) continue; // the harness's '# …' header and anything not JSON
    try {
      lines.push(JSON.parse(raw) as LogLine);
    } catch {
      // a line being written right now
    }
  }
  return lines;
}

/**
 * Starts the operator with the launcher's flags (kubeconfig, leader election and Lease timings,
 * `--metrics-port=0` on 127.0.0.1), then `args`. Its HTTP port is plain and /metrics open
 * (METRICS_SECURE=false, which `args` or `env` may override; an older build ignores the
 * variable): the suites read it over loopback, where no Prometheus token exists; the chart's
 * secure metrics are the chart tests'. Learns its port from its `operator starting` log line and
 * returns once /readyz is 200. It does not wait for leadership.
 */
export async function startOperator(cluster: Cluster, opts: OperatorOptions = {}): Promise<RunningOperator> {
  const name = opts.name ?? 'operator';
  // A log of this name may hold an earlier process's lines (an operator started again under the
  // same name appends): this handle reads only its own.
  const first = readLog(join(cluster.state.logDir, `${name}.log`)).length;
  const service = await startService(cluster, {
    name,
    entry: opts.entry ?? join(repoRoot(), 'services', 'operator', 'dist', 'main.js'),
    args: [...operatorFlags(opts.kubeconfigPath ?? cluster.kubeconfigPath, opts.leaderElection), ...(opts.args ?? [])],
    env: { METRICS_SECURE: 'false', ...opts.env },
    readiness: opts.readiness,
  });
  const logPath = service.logPath;
  const ownLog = (): LogLine[] => readLog(logPath).slice(first);
  const alive = (): void => {
    const exit = service.process.exited();
    if (exit) throw new FatalWaitError(`operator ${name} exited during start-up (${JSON.stringify(exit)})`);
  };
  let baseUrl = '';
  try {
    const port = await waitFor(
      `operator ${name} to log 'operator starting' with its httpPort`,
      async () => {
        alive();
        const line = ownLog().find((l) => l.msg === 'operator starting');
        return typeof line?.httpPort === 'number' ? line.httpPort : undefined;
      },
      { timeoutMs: 30_000, intervalMs: 100 },
    );
    baseUrl = `http://127.0.0.1:${port}`;
    await waitFor(
      `operator ${name} to answer 200 at ${baseUrl}/readyz (every informer synced)`,
      async (observe) => {
        alive();
        const res = await fetch(`${baseUrl}/readyz`, { signal: AbortSignal.timeout(5_000) });
        observe(`HTTP ${res.status}: ${(await res.text()).slice(0, 300)}`);
        return res.status === 200;
      },
      { timeoutMs: opts.readyTimeoutMs ?? 60_000, intervalMs: 200 },
    );
  } catch (error) {
    await service.stop();
    throw new Error(`${(error as Error).message}\n----- ${name} log tail -----\n${service.logTail(30)}`, {
      cause: error,
    });
  }
  const identity = opts.leaderElection ? (opts.leaderElection.identity ?? '') : '';
  const op: RunningOperator = {
    ...service,
    identity,
    baseUrl,
    metricsUrl: `${baseUrl}/metrics`,
    readyzUrl: `${baseUrl}/readyz`,
    logLines: (since = 0) => ownLog().slice(since),
    logMark: () => ownLog().length,
    metrics: () => scrapeMetrics(`${baseUrl}/metrics`),
    async metric(metricName, labels = {}) {
      return sumMetric(await op.metrics(), metricName, labels);
    },
    waitReconciled(key, since, timeoutMs = 30_000) {
      return waitFor(
        `operator ${name} to log a 'reconciled' line for ${key}`,
        async (observe) => {
          const lines = ownLog().slice(since);
          observe(lines.slice(-5));
          return lines.find((l) => l.msg === 'reconciled' && l.controller === 'instances' && l.key === key);
        },
        { timeoutMs, intervalMs: 100 },
      );
    },
  };
  return op;
}
