/**
 * An OCI registry for the publish suite (e2e/test/publish-real-node.test.ts): `crane registry
 * serve` (go-containerregistry's in-memory registry, the crane the components script builds) on
 * the host side of the real node's veth, the harness's test address: reachable from the node's
 * containerd and from this process, from nothing beyond this machine. Plain HTTP; the node's
 * containerd is told so (registryHostsToml, written to its registry hosts directory, read at each
 * pull). The control plane's reaper kills it with the run.
 */
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { registryHostsToml } from './node/config.js';
import type { RealNodeCluster } from './node/real-node.js';
import { startProcess } from './process.js';
import { REAPER_PID_FILE } from './reaper.js';
import { waitFor } from './wait.js';

export interface TestRegistry {
  /** host:port, e.g. 10.77.255.1:40123. */
  readonly host: string;
  stop(): Promise<void>;
}

export async function serveRegistry(cluster: RealNodeCluster): Promise<TestRegistry> {
  const address = cluster.layout.network.hostIp;
  const logPath = join(cluster.cp.dir, 'logs', 'registry.log');
  const proc = startProcess({
    name: 'registry',
    command: join(cluster.layout.binDir, 'crane'),
    args: ['registry', 'serve', '--address', `${address}:0`],
    logPath,
    reaperPidFile: join(cluster.cp.dir, REAPER_PID_FILE),
  });
  const port = await waitFor(
    'the test registry to listen',
    async () => {
      if (proc.exited()) throw new Error(`crane registry serve exited: ${readFileSync(logPath, 'utf8')}`);
      return /serving on port (\d+)/.exec(readFileSync(logPath, 'utf8'))?.[1];
    },
    { timeoutMs: 15_000, intervalMs: 100 },
  );
  const host = `${address}:${port}`;
  mkdirSync(join(cluster.layout.registryConfigDir, host), { recursive: true });
  writeFileSync(join(cluster.layout.registryConfigDir, host, 'hosts.toml'), registryHostsToml(host));
  return {
    host,
    stop: async () => {
      await proc.stop(2_000);
    },
  };
}
