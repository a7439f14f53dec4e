#!/usr/bin/env node
/**
 * Entry point: flags → operator → signals. Exit status: 0 after a graceful shutdown (SIGTERM or
 * SIGINT; the Lease is released), 1 when the operator cannot start, fails, loses its Lease
 * (so it restarts as a clean standby) or a shutdown overruns --shutdown-timeout, 2 for invalid
 * flags (as --help says); --version prints the version. With --uninstall it cleans up once and exits
 * 0 when done, 1 on a failure.
 */
import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { bootstrap, describeError, packageVersion } from '@kubeplus-isolation/service';
import { IN_CLUSTER_NAMESPACE_FILE, PROGRAM, parseConfig, usage } from './config.js';

function inClusterNamespace(): string | undefined {
  try {
    return readFileSync(IN_CLUSTER_NAMESPACE_FILE, 'utf8');
  } catch {
    return undefined;
  }
}

const version = packageVersion(import.meta.url);
const { config, logger } = bootstrap({
  program: PROGRAM,
  version,
  component: 'operator',
  parse: () => parseConfig(process.argv.slice(2), { env: process.env, inClusterNamespace }),
  usage,
});

if (config.uninstall !== undefined) {
  // The chart's pre-delete hook: clean up once and exit (uninstall/run.ts).
  const { loadKubeConfig } = await import('./kube/kubeconfig.js');
  const { runUninstall } = await import('./uninstall/run.js');
  try {
    const summary = await runUninstall(
      loadKubeConfig(config.kubeconfig),
      config,
      { mode: config.uninstall, stopDeployment: config.uninstallStopDeployment },
      logger,
    );
    logger.info('uninstall cleanup done', { mode: config.uninstall, ...summary });
  } catch (err) {
    logger.error('uninstall cleanup failed; run it again (helm uninstall retries the hook)', {
      error: describeError(err),
    });
    process.exitCode = 1;
  }
} else {
  // Loaded after the flags are checked, so --help and flag errors answer at once.
  const { runUntilSignalled } = await import('./runtime/shutdown.js');
  const { createOperator } = await import('./operator.js');
  const { loadKubeConfig } = await import('./kube/kubeconfig.js');
  const { kubeOperatorDeps } = await import('./kube/operator-deps.js');

  const identity = config.leaderElectionIdentity ?? `${process.env.POD_NAME || hostname()}_${randomUUID()}`;

  await runUntilSignalled(
    async (signal) => {
      const kc = loadKubeConfig(config.kubeconfig);
      const deps = await kubeOperatorDeps(kc, config, identity);
      return createOperator({ ...deps, logger, version }).run(signal);
    },
    { shutdownTimeoutMs: config.shutdownTimeoutMs, logger },
  );
}
