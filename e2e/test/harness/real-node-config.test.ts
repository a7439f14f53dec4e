/**
 * The real node's pure parts: addresses per slot, the configuration it renders, and the preflight
 * message a machine that cannot run it gets. (What they do on a machine: real-node.test.ts.)
 */
import { describe, expect, test } from '@jest/globals';
import {
  assertRealNodeSupported,
  ipInCidr,
  type MachineFacts,
  nodeLayout,
  nodeNetwork,
  realNodePreflight,
} from '@kubeplus-isolation/e2e';
import {
  cniConflist,
  containerdConfig,
  kubeletConfig,
  kubeProxyConfig,
  RUNSC_HANDLER,
  registryHostsToml,
  runscConfig,
} from '../../src/harness/node/config.js';
import { cidrsOverlap, MAX_SLOTS, slotSupernet } from '../../src/harness/node/network.js';

describe('nodeNetwork', () => {
  test('every slot has its own ranges, inside its own /16, none overlapping another slot', () => {
    const all = Array.from({ length: MAX_SLOTS }, (_, slot) => nodeNetwork(slot));
    for (const n of all) {
      for (const ip of [n.hostIp, n.nodeIp, n.podGateway, n.kubernetesServiceIp]) {
        expect(ipInCidr(ip, slotSupernet(n.slot))).toBe(true);
      }
      expect(ipInCidr(n.podGateway, n.podCidr)).toBe(true);
      expect(ipInCidr(n.kubernetesServiceIp, n.serviceCidr)).toBe(true);
      expect(cidrsOverlap(n.podCidr, n.serviceCidr)).toBe(false);
      expect(ipInCidr(n.hostIp, n.podCidr) || ipInCidr(n.hostIp, n.serviceCidr)).toBe(false);
    }
    for (let a = 0; a < all.length; a++) {
      for (let b = a + 1; b < all.length; b++) {
        expect(cidrsOverlap(slotSupernet(a), slotSupernet(b))).toBe(false);
      }
    }
    expect(new Set(all.map((n) => n.hostLink)).size).toBe(MAX_SLOTS);
  });

  test('slots outside 0..MAX_SLOTS-1 are refused', () => {
    expect(() => nodeNetwork(-1)).toThrow('outside');
    expect(() => nodeNetwork(MAX_SLOTS)).toThrow('outside');
    expect(() => nodeNetwork(1.5)).toThrow('outside');
  });

  test('ipInCidr and cidrsOverlap', () => {
    expect(ipInCidr('10.200.0.5', '10.200.0.0/24')).toBe(true);
    expect(ipInCidr('10.200.1.5', '10.200.0.0/24')).toBe(false);
    expect(ipInCidr('1.2.3.4', '0.0.0.0/0')).toBe(true);
    expect(cidrsOverlap('10.0.0.0/8', '10.200.0.0/16')).toBe(true);
    expect(cidrsOverlap('10.201.0.0/16', '10.200.0.0/16')).toBe(false);
  });
});

describe('the rendered configuration', () => {
  const layout = nodeLayout('/tmp/kubeplus-node-x', '/cache/bin', nodeNetwork(3), '/tmp/cp/pki/ca.crt');

  test('containerd keeps every path in the run dir and works around this machine kind', () => {
    const toml = containerdConfig(layout);
    for (const key of ['root', 'state']) expect(toml).toMatch(new RegExp(`^${key} = "/tmp/kubeplus-node-x/`, 'm'));
    expect(toml).toContain('address = "/tmp/kubeplus-node-x/containerd/containerd.sock"');
    expect(toml).toContain('restrict_oom_score_adj = true');
    expect(toml).toContain('netns_mounts_under_state_dir = true');
    expect(toml).toContain('BinaryName = "/cache/bin/runc"');
    expect(toml).toContain('sandbox = "kubeplus-isolation.local/pause:1"');
    expect(toml).toContain('bin_dirs = ["/cache/bin"]');
  });

  test("containerd has a runsc handler whose shim runs the node's runsc on systrap, its state in the run dir", () => {
    const toml = containerdConfig(layout);
    const table = `[plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.${RUNSC_HANDLER}]`;
    expect(toml).toContain(table);
    const entry = toml.slice(toml.indexOf(table));
    expect(entry).toMatch(/^\s+runtime_type = "io.containerd.runsc.v1"$/m);
    expect(entry).toMatch(/^\s+TypeUrl = "io.containerd.runsc.v1.options"$/m);
    expect(entry).toMatch(/^\s+ConfigPath = "\/tmp\/kubeplus-node-x\/containerd\/runsc.toml"$/m);
    // runc stays the default: only a RuntimeClass naming runsc runs a Pod inside gVisor.
    expect(toml).toContain('default_runtime_name = "runc"');
    expect(runscConfig(layout)).toBe(
      'binary_name = "/cache/bin/runsc"\nroot = "/tmp/kubeplus-node-x/containerd/runsc"\n\n[runsc_config]\n  platform = "systrap"\n',
    );
  });

  test("containerd reads registry hosts from the run dir, so a suite's plain-HTTP test registry is pulled from as http://", () => {
    expect(containerdConfig(layout)).toMatch(
      /^ {2}\[plugins\.'io\.containerd\.cri\.v1\.images'\.registry\]\n {4}config_path = "\/tmp\/kubeplus-node-x\/containerd\/certs\.d"$/m,
    );
    expect(layout.registryConfigDir).toBe('/tmp/kubeplus-node-x/containerd/certs.d');
    expect(registryHostsToml('10.3.255.1:5000')).toBe(
      'server = "http://10.3.255.1:5000"\n\n[host."http://10.3.255.1:5000"]\n  capabilities = ["pull", "resolve"]\n',
    );
    expect(() => registryHostsToml('http://x:1')).toThrow(/not host:port/);
  });

  test('the CNI bridge hands out the Pod range with the bridge as gateway, no masquerading, leases in the run dir', () => {
    const conf = JSON.parse(cniConflist(layout));
    const bridge = conf.plugins[0];
    expect(bridge).toMatchObject({ type: 'bridge', isGateway: true, ipMasq: false });
    expect(bridge.ipam.ranges).toEqual([[{ subnet: '10.203.0.0/24', gateway: '10.203.0.1' }]]);
    expect(bridge.ipam.dataDir).toBe('/tmp/kubeplus-node-x/cni/networks');
  });

  test('kubelet: cgroup v1 allowed, cgroupfs under the run-specific root, x509 + webhook auth, no image GC', () => {
    const yaml = kubeletConfig(layout);
    for (const line of [
      'failCgroupV1: false',
      'cgroupDriver: cgroupfs',
      'cgroupRoot: /kubeplus-isolation-node-3',
      'address: 10.203.255.2',
      'readOnlyPort: 0',
      'clientCAFile: /tmp/cp/pki/ca.crt',
      'mode: Webhook',
      'imageGCHighThresholdPercent: 100',
    ]) {
      expect(yaml).toContain(line);
    }
  });

  test("kube-proxy: nftables, masquerading Service traffic, leaving the host's conntrack sysctls alone", () => {
    const yaml = kubeProxyConfig(layout);
    expect(yaml).toContain('mode: nftables');
    expect(yaml).toContain('masqueradeAll: true');
    expect(yaml).toContain('maxPerCore: 0');
    expect(yaml).toContain('clusterCIDR: 10.203.0.0/24');
    expect(yaml).not.toContain('featureGates');
  });

  test('an older minor (the version matrix) gets only what its kubelet and kube-proxy know and need', () => {
    const old = nodeLayout(
      '/tmp/kubeplus-node-x',
      '/cache/bin',
      nodeNetwork(3),
      '/tmp/cp/pki/ca.crt',
      undefined,
      '1.30',
    );
    // failCgroupV1 appeared in 1.31 (v1 is simply supported before); nftables mode was alpha before 1.31.
    expect(kubeletConfig(old)).not.toContain('failCgroupV1');
    expect(kubeProxyConfig(old)).toContain('featureGates:\n  NFTablesProxyMode: true\n');
    const beta = nodeLayout(
      '/tmp/kubeplus-node-x',
      '/cache/bin',
      nodeNetwork(3),
      '/tmp/cp/pki/ca.crt',
      undefined,
      '1.31',
    );
    expect(kubeletConfig(beta)).toContain('failCgroupV1: false');
    expect(kubeProxyConfig(beta)).not.toContain('featureGates');
  });
});

describe('preflight', () => {
  const able: MachineFacts = {
    uid: 0,
    filesystems: 'nodev\ttmpfs\nnodev\toverlay\n',
    cgroupsMounted: true,
    commands: { unshare: true, nsenter: true, ip: true, mount: true },
    namespaces: true,
    veth: true,
  };

  test('a machine with everything passes', () => {
    expect(realNodePreflight(able)).toEqual([]);
    expect(() => assertRealNodeSupported(able)).not.toThrow();
  });

  test('one message names everything missing', () => {
    const facts: MachineFacts = {
      ...able,
      uid: 1000,
      filesystems: 'nodev\ttmpfs\n',
      commands: { ...able.commands, nsenter: false },
    };
    expect(realNodePreflight(facts)).toEqual([
      'root (kubelet, containerd and runc need it; run as root)',
      'overlayfs (kernel module overlay: containerd snapshots and the node sandbox need it)',
      'nsenter (util-linux: starting the node processes in it)',
    ]);
    expect(() => assertRealNodeSupported(facts)).toThrow(
      /cannot run the real node .*missing: root .*; overlayfs .*; nsenter/,
    );
  });
});
