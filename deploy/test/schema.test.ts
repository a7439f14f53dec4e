/**
 * values.schema.json (umbrella and subcharts): bad values fail at install time, with a message
 * that names the offending value; good ones (every documented value) render. Plus `helm lint`.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, jest, test } from '@jest/globals';
import { load } from 'js-yaml';
import { CHART_DIR, helm, render, renderError } from './helm.js';

jest.setTimeout(60_000);

describe('helm lint', () => {
  test('the umbrella chart and its subcharts lint clean (strict)', async () => {
    const result = await helm(['lint', CHART_DIR, '--strict', '--with-subcharts']);
    expect({ code: result.code, out: result.stdout + result.stderr }).toEqual({
      code: 0,
      out: expect.stringContaining('0 chart(s) failed'),
    });
    expect(result.stdout).not.toMatch(/\[(WARNING|ERROR)\]/);
  });
});

describe('values.schema.json', () => {
  const cases: [string, unknown, RegExp][] = [
    [
      'negative webhook replicas',
      { webhook: { replicas: -1 } },
      /webhook:[\s\S]*at '\/replicas': minimum: got -1, want 1/,
    ],
    [
      'zero operator replicas',
      { operator: { replicas: 0 } },
      /operator:[\s\S]*at '\/replicas': minimum: got 0, want 1/,
    ],
    ['replicas as a string', { webhook: { replicas: '2' } }, /at '\/replicas'/],
    ['unknown umbrella key', { webhok: { enabled: true } }, /additional properties 'webhok' not allowed/],
    ['unknown webhook key', { webhook: { replica: 2 } }, /webhook:[\s\S]*additional properties 'replica' not allowed/],
    [
      'unknown operator key',
      { operator: { leaderElection: { lease: 'x' } } },
      /additional properties 'lease' not allowed/,
    ],
    ['timeoutSeconds 0', { webhook: { timeoutSeconds: 0 } }, /at '\/timeoutSeconds': minimum: got 0, want 1/],
    ['timeoutSeconds 31', { webhook: { timeoutSeconds: 31 } }, /at '\/timeoutSeconds': maximum: got 31, want 30/],
    ['log level', { operator: { logLevel: 'verbose' } }, /at '\/logLevel'/],
    ['pull policy', { webhook: { image: { pullPolicy: 'Sometimes' } } }, /at '\/image\/pullPolicy'/],
    ['image digest', { operator: { image: { digest: 'latest' } } }, /at '\/image\/digest'/],
    [
      'wildcard instance group',
      { operator: { instanceGroups: [{ group: '*', resources: ['x'] }] } },
      /instanceGroups\/0\/group/,
    ],
    [
      'wildcard instance resource',
      { operator: { instanceGroups: [{ group: 'a.io', resources: ['*'] }] } },
      /resources\/0/,
    ],
    [
      'subresource',
      { operator: { instanceGroups: [{ group: 'a.io', resources: ['agents/status'] }] } },
      /resources\/0/,
    ],
    ['core group as instances', { operator: { instanceGroups: [{ group: '', resources: ['pods'] }] } }, /group/],
    ['platform namespace not a name', { operator: { platformNamespace: 'Not_A_Name' } }, /platformNamespace/],
    ['kubeplus switch not a boolean', { operator: { kubeplus: { enabled: 'yes' } } }, /kubeplus\/enabled/],
    ['failurePolicy', { tamperProtection: { failurePolicy: 'Open' } }, /tamperProtection\/failurePolicy/],
    ['anti-affinity preset', { webhook: { podAntiAffinity: 'strict' } }, /at '\/podAntiAffinity'/],
    ['PDB percentage', { webhook: { podDisruptionBudget: { enabled: true, maxUnavailable: '50' } } }, /maxUnavailable/],
    ['CPU quantity', { webhook: { resources: { requests: { cpu: 'lots' } } } }, /resources\/requests\/cpu/],
    ['cert lifetime', { webhook: { tls: { certValidityDays: 0 } } }, /tls\/certValidityDays/],
    [
      'unknown TLS mode',
      { webhook: { tls: { mode: 'operator-managed' } } },
      /webhook:[\s\S]*at '\/tls\/mode': value must be one of 'operator', 'helm'/,
    ],
    ['TLS mode in a different case', { webhook: { tls: { mode: 'Helm' } } }, /at '\/tls\/mode'/],
    [
      'webhook CA validity in days',
      { operator: { webhookCertificates: { caValidity: '1825d' } } },
      /operator:[\s\S]*at '\/webhookCertificates\/caValidity'/,
    ],
    [
      'webhook certificate validity without a unit',
      { operator: { webhookCertificates: { certValidity: '2160' } } },
      /at '\/webhookCertificates\/certValidity'/,
    ],
    [
      'propagation delay with a space',
      { operator: { webhookCertificates: { propagationDelay: '2 m' } } },
      /at '\/webhookCertificates\/propagationDelay'/,
    ],
    [
      'webhook certificates switch as a string',
      { operator: { webhookCertificates: { enabled: 'true' } } },
      /at '\/webhookCertificates\/enabled'/,
    ],
  ];

  test.each(cases)('%s is rejected naming the value', async (_name, values, message) => {
    expect(await renderError(values)).toMatch(message);
  });

  test('every value in the values files passes its schema (defaults render)', async () => {
    const objects = await render();
    expect(objects.length).toBeGreaterThan(10);
  });

  test('all optional features on at once render', async () => {
    const objects = await render({
      webhook: {
        autoscaling: { enabled: true, targetMemoryUtilizationPercentage: 80 },
        serviceMonitor: { enabled: true, labels: { release: 'prom' } },
        prometheusRule: { enabled: true },
        certManager: { enabled: true },
        imagePullSecrets: [{ name: 'regcred' }],
        extraArgs: ['--max-body-bytes=1048576'],
      },
      operator: {
        instanceGroups: [{ group: 'cloudark.io', resources: ['agents'] }],
        instanceRoleAggregation: true,
        serviceMonitor: { enabled: true },
        prometheusRule: { enabled: true },
      },
      grafanaDashboard: { enabled: true, namespace: 'monitoring' },
    });
    const kinds = new Set(objects.map((o) => o.kind));
    for (const kind of ['HorizontalPodAutoscaler', 'ServiceMonitor', 'PrometheusRule', 'Certificate', 'ConfigMap']) {
      expect(kinds).toContain(kind);
    }
  });

  test('the umbrella schema knows every top-level key of values.yaml, the subchart schemas theirs', () => {
    for (const dir of ['.', 'charts/webhook', 'charts/operator']) {
      const values = load(readFileSync(join(CHART_DIR, dir, 'values.yaml'), 'utf8')) as Record<string, unknown>;
      const schema = JSON.parse(readFileSync(join(CHART_DIR, dir, 'values.schema.json'), 'utf8')) as {
        additionalProperties: boolean;
        properties: Record<string, unknown>;
      };
      expect(schema.additionalProperties).toBe(false);
      expect(Object.keys(values).filter((k) => !(k in schema.properties))).toEqual([]);
    }
  });

  test('README.md lists every value, and only real ones', () => {
    const readme = readFileSync(join(CHART_DIR, 'README.md'), 'utf8');
    const valuesSection = readme.slice(readme.indexOf('\n## Values\n'));
    const rows = new Set([...valuesSection.matchAll(/^\| `([A-Za-z0-9_.]+)` \|/gm)].map((m) => m[1] as string));
    const leaves = (value: unknown, prefix: string): string[] =>
      value !== null && typeof value === 'object' && !Array.isArray(value) && Object.keys(value).length > 0
        ? Object.entries(value).flatMap(([k, v]) => leaves(v, `${prefix}${k}.`))
        : [prefix.slice(0, -1)];
    const documented = (path: string): boolean => {
      const parts = path.split('.');
      return parts.some((_, i) => rows.has(parts.slice(0, i + 1).join('.')));
    };
    for (const [dir, prefix] of [
      ['.', ''],
      ['charts/webhook', 'webhook.'],
      ['charts/operator', 'operator.'],
    ] as const) {
      const values = load(readFileSync(join(CHART_DIR, dir, 'values.yaml'), 'utf8'));
      expect(leaves(values, prefix).filter((p) => !documented(p))).toEqual([]);
    }
    // Each row names a value the schemas define.
    type Schema = { properties?: Record<string, Schema>; $ref?: string; definitions?: Record<string, Schema> };
    const schemas: Record<string, Schema> = {
      '': JSON.parse(readFileSync(join(CHART_DIR, 'values.schema.json'), 'utf8')),
      webhook: JSON.parse(readFileSync(join(CHART_DIR, 'charts/webhook/values.schema.json'), 'utf8')),
      operator: JSON.parse(readFileSync(join(CHART_DIR, 'charts/operator/values.schema.json'), 'utf8')),
    };
    const defined = (path: string): boolean => {
      const [head, ...rest] = path.split('.');
      const [schema, parts] =
        head === 'webhook' || head === 'operator'
          ? [schemas[head] as Schema, rest]
          : [schemas[''] as Schema, path.split('.')];
      const deref = (n: Schema | undefined): Schema | undefined =>
        n?.$ref ? schema.definitions?.[n.$ref.replace('#/definitions/', '')] : n;
      let node: Schema | undefined = schema;
      for (const part of parts) node = deref(deref(node)?.properties?.[part]);
      return node !== undefined;
    };
    expect(rows.size).toBeGreaterThan(100);
    expect([...rows].filter((r) => !defined(r))).toEqual([]);
  });
});
