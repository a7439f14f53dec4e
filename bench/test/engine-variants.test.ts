import { readFileSync } from 'node:fs';
import { describe, expect, test } from '@jest/globals';
import { type KubernetesObject, loadAllYaml } from '@kubernetes/client-node';
import type { EngineTrimsResult } from '../src/engine-trims.js';
import { engineTrimsSection, fasterThanE } from '../src/engine-trims-report.js';
import {
  celLiteral,
  type EngineObject,
  engineVariant,
  selectorPatch,
  tolerationIdentity,
  tolerationsPatch,
  VARIANTS,
} from '../src/engine-variants.js';

const shipped = (
  loadAllYaml(
    readFileSync(new URL('../../deploy/kubeplus-isolation/files/node-isolation-engine.yaml', import.meta.url), 'utf8'),
  ) as (KubernetesObject | null)[]
).filter((o): o is KubernetesObject => o !== null);
const MANDATE = {
  nodeSelector: { pool: 'p' },
  tolerations: [{ key: 'dedicated', operator: 'Equal', value: 'p', effect: 'NoSchedule' }],
};
const squash = (cel: string): string => cel.replace(/\s+/g, ' ').replace(/ \./g, '.').trim();
const policyOf = (objects: EngineObject[]): EngineObject =>
  objects.find((o) => o.kind === 'MutatingAdmissionPolicy') as EngineObject;
const shippedPolicy = shipped.find((o) => o.kind === 'MutatingAdmissionPolicy') as EngineObject;
const patchOf = (p: EngineObject): string => squash(p.spec.mutations[0]?.jsonPatch?.expression ?? '');
const variableOf = (p: EngineObject, name: string): string | undefined =>
  p.spec.variables?.find((v) => v.name === name)?.expression;

describe('engine variants', () => {
  test('the patch parts the variants reuse are the shipped patch, read through the shipped variables', () => {
    expect(squash(`${selectorPatch('variables.selector')} + ${tolerationsPatch('variables.missingTolerations')}`)).toBe(
      patchOf(shippedPolicy),
    );
  });

  test('e is the shipped policy under its own name, its binding selecting only the variant’s label', () => {
    const objects = engineVariant(shipped, 'e', 'bench/e', MANDATE);
    expect(objects.map((o) => `${o.kind}/${o.metadata?.name}`)).toEqual([
      'MutatingAdmissionPolicy/kubeplus-bench-engine-e',
      'MutatingAdmissionPolicyBinding/kubeplus-bench-engine-e',
    ]);
    expect(policyOf(objects).spec).toEqual(shippedPolicy.spec);
    const binding = objects[1] as EngineObject;
    expect(binding.spec.policyName).toBe('kubeplus-bench-engine-e');
    expect(binding.spec.matchResources).toEqual({ namespaceSelector: { matchLabels: { 'bench/e': 'true' } } });
    expect(binding.spec.paramRef).toMatchObject({ name: 'node-isolation', parameterNotFoundAction: 'Allow' });
  });

  test('each variant changes only what it says, and never the shipped objects', () => {
    const before = JSON.stringify(shipped);
    const vars = policyOf(engineVariant(shipped, 'vars', 'l', MANDATE));
    expect(vars.spec.variables?.map((v) => v.name)).toEqual(['missingTolerations']);
    expect(variableOf(vars, 'missingTolerations')).not.toMatch(/variables\.|has\(params\.spec\)/);
    expect(patchOf(vars)).toContain('params.spec.nodeSelector');
    expect(patchOf(vars)).not.toContain('variables.selector');

    const ids = policyOf(engineVariant(shipped, 'ids', 'l', MANDATE));
    expect(ids.spec.variables?.map((v) => v.name)).toEqual([
      'selector',
      'tolerations',
      'podTolerations',
      'missingTolerations',
    ]);
    expect(variableOf(ids, 'missingTolerations')).toContain(
      `!(${tolerationIdentity('m')} in variables.podTolerations)`,
    );
    expect(patchOf(ids)).toBe(patchOf(shippedPolicy));

    const both = policyOf(engineVariant(shipped, 'vars+ids', 'l', MANDATE));
    expect(both.metadata?.name).toBe('kubeplus-bench-engine-vars-ids');
    expect(both.spec.variables?.map((v) => v.name)).toEqual(['podTolerations', 'missingTolerations']);
    expect(patchOf(both)).toBe(patchOf(vars));

    const inline = engineVariant(shipped, 'inline', 'l', MANDATE);
    expect(policyOf(inline).spec.paramKind).toBeUndefined();
    expect((inline[1] as EngineObject).spec.paramRef).toBeUndefined();
    expect(variableOf(policyOf(inline), 'selector')).toBe('{"pool": "p"}');

    const limits = engineVariant(shipped, 'limits', 'l', MANDATE);
    expect(limits.map((o) => `${o.kind}/${o.metadata?.name}`)).toEqual([
      'MutatingAdmissionPolicy/kubeplus-bench-engine-limits',
      'MutatingAdmissionPolicyBinding/kubeplus-bench-engine-limits',
      'ValidatingAdmissionPolicy/kubeplus-bench-engine-limits-limits',
      'ValidatingAdmissionPolicyBinding/kubeplus-bench-engine-limits-limits',
    ]);
    expect((limits[3] as EngineObject).spec.matchResources).toEqual({
      namespaceSelector: { matchLabels: { l: 'true' } },
    });
    expect(JSON.stringify(shipped)).toBe(before);
    expect(VARIANTS).toContain('e');
  });

  test('the toleration identity normalizes as the webhook does: empty operator = Equal, absent = empty', () => {
    const id = tolerationIdentity('t');
    expect(id).toContain("(has(t.operator) && t.operator == 'Exists' ? 'Exists' : 'Equal')");
    expect(id).toContain("(has(t.tolerationSeconds) ? string(t.tolerationSeconds) : '')");
    expect(celLiteral([{ key: 'k', n: 5 }])).toBe('[{"key": "k", "n": 5}]');
  });
});

describe('engine trims report', () => {
  const summary = (median: number) => ({ median, min: median, max: median, n: 1 });
  const ratio = (setup: (typeof VARIANTS)[number], concurrency: number, toE: number) => ({
    setup,
    concurrency,
    toF: { p50: summary(1), p99: summary(1) },
    toE: { p50: summary(toE), p99: summary(1) },
  });
  const result = (ratios: ReturnType<typeof ratio>[]): EngineTrimsResult => ({
    blocks: [],
    ratios,
    applyConfiguration: [],
    probes: 4,
    errors: [],
  });

  test('a candidate is faster only when its p50 is at most 0.95 of e’s at every client count; inline and limits never count', () => {
    const t = result([
      ratio('vars', 1, 0.9),
      ratio('vars', 32, 0.94),
      ratio('ids', 1, 0.9),
      ratio('ids', 32, 0.96),
      ratio('inline', 1, 0.5),
      ratio('inline', 32, 0.5),
    ]);
    expect(fasterThanE(t)).toEqual(['vars']);
    expect(engineTrimsSection(t, 9).join('\n')).toContain('at every client count: vars.');
    expect(engineTrimsSection(result([ratio('ids', 1, 1.2)]), 9).join('\n')).toContain(
      'so the engine stays as shipped',
    );
  });
});
