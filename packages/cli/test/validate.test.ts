import { describe, expect, it } from '@jest/globals';
import {
  NO_CONFIGURED_KINDS,
  NODE_ISOLATION_ANNOTATION,
  parseInstanceKinds,
  parseNodeIsolation,
  parseSandboxIsolation,
  SANDBOX_ISOLATION_ANNOTATION,
} from '@kubeplus-isolation/spec';
import fc from 'fast-check';
// The spec package's fixtures (packages/spec/test/fixtures.ts): the design documents' examples,
// the inputs of its parser tests, and edge cases.
import { NODE_CASES, SANDBOX_CASES } from '../../spec/test/fixtures.js';
import { type Document, decide, formatValidate, splitDocuments } from '../src/validate.js';

const SEED_NODE = JSON.stringify(NODE_CASES[0]);
const SEED_SANDBOX = JSON.stringify(SANDBOX_CASES[0]);
const BAD_TOLERATIONS = JSON.stringify(NODE_CASES.find((c) => JSON.stringify(c).includes('"operator":"In"')));
const BAD_SANDBOX = JSON.stringify(SANDBOX_CASES.find((c) => JSON.stringify(c).includes('gvisor')));

function agent(name: string, annotations: Record<string, unknown>, apiVersion = 'cloudark.io/v1', kind = 'Agent') {
  return { apiVersion, kind, metadata: { name, namespace: 'team-a', annotations } };
}

function docs(...objects: unknown[]): Document[] {
  return objects.map((object, i) => ({ source: 'in.yaml', document: i + 1, line: 1 + i * 10, object }));
}

const kinds = (text: string) => {
  const r = parseInstanceKinds(text);
  if (!r.ok) throw new Error(r.errors.join('; '));
  return r.value;
};

describe('validate: judges annotations exactly as the operator', () => {
  it("accepts the design documents' examples", () => {
    const r = decide(
      docs(agent('a', { [NODE_ISOLATION_ANNOTATION]: SEED_NODE, [SANDBOX_ISOLATION_ANNOTATION]: SEED_SANDBOX })),
      NO_CONFIGURED_KINDS,
    );
    expect(r.valid).toBe(true);
    expect(r.instances[0]?.annotations).toEqual([
      { annotation: NODE_ISOLATION_ANNOTATION, valid: true, errors: [] },
      { annotation: SANDBOX_ISOLATION_ANNOTATION, valid: true, errors: [] },
    ]);
  });

  it("gives the operator's messages, JSON paths first, for each broken annotation", () => {
    const r = decide(
      docs(agent('b', { [NODE_ISOLATION_ANNOTATION]: BAD_TOLERATIONS, [SANDBOX_ISOLATION_ANNOTATION]: BAD_SANDBOX })),
      NO_CONFIGURED_KINDS,
    );
    expect(r.valid).toBe(false);
    const [node, sandbox] = r.instances[0]?.annotations ?? [];
    expect(node?.errors).toEqual((parseNodeIsolation(BAD_TOLERATIONS) as { errors: string[] }).errors);
    expect(node?.errors.slice(0, 2)).toEqual([
      'tolerations[0].value must be empty when operator is Exists',
      'tolerations[1].effect must be one of NoSchedule, PreferNoSchedule, NoExecute (or empty for all effects)',
    ]);
    expect(sandbox?.errors).toEqual((parseSandboxIsolation(BAD_SANDBOX) as { errors: string[] }).errors);
    expect(formatValidate(r)).toContain(
      'in.yaml:1 (document 1): cloudark.io/v1 Agent team-a/b\n  kubeplus.io/node-isolation is invalid:\n    tolerations[0].value must be empty when operator is Exists\n',
    );
  });

  it('reports a runtimeClassName that cannot name a RuntimeClass, and accepts one that can', () => {
    const r = decide(
      docs(
        agent('good', { [SANDBOX_ISOLATION_ANNOTATION]: '{"minRuntimeClass":"runsc","runtimeClassName":"gvisor"}' }),
        agent('bad', { [SANDBOX_ISOLATION_ANNOTATION]: '{"minRuntimeClass":"runsc","runtimeClassName":"GVisor"}' }),
      ),
      NO_CONFIGURED_KINDS,
    );
    expect(r.valid).toBe(false);
    expect(r.instances.map((i) => i.annotations[0]?.valid)).toEqual([true, false]);
    expect(formatValidate(r)).toContain(
      "  kubeplus.io/sandbox-isolation is invalid:\n    runtimeClassName must name a RuntimeClass: a DNS-1123 subdomain (an object name such as a RuntimeClass's): at most 253 characters",
    );
  });

  it("gives each fixture of the spec package the parser's verdict and messages", () => {
    const annotated = [
      ...NODE_CASES.map((c, i) => agent(`n${i}`, { [NODE_ISOLATION_ANNOTATION]: JSON.stringify(c) })),
      ...SANDBOX_CASES.map((c, i) => agent(`s${i}`, { [SANDBOX_ISOLATION_ANNOTATION]: JSON.stringify(c) })),
    ];
    const r = decide(docs(...annotated), NO_CONFIGURED_KINDS);
    const expected = [
      ...NODE_CASES.map((c) => parseNodeIsolation(JSON.stringify(c))),
      ...SANDBOX_CASES.map((c) => parseSandboxIsolation(JSON.stringify(c))),
    ];
    expect(r.instances.map((i) => i.annotations[0]?.errors)).toEqual(expected.map((e) => (e.ok ? [] : e.errors)));
    expect(expected.some((e) => e.ok) && expected.some((e) => !e.ok)).toBe(true);
  });

  it('agrees with parseNodeIsolation and parseSandboxIsolation on any value', () => {
    const value = fc.oneof(
      fc.string(),
      fc.json(),
      fc.constantFrom(...[...NODE_CASES, ...SANDBOX_CASES].map((c) => JSON.stringify(c))),
      fc.anything(),
    );
    fc.assert(
      fc.property(value, value, (node, sandbox) => {
        const r = decide(
          docs(agent('x', { [NODE_ISOLATION_ANNOTATION]: node, [SANDBOX_ISOLATION_ANNOTATION]: sandbox })),
          NO_CONFIGURED_KINDS,
        );
        const expected = [parseNodeIsolation(node), parseSandboxIsolation(sandbox)];
        expect(
          r.instances[0]?.annotations.map((a) => (a.valid ? { ok: true } : { ok: false, errors: a.errors })),
        ).toEqual(expected.map((e) => (e.ok ? { ok: true } : { ok: false, errors: e.errors })));
        expect(r.valid).toBe(expected.every((e) => e.ok));
      }),
    );
  });
});

describe('validate: what counts as an instance', () => {
  it('configured kinds and groups, and kinds of CRDs labelled registered-by=kubeplus in the input', () => {
    const crd = {
      apiVersion: 'apiextensions.k8s.io/v1',
      kind: 'CustomResourceDefinition',
      metadata: { name: 'hosts.platformapi.kubeplus', labels: { 'registered-by': 'kubeplus' } },
      spec: { group: 'platformapi.kubeplus', names: { kind: 'Host' } },
    };
    const r = decide(
      docs(
        agent('plain', {}),
        agent('host', {}, 'platformapi.kubeplus/v1', 'Host'),
        agent('other', {}, 'example.com/v1', 'Widget'),
        crd,
      ),
      kinds('cloudark.io/v2/Agent'),
    );
    expect(r.instances.map((i) => [i.name, i.selectedBy])).toEqual([
      ['plain', 'instance-kinds'],
      ['host', 'crd-label'],
    ]);
    expect(decide(docs(agent('w', {}, 'example.com/v1', 'Widget')), kinds('example.com')).instances).toHaveLength(1);
  });

  it('checks any annotated object, warning when the operator would not read it', () => {
    const cm = agent('cm', { [SANDBOX_ISOLATION_ANNOTATION]: '{"minRuntimeClass":"nope"}' }, 'v1', 'ConfigMap');
    const widget = agent('w', { [NODE_ISOLATION_ANNOTATION]: SEED_NODE }, 'example.com/v1', 'Widget');
    const unconfigured = decide(docs(cm, widget), NO_CONFIGURED_KINDS);
    expect(unconfigured.valid).toBe(false);
    expect(unconfigured.warnings.map((w) => w.message)).toEqual([expect.stringContaining('not on a ConfigMap')]);
    const configured = decide(docs(widget), kinds('cloudark.io/v1/Agent'));
    expect(configured.valid).toBe(true);
    expect(configured.warnings.map((w) => w.message)).toEqual([expect.stringContaining('not an instance Kind')]);
  });

  it('expands List objects', () => {
    const list = { apiVersion: 'v1', kind: 'List', items: [agent('a', { [NODE_ISOLATION_ANNOTATION]: '{}' })] };
    const r = decide(docs(list), NO_CONFIGURED_KINDS);
    expect(r.instances.map((i) => i.name)).toEqual(['a']);
    expect(r.valid).toBe(false);
  });
});

describe('splitDocuments', () => {
  it('skips empty documents, numbers the others, and gives the line each starts at', () => {
    const text = '# header\n---\n---\na: 1\n---\n# only a comment\n---\n\nb: 2\n...\n--- {c: 3}\n---\nnull\n---\n~\n';
    expect(splitDocuments('f', text).map((d) => [d.document, d.line, d.object])).toEqual([
      [1, 4, { a: 1 }],
      [2, 9, { b: 2 }],
      [3, 11, { c: 3 }],
    ]);
  });

  it('reports a broken document with its place and still reads the others', () => {
    const r = splitDocuments('f', 'a: 1\n---\nkind: [\n---\nb: 2\n');
    expect(r.map((d) => [d.document, d.line, d.error === undefined])).toEqual([
      [1, 1, true],
      [2, 3, false],
      [3, 5, true],
    ]);
    expect(r[1]?.error).toMatch(/^not valid YAML\/JSON: /);
    const result = decide(r, NO_CONFIGURED_KINDS);
    expect(result.valid).toBe(false);
    expect(result.errors).toEqual([{ source: 'f', document: 2, line: 3, message: r[1]?.error }]);
  });

  it('reads JSON', () => {
    expect(splitDocuments('f.json', '{"kind":"Agent","apiVersion":"cloudark.io/v1"}')[0]?.object).toEqual({
      kind: 'Agent',
      apiVersion: 'cloudark.io/v1',
    });
  });
});
