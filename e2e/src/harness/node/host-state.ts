import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { cgroupHierarchies } from './cgroups.js';
import { KUBELET_SYSCTLS, sysctlRecordPath } from './host-sysctls.js';

/**
 * What a real node could leave behind on the host, read from the host's namespaces: the test that
 * starts and stops a node compares this before and after (e2e/test/real-node.test.ts).
 */
export interface HostState {
  links: string[];
  routes: string[];
  rules: string[];
  sysctls: Record<string, string>;
  mountPoints: string[];
  /** Paths kubelet, containerd and the CNI plugins use by default, and whether each exists. */
  paths: Record<string, boolean>;
  /** Top-level directories of every cgroup hierarchy. */
  cgroups: string[];
  /** The host's nftables tables ("" when there is no nft to ask). */
  nftTables: string;
  /** The harness's own leftovers in the temp dir (node run dirs, the shared sysctl record). */
  tmpEntries: string[];
}

export const DEFAULT_NODE_PATHS = [
  '/var/lib/kubelet',
  '/var/log/containers',
  '/var/log/pods',
  '/var/lib/containerd',
  '/run/containerd',
  '/var/lib/cni',
  '/etc/cni',
  '/opt/cni',
  '/opt/containerd',
  '/run/netns',
  '/etc/containerd',
  '/etc/kubernetes',
] as const;

const HOST_SYSCTLS = [...KUBELET_SYSCTLS, 'net/ipv4/ip_forward', 'net/ipv6/conf/all/forwarding'] as const;

function lines(command: string, args: string[]): string[] {
  return execFileSync(command, args, { encoding: 'utf8' })
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l !== '')
    .sort();
}

/** Reads the host's state (`nft`: path of an nft binary to list the host's tables with, if any). */
export function hostState(nft?: string): HostState {
  const sysctls: Record<string, string> = {};
  for (const key of HOST_SYSCTLS) {
    if (existsSync(`/proc/sys/${key}`)) sysctls[key] = readFileSync(`/proc/sys/${key}`, 'utf8').trim();
  }
  const mountPoints = readFileSync('/proc/self/mountinfo', 'utf8')
    .split('\n')
    .map((l) => l.split(' ')[4])
    .filter((p): p is string => p !== undefined && p !== '')
    .sort();
  const cgroups = cgroupHierarchies().flatMap((h) =>
    readdirSync(h, { withFileTypes: true })
      .filter((e) => e.isDirectory())
      .map((e) => join(h, e.name)),
  );
  return {
    links: lines('ip', ['-o', 'link', 'show']).map((l) => l.split(':')[1]?.trim().split('@')[0] ?? l),
    routes: [
      ...lines('ip', ['-4', 'route', 'show', 'table', 'all']),
      ...lines('ip', ['-6', 'route', 'show', 'table', 'all']),
    ],
    rules: lines('ip', ['rule', 'show']),
    sysctls,
    mountPoints,
    paths: Object.fromEntries(DEFAULT_NODE_PATHS.map((p) => [p, existsSync(p)])),
    cgroups: cgroups.sort(),
    nftTables: nft ? execFileSync(nft, ['list', 'tables'], { encoding: 'utf8' }) : '',
    tmpEntries: [
      ...readdirSync(tmpdir()).filter((e) => e.startsWith('kubeplus-node-')),
      ...(existsSync(sysctlRecordPath()) ? [sysctlRecordPath()] : []),
      ...(existsSync(`${sysctlRecordPath()}.lock`) ? [`${sysctlRecordPath()}.lock`] : []),
    ].sort(),
  };
}
