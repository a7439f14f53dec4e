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
  const { PLATFORM_NAMESPACE_CHANGED, resolvePlatformNamespace, watchPlatformNamespace } = await import(
    './kube/platform-namespace.js'
  );
  const { webhookConfigurationSource } = await import('./kube/informer-sources.js');
  const { AdmissionregistrationV1Api } = await import('@kubernetes/client-node');

  const identity = config.leaderElectionIdentity ?? `${process.env.POD_NAME || hostname()}_${randomUUID()}`;

  await runUntilSignalled(
    async (signal) => {
      const kc = loadKubeConfig(config.kubeconfig);
      // KubePlus's namespace: the flag, else found from KubePlus's webhook registration (issue 35).
      const platform = await resolvePlatformNamespace(config.platformNamespace, async () => {
        const api = kc.makeApiClient(AdmissionregistrationV1Api);
        return (await api.listMutatingWebhookConfiguration()).items;
      });
      logger.info('platform namespace', {
        platformNamespace: platform.namespace,
        source: platform.source,
        detail: platform.detail,
      });
      // A discovered namespace that changes ends the run: the restart starts from the new one.
      const run = new AbortController();
      const forward = (): void => run.abort(signal.reason);
      signal.addEventListener('abort', forward, { once: true });
      let changedTo: { namespace: string; detail: string } | undefined;
      const watch =
        platform.source === 'flag'
          ? undefined
          : watchPlatformNamespace(
              webhookConfigurationSource(kc),
              platform.namespace,
              (next) => {
                changedTo = next;
                logger.error("KubePlus's namespace changed; stopping so the restarted operator uses it", {
                  reason: PLATFORM_NAMESPACE_CHANGED,
                  from: platform.namespace,
                  to: next.namespace,
                  detail: next.detail,
                });
                run.abort(new Error(PLATFORM_NAMESPACE_CHANGED));
              },
              (err) =>
                logger.warn(
                  "cannot watch MutatingWebhookConfigurations (KubePlus's namespace is re-checked once it can)",
                  {
                    error: describeError(err, 300),
                  },
                ),
            );
      try {
        const deps = await kubeOperatorDeps(kc, { ...config, platformNamespace: platform.namespace }, identity);
        const exit = await createOperator({ ...deps, logger, version }).run(run.signal);
        if (changedTo !== undefined && !signal.aborted) {
          throw new Error(
            `${PLATFORM_NAMESPACE_CHANGED}: KubePlus's namespace is now ${changedTo.namespace} (${changedTo.detail}), was ${platform.namespace}`,
          );
        }
        return exit;
      } finally {
        signal.removeEventListener('abort', forward);
        await watch?.stop();
      }
    },
    { shutdownTimeoutMs: config.shutdownTimeoutMs, logger },
  );
}
