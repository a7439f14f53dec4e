#!/usr/bin/env node
/**
 * Entry point: flags → webhook → signals. Exit codes: 0 after a clean shutdown, 1 when the
 * webhook cannot start (or a second signal cuts the shutdown short), 2 for invalid flags.
 */
import { PROGRAM, parseConfig, usage } from './config.js';
import { createLogger } from './log.js';

const parsed = parseConfig(process.argv.slice(2), process.env);
if (parsed.kind === 'help') {
  process.stdout.write(usage());
  process.exit(0);
}
if (parsed.kind === 'error') {
  process.stderr.write(`${PROGRAM}: ${parsed.message}\nRun ${PROGRAM} --help for the flags.\n`);
  process.exit(2);
}
const config = parsed.config;
const logger = createLogger({ level: config.logLevel });

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
  const webhook = await startWebhook(config, new KubeClient(connection), logger);
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
