/**
 * Reading the chart's secure metrics (issue 34) as Prometheus does: over HTTPS, with the bearer
 * token of a ServiceAccount bound to the chart's metrics-reader ClusterRole. The API server's Pod
 * proxy cannot carry such a token to the Pod, so the harness calls the Pod's address itself (the
 * host routes the real node's Pod network).
 */
import { request as httpsRequest } from 'node:https';
import { CoreV1Api, type KubeConfig, RbacAuthorizationV1Api } from '@kubernetes/client-node';
import { type MetricSample, parsePrometheusText } from './metrics.js';

function httpStatus(err: unknown): number | undefined {
  const e = err as { code?: unknown; statusCode?: unknown };
  return typeof e?.code === 'number' ? e.code : typeof e?.statusCode === 'number' ? e.statusCode : undefined;
}

/** Creates `create()`'s object unless it exists already (409). */
async function ensure(create: () => Promise<unknown>): Promise<void> {
  try {
    await create();
  } catch (err) {
    if (httpStatus(err) !== 409) throw err;
  }
}

/**
 * A token of ServiceAccount `namespace/name`, bound (ClusterRoleBinding `name`) to `clusterRole`:
 * the chart's `<release>-kubeplus-isolation-metrics-reader` gives it get on /metrics. Valid 1 h.
 */
export async function metricsReaderToken(
  kc: KubeConfig,
  opts: { namespace: string; clusterRole: string; name?: string },
): Promise<string> {
  const name = opts.name ?? 'e2e-metrics-reader';
  const core = kc.makeApiClient(CoreV1Api);
  await ensure(() => core.createNamespacedServiceAccount({ namespace: opts.namespace, body: { metadata: { name } } }));
  await ensure(() =>
    kc.makeApiClient(RbacAuthorizationV1Api).createClusterRoleBinding({
      body: {
        metadata: { name },
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: opts.clusterRole },
        subjects: [{ kind: 'ServiceAccount', name, namespace: opts.namespace }],
      },
    }),
  );
  const request = await core.createNamespacedServiceAccountToken({
    name,
    namespace: opts.namespace,
    body: { spec: { audiences: [], expirationSeconds: 3600 } },
  });
  const token = request.status?.token;
  if (!token) throw new Error(`no token issued for ServiceAccount ${opts.namespace}/${name}`);
  return token;
}

/**
 * GET https://<address>:<port>/metrics with `token` (none: no Authorization header): its status
 * and body. The serving certificate names the Service, not the Pod's address, and this checks
 * who may read, not the server's identity: it is not verified here.
 */
export function getSecureMetrics(
  address: string,
  port: number,
  token: string | undefined,
): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const req = httpsRequest(
      {
        host: address,
        port,
        path: '/metrics',
        method: 'GET',
        agent: false,
        rejectUnauthorized: false,
        timeout: 10_000,
        headers: token === undefined ? {} : { Authorization: `Bearer ${token}` },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString('utf8') }));
        res.on('error', reject);
      },
    );
    req.on('timeout', () => req.destroy(new Error(`GET https://${address}:${port}/metrics timed out`)));
    req.on('error', reject);
    req.end();
  });
}

/** The samples of a secure metrics endpoint, read with `token`; any answer but 200 is an error. */
export async function scrapeSecureMetrics(address: string, port: number, token: string): Promise<MetricSample[]> {
  const { status, text } = await getSecureMetrics(address, port, token);
  if (status !== 200) throw new Error(`GET https://${address}:${port}/metrics: HTTP ${status}: ${text.slice(0, 300)}`);
  return parsePrometheusText(text);
}
