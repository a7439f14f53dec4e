import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CoreV1Api } from '@kubernetes/client-node';
import { type Assets, CONTROL_PLANE_BINARIES, resolveAssets } from './assets.js';
import { Cluster, type ClusterState, FAILURE_MARKER, writeState } from './cluster.js';
import {
  apiServerArgs,
  apiServerHosts,
  type ClusterLayout,
  type Component,
  type ComponentSettings,
  type ControlPlaneNetwork,
  clusterLayout,
  controllerManagerArgs,
  etcdArgs,
  schedulerArgs,
} from './components.js';
import { describeSweep, sweepDeadRuns } from './dead-runs.js';
import { httpGet, type ProbeTls } from './http-probe.js';
import { writeKubeconfig } from './kubeconfig.js';
import { type CertAndKey, CertificateAuthority, generateServiceAccountKeyPair } from './pki.js';
import { freePorts } from './ports.js';
import {
  describeExit,
  type ManagedProcess,
  onInterrupt,
  type ProcessExit,
  signalProcessGroup,
  startProcess,
  tailFile,
} from './process.js';
import { killTrackedGroups, REAPER_PID_FILE, startReaper } from './reaper.js';
import { OWNER_FILE, writeOwner } from './run-owner.js';
import { FatalWaitError, waitFor } from './wait.js';

export interface ControlPlaneOptions {
  /** Binaries; default: resolveAssets() (KUBEPLUS_ISOLATION_ASSETS or e2e/scripts/build-components.sh). */
  assets?: Assets;
  /** Admission plugins enabled on top of the defaults, e.g. NODE_PLACEMENT_ADMISSION_PLUGINS. */
  extraAdmissionPlugins?: readonly string[];
  /** kube-controller-manager --node-monitor-grace-period (default 40s). */
  nodeMonitorGracePeriodSeconds?: number;
  /** klog -v of the Kubernetes components (default 1). */
  verbosity?: number;
  /** Extra flags per component, appended last (so they override the harness's). */
  extraArgs?: Partial<Record<Component, readonly string[]>>;
  /** Keep the temp dir when stopped after a failure (default: KEEP_E2E_TMP=1). */
  keepTmpOnFailure?: boolean;
  /** Parent of the per-run temp dir (default os.tmpdir()). */
  tmpRoot?: string;
  /** How long each component may take to become ready (default 120s). */
  readyTimeoutMs?: number;
  /** Progress messages (default: none). */
  log?: (message: string) => void;
  /** Listen where a real node reaches the API server (real-node.ts); default 127.0.0.1 only. */
  network?: ControlPlaneNetwork;
}

export interface StopOptions {
  /** The run failed: keep the temp dir if keepTmpOnFailure. Also inferred from the FAILED marker file. */
  failed?: boolean;
}

export interface StopComponentOptions {
  /** SIGTERM (default: a graceful stop, SIGKILL after 10 s) or SIGKILL (a crash). */
  signal?: 'SIGTERM' | 'SIGKILL';
}

const START_ATTEMPTS = 3;

/** Stops and starts single components of a running control plane (see ControlPlane.stopComponent). */
export interface ComponentControl {
  stop(name: Component, signal: 'SIGTERM' | 'SIGKILL'): Promise<ProcessExit>;
  start(name: Component): Promise<void>;
}

/** A control plane this process started; stop() tears it down. */
export class ControlPlane extends Cluster {
  private stopping: Promise<void> | undefined;

  /** @internal use startControlPlane() */
  constructor(
    state: ClusterState,
    ca: CertificateAuthority,
    /** The running component processes; a restarted component's entry is replaced by its new process. */
    readonly processes: readonly ManagedProcess[],
    private readonly teardown: (failed: boolean) => Promise<void>,
    private readonly control?: ComponentControl,
  ) {
    super(state, ca);
  }

  /** Stops every component (process groups, SIGTERM then SIGKILL) and removes the temp dir. Idempotent. */
  stop(opts: StopOptions = {}): Promise<void> {
    this.stopping ??= this.teardown(opts.failed === true || existsSync(join(this.dir, FAILURE_MARKER)));
    return this.stopping;
  }

  /**
   * Stops one component (its whole process group) and resolves with its exit once it is gone; the
   * others keep running. Its ports, data (etcd's data dir) and certificates stay, so
   * startComponent() brings the same component back and every kubeconfig stays valid.
   * For fault-injection suites on their OWN control plane: never on the shared one.
   */
  stopComponent(name: Component, opts: StopComponentOptions = {}): Promise<ProcessExit> {
    return this.requireControl().stop(name, opts.signal ?? 'SIGTERM');
  }

  /** Starts a component stopped by stopComponent() again, same flags; resolves once it is healthy. */
  startComponent(name: Component): Promise<void> {
    return this.requireControl().start(name);
  }

  /** stopComponent() then startComponent(). */
  async restart(name: Component, opts: StopComponentOptions = {}): Promise<void> {
    await this.stopComponent(name, opts);
    await this.startComponent(name);
  }

  private requireControl(): ComponentControl {
    if (this.stopping) throw new Error('control plane is stopped');
    if (!this.control) throw new Error('this ControlPlane cannot stop or start single components');
    return this.control;
  }
}

interface Pki {
  ca: CertificateAuthority;
  admin: CertAndKey;
}

async function writePki(l: ClusterLayout, network?: ControlPlaneNetwork): Promise<Pki> {
  mkdirSync(join(l.dir, 'pki'), { recursive: true, mode: 0o700 });
  const ca = await CertificateAuthority.create('kubeplus-e2e-ca');
  const [apiServer, admin, kcmServing, schedServing, serviceAccount, kubeletClient] = await Promise.all([
    ca.issueServingCert(apiServerHosts(network)),
    ca.issueClientCert('kubeplus-e2e-admin', ['system:masters']),
    ca.issueServingCert(['127.0.0.1', 'localhost']),
    ca.issueServingCert(['127.0.0.1', 'localhost']),
    generateServiceAccountKeyPair(),
    ca.issueClientCert('kube-apiserver-kubelet-client', ['system:masters']),
  ]);
  const files: [string, string][] = [
    [l.caCert, ca.certPem],
    [l.caKey, ca.keyPem],
    [l.apiServerCert, apiServer.certPem],
    [l.apiServerKey, apiServer.keyPem],
    [l.adminCert, admin.certPem],
    [l.adminKey, admin.keyPem],
    [l.controllerManagerCert, kcmServing.certPem],
    [l.controllerManagerKey, kcmServing.keyPem],
    [l.schedulerCert, schedServing.certPem],
    [l.schedulerKey, schedServing.keyPem],
    [l.serviceAccountKey, serviceAccount.privateKeyPem],
    [l.serviceAccountPub, serviceAccount.publicKeyPem],
    [l.kubeletClientCert, kubeletClient.certPem],
    [l.kubeletClientKey, kubeletClient.keyPem],
  ];
  for (const [path, pem] of files) writeFileSync(path, pem, { mode: 0o600 });
  return { ca, admin };
}

/** Client kubeconfigs; the components authenticate with their own identities (bootstrap RBAC roles). */
async function writeKubeconfigs(l: ClusterLayout, pki: Pki, server: string): Promise<void> {
  const [kcm, scheduler] = await Promise.all([
    pki.ca.issueClientCert('system:kube-controller-manager'),
    pki.ca.issueClientCert('system:kube-scheduler'),
  ]);
  const base = { server, caPem: pki.ca.certPem };
  writeKubeconfig(l.adminKubeconfig, { ...base, user: 'kubeplus-e2e-admin', credentials: pki.admin });
  writeKubeconfig(l.controllerManagerKubeconfig, { ...base, user: 'system:kube-controller-manager', credentials: kcm });
  writeKubeconfig(l.schedulerKubeconfig, { ...base, user: 'system:kube-scheduler', credentials: scheduler });
}

function keepTmpFromEnv(): boolean {
  return process.env.KEEP_E2E_TMP === '1';
}

function failedToStart(proc: ManagedProcess, what: string): FatalWaitError {
  const exit = proc.exited();
  return new FatalWaitError(
    `${proc.name} ${exit ? describeExit(exit) : 'failed'} before ${what}; last lines of ${proc.logPath}:\n${tailFile(proc.logPath, 30)}`,
  );
}

function isPortConflict(procs: readonly ManagedProcess[]): boolean {
  return procs.some((p) => /address already in use/i.test(tailFile(p.logPath, 50)));
}

/**
 * Starts etcd, kube-apiserver, kube-controller-manager and kube-scheduler on 127.0.0.1 with random
 * free ports, in a fresh temp dir, and returns once the API server is ready, both controllers are
 * healthy and the service-account controllers have created default/default.
 */
export async function startControlPlane(opts: ControlPlaneOptions = {}): Promise<ControlPlane> {
  const began = performance.now();
  const log = opts.log ?? ((): void => {});
  const keepTmpOnFailure = opts.keepTmpOnFailure ?? keepTmpFromEnv();
  const assets = opts.assets ?? (await resolveAssets(CONTROL_PLANE_BINARIES));
  // What runs SIGKILLed with their watchdogs left behind goes first (dead-runs.ts).
  const swept = describeSweep(sweepDeadRuns({ tmp: opts.tmpRoot ?? tmpdir() }));
  if (swept !== '') log(swept);
  const dir = mkdtempSync(join(opts.tmpRoot ?? tmpdir(), 'kubeplus-e2e-'));
  writeOwner(join(dir, OWNER_FILE));
  const settings: ComponentSettings = {
    extraAdmissionPlugins: opts.extraAdmissionPlugins ?? [],
    nodeMonitorGracePeriodSeconds: opts.nodeMonitorGracePeriodSeconds ?? 40,
    verbosity: opts.verbosity ?? 1,
    extraArgs: opts.extraArgs ?? {},
    network: opts.network,
  };
  const timings: Record<string, number> = {};
  const mark = (phase: string, since: number): void => {
    timings[phase] = Math.round(performance.now() - since);
  };

  const pidFile = join(dir, REAPER_PID_FILE);
  const reaper = startReaper({
    pidFile,
    tmpDir: dir,
    keepTmpOnCrash: keepTmpOnFailure,
    logPath: join(dir, 'reaper.out'),
  });
  const processes: ManagedProcess[] = [];
  // Ctrl-C / SIGTERM / SIGHUP: process.ts has killed every process group it started in this
  // process (components, services, …) by the time this runs; the pid file also lists those
  // started elsewhere against this cluster (e.g. by jest suites, in their own module registry).
  // The signal is re-raised afterwards.
  const removeInterruptCleanup = onInterrupt(() => {
    killTrackedGroups(pidFile);
    reaper.dismiss();
    if (!keepTmpOnFailure) rmSync(dir, { recursive: true, force: true });
  });

  const stopAll = async (): Promise<void> => {
    const byName = (name: Component): ManagedProcess[] => processes.filter((p) => p.name === name);
    // Controllers first (they would only log errors once the API server is gone), etcd last.
    await Promise.all([...byName('kube-scheduler'), ...byName('kube-controller-manager')].map((p) => p.stop()));
    await Promise.all(byName('kube-apiserver').map((p) => p.stop()));
    await Promise.all(byName('etcd').map((p) => p.stop()));
    processes.length = 0;
  };
  const teardown = async (failed: boolean): Promise<void> => {
    try {
      await stopAll();
    } finally {
      // Whatever else still runs against this cluster (a service a suite did not stop) goes with it.
      killTrackedGroups(pidFile);
      reaper.dismiss();
      removeInterruptCleanup();
      if (!(failed && keepTmpOnFailure)) rmSync(dir, { recursive: true, force: true });
      // Kept on purpose (KEEP_E2E_TMP=1): no longer a run's, so no later sweep removes it.
      else rmSync(join(dir, OWNER_FILE), { force: true });
    }
  };

  try {
    let t = performance.now();
    let layout = clusterLayout(dir, { etcdClient: 0, etcdPeer: 0, apiServer: 0, controllerManager: 0, scheduler: 0 });
    mkdirSync(layout.logDir, { recursive: true });
    const pki = await writePki(layout, opts.network);
    mark('pki', t);
    const tls: ProbeTls = { caPem: pki.ca.certPem, certPem: pki.admin.certPem, keyPem: pki.admin.keyPem };
    const readyTimeoutMs = opts.readyTimeoutMs ?? 120_000;

    const launch = (name: Component, command: string, args: string[]): ManagedProcess => {
      const proc = startProcess({
        name,
        command,
        args,
        logPath: join(layout.logDir, `${name}.log`),
        reaperPidFile: pidFile,
      });
      processes.push(proc);
      return proc;
    };
    const waitHealthy = (proc: ManagedProcess, url: string, probeTls?: ProbeTls): Promise<true> =>
      waitFor(
        `${proc.name} to report healthy at ${url}`,
        async (observe) => {
          if (proc.exited()) throw failedToStart(proc, `becoming healthy at ${url}`);
          const res = await httpGet(url, probeTls);
          observe(`HTTP ${res.status}: ${res.body.slice(0, 500)}`);
          return res.status === 200 || undefined;
        },
        { timeoutMs: readyTimeoutMs, intervalMs: 200 },
      );

    for (let attempt = 1; ; attempt++) {
      const [etcdClient, etcdPeer, apiServer, controllerManager, scheduler] = await freePorts(5);
      layout = clusterLayout(dir, {
        etcdClient: etcdClient as number,
        etcdPeer: etcdPeer as number,
        apiServer: apiServer as number,
        controllerManager: controllerManager as number,
        scheduler: scheduler as number,
      });
      mkdirSync(layout.etcdDataDir, { recursive: true, mode: 0o700 });
      const server = `https://${opts.network?.apiServerAddress ?? '127.0.0.1'}:${layout.ports.apiServer}`;
      await writeKubeconfigs(layout, pki, server);
      try {
        t = performance.now();
        const etcd = launch('etcd', assets.etcd, etcdArgs(layout, settings));
        await waitHealthy(etcd, `http://127.0.0.1:${layout.ports.etcdClient}/health`);
        mark('etcd', t);
        log(`etcd ready on 127.0.0.1:${layout.ports.etcdClient}`);

        t = performance.now();
        const apiserver = launch('kube-apiserver', assets['kube-apiserver'], apiServerArgs(layout, settings));
        await waitHealthy(apiserver, `${server}/readyz`, tls);
        mark('kube-apiserver', t);
        const kubernetesVersion = await serverVersion(server, tls);
        log(`kube-apiserver ${kubernetesVersion} ready at ${server}`);

        t = performance.now();
        const kcm = launch(
          'kube-controller-manager',
          assets['kube-controller-manager'],
          controllerManagerArgs(layout, settings),
        );
        const sched = launch('kube-scheduler', assets['kube-scheduler'], schedulerArgs(layout, settings));
        await Promise.all([
          waitHealthy(kcm, `https://127.0.0.1:${layout.ports.controllerManager}/healthz`, tls),
          waitHealthy(sched, `https://127.0.0.1:${layout.ports.scheduler}/healthz`, tls),
        ]);
        mark('controllers', t);

        t = performance.now();
        const state: ClusterState = {
          version: 1,
          dir,
          server,
          kubeconfigPath: layout.adminKubeconfig,
          caCertPath: layout.caCert,
          caKeyPath: layout.caKey,
          logDir: layout.logDir,
          ports: layout.ports,
          assetsDir: assets.dir,
          kubernetesVersion,
          nodeMonitorGracePeriodSeconds: settings.nodeMonitorGracePeriodSeconds,
          extraAdmissionPlugins: [...settings.extraAdmissionPlugins],
          timings,
        };
        const running = [...processes];
        const argsOf: Record<Component, () => [string, string[]]> = {
          etcd: () => [assets.etcd, etcdArgs(layout, settings)],
          'kube-apiserver': () => [assets['kube-apiserver'], apiServerArgs(layout, settings)],
          'kube-controller-manager': () => [assets['kube-controller-manager'], controllerManagerArgs(layout, settings)],
          'kube-scheduler': () => [assets['kube-scheduler'], schedulerArgs(layout, settings)],
        };
        const healthOf: Record<Component, () => [string, ProbeTls | undefined]> = {
          etcd: () => [`http://127.0.0.1:${layout.ports.etcdClient}/health`, undefined],
          'kube-apiserver': () => [`${server}/readyz`, tls],
          'kube-controller-manager': () => [`https://127.0.0.1:${layout.ports.controllerManager}/healthz`, tls],
          'kube-scheduler': () => [`https://127.0.0.1:${layout.ports.scheduler}/healthz`, tls],
        };
        const control: ComponentControl = {
          async stop(name, signal) {
            const proc = processes.find((p) => p.name === name);
            if (!proc) throw new Error(`${name} is not running`);
            if (signal === 'SIGKILL') signalProcessGroup(proc.pid, 'SIGKILL');
            // Either way, once it has exited process.ts has killed whatever it forked.
            const exit = signal === 'SIGKILL' ? await proc.exit : await proc.stop();
            processes.splice(processes.indexOf(proc), 1);
            return exit;
          },
          async start(name) {
            if (processes.some((p) => p.name === name)) throw new Error(`${name} is already running`);
            const [command, args] = argsOf[name]();
            const proc = launch(name, command, args);
            const index = running.findIndex((p) => p.name === name);
            if (index >= 0) running[index] = proc;
            else running.push(proc);
            const [url, probeTls] = healthOf[name]();
            await waitHealthy(proc, url, probeTls);
          },
        };
        const cp = new ControlPlane(state, pki.ca, running, teardown, control);
        // The token and service-account controllers run (with their own credentials) once this exists.
        const core = cp.kc.makeApiClient(CoreV1Api);
        await waitFor(
          'the controller-manager to create ServiceAccount default/default',
          async () => {
            if (kcm.exited()) throw failedToStart(kcm, 'creating the default ServiceAccount');
            return core.readNamespacedServiceAccount({ name: 'default', namespace: 'default' });
          },
          { timeoutMs: readyTimeoutMs, intervalMs: 250 },
        );
        mark('serviceaccounts', t);
        timings.total = Math.round(performance.now() - began);
        writeState(state);
        log(`control plane ready in ${(timings.total / 1000).toFixed(1)}s (dir ${dir})`);
        return cp;
      } catch (error) {
        const conflict = isPortConflict(processes);
        await stopAll();
        if (!conflict || attempt >= START_ATTEMPTS) throw error;
        log(`port conflict on attempt ${attempt}; retrying with new ports`);
        rmSync(layout.etcdDataDir, { recursive: true, force: true });
      }
    }
  } catch (error) {
    await teardown(true);
    const kept = keepTmpOnFailure ? ` (kept ${dir})` : ' (set KEEP_E2E_TMP=1 to keep its temp dir)';
    throw new Error(`control plane failed to start${kept}: ${(error as Error).message}`, { cause: error });
  }
}

/** The API server's gitVersion (GET /version), e.g. v1.30.14. */
async function serverVersion(server: string, tls: ProbeTls): Promise<string> {
  const res = await httpGet(`${server}/version`, tls);
  const version = res.status === 200 ? (JSON.parse(res.body) as { gitVersion?: unknown }).gitVersion : undefined;
  if (typeof version !== 'string') throw new Error(`GET ${server}/version answered ${res.status}: ${res.body}`);
  return version;
}
