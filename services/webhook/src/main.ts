#!/usr/bin/env node
/**
 * Entry point: flags → webhook → signals. Exit codes: 0 after a clean shutdown, 1 when the
 * webhook cannot start (or a second signal cuts the shutdown short), 2 for invalid flags;
 * --version prints the version.
 */
import { bootstrap, packageVersion } from '@kubeplus-isolation/service';
import { PROGRAM, parseConfig, usage } from './config.js';
import { COMPONENT, createLogger } from './log.js';

const version = packageVersion(import.meta.url);
const { config, logger } = bootstrap({
  program: PROGRAM,
  version,
  component: COMPONENT,
  parse: () => parseConfig(process.argv.slice(2), process.env),
  usage,
  createLogger: (c) => createLogger({ level: c.logLevel }),
});

// Loaded after the flags are checked, so --help and flag errors answer at once.
const { loadConnection } = await import('./kube/connection.js');
const { KubeClient } = await import('./kube/client.js');
const { startWebhook } = await import('./webhook.js');

try {
  const connection = await loadConnection(config.kubeconfig, process.env, {
    onTokenReadError: (e) =>
      logger.warn('could not re-read the API token file; still using the last token', {
        error: e instanceof Error ? e.message : String(e),
      }),
  });
  logger.info('API server', { server: connection.server.origin, credentials: connection.describe });
  const webhook = await startWebhook(config, new KubeClient(connection), logger, { version });
  let signalled = false;
  const onSignal = (signal: NodeJS.Signals): void => {
    if (signalled) {
      logger.warn('second signal during shutdown; exiting now', { signal });
      process.exit(1);
    }
    signalled = true;
    logger.info('signal received', { signal });
    webhook.shutdown().then(
      () => process.exit(0),
      (e: unknown) => {
        logger.error('shutdown failed', { error: e instanceof Error ? e.message : String(e) });
        process.exit(1);
      },
    );
  };
  process.on('SIGTERM', onSignal);
  process.on('SIGINT', onSignal);
} catch (e) {
  logger.error('webhook failed to start', { error: e instanceof Error ? e.message : String(e) });
  process.exit(1);
}
