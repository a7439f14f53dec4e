import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, readlinkSync } from 'node:fs';
import { join } from 'node:path';
import { type ManagedProcess, startProcess } from '../process.js';
import { sleepSync, waitFor } from '../wait.js';
import { cidrsOverlap, MAX_SLOTS, type NodeNetwork, nodeNetwork, slotSupernet } from './network.js';

/**
 * The real node's sandbox on the host: ONE process ("the holder") in a new mount namespace and a
 * new network namespace, which every node process (containerd, kubelet, kube-proxy) joins with
 * nsenter. What the node changes stays in there and vanishes when its last process exits:
 *
 * - network: the namespace's only way out is a veth pair to the host; the host routes the node's
 *   Pod and Service ranges into it and nothing else, and the namespace has no default route, so a
 *   packet for any other address is "network unreachable" (network.ts).
 * - mounts: private propagation; /var, /run, /opt and /etc are overlays whose upper layers are a
 *   tmpfs of the namespace, so the paths kubelet, containerd and the CNI plugins hard-code
 *   (/var/lib/kubelet/device-plugins, /var/log/containers, /run/containerd, /var/lib/cni) are
 *   written there, never on the host; volume, rootfs and netns mounts are in the namespace too.
 *
 * What the kernel does not namespace (cgroups, three sysctls kubelet sets) is handled by
 * cgroups.ts and host-sysctls.ts.
 */
export interface NodeNamespace {
  readonly network: NodeNetwork;
  /** The holder process (its pid names the namespaces). */
  readonly holder: ManagedProcess;
  /** The mount namespace's identity, as /proc/<pid>/ns/mnt reads ("mnt:[…]"). */
  readonly mountNamespace: string;
  /** Command and arguments that run `command args` inside the node's namespaces. */
  enter(command: string, args: readonly string[]): [string, string[]];
  /** Runs a command inside the node's namespaces; resolves with its stdout. */
  exec(command: string, args: readonly string[], input?: string): string;
  /** SIGKILLs every process in the node's mount namespace, holder last (synchronous). */
  killAll(): void;
  /** What another process needs to tear the namespace down (the node reaper). */
  ref(): NodeNamespaceRef;
}

const OVERLAID = ['/var', '/run', '/opt', '/etc'] as const;

function holderScript(upper: string): string {
  const lines = ['set -eu', `mount -t tmpfs -o mode=0755 kubeplus-isolation-node ${upper}`];
  for (const dir of OVERLAID) {
    const name = dir.slice(1);
    lines.push(
      `mkdir -p ${upper}/${name} ${upper}/${name}.work`,
      `mount -t overlay overlay -o lowerdir=${dir},upperdir=${upper}/${name},workdir=${upper}/${name}.work ${dir}`,
    );
  }
  lines.push(
    'ip link set lo up',
    // The node routes between its Pods, the host veth and kube-proxy's Service NAT.
    'echo 1 > /proc/sys/net/ipv4/ip_forward',
    // Every packet for an address outside the node's ranges is answered "network unreachable" at
    // once (the namespace has no route out): not rate-limited, so a Pod sees ENETUNREACH, not a hang.
    'echo 0 > /proc/sys/net/ipv4/icmp_ratelimit',
    `touch ${upper}.ready`,
    'exec sleep infinity',
  );
  return lines.join('\n');
}

function run(command: string, args: readonly string[], input?: string): string {
  try {
    return execFileSync(command, args, { encoding: 'utf8', input, stdio: ['pipe', 'pipe', 'pipe'] });
  } catch (error) {
    const stderr = String((error as { stderr?: string }).stderr ?? '').trim();
    throw new Error(`${command} ${args.join(' ')} failed: ${stderr || (error as Error).message}`);
  }
}

interface RouteEntry {
  dst: string;
}

/** Slots whose /16 no host route touches (a host network in 10.200.0.0/11 would otherwise clash). */
function usableSlots(): number[] {
  const routes = JSON.parse(run('ip', ['-j', '-4', 'route', 'show', 'table', 'all'])) as RouteEntry[];
  const cidrs = routes
    .map((r) => r.dst)
    .filter((d) => d !== 'default' && /^\d+\.\d+\.\d+\.\d+(\/\d+)?$/.test(d))
    .map((d) => (d.includes('/') ? d : `${d}/32`));
  const slots: number[] = [];
  for (let slot = 0; slot < MAX_SLOTS; slot++) {
    if (!cidrs.some((c) => cidrsOverlap(c, slotSupernet(slot)))) slots.push(slot);
  }
  return slots;
}

/**
 * Starts the holder, claims a free slot by creating its veth pair (the host end's name is unique),
 * addresses both ends and routes the node's Pod and Service ranges from the host into it.
 */
export async function createNodeNamespace(dir: string, logDir: string): Promise<NodeNamespace> {
  const upper = join(dir, 'overlay');
  mkdirSync(upper, { recursive: true });
  const holder = startProcess({
    name: 'node-namespace',
    command: 'unshare',
    args: ['--mount', '--net', '--propagation', 'private', '--', 'sh', '-c', holderScript(upper)],
    logPath: join(logDir, 'node-namespace.log'),
  });
  let hostLink: { name: string; ifindex: string } | undefined;
  const ref = (): NodeNamespaceRef => ({ holderPid: holder.pid, mountNs, hostLink });
  const killAll = (): void => killNodeNamespace(ref());
  let mountNs = '';
  try {
    await waitFor(
      'the node namespace to be set up',
      async () => {
        if (holder.exited()) throw new Error('the node namespace holder exited (see node-namespace.log)');
        return existsSync(`${upper}.ready`) || undefined;
      },
      { timeoutMs: 10_000, intervalMs: 50 },
    );
    mountNs = readlinkSync(`/proc/${holder.pid}/ns/mnt`);
    const network = claimSlot(holder.pid);
    hostLink = { name: network.hostLink, ifindex: readIfindex(network.hostLink) ?? '' };
    const n = (args: string[]): string => run('nsenter', ['-t', String(holder.pid), '-n', '--', ...args]);
    run('ip', ['addr', 'add', `${network.hostIp}/${network.linkPrefix}`, 'dev', network.hostLink]);
    run('ip', ['link', 'set', network.hostLink, 'up']);
    n(['ip', 'addr', 'add', `${network.nodeIp}/${network.linkPrefix}`, 'dev', network.nodeLink]);
    n(['ip', 'link', 'set', network.nodeLink, 'up']);
    for (const cidr of [network.podCidr, network.serviceCidr]) {
      run('ip', ['route', 'add', cidr, 'via', network.nodeIp, 'dev', network.hostLink]);
    }
    const enter = (command: string, args: readonly string[]): [string, string[]] => [
      'nsenter',
      ['-t', String(holder.pid), '-m', '-n', '--', command, ...args],
    ];
    return {
      network,
      holder,
      mountNamespace: mountNs,
      enter,
      exec: (command, args, input) => run(...enter(command, args), input),
      killAll,
      ref,
    };
  } catch (error) {
    killAll();
    throw error;
  }
}

function claimSlot(holderPid: number): NodeNetwork {
  const tried: string[] = [];
  for (const slot of usableSlots()) {
    const network = nodeNetwork(slot);
    try {
      execFileSync(
        'ip',
        ['link', 'add', network.hostLink, 'type', 'veth', 'peer', 'name', network.nodeLink, 'netns', String(holderPid)],
        { stdio: ['ignore', 'ignore', 'pipe'] },
      );
      return network;
    } catch (error) {
      const stderr = String((error as { stderr?: Buffer }).stderr ?? '');
      if (!/exists/i.test(stderr)) throw new Error(`ip link add ${network.hostLink} failed: ${stderr.trim()}`);
      tried.push(network.hostLink);
    }
  }
  throw new Error(`no free node slot: ${tried.join(', ') || 'every 10.200-231.0.0/16 is routed on this host'} in use`);
}

function readIfindex(link: string): string | undefined {
  try {
    return readFileSync(`/sys/class/net/${link}/ifindex`, 'utf8').trim();
  } catch {
    return undefined;
  }
}

/** Pids of every process whose mount namespace is `mountNs` ("mnt:[…]"). */
export function processesInMountNamespace(mountNs: string): number[] {
  const pids: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      if (readlinkSync(`/proc/${entry}/ns/mnt`) === mountNs) pids.push(Number(entry));
    } catch {
      // exited meanwhile, or a kernel thread
    }
  }
  return pids;
}

/** What identifies a node's namespace on the host: enough to tear it down from another process. */
export interface NodeNamespaceRef {
  holderPid: number;
  /** "mnt:[…]" of the holder; '' before it was read. */
  mountNs: string;
  /** The host end of the veth, with the ifindex it had when this run created it. */
  hostLink?: { name: string; ifindex: string } | undefined;
}

/**
 * SIGKILLs every process in the node's mount namespace, holder last, and deletes the host end of
 * its veth if it is still ours (synchronous; used by stop, Ctrl-C and the node reaper). A pid is
 * signalled only while it is in that mount namespace, so a reused pid is never hit.
 */
export function killNodeNamespace(ref: NodeNamespaceRef): void {
  const inNamespace = (pid: number): boolean => {
    try {
      return ref.mountNs !== '' && readlinkSync(`/proc/${pid}/ns/mnt`) === ref.mountNs;
    } catch {
      return false;
    }
  };
  if (ref.mountNs !== '') {
    for (let attempt = 0; attempt < 100; attempt++) {
      const pids = processesInMountNamespace(ref.mountNs).filter((p) => p !== ref.holderPid);
      if (pids.length === 0) break;
      for (const pid of pids) {
        try {
          process.kill(pid, 'SIGKILL');
        } catch {
          // already gone
        }
      }
      sleepSync(50);
    }
  }
  if (ref.mountNs === '' || inNamespace(ref.holderPid)) {
    try {
      process.kill(ref.holderPid, 'SIGKILL');
    } catch {
      // already gone
    }
  }
  // The kernel tears a dead network namespace down asynchronously (its veth, with the host's
  // routes, can outlive the holder for a moment): delete the host end now, synchronously.
  // Only OUR link: once ours is gone, another run may have claimed the same name.
  const link = ref.hostLink;
  if (link !== undefined && readIfindex(link.name) === link.ifindex) {
    try {
      execFileSync('ip', ['link', 'del', link.name], { stdio: 'ignore' });
    } catch {
      // gone with the namespace meanwhile
    }
  }
}
