import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { basename, join } from 'node:path';
import type { KubeConfig } from '@kubernetes/client-node';
import type { ClusterPorts } from './components.js';
import { type KubeconfigCredentials, loadKubeConfig, writeKubeconfig } from './kubeconfig.js';
import { type CertAndKey, CertificateAuthority } from './pki.js';
import { tailFile } from './process.js';

/** Everything a test process needs to use a running control plane; serialized to `<dir>/state.json`. */
export interface ClusterState {
  version: 1;
  dir: string;
  server: string;
  /** Admin kubeconfig (user kubeplus-e2e-admin in group system:masters). */
  kubeconfigPath: string;
  caCertPath: string;
  caKeyPath: string;
  logDir: string;
  ports: ClusterPorts;
  assetsDir: string;
  /** The API server's version (gitVersion of /version, e.g. v1.30.14). */
  kubernetesVersion: string;
  nodeMonitorGracePeriodSeconds: number;
  extraAdmissionPlugins: string[];
  /** Milliseconds from startControlPlane() to a usable cluster, and per phase. */
  timings: Record<string, number>;
}

export const STATE_FILE = 'state.json';
/** Created in the cluster dir by the e2e test environment when a test fails (see test/environment.ts). */
export const FAILURE_MARKER = 'FAILED';

/** Access to a running control plane: connection, PKI, and the component logs. */
export class Cluster {
  readonly kc: KubeConfig;

  protected constructor(
    readonly state: ClusterState,
    private readonly ca: CertificateAuthority,
  ) {
    this.kc = loadKubeConfig(state.kubeconfigPath);
  }

  static async connect(statePath: string): Promise<Cluster> {
    const state = readState(statePath);
    const ca = await CertificateAuthority.fromPem({
      certPem: readFileSync(state.caCertPath, 'utf8'),
      keyPem: readFileSync(state.caKeyPath, 'utf8'),
    });
    return new Cluster(state, ca);
  }

  get dir(): string {
    return this.state.dir;
  }
  get server(): string {
    return this.state.server;
  }
  get kubeconfigPath(): string {
    return this.state.kubeconfigPath;
  }
  get caPem(): string {
    return this.ca.certPem;
  }
  get statePath(): string {
    return join(this.state.dir, STATE_FILE);
  }

  /** A serving certificate from the cluster CA (so `caPem` is the caBundle) for DNS names and/or IPs. */
  issueServingCert(hosts: readonly string[]): Promise<CertAndKey> {
    if (hosts.length === 0 || hosts.some((h) => h.trim() === '')) {
      throw new Error(`issueServingCert: need non-empty DNS names or IPs, got ${JSON.stringify(hosts)}`);
    }
    return this.ca.issueServingCert(hosts);
  }

  /** A client certificate the API server authenticates as `user` with `groups`. */
  issueClientCert(user: string, groups: readonly string[] = []): Promise<CertAndKey> {
    return this.ca.issueClientCert(user, groups);
  }

  /** Writes a kubeconfig for this cluster with other credentials (a client cert or a bearer token). */
  writeKubeconfig(path: string, user: string, credentials: KubeconfigCredentials): string {
    return writeKubeconfig(path, { server: this.server, caPem: this.caPem, user, credentials });
  }

  /** Log files of everything the harness started (components and services), by name. */
  logFiles(): Record<string, string> {
    return logFilesIn(this.state.logDir);
  }

  logTail(name: string, lines = 40): string {
    const path = this.logFiles()[name];
    if (!path) throw new Error(`no log named ${name}; have: ${Object.keys(this.logFiles()).join(', ')}`);
    return tailFile(path, lines);
  }

  /** Tails of every log, for a failure message. */
  logReport(lines = 25): string {
    return logReport(this.state.logDir, lines);
  }
}

/** `<name>.log` files in `logDir`, by name. */
export function logFilesIn(logDir: string): Record<string, string> {
  if (!existsSync(logDir)) return {};
  return Object.fromEntries(
    readdirSync(logDir)
      .filter((f) => f.endsWith('.log'))
      .sort()
      .map((f) => [basename(f, '.log'), join(logDir, f)]),
  );
}

/** The last `lines` lines of every log in `logDir`, each under a header naming the file. */
export function logReport(logDir: string, lines = 25): string {
  return Object.entries(logFilesIn(logDir))
    .map(([name, path]) => `----- ${name} (last ${lines} lines of ${path}) -----\n${tailFile(path, lines)}`)
    .join('\n');
}

export function writeState(state: ClusterState): string {
  const path = join(state.dir, STATE_FILE);
  writeFileSync(path, `${JSON.stringify(state, null, 2)}\n`);
  return path;
}

export function readState(statePath: string): ClusterState {
  let state: ClusterState;
  try {
    state = JSON.parse(readFileSync(statePath, 'utf8')) as ClusterState;
  } catch (error) {
    throw new Error(`cannot read control-plane state ${statePath}: ${(error as Error).message}`);
  }
  if (state.version !== 1) throw new Error(`${statePath}: unsupported state version ${String(state.version)}`);
  return state;
}
