import { createServer, type Server } from 'node:https';
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import {
  type Cluster,
  connectE2eCluster,
  createTestNamespace,
  deleteNamespace,
  loadWebhookEntry,
  registerWebhook,
  testPod,
  unregisterWebhook,
  waitFor,
} from '@kubeplus-isolation/e2e';
import {
  ADMISSION_REVIEW_API_VERSION,
  ADMISSION_REVIEW_KIND,
  NODE_ISOLATION_ENABLED_LABEL,
} from '@kubeplus-isolation/spec';
import { AdmissionregistrationV1Api, CoreV1Api, type KubeConfig, type V1Pod } from '@kubernetes/client-node';
import { uniqueName } from './support/names.js';

/**
 * Proves the harness's webhook plumbing against the real API server: the configuration generated
 * from the chart's webhook-entry.json is accepted, the API server trusts a serving certificate from
 * the harness CA through caBundle, calls the loopback URL, and its namespaceSelector keeps Pods of
 * unlabeled namespaces away. The webhook here is a minimal in-test HTTPS server that records each
 * AdmissionReview and marks the Pod; the real webhook's behaviour is the node-isolation suite's job.
 */

interface Review {
  namespace: string;
  operation: string;
  kind: string;
}

const MARK = 'e2e.kubeplus.io/admitted-by';

function startRecordingWebhook(cert: { certPem: string; keyPem: string }, reviews: Review[]): Promise<Server> {
  const server = createServer({ cert: cert.certPem, key: cert.keyPem }, (req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const review = JSON.parse(Buffer.concat(chunks).toString('utf8')) as {
        request: { uid: string; namespace: string; operation: string; kind: { kind: string } };
      };
      // The API server appends ?timeout=<webhook timeoutSeconds>s to the configured URL.
      if (new URL(req.url ?? '/', 'https://127.0.0.1').pathname !== '/mutate/pods') {
        res.writeHead(404).end();
        return;
      }
      reviews.push({
        namespace: review.request.namespace,
        operation: review.request.operation,
        kind: review.request.kind.kind,
      });
      const patch = [{ op: 'add', path: '/metadata/annotations', value: { [MARK]: 'harness-test' } }];
      res.writeHead(200, { 'content-type': 'application/json' }).end(
        JSON.stringify({
          apiVersion: ADMISSION_REVIEW_API_VERSION,
          kind: ADMISSION_REVIEW_KIND,
          response: {
            uid: review.request.uid,
            allowed: true,
            patchType: 'JSONPatch',
            patch: Buffer.from(JSON.stringify(patch)).toString('base64'),
          },
        }),
      );
    });
  });
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve(server));
  });
}

describe('e2e harness: webhook registration from the chart entry', () => {
  let cluster: Cluster;
  let kc: KubeConfig;
  let core: CoreV1Api;
  let server: Server | undefined;
  const reviews: Review[] = [];
  const configName = uniqueName('e2e-harness-webhook');
  const namespaces: string[] = [];
  let isolated = '';
  let plain = '';

  beforeAll(async () => {
    cluster = await connectE2eCluster();
    kc = cluster.kc;
    core = kc.makeApiClient(CoreV1Api);
    server = await startRecordingWebhook(await cluster.issueServingCert(['127.0.0.1']), reviews);
    const address = server.address();
    if (address === null || typeof address === 'string') throw new Error('webhook test server has no port');
    isolated = await createTestNamespace(kc, 'e2e-webhook-labeled', {
      labels: { [NODE_ISOLATION_ENABLED_LABEL]: 'true' },
    });
    plain = await createTestNamespace(kc, 'e2e-webhook-plain');
    namespaces.push(isolated, plain);
    await registerWebhook(kc, {
      url: `https://127.0.0.1:${address.port}/mutate/pods`,
      caPem: cluster.caPem,
      name: configName,
    });
    // The API server picks up webhook configurations asynchronously: dry-run until the webhook answers.
    await waitFor(
      'the API server to call the newly registered webhook',
      async () => {
        const pod = await core.createNamespacedPod({ namespace: isolated, body: testPod('probe'), dryRun: 'All' });
        return pod.metadata?.annotations?.[MARK] === 'harness-test';
      },
      { timeoutMs: 30_000, intervalMs: 200 },
    );
    reviews.length = 0;
  });

  afterAll(async () => {
    await unregisterWebhook(kc, configName);
    await Promise.all(namespaces.map((ns) => deleteNamespace(kc, ns)));
    if (server) {
      const closed = new Promise<void>((resolve) => server?.close(() => resolve()));
      server.closeAllConnections(); // the API server keeps its connections alive
      await closed;
    }
  });

  test('the stored configuration is the chart entry plus the harness clientConfig', async () => {
    const stored = await kc
      .makeApiClient(AdmissionregistrationV1Api)
      .readMutatingWebhookConfiguration({ name: configName });
    expect(stored.webhooks).toHaveLength(1);
    const [webhook] = stored.webhooks ?? [];
    expect(webhook).toMatchObject(loadWebhookEntry());
    expect(webhook?.clientConfig.url).toMatch(/^https:\/\/127\.0\.0\.1:\d+\/mutate\/pods$/);
    expect(Buffer.from(webhook?.clientConfig.caBundle ?? '', 'base64').toString('utf8')).toBe(cluster.caPem);
  });

  test('a Pod in a labeled namespace goes through the webhook over TLS and comes back patched', async () => {
    const pod: V1Pod = await core.createNamespacedPod({ namespace: isolated, body: testPod('through-webhook') });
    expect(pod.metadata?.annotations?.[MARK]).toBe('harness-test');
    expect(reviews).toContainEqual({ namespace: isolated, operation: 'CREATE', kind: 'Pod' });
  });

  test('a Pod in an unlabeled namespace never reaches the webhook', async () => {
    const pod = await core.createNamespacedPod({ namespace: plain, body: testPod('bypassing-webhook') });
    expect(pod.metadata?.annotations?.[MARK]).toBeUndefined();
    expect(reviews.filter((r) => r.namespace === plain)).toEqual([]);
    // Positive control in the same window: the webhook is still being called for the labeled namespace.
    await core.createNamespacedPod({ namespace: isolated, body: testPod('control') });
    expect(reviews.filter((r) => r.namespace === isolated).length).toBeGreaterThan(0);
  });
});
