/**
 * Wiring: informer → cache → resolver → HTTPS admission app, plus the metrics server and the
 * certificate reloader. No writes to the API server; replicas share nothing.
 */

import http from 'node:http';
import type https from 'node:https';
import type { AddressInfo } from 'node:net';
import { setTimeout as delay } from 'node:timers/promises';
import { MetricsAccessGuard, registerBuildInfo } from '@kubeplus-isolation/service';
import type { Logger } from 'winston';
import { NamespaceListWatch, NamespaceWatcher } from './cache/informer.js';
import { NamespaceCache } from './cache/namespace-cache.js';
import { KubeNamespaceReader } from './cache/namespace-reader.js';
import { IsolationResolver } from './cache/resolver.js';
import type { Config } from './config.js';
import { holdAdmit } from './hold/hold-admit.js';
import { Holder } from './hold/holder.js';
import { KUBEPLUS_NAMESPACES_SELECTOR, SettleCache, slimKubePlusNamespace } from './hold/settle-cache.js';
import { createWebhookApp } from './http/app.js';
import { BodyBudget } from './http/body-budget.js';
import { expressMessageClasses } from './http/express-messages.js';
import { createMetricsApp } from './http/metrics-app.js';
import { closeGracefully } from './http/shutdown.js';
import { KubeAccessReviewer } from './kube/access-review.js';
import type { KubeClient } from './kube/client.js';
import { createMetrics, type MetricSources, recordHoldOutcome, recordLiveLookup } from './metrics.js';
import { CertificateReloader, createHttpsServer, loadKeyPair } from './tls.js';

export interface RunningWebhook {
  /** Bound ports (useful when the config asked for port 0). */
  ports(): { port: number; metricsPort: number };
  /** Drain and stop; idempotent. */
  shutdown(): Promise<void>;
}

function listen(server: http.Server, port: number, host: string | undefined): Promise<void> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
}

export interface WebhookBuild {
  /** Reported as kubeplus_webhook_build_info{version}. */
  version: string;
}

export async function startWebhook(
  config: Config,
  kube: KubeClient,
  logger: Logger,
  build: WebhookBuild = { version: 'unknown' },
): Promise<RunningWebhook> {
  const pair = loadKeyPair({ certFile: config.tlsCertFile, keyFile: config.tlsKeyFile });

  const cache = new NamespaceCache({ logger });
  // Gauges read their values at scrape time from these sources.
  const sources: MetricSources = { cacheCounts: () => cache.counts() };
  const metrics = createMetrics({ sources });
  registerBuildInfo(metrics.registry, 'kubeplus_webhook', build.version);
  const watcher = new NamespaceWatcher((hooks) => new NamespaceListWatch(kube, hooks), cache, {
    maxStalenessMs: config.maxInformerStalenessMs,
    logger,
    onError: () => metrics.informerErrors.inc(),
  });
  sources.informerStatus = () => watcher.status();
  // The hold's own informer: KubePlus's namespaces only, whether settled, stamped, how old.
  const settleCache = new SettleCache();
  const settleWatcher = new NamespaceWatcher(
    (hooks) =>
      new NamespaceListWatch(kube, hooks, { labelSelector: KUBEPLUS_NAMESPACES_SELECTOR, slim: slimKubePlusNamespace }),
    settleCache,
    { maxStalenessMs: config.maxInformerStalenessMs, logger, onError: () => metrics.informerErrors.inc() },
  );
  const holder = new Holder(settleCache, {
    timeoutMs: config.holdTimeoutMs,
    windowMs: config.holdWindowMs,
    maxHeld: config.maxHeldRequests,
    onOutcome: (outcome, seconds) => recordHoldOutcome(metrics, outcome, seconds),
  });
  sources.heldRequests = () => holder.held;
  const resolver = new IsolationResolver(cache, new KubeNamespaceReader(kube), {
    liveLookupTimeoutMs: config.liveLookupTimeoutMs,
    maxConcurrentLookups: config.maxLiveLookups,
    onLiveLookup: (result) => recordLiveLookup(metrics, result),
  });

  const budget = new BodyBudget({
    smallReviewBytes: config.smallReviewBytes,
    smallBudgetBytes: config.smallReviewsMemoryBytes,
    largeBudgetBytes: config.largeReviewsMemoryBytes,
    maxQueued: config.largeReviewQueue,
    maxWaitMs: config.largeReviewWaitMs,
  });
  sources.reviewBuffer = () => ({ inUse: budget.inUse(), queued: budget.queued() });

  let shuttingDown = false;
  const app = createWebhookApp({
    resolve: (ns) => resolver.resolve(ns),
    readiness: () => {
      const r = watcher.readiness();
      return r.ready ? settleWatcher.readiness() : r;
    },
    hold: (request) => holdAdmit(request, holder),
    metrics,
    logger,
    maxBodyBytes: config.maxBodyBytes,
    budget,
    bodyReadTimeoutMs: config.bodyReadTimeoutMs,
    isShuttingDown: () => shuttingDown,
  });
  const httpsServer: https.Server = createHttpsServer(app, pair, expressMessageClasses(app));
  httpsServer.maxConnections = config.maxConnections;
  const reloader = new CertificateReloader(
    httpsServer,
    { certFile: config.tlsCertFile, keyFile: config.tlsKeyFile },
    pair,
    {
      pollIntervalMs: config.tlsReloadIntervalMs,
      logger,
      onReload: (result) => metrics.tlsReloads.inc({ result }),
      onCertificate: (info) => metrics.tlsCertificateExpiry.set(info.notAfter.getTime() / 1000),
    },
  );
  // Secure metrics (--metrics-secure): HTTPS with the serving pair, /metrics only for a token allowed to get it.
  const metricsApp = createMetricsApp({
    registry: metrics.registry,
    ...(config.metricsSecure && { guard: new MetricsAccessGuard({ reviewer: new KubeAccessReviewer(kube), logger }) }),
  });
  const metricsServer: http.Server = config.metricsSecure
    ? createHttpsServer(metricsApp, pair)
    : http.createServer(metricsApp);
  // Its own reloader, which reports nothing: the admission port's already counts each reload.
  const metricsReloader = config.metricsSecure
    ? new CertificateReloader(
        metricsServer as https.Server,
        { certFile: config.tlsCertFile, keyFile: config.tlsKeyFile },
        pair,
        { pollIntervalMs: config.tlsReloadIntervalMs, logger },
      )
    : undefined;

  await listen(httpsServer, config.port, config.bindAddress);
  try {
    await listen(metricsServer, config.metricsPort, config.bindAddress);
  } catch (e) {
    httpsServer.close();
    throw e;
  }
  reloader.start();
  metricsReloader?.start();
  watcher.start();
  settleWatcher.start();
  const ports = {
    port: (httpsServer.address() as AddressInfo).port,
    metricsPort: (metricsServer.address() as AddressInfo).port,
  };
  logger.info('webhook serving', {
    ...ports,
    metricsSecure: config.metricsSecure,
    liveLookupTimeoutMs: config.liveLookupTimeoutMs,
  });

  let stopping: Promise<void> | undefined;
  const shutdown = (): Promise<void> => {
    stopping ??= (async () => {
      shuttingDown = true;
      // Held requests are refused (retryable) at once: another replica, or a later try, answers them.
      holder.close();
      logger.info('shutting down: /readyz now fails; still serving during the shutdown delay', {
        shutdownDelayMs: config.shutdownDelayMs,
      });
      if (config.shutdownDelayMs > 0) await delay(config.shutdownDelayMs);
      const [webhookClose] = await Promise.all([
        closeGracefully(httpsServer, config.shutdownTimeoutMs),
        closeGracefully(metricsServer, config.shutdownTimeoutMs),
      ]);
      reloader.stop();
      metricsReloader?.stop();
      await Promise.all([watcher.stop(), settleWatcher.stop()]);
      logger.info('shutdown complete', { connections: webhookClose });
    })();
    return stopping;
  };

  return { ports: () => ports, shutdown };
}
