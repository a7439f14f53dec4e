import { join } from 'node:path';

/** The four control-plane binaries the harness runs (kubectl and helm are only used by later suites). */
export const COMPONENTS = ['etcd', 'kube-apiserver', 'kube-controller-manager', 'kube-scheduler'] as const;
export type Component = (typeof COMPONENTS)[number];

/** Admission plugins a later benchmark compares the webhook against (off by default in Kubernetes). */
export const NODE_PLACEMENT_ADMISSION_PLUGINS = ['PodNodeSelector', 'PodTolerationRestriction'] as const;

export const SERVICE_CLUSTER_IP_RANGE = '10.0.0.0/24';
/** First address of the service range: the `kubernetes` Service's ClusterIP. */
export const KUBERNETES_SERVICE_IP = '10.0.0.1';
export const SERVICE_ACCOUNT_ISSUER = 'https://kubernetes.default.svc.cluster.local';
/** DNS names and IPs the API server certificate is valid for. */
export const API_SERVER_HOSTS = [
  '127.0.0.1',
  'localhost',
  'kubernetes',
  'kubernetes.default',
  'kubernetes.default.svc',
  'kubernetes.default.svc.cluster.local',
  KUBERNETES_SERVICE_IP,
] as const;

/**
 * Where the API server listens when a real node joins (real-node.ts): the host's address on the
 * node's veth instead of 127.0.0.1, the node's Service range, and the `kubernetes` Service's
 * ClusterIP (in the API server's certificate, so Pods verify it).
 */
export interface ControlPlaneNetwork {
  apiServerAddress: string;
  serviceClusterIpRange: string;
  kubernetesServiceIp: string;
}

/** DNS names and IPs the API server certificate is valid for, on a given network. */
export function apiServerHosts(network?: ControlPlaneNetwork): string[] {
  if (!network) return [...API_SERVER_HOSTS];
  return [
    ...API_SERVER_HOSTS.filter((h) => h !== KUBERNETES_SERVICE_IP),
    network.apiServerAddress,
    network.kubernetesServiceIp,
  ];
}

export interface ClusterPorts {
  etcdClient: number;
  etcdPeer: number;
  apiServer: number;
  controllerManager: number;
  scheduler: number;
}

/** Every file the components read, all inside one temp dir. */
export interface ClusterLayout {
  dir: string;
  ports: ClusterPorts;
  etcdDataDir: string;
  logDir: string;
  caCert: string;
  caKey: string;
  apiServerCert: string;
  apiServerKey: string;
  serviceAccountKey: string;
  serviceAccountPub: string;
  controllerManagerKubeconfig: string;
  controllerManagerCert: string;
  controllerManagerKey: string;
  schedulerKubeconfig: string;
  schedulerCert: string;
  schedulerKey: string;
  adminKubeconfig: string;
  adminCert: string;
  adminKey: string;
  /** The API server's client certificate for kubelets (logs, exec, port-forward). */
  kubeletClientCert: string;
  kubeletClientKey: string;
}

export function clusterLayout(dir: string, ports: ClusterPorts): ClusterLayout {
  const pki = join(dir, 'pki');
  return {
    dir,
    ports,
    etcdDataDir: join(dir, 'etcd'),
    logDir: join(dir, 'logs'),
    caCert: join(pki, 'ca.crt'),
    caKey: join(pki, 'ca.key'),
    apiServerCert: join(pki, 'apiserver.crt'),
    apiServerKey: join(pki, 'apiserver.key'),
    serviceAccountKey: join(pki, 'sa.key'),
    serviceAccountPub: join(pki, 'sa.pub'),
    controllerManagerKubeconfig: join(dir, 'controller-manager.kubeconfig'),
    controllerManagerCert: join(pki, 'controller-manager-serving.crt'),
    controllerManagerKey: join(pki, 'controller-manager-serving.key'),
    schedulerKubeconfig: join(dir, 'scheduler.kubeconfig'),
    schedulerCert: join(pki, 'scheduler-serving.crt'),
    schedulerKey: join(pki, 'scheduler-serving.key'),
    adminKubeconfig: join(dir, 'admin.kubeconfig'),
    adminCert: join(pki, 'admin.crt'),
    adminKey: join(pki, 'admin.key'),
    kubeletClientCert: join(pki, 'apiserver-kubelet-client.crt'),
    kubeletClientKey: join(pki, 'apiserver-kubelet-client.key'),
  };
}

export interface ComponentSettings {
  /** Added to the API server's default-on admission plugins. */
  extraAdmissionPlugins: readonly string[];
  /** kube-controller-manager --node-monitor-grace-period, in seconds. */
  nodeMonitorGracePeriodSeconds: number;
  /** klog verbosity of the Kubernetes components. */
  verbosity: number;
  extraArgs: Partial<Record<Component, readonly string[]>>;
  /** A real node's network (undefined: loopback only, fake nodes). */
  network?: ControlPlaneNetwork;
}

const loopbackUrl = (port: number): string => `http://127.0.0.1:${port}`;

export function etcdArgs(l: ClusterLayout, s: ComponentSettings): string[] {
  const peer = loopbackUrl(l.ports.etcdPeer);
  const client = loopbackUrl(l.ports.etcdClient);
  return [
    '--name=e2e',
    `--data-dir=${l.etcdDataDir}`,
    // Plain HTTP on loopback only: the data is throw-away and only the API server connects.
    `--listen-client-urls=${client}`,
    `--advertise-client-urls=${client}`,
    `--listen-peer-urls=${peer}`,
    `--initial-advertise-peer-urls=${peer}`,
    `--initial-cluster=e2e=${peer}`,
    '--initial-cluster-state=new',
    // Durability is worthless for a test cluster; fsync latency on a shared disk is not.
    '--unsafe-no-fsync=true',
    '--log-level=warn',
    ...(s.extraArgs.etcd ?? []),
  ];
}

export function apiServerArgs(l: ClusterLayout, s: ComponentSettings): string[] {
  return [
    `--etcd-servers=${loopbackUrl(l.ports.etcdClient)}`,
    `--bind-address=${s.network?.apiServerAddress ?? '127.0.0.1'}`,
    `--advertise-address=${s.network?.apiServerAddress ?? '127.0.0.1'}`,
    `--secure-port=${l.ports.apiServer}`,
    `--tls-cert-file=${l.apiServerCert}`,
    `--tls-private-key-file=${l.apiServerKey}`,
    // x509 client-certificate authentication (admin, controller-manager, scheduler).
    `--client-ca-file=${l.caCert}`,
    '--authorization-mode=Node,RBAC',
    `--service-cluster-ip-range=${s.network?.serviceClusterIpRange ?? SERVICE_CLUSTER_IP_RANGE}`,
    ...(s.network
      ? [
          // Admission and conversion webhooks are called at their Service's endpoint IPs (routed into
          // the node), never at a ClusterIP: the host has no kube-proxy, and a ClusterIP must never
          // follow the host's default route off the machine.
          '--enable-aggregator-routing=true',
          `--kubelet-client-certificate=${l.kubeletClientCert}`,
          `--kubelet-client-key=${l.kubeletClientKey}`,
          `--kubelet-certificate-authority=${l.caCert}`,
          '--kubelet-preferred-address-types=InternalIP',
        ]
      : // Nothing but loopback answers for the `kubernetes` Service: don't publish 127.0.0.1 as its endpoint.
        ['--endpoint-reconciler-type=none']),
    // Service-account tokens (TokenRequest, projected volumes): our services run as service accounts.
    `--service-account-issuer=${SERVICE_ACCOUNT_ISSUER}`,
    `--service-account-key-file=${l.serviceAccountPub}`,
    `--service-account-signing-key-file=${l.serviceAccountKey}`,
    ...(s.extraAdmissionPlugins.length > 0 ? [`--enable-admission-plugins=${s.extraAdmissionPlugins.join(',')}`] : []),
    `--v=${s.verbosity}`,
    ...(s.extraArgs['kube-apiserver'] ?? []),
  ];
}

export function controllerManagerArgs(l: ClusterLayout, s: ComponentSettings): string[] {
  return [
    `--kubeconfig=${l.controllerManagerKubeconfig}`,
    `--authentication-kubeconfig=${l.controllerManagerKubeconfig}`,
    `--authorization-kubeconfig=${l.controllerManagerKubeconfig}`,
    '--bind-address=127.0.0.1',
    `--secure-port=${l.ports.controllerManager}`,
    `--tls-cert-file=${l.controllerManagerCert}`,
    `--tls-private-key-file=${l.controllerManagerKey}`,
    // One instance: no leader election, so controllers start at once.
    '--leader-elect=false',
    // Each controller uses its own service account, as in kubeadm clusters (real RBAC for controllers).
    '--use-service-account-credentials=true',
    `--service-account-private-key-file=${l.serviceAccountKey}`,
    `--root-ca-file=${l.caCert}`,
    // The CSR signer, so certificates.k8s.io works like in a real cluster.
    `--cluster-signing-cert-file=${l.caCert}`,
    `--cluster-signing-key-file=${l.caKey}`,
    // Explicit (the default changed across releases): fake nodes heartbeat every 10s, well inside it.
    `--node-monitor-grace-period=${s.nodeMonitorGracePeriodSeconds}s`,
    '--node-monitor-period=5s',
    `--v=${s.verbosity}`,
    ...(s.extraArgs['kube-controller-manager'] ?? []),
  ];
}

export function schedulerArgs(l: ClusterLayout, s: ComponentSettings): string[] {
  return [
    `--kubeconfig=${l.schedulerKubeconfig}`,
    `--authentication-kubeconfig=${l.schedulerKubeconfig}`,
    `--authorization-kubeconfig=${l.schedulerKubeconfig}`,
    '--bind-address=127.0.0.1',
    `--secure-port=${l.ports.scheduler}`,
    `--tls-cert-file=${l.schedulerCert}`,
    `--tls-private-key-file=${l.schedulerKey}`,
    '--leader-elect=false',
    `--v=${s.verbosity}`,
    ...(s.extraArgs['kube-scheduler'] ?? []),
  ];
}
