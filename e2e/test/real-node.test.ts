/**
 * The harness's real node (e2e/src/harness/node): kubelet + containerd + runc + CNI + kube-proxy,
 * built from Go modules, joined to a control plane of its own, and contained:
 *
 * - a Pod runs for real (restricted: non-root, read-only root, RuntimeDefault seccomp);
 * - a Pod reaches the API server through the `kubernetes` Service (kube-proxy, nftables) and
 *   verifies its certificate with the ServiceAccount CA;
 * - nothing leaves the machine: a Pod connecting outside the Pod and Service ranges gets "network
 *   unreachable", and the host routes those ranges only into the node's veth, never off the host;
 * - stopping the node leaves the host exactly as it was (links, routes, sysctls, mounts, default
 *   paths, cgroups, nft tables, temp dirs, gVisor's processes), and so does a Ctrl-C of a process
 *   running one; each run stops with a Pod running inside gVisor (runsc) on the node, so runsc's
 *   mounts (its null-netns bind mount), cgroups, processes and files are covered too.
 */
import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import {
  acquireSweepLock,
  comparableHostStates,
  describeSweep,
  gvisorProcesses,
  type HostState,
  hostState,
  ipInCidr,
  type RealNodeCluster,
  repoRoot,
  resolveNodeAssets,
  sweepDeadRuns,
  sysctlRecordPath,
  waitFor,
} from '@kubeplus-isolation/e2e';
import { CoreV1Api } from '@kubernetes/client-node';
import { kubectl, kubectlWithInput, probePod, runProbe, startProjectNode } from './support/real-node.js';

/** A long-running Pod inside gVisor (the platform RuntimeClass the harness installs). */
const GVISOR_POD = `apiVersion: v1
kind: Pod
metadata: {name: in-gvisor, namespace: default}
spec:
  runtimeClassName: gvisor
  terminationGracePeriodSeconds: 0
  containers:
  - {name: pause, image: kubeplus-isolation.local/pause:1, imagePullPolicy: Never}
`;

const run = promisify(execFile);

interface IpRoute {
  dst: string;
  dev?: string;
  gateway?: string;
}

describe('a real node, contained', () => {
  let cluster: RealNodeCluster;
  let before: HostState;
  let nft: string;
  const namespace = 'default';

  beforeAll(async () => {
    nft = join(await resolveNodeAssets(), 'nft');
    before = hostState(nft);
    cluster = await startProjectNode();
  });

  afterAll(async () => {
    await cluster?.stop();
  });

  test('the node is Ready and a restricted Pod runs on it with seccomp', async () => {
    const nodes = await kubectl(cluster, 'get', 'nodes', '-o', 'wide');
    expect(nodes).toMatch(new RegExp(`${cluster.nodeName}\\s+Ready`));
    expect(nodes).toContain(cluster.namespace.network.nodeIp);
    const { phase, log, pod } = await runProbe(
      cluster.cp.kc,
      namespace,
      probePod(
        'hello',
        `const fs=require('fs');console.log('uid', process.getuid());console.log(fs.readFileSync('/proc/self/status','utf8').split('\\n').filter(l=>/^Seccomp:/.test(l))[0]);try{fs.writeFileSync('/x','')}catch(e){console.log('write', e.code)}`,
      ),
    );
    expect({ phase, log }).toEqual({ phase: 'Succeeded', log: expect.stringContaining('uid 65532') });
    expect(log).toMatch(/Seccomp:\s+2/); // 2 = filter mode: the RuntimeDefault profile is applied
    expect(log).toContain('write EROFS');
    expect(pod.spec?.nodeName).toBe(cluster.nodeName);
    expect(ipInCidr(pod.status?.podIP ?? '', cluster.namespace.network.podCidr)).toBe(true);
  });

  test('a Pod reaches the API server through the kubernetes Service and verifies its certificate', async () => {
    const script = `const https=require('https'),fs=require('fs');
      const host=process.env.KUBERNETES_SERVICE_HOST, port=process.env.KUBERNETES_SERVICE_PORT;
      https.get({host,port,path:'/readyz',ca:fs.readFileSync('/var/run/secrets/kubernetes.io/serviceaccount/ca.crt')},
        r=>{let b='';r.on('data',d=>b+=d);r.on('end',()=>console.log('via', host, 'status', r.statusCode, b))})
        .on('error',e=>{console.log('error', e.code, e.message);process.exit(1)});`;
    const { phase, log } = await runProbe(cluster.cp.kc, namespace, probePod('api', script));
    expect({ phase, log: log.trim() }).toEqual({
      phase: 'Succeeded',
      log: `via ${cluster.namespace.network.kubernetesServiceIp} status 200 ok`,
    });
  });

  test('nothing leaves the machine: a Pod connecting outside the Pod and Service ranges gets "network unreachable"', async () => {
    const hostGateway = (JSON.parse((await run('ip', ['-j', '-4', 'route', 'show', 'default'])).stdout) as IpRoute[])[0]
      ?.gateway;
    const targets = ['192.0.2.123', '8.8.8.8', ...(hostGateway ? [hostGateway] : [])];
    const script = `const net=require('net');let n=${targets.length};
      for (const ip of ${JSON.stringify(targets)}) {
        const s=net.connect({host:ip,port:443,timeout:5000});
        const done=(r)=>{console.log(ip, r);s.destroy();if(--n===0)process.exit(0)};
        s.on('connect',()=>done('CONNECTED')).on('timeout',()=>done('TIMEOUT')).on('error',e=>done(e.code));
      }`;
    const { phase, log } = await runProbe(cluster.cp.kc, namespace, probePod('escape', script));
    expect(phase).toBe('Succeeded');
    for (const ip of targets) expect(log).toContain(`${ip} ENETUNREACH`);
    // The node namespace itself has no route out either.
    expect(() => cluster.nodeExec('ip', ['route', 'get', '8.8.8.8'])).toThrow(/unreachable/i);
  });

  test("the host routes the node's Pod and Service ranges only into the node's veth", async () => {
    const net = cluster.namespace.network;
    for (const ip of [net.podGateway, net.kubernetesServiceIp, '10.200.0.77'.replace('200', String(200 + net.slot))]) {
      const [route] = JSON.parse((await run('ip', ['-j', 'route', 'get', ip])).stdout) as IpRoute[];
      expect({ ip, dev: route?.dev }).toEqual({ ip, dev: net.hostLink });
    }
    const routes = JSON.parse((await run('ip', ['-j', '-4', 'route', 'show', 'table', 'all'])).stdout) as IpRoute[];
    const intoRanges = routes.filter(
      (r) => r.dst !== 'default' && [net.podCidr, net.serviceCidr].some((c) => ipInCidr(r.dst.split('/')[0] ?? '', c)),
    );
    expect(intoRanges.length).toBeGreaterThan(0);
    for (const r of intoRanges) expect({ dst: r.dst, dev: r.dev }).toEqual({ dst: r.dst, dev: net.hostLink });
  });

  test('a Pod on the platform class gvisor runs inside gVisor, and is still running when the node stops', async () => {
    await kubectlWithInput(cluster, GVISOR_POD, 'apply', '-f', '-');
    await kubectl(cluster, 'wait', '--for=condition=Ready', 'pod/in-gvisor', '--timeout=120s');
    // gVisor's shim, sandbox and gofer run (on the host's process table, in the node's namespaces).
    expect(gvisorProcesses().length).toBeGreaterThanOrEqual(3);
  });

  test('stopping the node leaves the host exactly as it was', async () => {
    const core = cluster.cp.kc.makeApiClient(CoreV1Api);
    expect((await core.listNamespacedPod({ namespace })).items.length).toBeGreaterThan(0);
    expect(gvisorProcesses()).not.toEqual([]);
    await cluster.stop();
    // Another real-node run may coexist: its traces are left out of both snapshots (host-state.ts).
    const [a, b] = comparableHostStates(
      before,
      hostState(nft, { slot: cluster.namespace.network.slot, dir: cluster.layout.dir }),
    );
    expect(b).toEqual(a);
  });
});

/**
 * A child process runs a real node, reports it Ready, and is sent `signal`: the host must end up
 * as it was before. Returns how the child exited.
 */
/** Every live descendant of `pid` (children before grandchildren), read from /proc. */
function descendants(pid: number): number[] {
  const parentOf = new Map<number, number>();
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      parentOf.set(Number(entry), Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]));
    } catch {
      // exited meanwhile
    }
  }
  const out: number[] = [];
  const walk = (p: number): void => {
    for (const [child, parent] of parentOf) {
      if (parent === p) {
        out.push(child);
        walk(child);
      }
    }
  };
  walk(pid);
  return out;
}

/**
 * Starts a real node (a Pod inside gVisor on it) in a child process, snapshots the host, interrupts
 * the child (`interrupt`: a signal to the child alone, or any other way) and, once `settle` returns,
 * expects the host as it was before.
 */
async function interruptNodeRun(
  interrupt: NodeJS.Signals | ((child: ChildProcess) => void),
  settle: (check: () => boolean) => Promise<void>,
): Promise<NodeJS.Signals | number | null> {
  const nft = join(await resolveNodeAssets(), 'nft');
  const before = hostState(nft);
  const harness = join(repoRoot(), 'e2e', 'dist', 'harness', 'index.js');
  // The child's node runs a Pod inside gVisor when the signal comes (GVISOR_POD, with its kubectl).
  const script = `import { execFileSync } from 'node:child_process';
    import { startRealNodeCluster } from ${JSON.stringify(harness)};
    const c = await startRealNodeCluster();
    const kubectl = (args, input) => execFileSync(c.cp.state.assetsDir + '/kubectl',
      ['--kubeconfig', c.cp.kubeconfigPath, ...args], { input });
    kubectl(['apply', '-f', '-'], ${JSON.stringify(GVISOR_POD)});
    kubectl(['wait', '--for=condition=Ready', 'pod/in-gvisor', '--timeout=120s']);
    console.log('READY', c.namespace.network.slot, c.layout.dir);
    setInterval(() => {}, 1000);`;
  const child = spawn(process.execPath, ['--input-type=module', '-e', script], { stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  child.stdout.on('data', (d) => {
    output += String(d);
  });
  child.stderr.on('data', (d) => {
    output += String(d);
  });
  const exited = new Promise<NodeJS.Signals | number | null>((resolve) => {
    child.on('exit', (code, sig) => resolve(sig ?? code));
  });
  await waitFor(
    'the child to report its node Ready',
    async () => {
      if (child.exitCode !== null) throw new Error(`child exited: ${output}`);
      return output.includes('READY') || undefined;
    },
    { timeoutMs: 300_000, intervalMs: 250 },
  );
  const [, slot, dir] = /READY (\d+) (\S+)/.exec(output) ?? [];
  const own = { slot: Number(slot), dir: dir ?? '' };
  expect(hostState(nft, own)).not.toEqual(before); // a node really runs: the veth, the routes, the cgroups
  expect(gvisorProcesses()).not.toEqual([]); // and a Pod inside gVisor
  if (typeof interrupt === 'string') child.kill(interrupt);
  else interrupt(child);
  const how = await exited;
  const restored = (): boolean => {
    const [a, b] = comparableHostStates(before, hostState(nft, own));
    return JSON.stringify(a) === JSON.stringify(b);
  };
  await settle(restored);
  const [a, b] = comparableHostStates(before, hostState(nft, own));
  expect(b).toEqual(a);
  return how;
}

describe('a Ctrl-C while a real node runs', () => {
  test('restores the host: the interrupted process cleans up before it dies of the signal', async () => {
    // Synchronous cleanup in the signal handler: restored by the time the process is gone.
    expect(await interruptNodeRun('SIGINT', async () => {})).toBe('SIGINT');
  });
});

describe('a SIGKILL while a real node runs', () => {
  test('restores the host: the node reaper and the control plane reaper clean up after the dead process', async () => {
    // Nothing runs in a SIGKILLed process: the watchdogs notice within 500 ms and tear down.
    const how = await interruptNodeRun('SIGKILL', async (restored) => {
      await waitFor('the host restored by the reapers', async () => restored() || undefined, {
        timeoutMs: 30_000,
        intervalMs: 250,
      });
    });
    expect(how).toBe('SIGKILL');
  });
});

describe('a SIGKILL of a whole run, its watchdogs too', () => {
  test("leaves traces that the next run's sweep (the one make clean-node runs) removes: processes, gVisor, cgroups, veth, sysctls, temp dirs", async () => {
    // As a CI timeout or `kill -9` of the process tree does: the child, the control plane, the
    // node's holder, containerd, kubelet and both watchdogs die at once; nothing of the run is left
    // to clean up, and the shims and gVisor's sandboxes (reparented away) keep running.
    // This process holds the sweep lock from the kill on: a run starting meanwhile (make test runs
    // two jest runs at once) sweeps only after this test's sweep, so the traces are still there to
    // see, and the sweep that removes them is the one `make clean-node` runs, in this process.
    let release = (): void => {};
    let leftBehind = '';
    let swept = '';
    try {
      const how = await interruptNodeRun(
        (child) => {
          const lock = acquireSweepLock();
          if (!('release' in lock)) throw new Error(`the sweep lock is held by ${lock.heldBy}`);
          release = lock.release;
          for (const pid of [child.pid ?? 0, ...descendants(child.pid ?? 0)].filter((p) => p > 0)) {
            try {
              process.kill(pid, 'SIGKILL');
            } catch {
              // exited meanwhile
            }
          }
        },
        async (restored) => {
          // Past the watchdogs' 500 ms period: had one survived, it would have cleaned up by now.
          await new Promise((r) => setTimeout(r, 3_000));
          expect(restored()).toBe(false);
          leftBehind = [
            ...gvisorProcesses(),
            ...readdirSync('/sys/class/net').filter((l) => /^kpin\d+$/.test(l)),
            ...readdirSync('/tmp').filter((e) => e.startsWith('kubeplus-node-') || e === sysctlRecordPath().slice(5)),
          ].join(', ');
          swept = describeSweep(sweepDeadRuns());
        },
      );
      expect(how).toBe('SIGKILL');
    } finally {
      release();
    }
    expect(swept).toMatch(/removed what dead runs left: real node \S+kubeplus-node-/);
    expect(swept).toMatch(/control plane \S+kubeplus-e2e-/);
    expect(leftBehind).toMatch(/runsc|containerd-shim-runsc-v1/); // the run really left gVisor running
    expect(gvisorProcesses()).toEqual([]);
  });
});
