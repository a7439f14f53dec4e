import { join } from 'node:path';
import type { NodeNetwork } from './network.js';

/**
 * The real node's configuration files, rendered from its paths and addresses (pure). Each setting
 * that is not a default says why: most are what this machine kind needs (e2e/README.md, "A real
 * node") or keep the node's state inside its run directory.
 */
export interface NodeLayout {
  dir: string;
  binDir: string;
  nodeName: string;
  network: NodeNetwork;
  /** kubelet's and kube-proxy's minor (the control plane's: a kubelet is never newer), e.g. 1.30. */
  kubernetesMinor: string;
  /** kubelet's cgroupRoot, the same path in every hierarchy (cgroups.ts). */
  cgroupRoot: string;
  /** The Pod sandbox image, imported before kubelet starts (pinned: never pulled, never collected). */
  pauseImage: string;
  containerdRoot: string;
  containerdState: string;
  containerdSocket: string;
  containerdConfig: string;
  /**
   * containerd's registry hosts directory (`config_path`): `<host:port>/hosts.toml` per registry,
   * read at each pull, so a suite can point the node at a registry it starts (registryHostsToml).
   */
  registryConfigDir: string;
  runcRoot: string;
  /** runsc's state (`--root`): its sandboxes' state files and the null-netns bind mount. */
  runscRoot: string;
  /** The runsc shim's configuration (`ConfigPath` of containerd's runsc runtime). */
  runscConfig: string;
  cniConfDir: string;
  cniDataDir: string;
  kubeletRoot: string;
  kubeletConfig: string;
  kubeletKubeconfig: string;
  kubeletCert: string;
  kubeletKey: string;
  podLogsDir: string;
  resolvConf: string;
  kubeProxyConfig: string;
  kubeProxyKubeconfig: string;
  clientCaFile: string;
}

export function nodeLayout(
  dir: string,
  binDir: string,
  network: NodeNetwork,
  clientCaFile: string,
  nodeName = `kubeplus-node-${network.slot}`,
  kubernetesMinor = '1.36',
): NodeLayout {
  return {
    dir,
    binDir,
    nodeName,
    network,
    kubernetesMinor,
    cgroupRoot: `/kubeplus-isolation-node-${network.slot}`,
    pauseImage: 'kubeplus-isolation.local/pause:1',
    containerdRoot: join(dir, 'containerd', 'root'),
    containerdState: join(dir, 'containerd', 'state'),
    containerdSocket: join(dir, 'containerd', 'containerd.sock'),
    containerdConfig: join(dir, 'containerd', 'config.toml'),
    registryConfigDir: join(dir, 'containerd', 'certs.d'),
    runcRoot: join(dir, 'containerd', 'runc'),
    runscRoot: join(dir, 'containerd', 'runsc'),
    runscConfig: join(dir, 'containerd', 'runsc.toml'),
    cniConfDir: join(dir, 'cni', 'net.d'),
    cniDataDir: join(dir, 'cni', 'networks'),
    kubeletRoot: join(dir, 'kubelet'),
    kubeletConfig: join(dir, 'kubelet-config.yaml'),
    kubeletKubeconfig: join(dir, 'kubelet.kubeconfig'),
    kubeletCert: join(dir, 'pki', 'kubelet.crt'),
    kubeletKey: join(dir, 'pki', 'kubelet.key'),
    podLogsDir: join(dir, 'pod-logs'),
    resolvConf: join(dir, 'resolv.conf'),
    kubeProxyConfig: join(dir, 'kube-proxy-config.yaml'),
    kubeProxyKubeconfig: join(dir, 'kube-proxy.kubeconfig'),
    clientCaFile,
  };
}

const q = (s: string): string => JSON.stringify(s);
/** `minor` (1.x) is 1.`at` or later. */
const atLeast = (minor: string, at: number): boolean => Number(minor.split('.')[1]) >= at;

export function containerdConfig(l: NodeLayout): string {
  const runtime = "plugins.'io.containerd.cri.v1.runtime'";
  return `version = 3
root = ${q(l.containerdRoot)}
state = ${q(l.containerdState)}

[grpc]
  address = ${q(l.containerdSocket)}

[ttrpc]
  address = ${q(`${l.containerdSocket}.ttrpc`)}

[debug]
  address = ""

[metrics]
  address = ""

[plugins.'io.containerd.cri.v1.images']
  snapshotter = "overlayfs"
  [plugins.'io.containerd.cri.v1.images'.pinned_images]
    sandbox = ${q(l.pauseImage)}
  [plugins.'io.containerd.cri.v1.images'.registry]
    config_path = ${q(l.registryConfigDir)}

[${runtime}]
  enable_selinux = false
  # This machine kind lacks CAP_SYS_RESOURCE: without it runc fails to lower oom_score_adj.
  restrict_oom_score_adj = true
  # Pod network namespaces are bind-mounted under the state dir, not /run/netns.
  netns_mounts_under_state_dir = true
  enable_cdi = false
  [${runtime}.containerd]
    default_runtime_name = "runc"
    [${runtime}.containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [${runtime}.containerd.runtimes.runc.options]
        BinaryName = ${q(join(l.binDir, 'runc'))}
        Root = ${q(l.runcRoot)}
        SystemdCgroup = false
    # gVisor: the handler a RuntimeClass names \`runsc\` (the harness installs the platform class
    # \`gvisor\`, RUNSC_RUNTIME_CLASS). The shim (containerd-shim-runsc-v1) is found on containerd's
    # PATH, the node's binary directory; its options point at runscConfig(l).
    [${runtime}.containerd.runtimes.runsc]
      runtime_type = "io.containerd.runsc.v1"
      [${runtime}.containerd.runtimes.runsc.options]
        TypeUrl = "io.containerd.runsc.v1.options"
        ConfigPath = ${q(l.runscConfig)}
  [${runtime}.cni]
    bin_dirs = [${q(l.binDir)}]
    conf_dir = ${q(l.cniConfDir)}
    max_conf_num = 1

[plugins.'io.containerd.grpc.v1.cri']
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"

[plugins.'io.containerd.nri.v1.nri']
  disable = true
`;
}

/**
 * containerd's hosts.toml for a registry the harness serves over plain HTTP at `host` (host:port,
 * e.g. the node's host-side address): pull and resolve from it, as `http://`. Written to
 * `<registryConfigDir>/<host>/hosts.toml`.
 */
export function registryHostsToml(host: string): string {
  if (!/^[a-z0-9.-]+:\d+$/.test(host)) throw new Error(`registry host ${host} is not host:port`);
  return `server = ${q(`http://${host}`)}

[host.${q(`http://${host}`)}]
  capabilities = ["pull", "resolve"]
`;
}

/** The containerd handler that runs a Pod inside gVisor, and the platform RuntimeClass naming it. */
export const RUNSC_HANDLER = 'runsc';
export const RUNSC_RUNTIME_CLASS = 'gvisor';

/**
 * The runsc shim's configuration: runsc from the node's binaries, its state in the run dir, and
 * the systrap platform (gVisor's KVM platform hangs under this machine kind's nested
 * virtualization; systrap needs no device and no capability beyond root's).
 */
export function runscConfig(l: NodeLayout): string {
  return `binary_name = ${q(join(l.binDir, 'runsc'))}
root = ${q(l.runscRoot)}

[runsc_config]
  platform = "systrap"
`;
}

/** One bridge network: Pods get an address from podCidr and a default route via the bridge. */
export function cniConflist(l: NodeLayout): string {
  return `${JSON.stringify(
    {
      cniVersion: '1.0.0',
      name: 'kubeplus-node',
      plugins: [
        {
          type: 'bridge',
          bridge: 'cni0',
          isGateway: true,
          // No iptables here, and nothing to masquerade to: the node namespace has no way out.
          ipMasq: false,
          hairpinMode: true,
          ipam: {
            type: 'host-local',
            ranges: [[{ subnet: l.network.podCidr, gateway: l.network.podGateway }]],
            routes: [{ dst: '0.0.0.0/0' }],
            dataDir: l.cniDataDir,
          },
        },
        { type: 'portmap', capabilities: { portMappings: true } },
      ],
    },
    null,
    2,
  )}\n`;
}

export function kubeletConfig(l: NodeLayout): string {
  return `apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
${
  atLeast(l.kubernetesMinor, 31)
    ? '# This machine kind has cgroup v1 (hybrid); kubelet 1.36 refuses v1 unless told otherwise (1.31+).\nfailCgroupV1: false\n'
    : ''
}cgroupDriver: cgroupfs
cgroupRoot: ${l.cgroupRoot}
containerRuntimeEndpoint: unix://${l.containerdSocket}
address: ${l.network.nodeIp}
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
tlsCertFile: ${l.kubeletCert}
tlsPrivateKeyFile: ${l.kubeletKey}
authentication:
  anonymous:
    enabled: false
  webhook:
    enabled: true
  x509:
    clientCAFile: ${l.clientCaFile}
authorization:
  mode: Webhook
podLogsDir: ${l.podLogsDir}
resolvConf: ${l.resolvConf}
failSwapOn: false
# Never collect the images the harness imported (nothing can be pulled here).
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
# A test machine's disk may be fuller than the default eviction thresholds allow.
evictionHard:
  memory.available: 50Mi
  nodefs.available: 1%
  imagefs.available: 1%
  nodefs.inodesFree: 1%
serializeImagePulls: false
nodeStatusReportFrequency: 10s
nodeStatusUpdateFrequency: 5s
syncFrequency: 10s
fileCheckFrequency: 10s
shutdownGracePeriod: 0s
`;
}

export function kubeProxyConfig(l: NodeLayout): string {
  return `apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: nftables
${
  atLeast(l.kubernetesMinor, 31)
    ? ''
    : '# nftables mode is alpha before 1.31 (beta, on by default, in 1.31; GA in 1.33).\nfeatureGates:\n  NFTablesProxyMode: true\n'
}clientConnection:
  kubeconfig: ${l.kubeProxyKubeconfig}
hostnameOverride: ${l.nodeName}
bindAddress: ${l.network.nodeIp}
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
clusterCIDR: ${l.network.podCidr}
# Service traffic is SNATed, so a Pod reaching a Service backed by a Pod on the same bridge
# gets its replies through the node (there is no br_netfilter here).
nftables:
  masqueradeAll: true
# 0: leave the (not namespaced) conntrack sysctls of the host alone.
conntrack:
  maxPerCore: 0
  min: 0
  tcpEstablishedTimeout: 0s
  tcpCloseWaitTimeout: 0s
`;
}
