/**
 * The webhook's serving certificate, all three ways:
 * - operator-issued (tls.mode=operator, the default): the chart renders an Opaque `-certs` Secret
 *   without data and a MutatingWebhookConfiguration labelled and annotated for the operator,
 *   without caBundle; the render holds no certificate material, so it is the same every time;
 * - Helm-generated (tls.mode=helm): a private CA and a leaf whose SANs are the Service's names,
 *   verified cryptographically here, new on every `helm template`;
 * - cert-manager (certManager.enabled, which takes precedence over tls.mode): Issuer +
 *   Certificate + CA injection, and then no chart-made Secret at all.
 *
 * Not coverable here: the `lookup` branches. `helm template` cannot look up (lookup returns
 * nothing), so helm mode always generates fresh material and operator mode always renders the
 * Secret without data. Reuse on upgrade (helm mode keeps its CA; operator mode renders the live
 * -certs data unchanged, or seeds it from the helm-mode -tls Secret so an upgrade from helm mode
 * keeps the same CA and caBundle) is proven against a real release in e2e (e2e/test/chart.test.ts).
 */
import { createPrivateKey, createPublicKey, X509Certificate } from 'node:crypto';
import { describe, expect, jest, test } from '@jest/globals';
import { CHART_DIR, helm, type K8sObject, NAMESPACE, one, RELEASE, render } from './helm.js';

jest.setTimeout(60_000);

const SERVICE = `${RELEASE}-webhook`;
const SERVICE_NAMES = [
  SERVICE,
  `${SERVICE}.${NAMESPACE}`,
  `${SERVICE}.${NAMESPACE}.svc`,
  `${SERVICE}.${NAMESPACE}.svc.cluster.local`,
];

const HELM_MODE = { tls: { mode: 'helm' } };
const CERTS_SECRET = `${RELEASE}-webhook-certs`;

function secretData(objects: K8sObject[]): Record<string, string> {
  const secret = one(objects, 'Secret', `${RELEASE}-webhook-tls`);
  expect(secret.type).toBe('kubernetes.io/tls');
  return Object.fromEntries(
    Object.entries(secret.data as Record<string, string>).map(([k, v]) => [k, Buffer.from(v, 'base64').toString()]),
  );
}

function caBundle(objects: K8sObject[]): string | undefined {
  const mwc = one(objects, 'MutatingWebhookConfiguration');
  const [entry] = mwc.webhooks as { clientConfig: { caBundle?: string } }[];
  return entry?.clientConfig.caBundle;
}

function sans(cert: X509Certificate): string[] {
  return (cert.subjectAltName ?? '').split(', ').filter((s) => s !== '');
}

function webhookTlsVolume(objects: K8sObject[]): { secretName: string; optional?: boolean; items: unknown[] } {
  const deployment = one(objects, 'Deployment', `${RELEASE}-webhook`).spec as {
    template: { spec: { volumes: { name: string; secret?: { secretName: string; items: unknown[] } }[] } };
  };
  const volume = deployment.template.spec.volumes.find((v) => v.name === 'tls');
  if (!volume?.secret) throw new Error('the webhook Deployment has no tls Secret volume');
  return volume.secret;
}

describe('operator-issued TLS (tls.mode=operator, the default)', () => {
  test('the default render: an Opaque -certs Secret without data, the configuration labelled for the operator and without caBundle', async () => {
    const objects = await render();
    // The only Secret is the operator's, Opaque (kubernetes.io/tls would need tls.crt at creation)
    // and without a data key at all: a re-apply of the render never touches what the operator wrote.
    expect(objects.filter((o) => o.kind === 'Secret').map((o) => o.metadata.name)).toEqual([CERTS_SECRET]);
    const secret = one(objects, 'Secret', CERTS_SECRET);
    expect(secret.type).toBe('Opaque');
    expect(secret.metadata.namespace).toBe(NAMESPACE);
    expect(Object.keys(secret).sort()).toEqual(['apiVersion', 'kind', 'metadata', 'type']);
    expect(secret.metadata.labels).toEqual(one(objects, 'Deployment', `${RELEASE}-webhook`).metadata.labels);
    expect(secret.metadata.annotations).toBeUndefined();
    // The configuration tells the operator which Secret and which names.
    const mwc = one(objects, 'MutatingWebhookConfiguration');
    expect(mwc.metadata.labels?.['isolation.kubeplus.io/certificates']).toBe('operator');
    expect(mwc.metadata.annotations).toEqual({
      'isolation.kubeplus.io/certificates-secret': `${NAMESPACE}/${CERTS_SECRET}`,
      'isolation.kubeplus.io/certificates-dns-names': SERVICE_NAMES.join(','),
    });
    expect(caBundle(objects)).toBeUndefined();
    // The webhook Pods mount the operator's Secret, not optional: they wait for the certificate.
    const volume = webhookTlsVolume(objects);
    expect(volume.optional).toBeUndefined();
    expect(volume).toMatchObject({
      secretName: CERTS_SECRET,
      items: [
        { key: 'tls.crt', path: 'tls.crt' },
        { key: 'tls.key', path: 'tls.key' },
      ],
    });
    expect(objects.filter((o) => o.apiVersion.startsWith('cert-manager.io/'))).toEqual([]);
  });

  test('two renders are identical, byte for byte: a GitOps re-apply changes nothing (helm mode: a new CA each time)', async () => {
    // Raw `helm template` output, not parsed objects: byte for byte what `kubectl apply` would get.
    for (const args of [[], ['--set', 'webhook.clientConfig.url=https://10.0.0.7:8443/mutate/pods']]) {
      const [first, second] = await Promise.all(
        [0, 1].map(() => helm(['template', RELEASE, CHART_DIR, '--namespace', NAMESPACE, ...args])),
      );
      expect([first?.code, second?.code]).toEqual([0, 0]);
      expect(first?.stdout.length).toBeGreaterThan(1000);
      expect(second?.stdout).toBe(first?.stdout);
    }
    // The contrast that motivates the mode: Helm generates a new CA per render.
    const [helmFirst, helmSecond] = await Promise.all([render({ webhook: HELM_MODE }), render({ webhook: HELM_MODE })]);
    expect(caBundle(helmFirst)).toMatch(/^[A-Za-z0-9+/]+=*$/);
    expect(caBundle(helmSecond)).not.toBe(caBundle(helmFirst));
  });

  test('the names the operator certifies follow the Service and clientConfig.url (IP addresses apart)', async () => {
    const annotations = async (values: unknown, namespace?: string) =>
      one(await render({ webhook: values }, { namespace }), 'MutatingWebhookConfiguration').metadata.annotations ?? {};
    const byIp = await annotations({ clientConfig: { url: 'https://127.0.0.1:18443/mutate/pods' } });
    expect(byIp['isolation.kubeplus.io/certificates-dns-names']).toBe(SERVICE_NAMES.join(','));
    expect(byIp['isolation.kubeplus.io/certificates-ip-addresses']).toBe('127.0.0.1');
    const byName = await annotations({ clientConfig: { url: 'https://webhook.dev.example:8443/mutate/pods' } });
    expect(byName['isolation.kubeplus.io/certificates-dns-names']).toBe(
      [...SERVICE_NAMES, 'webhook.dev.example'].join(','),
    );
    expect(byName['isolation.kubeplus.io/certificates-ip-addresses']).toBeUndefined();
    const elsewhere = await annotations({ fullnameOverride: 'nw', clusterDomain: 'corp.internal' }, 'isolation');
    expect(elsewhere).toEqual({
      'isolation.kubeplus.io/certificates-secret': 'isolation/nw-certs',
      'isolation.kubeplus.io/certificates-dns-names': 'nw,nw.isolation,nw.isolation.svc,nw.isolation.svc.corp.internal',
    });
  });

  test('helm mode, cert-manager, a disabled or inactive webhook: no -certs Secret and no operator label', async () => {
    for (const values of [
      { webhook: HELM_MODE },
      { webhook: { certManager: { enabled: true } } },
      { webhook: { certManager: { enabled: true }, tls: { mode: 'operator' } } },
      { webhook: { enabled: false } },
      { global: { nodeIsolation: { engine: 'admissionPolicy' } } },
    ]) {
      const objects = await render(values);
      expect({ values, certs: objects.filter((o) => o.metadata.name.endsWith('-certs')) }).toEqual({
        values,
        certs: [],
      });
      for (const mwc of objects.filter((o) => o.kind === 'MutatingWebhookConfiguration')) {
        expect(mwc.metadata.labels?.['isolation.kubeplus.io/certificates']).toBeUndefined();
        expect(Object.keys(mwc.metadata.annotations ?? {}).filter((k) => k.startsWith('isolation.'))).toEqual([]);
      }
    }
  });
});

describe('Helm-generated TLS (tls.mode=helm)', () => {
  test('a CA-signed leaf for the Service names, its key, and the CA as caBundle', async () => {
    const objects = await render({ webhook: HELM_MODE });
    expect(webhookTlsVolume(objects).secretName).toBe(`${RELEASE}-webhook-tls`);
    const data = secretData(objects);
    const ca = new X509Certificate(data['ca.crt'] as string);
    const leaf = new X509Certificate(data['tls.crt'] as string);
    expect(ca.ca).toBe(true);
    expect(leaf.ca).toBe(false);
    expect(leaf.checkIssued(ca)).toBe(true);
    expect(leaf.verify(ca.publicKey)).toBe(true);
    expect(sans(leaf).sort()).toEqual(SERVICE_NAMES.map((n) => `DNS:${n}`).sort());
    // tls.key is the leaf's private key; ca.key is the CA's.
    const leafPub = createPublicKey(createPrivateKey(data['tls.key'] as string)).export({
      type: 'spki',
      format: 'der',
    });
    expect(Buffer.compare(leafPub, leaf.publicKey.export({ type: 'spki', format: 'der' }))).toBe(0);
    const caPub = createPublicKey(createPrivateKey(data['ca.key'] as string)).export({ type: 'spki', format: 'der' });
    expect(Buffer.compare(caPub, ca.publicKey.export({ type: 'spki', format: 'der' }))).toBe(0);
    expect(Buffer.from(caBundle(objects) as string, 'base64').toString()).toBe(data['ca.crt']);
    // Validity follows tls.*Days (default 365 / 3650), give or take the render's clock.
    const days = (c: X509Certificate) => (Date.parse(c.validTo) - Date.now()) / 86_400_000;
    expect(days(leaf)).toBeGreaterThan(363);
    expect(days(leaf)).toBeLessThan(367);
    expect(days(ca)).toBeGreaterThan(3640);
    // The annotations that make the material reusable on upgrade describe it truthfully.
    const annotations = one(objects, 'Secret', `${RELEASE}-webhook-tls`).metadata.annotations ?? {};
    const notAfter = Number(annotations['isolation.kubeplus.io/cert-not-after']) * 1000;
    expect(Math.abs(notAfter - Date.parse(leaf.validTo))).toBeLessThan(120_000);
    const caNotAfter = Number(annotations['isolation.kubeplus.io/ca-not-after']) * 1000;
    expect(Math.abs(caNotAfter - Date.parse(ca.validTo))).toBeLessThan(120_000);
    expect(annotations['isolation.kubeplus.io/cert-sans']).toBe(`dns=${SERVICE_NAMES.join(',')};ips=`);
  });

  test('the host of clientConfig.url joins the SANs (IP or DNS name)', async () => {
    const byIp = secretData(
      await render({ webhook: { ...HELM_MODE, clientConfig: { url: 'https://127.0.0.1:18443/mutate/pods' } } }),
    );
    expect(sans(new X509Certificate(byIp['tls.crt'] as string))).toContain('IP Address:127.0.0.1');
    const byName = secretData(
      await render({
        webhook: { ...HELM_MODE, clientConfig: { url: 'https://webhook.dev.example:8443/mutate/pods' } },
      }),
    );
    expect(sans(new X509Certificate(byName['tls.crt'] as string))).toContain('DNS:webhook.dev.example');
  });

  test('certificate lifetimes follow tls.caValidityDays and tls.certValidityDays', async () => {
    const data = secretData(
      await render({ webhook: { tls: { mode: 'helm', caValidityDays: 30, certValidityDays: 7 } } }),
    );
    const days = (pem: string) => (Date.parse(new X509Certificate(pem).validTo) - Date.now()) / 86_400_000;
    expect(Math.round(days(data['ca.crt'] as string))).toBe(30);
    expect(Math.round(days(data['tls.crt'] as string))).toBe(7);
  });
});

describe('cert-manager TLS (certManager.enabled=true)', () => {
  test('Issuers and Certificates, CA injection, and no chart-made Secret, whatever tls.mode says', async () => {
    for (const mode of ['operator', 'helm']) {
      const objects = await render({ webhook: { certManager: { enabled: true }, tls: { mode } } });
      expect({ mode, secrets: objects.filter((o) => o.kind === 'Secret') }).toEqual({ mode, secrets: [] });
      expect(webhookTlsVolume(objects).secretName).toBe(`${RELEASE}-webhook-tls`);
      expect(one(objects, 'MutatingWebhookConfiguration').metadata.annotations).toEqual({
        'cert-manager.io/inject-ca-from': `${NAMESPACE}/${RELEASE}-webhook-serving`,
      });
    }
    const objects = await render({ webhook: { certManager: { enabled: true } } });
    const serving = one(objects, 'Certificate', `${RELEASE}-webhook-serving`);
    const spec = serving.spec as {
      secretName: string;
      dnsNames: string[];
      issuerRef: { kind: string; name: string };
      usages: string[];
    };
    expect(spec.secretName).toBe(`${RELEASE}-webhook-tls`);
    expect(spec.dnsNames).toEqual(SERVICE_NAMES);
    expect(spec.usages).toContain('server auth');
    expect(spec.issuerRef).toEqual({ group: 'cert-manager.io', kind: 'Issuer', name: `${RELEASE}-webhook-ca` });
    const ca = one(objects, 'Certificate', `${RELEASE}-webhook-ca`);
    expect((ca.spec as { isCA: boolean }).isCA).toBe(true);
    expect(
      objects
        .filter((o) => o.kind === 'Issuer')
        .map((i) => i.metadata.name)
        .sort(),
    ).toEqual([`${RELEASE}-webhook-ca`, `${RELEASE}-webhook-selfsigned`]);
    const mwc = one(objects, 'MutatingWebhookConfiguration');
    expect(mwc.metadata.annotations?.['cert-manager.io/inject-ca-from']).toBe(
      `${NAMESPACE}/${RELEASE}-webhook-serving`,
    );
    expect(caBundle(objects)).toBeUndefined();
  });

  test('an existing issuer replaces the chart’s own CA chain', async () => {
    const issuerRef = { group: 'cert-manager.io', kind: 'ClusterIssuer', name: 'corp-ca' };
    const objects = await render({ webhook: { certManager: { enabled: true, issuerRef } } });
    expect(objects.filter((o) => o.kind === 'Issuer')).toEqual([]);
    expect(objects.filter((o) => o.kind === 'Certificate').map((c) => c.metadata.name)).toEqual([
      `${RELEASE}-webhook-serving`,
    ]);
    expect((one(objects, 'Certificate').spec as { issuerRef: unknown }).issuerRef).toEqual(issuerRef);
  });

  test('the operator and Helm modes render no cert-manager object', async () => {
    for (const mode of ['operator', 'helm']) {
      const objects = await render({ webhook: { tls: { mode } } });
      expect(objects.filter((o) => o.apiVersion.startsWith('cert-manager.io/'))).toEqual([]);
      const annotations = one(objects, 'MutatingWebhookConfiguration').metadata.annotations ?? {};
      expect(annotations['cert-manager.io/inject-ca-from']).toBeUndefined();
    }
  });
});
