/**
 * The webhook's serving certificate, both ways: Helm-generated (a private CA and a leaf whose
 * SANs are the Service's names, verified cryptographically here) and cert-manager (Issuer +
 * Certificate + CA injection, and then no generated Secret at all).
 *
 * Not coverable here: reuse of an existing Secret on upgrade. `helm template` cannot `lookup`, so
 * it always generates fresh material; e2e/test/chart.test.ts upgrades a real release and checks
 * that the CA and caBundle stay the same.
 */
import { createPrivateKey, createPublicKey, X509Certificate } from 'node:crypto';
import { describe, expect, jest, test } from '@jest/globals';
import { type K8sObject, NAMESPACE, one, RELEASE, render } from './helm.js';

jest.setTimeout(60_000);

const SERVICE = `${RELEASE}-webhook`;
const SERVICE_NAMES = [
  SERVICE,
  `${SERVICE}.${NAMESPACE}`,
  `${SERVICE}.${NAMESPACE}.svc`,
  `${SERVICE}.${NAMESPACE}.svc.cluster.local`,
];

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

describe('Helm-generated TLS (certManager.enabled=false)', () => {
  test('a CA-signed leaf for the Service names, its key, and the CA as caBundle', async () => {
    const objects = await render();
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
      await render({ webhook: { clientConfig: { url: 'https://127.0.0.1:18443/mutate/pods' } } }),
    );
    expect(sans(new X509Certificate(byIp['tls.crt'] as string))).toContain('IP Address:127.0.0.1');
    const byName = secretData(
      await render({ webhook: { clientConfig: { url: 'https://webhook.dev.example:8443/mutate/pods' } } }),
    );
    expect(sans(new X509Certificate(byName['tls.crt'] as string))).toContain('DNS:webhook.dev.example');
  });

  test('certificate lifetimes follow tls.caValidityDays and tls.certValidityDays', async () => {
    const data = secretData(await render({ webhook: { tls: { caValidityDays: 30, certValidityDays: 7 } } }));
    const days = (pem: string) => (Date.parse(new X509Certificate(pem).validTo) - Date.now()) / 86_400_000;
    expect(Math.round(days(data['ca.crt'] as string))).toBe(30);
    expect(Math.round(days(data['tls.crt'] as string))).toBe(7);
  });
});

describe('cert-manager TLS (certManager.enabled=true)', () => {
  test('Issuers and Certificates, CA injection, and no generated Secret', async () => {
    const objects = await render({ webhook: { certManager: { enabled: true } } });
    expect(objects.filter((o) => o.kind === 'Secret')).toEqual([]);
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

  test('the generated mode renders no cert-manager object', async () => {
    const objects = await render();
    expect(objects.filter((o) => o.apiVersion.startsWith('cert-manager.io/'))).toEqual([]);
    expect(one(objects, 'MutatingWebhookConfiguration').metadata.annotations).toBeUndefined();
  });
});
