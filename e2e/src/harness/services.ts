import { existsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Cluster } from './cluster.js';
import { httpGet, type ProbeTls } from './http-probe.js';
import { freePorts } from './ports.js';
import { describeExit, type ManagedProcess, signalProcessGroup, startProcess, tailFile } from './process.js';
import { REAPER_PID_FILE } from './reaper.js';
import { repoRoot } from './repo.js';
import { FatalWaitError, waitFor } from './wait.js';

export interface ServiceOptions {
  /** Log name: the output goes to `<cluster dir>/logs/<name>.log`. */
  name: string;
  /** The JavaScript entry point, run with this process's Node.js (process.execPath). */
  entry: string;
  args: readonly string[];
  env?: NodeJS.ProcessEnv;
  /** Polled (GET, expects 200) until ready; without it, start returns once spawned. */
  readiness?: { url: string; tls?: ProbeTls; timeoutMs?: number };
}

export interface RunningService {
  readonly name: string;
  readonly process: ManagedProcess;
  readonly logPath: string;
  logTail(lines?: number): string;
  /** SIGTERM, then SIGKILL after 5 s; resolves once the process has exited. */
  stop(): Promise<void>;
  /**
   * Sends `signal` to the service's process group at once (e.g. SIGKILL: a crash; SIGTERM: a
   * graceful stop whose exit the test awaits through `process.exit`). False if it is already gone.
   */
  signal(signal: NodeJS.Signals): boolean;
}

/**
 * Runs one of this project's Node.js services against the cluster: own process group, output in the
 * cluster's log dir (so test failures print its tail), killed by the reaper if the test run dies.
 */
export async function startService(cluster: Cluster, opts: ServiceOptions): Promise<RunningService> {
  if (!existsSync(opts.entry)) {
    throw new Error(`${opts.name}: ${opts.entry} does not exist; build the services first (make build)`);
  }
  const proc = startProcess({
    name: opts.name,
    command: process.execPath,
    args: [opts.entry, ...opts.args],
    logPath: join(cluster.state.logDir, `${opts.name}.log`),
    env: { ...process.env, ...opts.env },
    cwd: repoRoot(),
    // Killed with this process (exit, Ctrl-C: process.ts), and through the pid file by the
    // control plane's teardown, interrupt handler and reaper wherever the cluster was started.
    reaperPidFile: join(cluster.dir, REAPER_PID_FILE),
  });
  const service: RunningService = {
    name: opts.name,
    process: proc,
    logPath: proc.logPath,
    logTail: (lines = 40) => tailFile(proc.logPath, lines),
    async stop() {
      await proc.stop(5_000);
    },
    signal: (signal) => signalProcessGroup(proc.pid, signal),
  };
  const { readiness } = opts;
  if (readiness) {
    try {
      await waitFor(
        `${opts.name} to answer 200 at ${readiness.url}`,
        async (observe) => {
          const exit = proc.exited();
          if (exit) {
            throw new FatalWaitError(
              `${opts.name} ${describeExit(exit)} during startup; last lines of ${proc.logPath}:\n${tailFile(proc.logPath, 30)}`,
            );
          }
          const res = await httpGet(readiness.url, readiness.tls);
          observe(`HTTP ${res.status}: ${res.body.slice(0, 300)}`);
          return res.status === 200;
        },
        { timeoutMs: readiness.timeoutMs ?? 30_000, intervalMs: 100 },
      );
    } catch (error) {
      await service.stop();
      throw new Error(`${(error as Error).message}\n----- ${opts.name} log tail -----\n${tailFile(proc.logPath, 30)}`, {
        cause: error,
      });
    }
  }
  return service;
}

export interface WebhookOptions {
  /** Kubeconfig the webhook uses for its Namespace informer (default: the admin kubeconfig). */
  kubeconfigPath?: string;
  /** Flags appended after the harness's, so they override them (e.g. --log-level=debug). */
  extraArgs?: readonly string[];
  env?: NodeJS.ProcessEnv;
  /**
   * Listen on this HTTPS port instead of a free one: e.g. a webhook started again behind the URL
   * an earlier one registered. Its certificate files are written anew (same names, same CA).
   */
  port?: number;
  /** Metrics port instead of a free one. */
  metricsPort?: number;
}

export interface RunningWebhook extends RunningService {
  readonly port: number;
  /** The admission URL to register: https://127.0.0.1:<port>/mutate/pods */
  readonly url: string;
  /** Prometheus metrics: http://127.0.0.1:<metrics port>/metrics */
  readonly metricsUrl: string;
  /** PEM of the CA that signed the webhook's serving certificate (the cluster CA): the caBundle. */
  readonly caPem: string;
  /** The serving certificate and key files it was started with (--tls-cert-file / --tls-key-file). */
  readonly tlsCertFile: string;
  readonly tlsKeyFile: string;
}

/**
 * Starts services/webhook/dist/main.js (flags: services/webhook/src/config.ts) on free loopback
 * ports, with a serving certificate for 127.0.0.1 from the cluster CA; returns once /readyz is 200
 * (its Namespace informer has synced). Its metrics port is plain and /metrics open
 * (METRICS_SECURE=false, which `extraArgs` or `env` may override), as the operator's: the suites
 * read it over loopback, where no Prometheus token exists; secure metrics are the chart's suites'.
 */
export async function startWebhook(cluster: Cluster, opts: WebhookOptions = {}): Promise<RunningWebhook> {
  const [freePort, freeMetricsPort] = (await freePorts(2)) as [number, number];
  const port = opts.port ?? freePort;
  const metricsPort = opts.metricsPort ?? freeMetricsPort;
  const serving = await cluster.issueServingCert(['127.0.0.1', 'localhost']);
  const certFile = join(cluster.dir, 'pki', `webhook-${port}.crt`);
  const keyFile = join(cluster.dir, 'pki', `webhook-${port}.key`);
  writeFileSync(certFile, serving.certPem, { mode: 0o600 });
  writeFileSync(keyFile, serving.keyPem, { mode: 0o600 });
  const base = `https://127.0.0.1:${port}`;
  const service = await startService(cluster, {
    name: `webhook-${port}`,
    entry: join(repoRoot(), 'services', 'webhook', 'dist', 'main.js'),
    args: [
      '--bind-address=127.0.0.1',
      `--port=${port}`,
      `--metrics-port=${metricsPort}`,
      `--tls-cert-file=${certFile}`,
      `--tls-key-file=${keyFile}`,
      `--kubeconfig=${opts.kubeconfigPath ?? cluster.kubeconfigPath}`,
      // No endpoints to drain from on loopback: stop at once.
      '--shutdown-delay=0',
      ...(opts.extraArgs ?? []),
    ],
    env: { METRICS_SECURE: 'false', ...opts.env },
    readiness: { url: `${base}/readyz`, tls: { caPem: cluster.caPem } },
  });
  return {
    ...service,
    port,
    url: `${base}/mutate/pods`,
    metricsUrl: `http://127.0.0.1:${metricsPort}/metrics`,
    caPem: cluster.caPem,
    tlsCertFile: certFile,
    tlsKeyFile: keyFile,
  };
}
