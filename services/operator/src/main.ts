#!/usr/bin/env node
/**
 * Entry point: flags → operator → signals. Exit status: 0 after a graceful shutdown (SIGTERM or
 * SIGINT; the Lease is released), 1 when the operator cannot start, fails, loses its Lease
 * (so it restarts as a clean standby) or a shutdown overruns --shutdown-timeout, 2 for invalid
 * flags.
 */
import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { IN_CLUSTER_NAMESPACE_FILE, PROGRAM, parseConfig, usage } from './config.js';
import { createLogger } from './runtime/log.js';

function inClusterNamespace(): string | undefined {
  try {
    return readFileSync(IN_CLUSTER_NAMESPACE_FILE, 'utf8');
  } catch {
    return undefined;
  }
}

const parsed = parseConfig(process.argv.slice(2), { env: process.env, inClusterNamespace });
if (parsed.kind === 'help') {
  process.stdout.write(usage());
  process.exit(0);
}
if (parsed.kind === 'error') {
  process.stderr.write(`${PROGRAM}: ${parsed.message}\nRun ${PROGRAM} --help for the flags.\n`);
  process.exit(2);
}
const config = parsed.config;
const logger = createLogger({ level: config.logLevel, base: { component: 'operator' } });

process.on('uncaughtException', (err) => {
  logger.error('uncaught exception; exiting', { error: err.message, stack: err.stack });
  process.exit(1);
});
process.on('unhandledRejection', (reason) => {
  logger.error('unhandled promise rejection; exiting', {
    error: reason instanceof Error ? reason.stack : String(reason),
  });
  process.exit(1);
});

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
    return createOperator({ ...deps, logger }).run(signal);
  },
  { shutdownTimeoutMs: config.shutdownTimeoutMs, logger },
);
