import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';

/** What preflight reads off the machine (machineFacts()). */
export interface MachineFacts {
  uid: number | undefined;
  /** /proc/filesystems */
  filesystems: string;
  cgroupsMounted: boolean;
  commands: Record<(typeof COMMANDS)[number][0], boolean>;
  namespaces: boolean;
  veth: boolean;
}

const COMMANDS = [
  ['unshare', 'util-linux: the node namespace'],
  ['nsenter', 'util-linux: starting the node processes in it'],
  ['ip', 'iproute2: the veth pair and routes'],
  ['mount', 'util-linux'],
] as const;

export function machineFacts(): MachineFacts {
  return {
    uid: process.getuid?.(),
    filesystems: readText('/proc/filesystems'),
    cgroupsMounted: cgroupsMounted(),
    commands: Object.fromEntries(COMMANDS.map(([c]) => [c, onPath(c)])) as MachineFacts['commands'],
    namespaces: existsSync('/proc/self/ns/net') && existsSync('/proc/self/ns/mnt'),
    veth: existsSync('/sys/module/veth') || moduleBuiltIn('veth') || canCreateVeth(),
  };
}

/**
 * What a machine needs to run the harness's real node, checked before anything is changed. Each
 * entry names one missing thing and why; an empty list means the machine can.
 */
export function realNodePreflight(facts: MachineFacts = machineFacts()): string[] {
  const missing: string[] = [];
  if (facts.uid !== 0) missing.push('root (kubelet, containerd and runc need it; run as root)');
  if (!/\boverlay\b/.test(facts.filesystems)) {
    missing.push('overlayfs (kernel module overlay: containerd snapshots and the node sandbox need it)');
  }
  if (!/\btmpfs\b/.test(facts.filesystems)) missing.push('tmpfs');
  if (!facts.cgroupsMounted) missing.push('cgroups mounted under /sys/fs/cgroup (v1 hierarchies or v2)');
  for (const [command, why] of COMMANDS) if (!facts.commands[command]) missing.push(`${command} (${why})`);
  if (!facts.namespaces) missing.push('network and mount namespaces');
  if (!facts.veth) missing.push('veth links (kernel)');
  return missing;
}

/** Throws ONE message naming everything the machine lacks for a real node. */
export function assertRealNodeSupported(facts?: MachineFacts): void {
  const missing = realNodePreflight(facts);
  if (missing.length > 0) {
    throw new Error(
      `this machine cannot run the real node (e2e/README.md, "A real node"); missing: ${missing.join('; ')}`,
    );
  }
}

function readText(path: string): string {
  try {
    return readFileSync(path, 'utf8');
  } catch {
    return '';
  }
}

function cgroupsMounted(): boolean {
  try {
    return readdirSync('/sys/fs/cgroup').length > 0;
  } catch {
    return false;
  }
}

function onPath(command: string): boolean {
  return (process.env.PATH ?? '/usr/sbin:/usr/bin:/sbin:/bin')
    .split(':')
    .concat(['/usr/sbin', '/sbin'])
    .some((dir) => dir !== '' && existsSync(`${dir}/${command}`));
}

function moduleBuiltIn(name: string): boolean {
  const release = readText('/proc/sys/kernel/osrelease').trim();
  return readText(`/lib/modules/${release}/modules.builtin`).includes(`/${name}.ko`);
}

/** Last resort: veth may be a module not loaded yet; `ip link add` loads it (and we delete at once). */
function canCreateVeth(): boolean {
  const name = `kpiprobe${process.pid % 100000}`;
  try {
    execFileSync('ip', ['link', 'add', name, 'type', 'veth', 'peer', 'name', `${name}p`], { stdio: 'ignore' });
    execFileSync('ip', ['link', 'del', name], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}
