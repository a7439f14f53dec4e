import {
  createTestNamespace,
  type RunningWebhook,
  scrapeApiServerMetrics,
  scrapeMetrics,
  sumMetric,
  testPod,
  waitFor,
} from '@kubeplus-isolation/e2e';
import {
  NODE_ISOLATION_ENABLED_LABEL,
  NODE_ISOLATION_RESOLVED_ANNOTATION,
  NODE_ISOLATION_WEBHOOK_NAME,
} from '@kubeplus-isolation/spec';
import { CoreV1Api, type KubeConfig, type V1Pod, type V1Toleration } from '@kubernetes/client-node';

export interface Mandate {
  nodeSelector: Record<string, string>;
  tolerations: V1Toleration[];
}

/** The seed's example mandate, for a pool name unique to the suite (so Pods can only fit its nodes). */
export function poolMandate(pool: string): Mandate {
  return {
    nodeSelector: { pool },
    tolerations: [{ key: 'dedicated', operator: 'Equal', value: pool, effect: 'NoSchedule' }],
  };
}

/** The metadata the operator writes: the label, and the mandate (or any raw text) as the annotation. */
export function isolationMetadata(mandate: Mandate | string): {
  labels: Record<string, string>;
  annotations: Record<string, string>;
} {
  return {
    labels: { [NODE_ISOLATION_ENABLED_LABEL]: 'true' },
    annotations: {
      [NODE_ISOLATION_RESOLVED_ANNOTATION]: typeof mandate === 'string' ? mandate : JSON.stringify(mandate, null, 2),
    },
  };
}

/** A namespace labeled and annotated as the operator would do it (the operator's own suite proves the operator). */
export function createIsolatedNamespace(
  kc: KubeConfig,
  prefix: string,
  mandate: Mandate | string,
  extraLabels: Record<string, string> = {},
): Promise<string> {
  const { labels, annotations } = isolationMetadata(mandate);
  return createTestNamespace(kc, prefix, { labels: { ...labels, ...extraLabels }, annotations });
}

/**
 * Waits until the API server calls the newly registered webhook (it loads configurations
 * asynchronously): dry-run Pods in `namespace` until one comes back with `expectSelector`.
 */
export async function waitForWebhookActive(
  kc: KubeConfig,
  namespace: string,
  expectSelector: Record<string, string>,
): Promise<void> {
  const core = kc.makeApiClient(CoreV1Api);
  await waitFor(
    `the API server to call the node-isolation webhook for namespace ${namespace}`,
    async (observe) => {
      const pod = await core.createNamespacedPod({ namespace, body: testPod('probe'), dryRun: 'All' });
      observe({ nodeSelector: pod.spec?.nodeSelector });
      return Object.entries(expectSelector).every(([k, v]) => pod.spec?.nodeSelector?.[k] === v);
    },
    { timeoutMs: 30_000, intervalMs: 200 },
  );
}

/** What both sides counted: the webhook's own metrics and the API server's webhook metrics. */
export interface AdmissionCounts {
  /** kubeplus_webhook_admissions_total, all results. */
  webhookTotal: number;
  webhookByResult: Record<string, number>;
  failOpenByReason: Record<string, number>;
  liveLookupsByResult: Record<string, number>;
  /** apiserver_admission_webhook_admission_duration_seconds_count for the entry: calls the API server made. */
  apiServerCalls: number;
  /** apiserver_admission_webhook_fail_open_count for the entry. */
  apiServerFailOpen: number;
}

function byLabel(
  samples: Awaited<ReturnType<typeof scrapeMetrics>>,
  name: string,
  label: string,
): Record<string, number> {
  const out: Record<string, number> = {};
  for (const s of samples)
    if (s.name === name) out[s.labels[label] ?? ''] = (out[s.labels[label] ?? ''] ?? 0) + s.value;
  return out;
}

export async function admissionCounts(kc: KubeConfig, webhook: RunningWebhook | undefined): Promise<AdmissionCounts> {
  const [mine, apiServer] = await Promise.all([
    webhook ? scrapeMetrics(webhook.metricsUrl) : Promise.resolve([]),
    scrapeApiServerMetrics(kc),
  ]);
  return {
    webhookTotal: sumMetric(mine, 'kubeplus_webhook_admissions_total'),
    webhookByResult: byLabel(mine, 'kubeplus_webhook_admissions_total', 'result'),
    failOpenByReason: byLabel(mine, 'kubeplus_webhook_failopen_total', 'reason'),
    liveLookupsByResult: byLabel(mine, 'kubeplus_webhook_live_lookups_total', 'result'),
    apiServerCalls: sumMetric(apiServer, 'apiserver_admission_webhook_admission_duration_seconds_count', {
      name: NODE_ISOLATION_WEBHOOK_NAME,
    }),
    apiServerFailOpen: sumMetric(apiServer, 'apiserver_admission_webhook_fail_open_count', {
      name: NODE_ISOLATION_WEBHOOK_NAME,
    }),
  };
}

/** Tolerations the API server itself adds (DefaultTolerationSeconds): not the chart's, not ours. */
export function withoutDefaultTolerations(tolerations: readonly V1Toleration[] | undefined): V1Toleration[] {
  return (tolerations ?? []).filter((t) => !t.key?.startsWith('node.kubernetes.io/'));
}

/** A short description of a Pod's placement-relevant fields, for failure messages. */
export function placement(pod: V1Pod): Record<string, unknown> {
  return {
    name: pod.metadata?.name,
    nodeName: pod.spec?.nodeName,
    nodeSelector: pod.spec?.nodeSelector,
    tolerations: withoutDefaultTolerations(pod.spec?.tolerations),
  };
}
