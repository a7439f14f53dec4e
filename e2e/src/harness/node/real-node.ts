import { execFile as execFileCb } from 'node:child_process';
import { accessSync, constants, existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { CoreV1Api, NodeV1Api } from '@kubernetes/client-node';
import { logReport } from '../cluster.js';
import { type ControlPlane, type ControlPlaneOptions, startControlPlane } from '../control-plane.js';
import { describeSweep, sweepDeadRuns } from '../dead-runs.js';
import { minorOf } from '../kubernetes-versions.js';
import { type ManagedProcess, onInterrupt, startProcess, tailFile } from '../process.js';
import { repoRoot } from '../repo.js';
import { runOwner } from '../run-owner.js';
import { FatalWaitError, waitFor } from '../wait.js';
import { createCgroupRoot, removeCgroupRoot } from './cgroups.js';
import {
  cniConflist,
  containerdConfig,
  kubeletConfig,
  kubeProxyConfig,
  type NodeLayout,
  nodeLayout,
  RUNSC_HANDLER,
  RUNSC_RUNTIME_CLASS,
  runscConfig,
} from './config.js';
import { holdKubeletSysctls, releaseKubeletSysctls } from './host-sysctls.js';
import { createNodeNamespace, type NodeNamespace, processesInMountNamespace } from './namespace.js';
import { armNodeReaper } from './node-reaper.js';
import { assertRealNodeSupported } from './preflight.js';
import { removeNodeRunRecord, writeNodeRunRecord } from './run-record.js';

const execFile = promisify(execFileCb);

/** What the real node runs, built by `e2e/scripts/build-components.sh node` (or KUBEPLUS_ISOLATION_ASSETS). */
export const NODE_BINARIES = [
  'kubelet',
  'kube-proxy',
  'containerd',
  'containerd-shim-runc-v2',
  'ctr',
  'runc',
  'bridge',
  'host-local',
  'loopback',
  'portmap',
  'nft',
  'pause-image.tar',
  'agent-sandbox-controller-image.tar',
  'runsc',
  'containerd-shim-runsc-v1',
  // Not the node's own: the publish suite's registry (crane) and signatures (cosign).
  'crane',
  'cosign',
] as const;

/** The node's binaries directory: KUBEPLUS_ISOLATION_ASSETS if it holds them all, else the build script's. */
export async function resolveNodeAssets(): Promise<string> {
  const holdsAll = (dir: string): boolean =>
    NODE_BINARIES.every((b) => {
      try {
        accessSync(join(dir, b), b.endsWith('.tar') ? constants.R_OK : constants.X_OK);
        return true;
      } catch {
        return false;
      }
    });
  const fromEnv = process.env.KUBEPLUS_ISOLATION_ASSETS;
  if (fromEnv && holdsAll(fromEnv)) return fromEnv;
  const script = join(repoRoot(), 'e2e', 'scripts', 'build-components.sh');
  const env = { ...process.env };
  delete env.KUBEPLUS_ISOLATION_ASSETS; // it lacks the node's binaries: build them into the cache
  try {
    const { stdout } = await execFile(script, ['node'], { env, maxBuffer: 16 * 1024 * 1024, timeout: 60 * 60 * 1000 });
    const dir = stdout.trim().split('\n').at(-1) ?? '';
    if (!holdsAll(dir)) throw new Error(`${dir} lacks some of ${NODE_BINARIES.join(', ')}`);
    return dir;
  } catch (error) {
    const stderr = (error as { stderr?: string }).stderr ?? '';
    throw new Error(`${script} node failed: ${(error as Error).message}\n${stderr.split('\n').slice(-20).join('\n')}`);
  }
}

export interface RealNodeOptions {
  /** Image archives (docker-save or OCI) imported into the node's containerd, e.g. dist/images/*.tar. */
  images?: readonly string[];
  /** The Node's name (default kubeplus-node-<slot>). */
  nodeName?: string;
  /** Options of the control plane started for the node (its network is the node's). */
  controlPlane?: Omit<ControlPlaneOptions, 'network'>;
  /** How long the node may take to become Ready (default 120 s). */
  readyTimeoutMs?: number;
  /** Keep the run's directories after a failure (default KEEP_E2E_TMP=1). */
  keepTmpOnFailure?: boolean;
  log?: (message: string) => void;
}

/**
 * A control plane with one real node (kubelet + containerd with runc and gVisor's runsc + CNI +
 * kube-proxy) joined to it, and the platform RuntimeClass `gvisor` (handler `runsc`).
 */
export interface RealNodeCluster {
  readonly cp: ControlPlane;
  readonly layout: NodeLayout;
  readonly namespace: NodeNamespace;
  readonly nodeName: string;
  /** The node's processes (containerd, kubelet, kube-proxy). */
  readonly processes: readonly ManagedProcess[];
  /** Tails of the node's and the control plane's logs, for a failure message. */
  logReport(lines?: number): string;
  /** Runs a command inside the node's namespaces (e.g. `ctr`, `ip`, `nft`); returns stdout. */
  nodeExec(command: string, args: readonly string[]): string;
  /** Stops the node, restores the host, then stops the control plane. Idempotent. */
  stop(opts?: { failed?: boolean }): Promise<void>;
}

/**
 * Starts a control plane listening on the node's veth address and a real node joined to it, in a
 * network and mount namespace of its own (namespace.ts). Order: preflight (one message naming what
 * the machine lacks) → binaries → namespace + veth → control plane → cgroup root → containerd (+
 * image import) → kubelet + kube-proxy → Node Ready. Teardown runs in reverse on stop(), on a
 * start failure, synchronously on Ctrl-C, and from a watchdog process (node-reaper.ts) when this
 * process is SIGKILLed; it leaves nothing on the host (e2e/README.md).
 */
export async function startRealNodeCluster(opts: RealNodeOptions = {}): Promise<RealNodeCluster> {
  const log = opts.log ?? ((): void => {});
  const keepTmpOnFailure = opts.keepTmpOnFailure ?? process.env.KEEP_E2E_TMP === '1';
  assertRealNodeSupported();
  const binDir = await resolveNodeAssets();
  const swept = describeSweep(sweepDeadRuns());
  if (swept !== '') log(swept);
  const dir = mkdtempSync(join(tmpdir(), 'kubeplus-node-'));
  const owner = runOwner();
  writeNodeRunRecord({ owner, dir });
  const logDir = join(dir, 'logs');
  mkdirSync(logDir, { recursive: true });

  let ns: NodeNamespace | undefined;
  let cp: ControlPlane | undefined;
  let layout: NodeLayout | undefined;
  const processes: ManagedProcess[] = [];
  let removeInterrupt = (): void => {};
  let disarmReaper = (): void => {};

  /** Everything that touches the host, synchronously (also the Ctrl-C path). */
  const restoreHostSync = (): string[] => {
    disarmReaper();
    const problems: string[] = [];
    if (layout) problems.push(...removeCgroupRoot(layout.cgroupRoot).map((d) => `cgroup ${d} not removed`));
    ns?.killAll();
    if (layout) problems.push(...removeCgroupRoot(layout.cgroupRoot).map((d) => `cgroup ${d} not removed`));
    releaseKubeletSysctls();
    removeNodeRunRecord(owner);
    return problems;
  };
  let stopping: Promise<void> | undefined;
  const stop = (failed: boolean): Promise<void> => {
    stopping ??= (async () => {
      try {
        // kubelet and kube-proxy first (graceful), then everything else in the namespace at once.
        for (const name of ['kube-proxy', 'kubelet', 'containerd']) {
          await Promise.all(processes.filter((p) => p.name === name).map((p) => p.stop(5_000)));
        }
        const problems = restoreHostSync();
        if (ns) {
          await ns.holder.exit;
          const left = processesInMountNamespace(ns.mountNamespace);
          if (left.length > 0) problems.push(`processes left in the node namespace: ${left.join(', ')}`);
        }
        removeInterrupt();
        if (problems.length > 0) log(`real node teardown: ${problems.join('; ')}`);
      } finally {
        await cp?.stop({ failed });
        if (!(failed && keepTmpOnFailure)) rmSync(dir, { recursive: true, force: true });
      }
    })();
    return stopping;
  };

  try {
    holdKubeletSysctls();
    removeInterrupt = onInterrupt(() => {
      restoreHostSync();
      if (!keepTmpOnFailure) rmSync(dir, { recursive: true, force: true });
    });
    ns = await createNodeNamespace(dir, logDir);
    writeNodeRunRecord({ owner, dir, namespace: ns.ref() });
    const { network } = ns;
    log(`node namespace ready: slot ${network.slot}, host ${network.hostIp} <-> node ${network.nodeIp}`);
    cp = await startControlPlane({
      ...opts.controlPlane,
      log,
      network: {
        apiServerAddress: network.hostIp,
        serviceClusterIpRange: network.serviceCidr,
        kubernetesServiceIp: network.kubernetesServiceIp,
      },
    });
    const l = nodeLayout(
      dir,
      binDir,
      network,
      join(cp.dir, 'pki', 'ca.crt'),
      opts.nodeName,
      minorOf(cp.state.kubernetesVersion),
    );
    layout = l;
    await writeNodeFiles(cp, l);
    writeNodeRunRecord({ owner, dir, namespace: ns.ref(), cgroupRoot: l.cgroupRoot });
    createCgroupRoot(l.cgroupRoot);
    // From here on a SIGKILL of this process is covered too (node-reaper.ts).
    disarmReaper = armNodeReaper({
      parentPid: process.pid,
      namespace: ns.ref(),
      cgroupRoot: l.cgroupRoot,
      owner,
      dir,
      keepDir: keepTmpOnFailure,
    });

    const nsRef = ns;
    const launch = (name: string, command: string, args: string[]): ManagedProcess => {
      const [c, a] = nsRef.enter(command, args);
      const proc = startProcess({
        name,
        command: c,
        args: a,
        logPath: join(logDir, `${name}.log`),
        env: { ...process.env, PATH: `${binDir}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin` },
      });
      processes.push(proc);
      return proc;
    };
    const alive = (proc: ManagedProcess, what: string): void => {
      const exit = proc.exited();
      if (exit) {
        throw new FatalWaitError(`${proc.name} exited before ${what}; last lines:\n${tailFile(proc.logPath, 30)}`);
      }
    };

    const containerd = launch('containerd', join(binDir, 'containerd'), ['--config', l.containerdConfig]);
    const ctr = (args: string[]): string => nsRef.exec(join(binDir, 'ctr'), ['--address', l.containerdSocket, ...args]);
    await waitFor(
      'containerd to serve its socket',
      async () => {
        alive(containerd, 'serving');
        try {
          ctr(['version']);
          return true;
        } catch {
          return undefined;
        }
      },
      { timeoutMs: 30_000, intervalMs: 100 },
    );
    // The pause image (the CRI sandbox image) and the Agent Sandbox controller's, always; then the caller's.
    const archives = [join(binDir, 'pause-image.tar'), join(binDir, 'agent-sandbox-controller-image.tar')];
    for (const archive of [...archives, ...(opts.images ?? [])]) {
      const began = performance.now();
      ctr(['-n', 'k8s.io', 'images', 'import', archive]);
      log(`imported ${archive} into the node's containerd (${((performance.now() - began) / 1000).toFixed(1)} s)`);
    }

    const kubelet = launch('kubelet', join(binDir, 'kubelet'), [
      `--config=${l.kubeletConfig}`,
      `--kubeconfig=${l.kubeletKubeconfig}`,
      `--root-dir=${l.kubeletRoot}`,
      `--hostname-override=${l.nodeName}`,
      `--node-ip=${network.nodeIp}`,
      '--v=1',
    ]);
    launch('kube-proxy', join(binDir, 'kube-proxy'), [`--config=${l.kubeProxyConfig}`, '--v=1']);

    const core = cp.kc.makeApiClient(CoreV1Api);
    await waitFor(
      `node ${l.nodeName} to be Ready`,
      async (observe) => {
        alive(kubelet, 'the node was Ready');
        alive(containerd, 'the node was Ready');
        const node = await core.readNode({ name: l.nodeName }).catch(() => undefined);
        const ready = node?.status?.conditions?.find((c) => c.type === 'Ready');
        observe(ready ? `Ready=${ready.status}: ${ready.message ?? ''}` : 'not registered');
        return ready?.status === 'True' || undefined;
      },
      { timeoutMs: opts.readyTimeoutMs ?? 120_000, intervalMs: 250 },
    );
    log(`node ${l.nodeName} Ready (${network.nodeIp}, Pods ${network.podCidr}, Services ${network.serviceCidr})`);
    // The node's containerd has a gVisor handler: the platform's RuntimeClass for it, as a platform
    // team installs one beside the runtime (a Pod naming it runs inside gVisor's kernel).
    await cp.kc.makeApiClient(NodeV1Api).createRuntimeClass({
      body: { metadata: { name: RUNSC_RUNTIME_CLASS }, handler: RUNSC_HANDLER },
    });

    const cpRef = cp;
    return {
      cp: cpRef,
      layout: l,
      namespace: nsRef,
      nodeName: l.nodeName,
      processes,
      logReport: (lines = 25) => `${logReport(logDir, lines)}\n${cpRef.logReport(lines)}`,
      nodeExec: (command, args) => nsRef.exec(command, args),
      stop: (o = {}) => stop(o.failed === true || existsSync(join(cpRef.dir, 'FAILED'))),
    };
  } catch (error) {
    const report = logReport(logDir, 30);
    await stop(true);
    throw new Error(`real node failed to start: ${(error as Error).message}\n${report}`, { cause: error });
  }
}

async function writeNodeFiles(cp: ControlPlane, l: NodeLayout): Promise<void> {
  for (const d of [
    l.cniConfDir,
    l.cniDataDir,
    l.kubeletRoot,
    l.podLogsDir,
    join(l.dir, 'pki'),
    l.runcRoot,
    l.runscRoot,
    l.containerdRoot,
  ]) {
    mkdirSync(d, { recursive: true });
  }
  const [serving, kubeletClient, proxyClient] = await Promise.all([
    cp.issueServingCert([l.network.nodeIp, l.nodeName]),
    cp.issueClientCert(`system:node:${l.nodeName}`, ['system:nodes']),
    cp.issueClientCert('system:kube-proxy'),
  ]);
  writeFileSync(l.kubeletCert, serving.certPem, { mode: 0o600 });
  writeFileSync(l.kubeletKey, serving.keyPem, { mode: 0o600 });
  cp.writeKubeconfig(l.kubeletKubeconfig, `system:node:${l.nodeName}`, kubeletClient);
  cp.writeKubeconfig(l.kubeProxyKubeconfig, 'system:kube-proxy', proxyClient);
  writeFileSync(l.containerdConfig, containerdConfig(l));
  writeFileSync(l.runscConfig, runscConfig(l));
  writeFileSync(join(l.cniConfDir, '10-kubeplus-node.conflist'), cniConflist(l));
  writeFileSync(l.kubeletConfig, kubeletConfig(l));
  writeFileSync(l.kubeProxyConfig, kubeProxyConfig(l));
  // No resolver: Pods here have nothing to resolve (and no way to reach one).
  writeFileSync(l.resolvConf, '');
}
