/**
 * The webhook's certificates, kept by the operator (the chart's default `webhook.tls.mode:
 * operator`), on the real node with the chart installed as Pods:
 *
 * - installed with lifetimes short enough to watch (CA 180 s, serving certificate 90 s,
 *   propagation delay 12 s), the operator renews the serving certificate and rotates the CA
 *   (next CA trusted, then signing, then the old one retired when it expires) while Pod CREATEs
 *   go on back to back, and for 10 s after: every Pod admitted carries the mandate, the API
 *   server counts no fail-open for the webhook, and the webhook Pods are seen serving a
 *   certificate of the new CA. The kubelet here refreshes a mounted Secret every 10 s plus up to
 *   50% jitter, so a webhook Pod may serve the old certificate 15 s after the Secret changed:
 *   longer than the delay (a CA retired a delay after the move was once seen failing one Pod in
 *   12,897 here), shorter than the 30 s a renewed certificate has left;
 * - a `helm template` render (what Argo CD and Flux apply) applied, then applied again and a
 *   fresh render applied on top, under the same load: nothing admitted unpatched, no fail-open
 *   (the render carries no certificate material in this mode, so re-applying changes nothing).
 *
 * Pod CREATEs are server-side dry runs: the admission chain runs in full, nothing is stored.
 */
import { createPrivateKey, X509Certificate } from 'node:crypto';
import { connect } from 'node:tls';
import { afterAll, beforeAll, beforeEach, describe, expect, test } from '@jest/globals';
import { type RealNodeCluster, scrapeApiServerMetrics, sumMetric, waitFor } from '@kubeplus-isolation/e2e';
import { NODE_ISOLATION_WEBHOOK_NAME } from '@kubeplus-isolation/spec';
import { AdmissionregistrationV1Api, AppsV1Api, CoreV1Api, loadAllYaml } from '@kubernetes/client-node';
import {
  admitDryRunWhile,
  CHART,
  carriesPoolMandate,
  helm,
  INSTANCE_GROUP_VALUES,
  installChart,
  isolateTenant,
  kubectl,
  kubectlWithInput,
  PLATFORM_NS,
  poolMandate,
  prepareChartNode,
  RELEASE_NS,
  startProjectNode,
  tenantPod,
} from './support/real-node.js';

const POOL = 'team-a-pool';
const MANDATE = poolMandate(POOL);
const WEBHOOK_PORT = 8443;
const SHORT_LIFETIMES = [
  '--set',
  'operator.webhookCertificates.caValidity=180s',
  '--set',
  'operator.webhookCertificates.certValidity=90s',
  '--set',
  'operator.webhookCertificates.propagationDelay=12s',
];

interface SecretView {
  cas: string[];
  signer: string | undefined;
  leaf: string | undefined;
  leafIssuer: string | undefined;
}

function viewOf(data: Record<string, string> | undefined): SecretView {
  const text = (k: string): string => Buffer.from(data?.[k] ?? '', 'base64').toString('utf8');
  const cas = (text('ca.crt').match(/-----BEGIN CERTIFICATE-----[\s\S]*?-----END CERTIFICATE-----/g) ?? []).map(
    (pem) => new X509Certificate(pem),
  );
  const leafPem = text('tls.crt');
  const leaf = leafPem ? new X509Certificate(leafPem) : undefined;
  const caKey = text('ca.key');
  const signer = caKey
    ? cas.find((ca) => {
        try {
          return ca.checkPrivateKey(createPrivateKey(caKey));
        } catch {
          return false;
        }
      })
    : undefined;
  return {
    cas: cas.map((c) => c.fingerprint256),
    signer: signer?.fingerprint256,
    leaf: leaf?.fingerprint256,
    leafIssuer: leaf && cas.find((ca) => leaf.checkIssued(ca) && leaf.verify(ca.publicKey))?.fingerprint256,
  };
}

/** The fingerprint of the certificate a webhook Pod presents (the host routes the Pod range into the node). */
function servedFingerprint(podIp: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect({ host: podIp, port: WEBHOOK_PORT, rejectUnauthorized: false, timeout: 5_000 }, () => {
      const cert = socket.getPeerX509Certificate();
      socket.end();
      if (cert === undefined) reject(new Error(`${podIp}: no certificate`));
      else resolve(cert.fingerprint256);
    });
    socket.on('error', reject);
    socket.on('timeout', () => socket.destroy(new Error(`${podIp}: TLS handshake timed out`)));
  });
}

describe('webhook certificates kept by the operator, on a real node', () => {
  let cluster: RealNodeCluster;
  let core: CoreV1Api;
  const tenant = 'team-a';

  const admitWhile = (done: () => boolean) => admitDryRunWhile(cluster.cp.kc, tenant, POOL, done);

  const failOpens = async (): Promise<number> =>
    sumMetric(await scrapeApiServerMetrics(cluster.cp.kc), 'apiserver_admission_webhook_fail_open_count', {
      name: NODE_ISOLATION_WEBHOOK_NAME,
    });

  const isolateTenantAndWait = async (): Promise<void> => {
    await isolateTenant(cluster, tenant, MANDATE);
    // The first Pod patched: the webhook is registered with a trusted caBundle and serving.
    await waitFor(
      'a tenant Pod patched by the webhook',
      async () => {
        const pod = await core.createNamespacedPod({ namespace: tenant, body: tenantPod('first'), dryRun: 'All' });
        return carriesPoolMandate(POOL, pod) || undefined;
      },
      { timeoutMs: 60_000 },
    );
  };

  beforeAll(async () => {
    cluster = await startProjectNode();
    core = cluster.cp.kc.makeApiClient(CoreV1Api);
    await prepareChartNode(cluster, { pool: POOL });
  });

  afterAll(async () => {
    await cluster?.stop();
  });

  // A clean slate, whatever the test before left (it may have failed half-way): no release (its
  // pre-delete hook removes the instances' finalizers), no instance, no tenant namespace.
  beforeEach(async () => {
    const releases = (await helm(cluster, 'list', '--namespace', RELEASE_NS, '--short')).split('\n').filter(Boolean);
    for (const release of releases) {
      await helm(cluster, 'uninstall', release, '--namespace', RELEASE_NS, '--wait', '--timeout', '120s');
    }
    await kubectl(
      cluster,
      'delete',
      'agents.cloudark.io',
      tenant,
      '--namespace',
      PLATFORM_NS,
      '--ignore-not-found',
      '--wait',
      '--timeout=60s',
    );
    await core.deleteNamespace({ name: tenant }).catch((e: unknown) => {
      if ((e as { code?: number }).code !== 404) throw e;
    });
    await waitFor(
      `namespace ${tenant} gone`,
      async () =>
        (await core.readNamespace({ name: tenant }).catch(() => undefined)) === undefined ? true : undefined,
      { timeoutMs: 120_000 },
    );
  });

  test('the serving certificate renews and the CA rotates under continuous Pod CREATEs: none unpatched, no fail-open', async () => {
    const release = 'kpc';
    const secretName = `${release}-webhook-certs`;
    await installChart(cluster, release, ...SHORT_LIFETIMES);
    await isolateTenantAndWait();
    const readView = async (): Promise<SecretView> =>
      viewOf((await core.readNamespacedSecret({ name: secretName, namespace: RELEASE_NS })).data);
    const first = await readView();
    expect(first.cas).toHaveLength(1);
    expect(first.leafIssuer).toBe(first.signer);

    // Follow the Secret while the load runs: every CA and serving certificate it held, in order.
    const seenLeaves = new Set<string>([first.leaf ?? '']);
    const seenCas = new Set<string>(first.cas);
    let maxCas = 1;
    let done = false;
    let servedByNewCa = false;
    const failOpensBefore = await failOpens();
    const watcher = (async () => {
      const deadline = Date.now() + 300_000;
      while (Date.now() < deadline) {
        const view = await readView();
        if (view.leaf) seenLeaves.add(view.leaf);
        for (const ca of view.cas) seenCas.add(ca);
        maxCas = Math.max(maxCas, view.cas.length);
        // Rotated: a new CA signs, the old one has left the bundle, and every webhook Pod serves
        // the current certificate (issued by the new CA).
        if (view.signer !== first.signer && view.cas.length === 1 && view.leafIssuer === view.signer) {
          const pods = (
            await core.listNamespacedPod({ namespace: RELEASE_NS, labelSelector: 'app.kubernetes.io/name=webhook' })
          ).items.filter((p) => p.status?.podIP && !p.metadata?.deletionTimestamp);
          const served = await Promise.all(pods.map((p) => servedFingerprint(p.status?.podIP ?? '')));
          if (pods.length > 0 && served.every((fp) => fp === view.leaf)) {
            servedByNewCa = true;
            // The API servers now drop the old CA from the caBundle: keep the load on meanwhile.
            await new Promise((r) => setTimeout(r, 10_000));
            break;
          }
        }
        await new Promise((r) => setTimeout(r, 1_000));
      }
      done = true;
    })();
    const load = await admitWhile(() => done);
    await watcher;
    const failOpensAfter = await failOpens();
    process.stderr.write(
      `[certificates] rotation: ${load.admitted} Pods admitted, ${load.unpatched.length} without the mandate; ` +
        `${seenLeaves.size} serving certificates, ${seenCas.size} CAs seen, at most ${maxCas} trusted at once; ` +
        `fail-opens ${failOpensAfter - failOpensBefore}\n`,
    );
    expect(servedByNewCa).toBe(true);
    expect(seenCas.size).toBeGreaterThanOrEqual(2);
    expect(maxCas).toBe(2); // the next CA was trusted beside the old one before it signed
    expect(seenLeaves.size).toBeGreaterThanOrEqual(3);
    expect(load.admitted).toBeGreaterThan(0);
    expect({ unpatched: load.unpatched, failOpens: failOpensAfter - failOpensBefore }).toEqual({
      unpatched: [],
      failOpens: 0,
    });
    const caBundle = (
      await cluster.cp.kc
        .makeApiClient(AdmissionregistrationV1Api)
        .readMutatingWebhookConfiguration({ name: `${release}-webhook` })
    ).webhooks?.[0]?.clientConfig?.caBundle;
    expect(viewOf({ 'ca.crt': caBundle ?? '' }).cas).toEqual((await readView()).cas);
  });

  test('a helm template render applied, applied again and re-rendered and applied: no admission fails', async () => {
    const release = 'kpt';
    const render = (): Promise<string> =>
      helm(
        cluster,
        'template',
        release,
        CHART,
        '--namespace',
        RELEASE_NS,
        ...INSTANCE_GROUP_VALUES,
        '--skip-tests',
        '--no-hooks',
      );
    const apply = async (manifest: string): Promise<void> => {
      const result = await kubectlWithInput(cluster, manifest, 'apply', '-f', '-');
      if (result.code !== 0) throw new Error(`kubectl apply failed (${result.code}): ${result.stderr}`);
    };
    const manifest = await render();
    // No certificate material in the render: the Secret has no data, the webhooks no caBundle.
    const docs = loadAllYaml(manifest) as Array<{
      kind?: string;
      metadata?: { name?: string };
      data?: unknown;
      webhooks?: Array<{ clientConfig?: { caBundle?: string } }>;
    }>;
    const certs = docs.find((d) => d?.kind === 'Secret' && d.metadata?.name === `${release}-webhook-certs`);
    expect(certs).toBeDefined();
    expect(certs?.data).toBeUndefined();
    const hooks = docs.filter((d) => d?.kind === 'MutatingWebhookConfiguration').flatMap((d) => d.webhooks ?? []);
    expect(hooks.length).toBeGreaterThan(0);
    expect(hooks.map((w) => w.clientConfig?.caBundle)).toEqual(hooks.map(() => undefined));
    await apply(manifest);
    const apps = cluster.cp.kc.makeApiClient(AppsV1Api);
    for (const component of ['webhook', 'operator']) {
      await waitFor(
        `${release}-${component} available`,
        async () => {
          const d = await apps.readNamespacedDeployment({ name: `${release}-${component}`, namespace: RELEASE_NS });
          return (d.status?.availableReplicas ?? 0) >= (d.spec?.replicas ?? 1) || undefined;
        },
        { timeoutMs: 180_000 },
      );
    }
    await isolateTenantAndWait();
    const secretBefore = (await core.readNamespacedSecret({ name: `${release}-webhook-certs`, namespace: RELEASE_NS }))
      .data;

    let done = false;
    const failOpensBefore = await failOpens();
    const reapply = (async () => {
      try {
        await apply(manifest);
        await apply(await render());
        // Long enough for the kubelet to refresh the webhook Pods' Secret volume (sync period
        // 10 s on this node) had anything changed, and for the API server to use any new caBundle.
        await new Promise((r) => setTimeout(r, 20_000));
      } finally {
        done = true;
      }
    })();
    const load = await admitWhile(() => done);
    await reapply;
    const failOpensAfter = await failOpens();
    process.stderr.write(
      `[certificates] helm template applied twice: ${load.admitted} Pods admitted, ${load.unpatched.length} without the mandate, fail-opens ${failOpensAfter - failOpensBefore}\n`,
    );
    expect(load.admitted).toBeGreaterThan(0);
    expect(load.unpatched).toEqual([]);
    expect(failOpensAfter - failOpensBefore).toBe(0);
    // Re-applying changed nothing the operator wrote.
    const secretAfter = (await core.readNamespacedSecret({ name: `${release}-webhook-certs`, namespace: RELEASE_NS }))
      .data;
    expect(secretAfter).toEqual(secretBefore);
  });
});
