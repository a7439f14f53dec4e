/**
 * Every document `helm template` prints is a Kubernetes object. A document holding only comments
 * (a `---` after a file's comment header) parses as `null`: `kubectl apply` skips it, but other
 * consumers of a render do not. @kubernetes/client-node's loadAllYaml throws on it ("Cannot read
 * properties of null"), which is how the e2e suite webhook-certificates first met it: GitOps
 * pipelines and scripts that read the render with a client library would fail the same way.
 */
import { describe, expect, jest, test } from '@jest/globals';
import { loadAll } from 'js-yaml';
import { renderRaw } from './helm.js';

jest.setTimeout(60_000);

const cases: Array<[string, unknown, readonly string[]]> = [
  ['the defaults', {}, []],
  [
    'every engine and policy on (node isolation both engines, refusal, exclusive pools refusing)',
    {
      global: {
        nodeIsolation: {
          engine: 'both',
          refuseUnplaced: true,
          exclusivePools: { validationActions: ['Deny', 'Audit'], exemptNamespaces: ['monitoring'] },
        },
      },
      operator: { instanceGroups: [{ group: 'cloudark.io', resources: ['agents'] }] },
      webhook: { certManager: { enabled: true } },
      grafanaDashboard: { enabled: true, namespace: 'monitoring' },
    },
    ['--kube-version', '1.36.0'],
  ],
];

describe('helm template output', () => {
  test.each(cases)('%s: every document is an object with apiVersion and kind', async (_name, values, args) => {
    const manifest = await renderRaw(values, { args });
    // Helm prints `---` before each document; whatever precedes the first one is not a document.
    const chunks = manifest.split(/^---[ \t]*$/m).slice(1);
    expect(chunks.length).toBeGreaterThan(10);
    const notObjects = chunks
      .filter((chunk) => {
        const parsed = loadAll(chunk) as unknown[];
        if (parsed.length !== 1) return true;
        const d = parsed[0];
        return d === null || typeof d !== 'object' || !('apiVersion' in d) || !('kind' in d);
      })
      .map((chunk) => chunk.match(/^# Source: .*$/m)?.[0] ?? chunk.slice(0, 120));
    expect(notObjects).toEqual([]);
  });
});
