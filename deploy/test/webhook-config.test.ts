/**
 * The MutatingWebhookConfiguration the chart renders: its webhooks[] entry is the design
 * document's node-isolation.kubeplus.io entry field by field, plus only deployment-specific
 * fields; clientConfig and timeoutSeconds follow the values.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, jest, test } from '@jest/globals';
import { HOLD_WEBHOOK_NAME, NODE_ISOLATION_ENABLED_LABEL, NODE_ISOLATION_WEBHOOK_NAME } from '@kubeplus-isolation/spec';
import { CHART_DIR, type K8sObject, NAMESPACE, one, RELEASE, render, renderError } from './helm.js';
import { seedWebhookEntry } from './seed.js';

jest.setTimeout(60_000);

/** Fields the chart may add to the design document's entry, and why. */
const DEPLOYMENT_FIELDS = new Set([
  'clientConfig', // where this installation's webhook is reached
  'timeoutSeconds', // configurable; short because the entry fails open
  'matchPolicy', // "Equivalent", the API default, made explicit in files/webhook-entry.json
  'reinvocationPolicy', // "IfNeeded": re-apply if a later webhook rewrites the Pod
]);

function allWebhooks(objects: K8sObject[]): Record<string, unknown>[] {
  const mwc = one(objects, 'MutatingWebhookConfiguration');
  return mwc.webhooks as Record<string, unknown>[];
}

/** The node-isolation entry first (what most tests here judge), then the others. */
function webhooks(objects: K8sObject[]): Record<string, unknown>[] {
  const all = allWebhooks(objects);
  return [
    ...all.filter((e) => e.name === NODE_ISOLATION_WEBHOOK_NAME),
    ...all.filter((e) => e.name !== NODE_ISOLATION_WEBHOOK_NAME),
  ];
}

interface HoldEntry {
  name: string;
  rules: { apiGroups: string[]; apiVersions: string[]; resources: string[]; operations: string[] }[];
  namespaceSelector: { matchExpressions: { key: string; operator: string; values?: string[] }[] };
  failurePolicy: string;
  sideEffects: string;
  reinvocationPolicy: string;
  timeoutSeconds: number;
  clientConfig: { service?: Record<string, unknown>; url?: string };
}

describe('MutatingWebhookConfiguration', () => {
  test('has the hold entry first, then the design document entry field by field', async () => {
    const seed = seedWebhookEntry();
    const all = allWebhooks(await render());
    expect(all.map((e) => e.name)).toEqual([HOLD_WEBHOOK_NAME, NODE_ISOLATION_WEBHOOK_NAME]);
    const entries = webhooks(await render());
    const entry = entries[0] as Record<string, unknown>;
    expect(entry.name).toBe(NODE_ISOLATION_WEBHOOK_NAME);
    for (const [field, value] of Object.entries(seed)) {
      expect({ field, value: entry[field] }).toEqual({ field, value });
    }
    const extra = Object.keys(entry).filter((k) => !(k in seed));
    expect(extra.filter((k) => !DEPLOYMENT_FIELDS.has(k))).toEqual([]);
  });

  test('files/webhook-entry.json is rendered unchanged apart from clientConfig and timeoutSeconds', async () => {
    const file = JSON.parse(
      readFileSync(join(CHART_DIR, 'charts', 'webhook', 'files', 'webhook-entry.json'), 'utf8'),
    ) as Record<string, unknown>;
    const {
      clientConfig: _cc,
      timeoutSeconds: _t,
      ...rendered
    } = webhooks(await render())[0] as Record<string, unknown>;
    const { timeoutSeconds: _ft, ...fromFile } = file;
    expect(rendered).toEqual(fromFile);
  });

  test('only Pods in namespaces labeled for node isolation are sent, and it fails open', async () => {
    const entry = webhooks(await render())[0] as {
      rules: { apiGroups: string[]; resources: string[]; operations: string[] }[];
      namespaceSelector: unknown;
      failurePolicy: string;
    };
    // Core group only: nothing here can match KubePlus's CRD-focused rule.
    expect(entry.rules.flatMap((r) => r.apiGroups)).toEqual(['']);
    expect(entry.rules.flatMap((r) => r.resources)).toEqual(['pods']);
    expect(entry.rules.flatMap((r) => r.operations)).toEqual(['CREATE']);
    expect(entry.namespaceSelector).toEqual({
      matchExpressions: [{ key: NODE_ISOLATION_ENABLED_LABEL, operator: 'In', values: ['true'] }],
    });
    expect(entry.failurePolicy).toBe('Ignore');
  });

  test('clientConfig targets the webhook Service on /mutate/pods; the caBundle is the operator’s (none rendered) or the generated CA', async () => {
    const objects = await render();
    const entry = webhooks(objects)[0] as { clientConfig: Record<string, unknown>; timeoutSeconds: number };
    const service = one(objects, 'Service', `${RELEASE}-webhook`);
    const servicePort = (service.spec as { ports: { name: string; port: number }[] }).ports.find(
      (p) => p.name === 'https',
    );
    expect(entry.clientConfig.service).toEqual({
      name: service.metadata.name,
      namespace: NAMESPACE,
      path: '/mutate/pods',
      port: servicePort?.port,
    });
    expect(entry.clientConfig.url).toBeUndefined();
    // tls.mode=operator (default): the operator writes the caBundle once it has issued the CA.
    expect(entry.clientConfig.caBundle).toBeUndefined();
    expect(entry.timeoutSeconds).toBe(5);
    // tls.mode=helm: the CA of the generated Secret, from the same render.
    const helmMode = await render({ webhook: { tls: { mode: 'helm' } } });
    const secret = one(helmMode, 'Secret', `${RELEASE}-webhook-tls`);
    const helmEntry = webhooks(helmMode)[0] as { clientConfig: Record<string, unknown> };
    expect(helmEntry.clientConfig.caBundle).toBe((secret.data as Record<string, string>)['ca.crt']);
    expect(helmEntry.clientConfig.service).toEqual(entry.clientConfig.service);
  });

  test('timeoutSeconds and a url clientConfig (out-of-cluster webhook) follow the values', async () => {
    for (const mode of ['operator', 'helm']) {
      const objects = await render({
        webhook: { timeoutSeconds: 3, clientConfig: { url: 'https://127.0.0.1:18443/mutate/pods' }, tls: { mode } },
      });
      const entry = webhooks(objects)[0] as { clientConfig: Record<string, unknown>; timeoutSeconds: number };
      expect(entry.timeoutSeconds).toBe(3);
      expect(entry.clientConfig.url).toBe('https://127.0.0.1:18443/mutate/pods');
      expect(entry.clientConfig.service).toBeUndefined();
      // helm: the generated CA now; operator: none until issued, for the URL's host too.
      expect({ mode, caBundle: typeof entry.clientConfig.caBundle }).toEqual({
        mode,
        caBundle: mode === 'helm' ? 'string' : 'undefined',
      });
    }
  });

  test('an explicit caBundle wins over the generated, the injected and the operator’s', async () => {
    const caBundle = Buffer.from('-----BEGIN CERTIFICATE-----\nx\n-----END CERTIFICATE-----\n').toString('base64');
    for (const [mode, certManager] of [
      ['operator', false],
      ['helm', false],
      ['operator', true],
    ] as const) {
      const objects = await render({
        webhook: { clientConfig: { caBundle }, tls: { mode }, certManager: { enabled: certManager } },
      });
      const mwc = one(objects, 'MutatingWebhookConfiguration');
      expect((webhooks(objects)[0] as { clientConfig: { caBundle: string } }).clientConfig.caBundle).toBe(caBundle);
      expect(mwc.metadata.annotations?.['cert-manager.io/inject-ca-from']).toBeUndefined();
    }
  });

  test('timeoutSeconds outside 1..30 and non-https urls are rejected by the schema', async () => {
    for (const timeoutSeconds of [0, 31, 2.5, '5']) {
      expect(await renderError({ webhook: { timeoutSeconds } })).toMatch(/timeoutSeconds/);
    }
    expect(await renderError({ webhook: { clientConfig: { url: 'http://127.0.0.1:8443/mutate/pods' } } })).toMatch(
      /clientConfig\/url|clientConfig.url/,
    );
    expect(await renderError({ webhook: { clientConfig: { url: 'https://h/p?q=1' } } })).toMatch(/url/);
  });

  test('a live-lookup bound not below the webhook timeout is refused with a clear message', async () => {
    const stderr = await renderError({ webhook: { timeoutSeconds: 1, liveLookupTimeoutMs: 1000 } });
    expect(stderr).toMatch(/webhook\.liveLookupTimeoutMs \(1000\) must be below webhook\.timeoutSeconds \(1s\)/);
  });

  describe('the hold entry (issue 35)', () => {
    const hold = (objects: K8sObject[]): HoldEntry =>
      allWebhooks(objects).find((e) => e.name === HOLD_WEBHOOK_NAME) as unknown as HoldEntry;

    test('Pod, Sandbox and SandboxTemplate CREATEs of unsettled KubePlus namespaces, never the system or release namespace, at /hold, failing open', async () => {
      const entry = hold(await render());
      expect(entry.rules.map((r) => [r.apiGroups, r.resources, r.operations, r.apiVersions])).toEqual([
        [[''], ['pods'], ['CREATE'], ['v1']],
        [['agents.x-k8s.io'], ['sandboxes'], ['CREATE'], ['*']],
        [['extensions.agents.x-k8s.io'], ['sandboxtemplates'], ['CREATE'], ['*']],
      ]);
      expect(entry.namespaceSelector.matchExpressions).toEqual([
        { key: 'managedby', operator: 'In', values: ['kubeplus'] },
        { key: 'kubeplus.io/isolation-settled', operator: 'DoesNotExist' },
        {
          key: 'kubernetes.io/metadata.name',
          operator: 'NotIn',
          values: ['kube-system', 'kube-public', 'kube-node-lease', 'default', NAMESPACE],
        },
      ]);
      expect([entry.failurePolicy, entry.sideEffects, entry.reinvocationPolicy, entry.timeoutSeconds]).toEqual([
        'Ignore',
        'None',
        'Never',
        30,
      ]);
      expect(entry.clientConfig.service).toMatchObject({ path: '/hold' });
    });

    test('the webhook gets the hold flags; hold.enabled=false drops the entry and turns holding off', async () => {
      const args = (objects: K8sObject[]) =>
        (
          one(objects, 'Deployment', `${RELEASE}-webhook`) as K8sObject & {
            spec: { template: { spec: { containers: Array<{ args: string[] }> } } };
          }
        ).spec.template.spec.containers[0]?.args ?? [];
      expect(args(await render())).toEqual(
        expect.arrayContaining(['--hold-timeout=25000ms', '--hold-window=300000ms', '--max-held-requests=256']),
      );
      const off = await render({ webhook: { hold: { enabled: false } } });
      expect(allWebhooks(off).map((e) => e.name)).toEqual([NODE_ISOLATION_WEBHOOK_NAME]);
      expect(args(off)).toContain('--hold-timeout=0ms');
    });

    test('a url clientConfig gets /hold beside /mutate/pods; a hold timeout not below timeoutSeconds is refused', async () => {
      const url = await render({ webhook: { clientConfig: { url: 'https://127.0.0.1:18443/mutate/pods' } } });
      expect(hold(url).clientConfig.url).toBe('https://127.0.0.1:18443/hold');
      expect(await renderError({ webhook: { hold: { timeoutSeconds: 10, timeoutMs: 10000 } } })).toMatch(
        /webhook.hold.timeoutMs \(10000\) must be below webhook.hold.timeoutSeconds \(10s\)/,
      );
    });
  });
});
