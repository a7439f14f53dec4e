/**
 * Secure metrics (issue 34, "Metrics leak tenants"), on by default for both services: each gets a
 * ClusterRole naming exactly tokenreviews and subjectaccessreviews (create), scrapers get the
 * `<fullname>-metrics-reader` ClusterRole (get on /metrics), the ServiceMonitors scrape over HTTPS
 * with Prometheus's token, the operator's probes follow its port to HTTPS; `metrics.secure: false`
 * takes all of it away.
 */
import { describe, expect, jest, test } from '@jest/globals';
import { parseConfig as parseOperatorConfig } from '../../services/operator/src/config.js';
import { type K8sObject, NAMESPACE, one, RELEASE, render, renderError } from './helm.js';

jest.setTimeout(60_000);

const READER = `${RELEASE}-kubeplus-isolation-metrics-reader`;
const REVIEW_RULES = [
  { apiGroups: ['authentication.k8s.io'], resources: ['tokenreviews'], verbs: ['create'] },
  { apiGroups: ['authorization.k8s.io'], resources: ['subjectaccessreviews'], verbs: ['create'] },
];
const MONITORS = { webhook: { serviceMonitor: { enabled: true } }, operator: { serviceMonitor: { enabled: true } } };
const TOKEN_FILE = '/var/run/secrets/kubernetes.io/serviceaccount/token';

interface Probe {
  httpGet: { path: string; port: string; scheme?: string };
}
interface Container {
  args: string[];
  env?: { name: string; value?: string }[];
  volumeMounts?: { name: string; mountPath: string; readOnly?: boolean }[];
  startupProbe: Probe;
  livenessProbe: Probe;
  readinessProbe: Probe;
}
interface PodSpec {
  containers: Container[];
  volumes: { name: string; secret?: { secretName: string; items?: unknown[] } }[];
}
interface Endpoint {
  port: string;
  path: string;
  scheme: string;
  bearerTokenFile?: string;
  authorization?: unknown;
  tlsConfig?: Record<string, unknown>;
}

const pod = (objects: K8sObject[], name: string): PodSpec =>
  (one(objects, 'Deployment', name).spec as { template: { spec: PodSpec } }).template.spec;
const container = (objects: K8sObject[], name: string): Container => pod(objects, name).containers[0] as Container;
const endpoint = (objects: K8sObject[], name: string): Endpoint =>
  (one(objects, 'ServiceMonitor', name).spec as { endpoints: Endpoint[] }).endpoints[0] as Endpoint;
const names = (objects: K8sObject[], kind: string): string[] =>
  objects.filter((o) => o.kind === kind).map((o) => o.metadata.name);

function operatorConfig(objects: K8sObject[]) {
  const env = { POD_NAMESPACE: NAMESPACE, POD_NAME: `${RELEASE}-operator-abc` };
  const args = container(objects, `${RELEASE}-operator`).args.map((a) =>
    a.replace(/\$\((\w+)\)/g, (_m, v: string) => env[v as keyof typeof env] ?? ''),
  );
  const parsed = parseOperatorConfig(args, { env });
  if (parsed.kind !== 'config') throw new Error(JSON.stringify(parsed));
  return parsed.config;
}

describe('secure metrics', () => {
  test('on by default: each service may create exactly TokenReviews and SubjectAccessReviews, bound to its own ServiceAccount', async () => {
    const objects = await render();
    for (const service of ['webhook', 'operator']) {
      const name = `${RELEASE}-${service}-metrics-auth`;
      expect(one(objects, 'ClusterRole', name).rules).toEqual(REVIEW_RULES);
      const binding = one(objects, 'ClusterRoleBinding', name);
      expect(binding.roleRef).toEqual({ apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name });
      expect(binding.subjects).toEqual([
        { kind: 'ServiceAccount', name: `${RELEASE}-${service}`, namespace: NAMESPACE },
      ]);
    }
  });

  test('the metrics-reader ClusterRole grants get on /metrics and nothing else; bound only to metricsReader.subjects', async () => {
    const objects = await render();
    expect(one(objects, 'ClusterRole', READER).rules).toEqual([{ nonResourceURLs: ['/metrics'], verbs: ['get'] }]);
    expect(names(objects, 'ClusterRoleBinding')).not.toContain(READER);
    const subjects = [{ kind: 'ServiceAccount', name: 'prometheus-k8s', namespace: 'monitoring' }];
    const bound = await render({ metricsReader: { subjects } });
    const binding = one(bound, 'ClusterRoleBinding', READER);
    expect(binding.roleRef).toEqual({ apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: READER });
    expect(binding.subjects).toEqual(subjects);
    // A ServiceAccount subject must name its namespace (the schema says so at install).
    expect(
      await renderError({ metricsReader: { subjects: [{ kind: 'ServiceAccount', name: 'prometheus' }] } }),
    ).toMatch(/metricsReader\/subjects\/0/);
  });

  test('the operator serves HTTPS with --metrics-secure=true; its probes follow, over HTTPS, without a token', async () => {
    const objects = await render();
    const c = container(objects, `${RELEASE}-operator`);
    expect(c.args).toContain('--metrics-secure=true');
    expect(c.args.filter((a) => a.startsWith('--metrics-tls-'))).toEqual([]);
    expect(operatorConfig(objects)).toMatchObject({
      metricsSecure: true,
      metricsTlsCertFile: undefined,
      metricsTlsKeyFile: undefined,
    });
    for (const probe of [c.startupProbe, c.livenessProbe, c.readinessProbe]) {
      expect(probe.httpGet).toEqual({
        path: expect.stringMatching(/^\/(healthz|readyz)$/),
        port: 'metrics',
        scheme: 'HTTPS',
      });
    }
  });

  test('the webhook is told by METRICS_SECURE (its serving certificate serves the metrics port too)', async () => {
    const env = (objects: K8sObject[]) => container(objects, `${RELEASE}-webhook`).env ?? [];
    expect(env(await render())).toContainEqual({ name: 'METRICS_SECURE', value: 'true' });
    expect(env(await render({ webhook: { metrics: { secure: false } } }))).toContainEqual({
      name: 'METRICS_SECURE',
      value: 'false',
    });
    // extraEnv still comes after it.
    const extra = env(await render({ webhook: { extraEnv: [{ name: 'A', value: 'b' }] } }));
    expect(extra.map((e) => e.name)).toEqual(['METRICS_SECURE', 'A']);
  });

  test('ServiceMonitors scrape over HTTPS with Prometheus’s own token; the webhook’s certificate is verified, the operator’s self-signed one cannot be', async () => {
    const objects = await render(MONITORS);
    const webhook = endpoint(objects, `${RELEASE}-webhook`);
    expect(webhook).toMatchObject({ port: 'metrics', path: '/metrics', scheme: 'https', bearerTokenFile: TOKEN_FILE });
    expect(webhook.tlsConfig).toEqual({
      ca: { secret: { name: `${RELEASE}-webhook-certs`, key: 'ca.crt' } },
      serverName: `${RELEASE}-webhook.${NAMESPACE}.svc`,
    });
    const operator = endpoint(objects, `${RELEASE}-operator`);
    expect(operator).toMatchObject({ port: 'metrics', path: '/metrics', scheme: 'https', bearerTokenFile: TOKEN_FILE });
    expect(operator.tlsConfig).toEqual({ insecureSkipVerify: true });
    // The webhook's CA is in the Secret its serving certificate comes from, whoever issues it.
    for (const webhookValues of [{ tls: { mode: 'helm' } }, { certManager: { enabled: true } }]) {
      const other = await render({ ...MONITORS, webhook: { ...MONITORS.webhook, ...webhookValues } });
      expect(endpoint(other, `${RELEASE}-webhook`).tlsConfig?.ca).toEqual({
        secret: { name: `${RELEASE}-webhook-tls`, key: 'ca.crt' },
      });
    }
  });

  test('serviceMonitor.authorization and tlsConfig replace the defaults', async () => {
    const authorization = { type: 'Bearer', credentials: { name: 'prometheus-token', key: 'token' } };
    const tlsConfig = { ca: { configMap: { name: 'metrics-ca', key: 'ca.crt' } }, serverName: 'metrics.example' };
    const monitor = { enabled: true, authorization, tlsConfig };
    const objects = await render({ webhook: { serviceMonitor: monitor }, operator: { serviceMonitor: monitor } });
    for (const name of [`${RELEASE}-webhook`, `${RELEASE}-operator`]) {
      const e = endpoint(objects, name);
      expect(e.authorization).toEqual(authorization);
      expect(e.bearerTokenFile).toBeUndefined();
      expect(e.tlsConfig).toEqual(tlsConfig);
    }
  });

  test('operator.metrics.certSecret: its tls.crt and tls.key are served (read-only mount, reloaded), and verified by the ServiceMonitor', async () => {
    const objects = await render({
      operator: { metrics: { certSecret: 'operator-metrics-cert' }, serviceMonitor: { enabled: true } },
    });
    const spec = pod(objects, `${RELEASE}-operator`);
    expect(spec.volumes.find((v) => v.name === 'metrics-tls')?.secret).toMatchObject({
      secretName: 'operator-metrics-cert',
      items: [
        { key: 'tls.crt', path: 'tls.crt' },
        { key: 'tls.key', path: 'tls.key' },
      ],
    });
    const mount = spec.containers[0]?.volumeMounts?.find((m) => m.name === 'metrics-tls');
    expect(mount).toEqual({ name: 'metrics-tls', mountPath: '/etc/operator/metrics-tls', readOnly: true });
    expect(operatorConfig(objects)).toMatchObject({
      metricsSecure: true,
      metricsTlsCertFile: '/etc/operator/metrics-tls/tls.crt',
      metricsTlsKeyFile: '/etc/operator/metrics-tls/tls.key',
    });
    expect(endpoint(objects, `${RELEASE}-operator`).tlsConfig).toEqual({
      ca: { secret: { name: 'operator-metrics-cert', key: 'ca.crt' } },
      serverName: `${RELEASE}-operator-metrics.${NAMESPACE}.svc`,
    });
    expect(await renderError({ operator: { metrics: { certSecret: 'Not_A_Name' } } })).toMatch(/metrics\/certSecret/);
  });

  test('metrics.secure=false: plain HTTP, open /metrics, no review RBAC; the reader role only while a service is secure', async () => {
    const off = await render({
      ...MONITORS,
      webhook: { ...MONITORS.webhook, metrics: { secure: false } },
      operator: { ...MONITORS.operator, metrics: { secure: false, certSecret: 'ignored' } },
    });
    expect(names(off, 'ClusterRole').filter((n) => n.includes('metrics'))).toEqual([]);
    expect(names(off, 'ClusterRoleBinding').filter((n) => n.includes('metrics'))).toEqual([]);
    for (const name of [`${RELEASE}-webhook`, `${RELEASE}-operator`]) {
      const e = endpoint(off, name);
      expect(e.scheme).toBe('http');
      expect(e.bearerTokenFile).toBeUndefined();
      expect(e.tlsConfig).toBeUndefined();
    }
    const c = container(off, `${RELEASE}-operator`);
    expect(c.args).toContain('--metrics-secure=false');
    expect(c.args.filter((a) => a.startsWith('--metrics-tls-'))).toEqual([]);
    expect(pod(off, `${RELEASE}-operator`).volumes.map((v) => v.name)).not.toContain('metrics-tls');
    expect(c.readinessProbe.httpGet.scheme).toBe('HTTP');
    expect(operatorConfig(off).metricsSecure).toBe(false);

    // One service still secure: its RBAC and the reader role stay.
    const operatorOnly = await render({ webhook: { metrics: { secure: false } } });
    expect(
      names(operatorOnly, 'ClusterRole')
        .filter((n) => n.includes('metrics'))
        .sort(),
    ).toEqual([READER, `${RELEASE}-operator-metrics-auth`].sort());
    // No secure service installed (or active): no reader role.
    const none = await render({
      global: { nodeIsolation: { engine: 'admissionPolicy' } },
      operator: { metrics: { secure: false } },
    });
    expect(names(none, 'ClusterRole')).not.toContain(READER);
  });
});
