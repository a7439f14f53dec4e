import { describe, expect, it } from '@jest/globals';
import {
  dedupeTolerations,
  findUnisolatedPods,
  missingDetails,
  missingPlacement,
  type NodeIsolationSpec,
  type PodLike,
  type Toleration,
} from '@kubeplus-isolation/spec';
import fc from 'fast-check';
import jsonpatch from 'fast-json-patch';
// The webhook's patch is the definition of "complies": the audit must agree with it exactly.
import { buildNodeIsolationPatch } from '../../../services/webhook/src/admission/patch.js';

const DEDICATED: Toleration = { key: 'dedicated', operator: 'Equal', value: 'team-a-pool', effect: 'NoSchedule' };
const SPEC: NodeIsolationSpec = { nodeSelector: { pool: 'team-a-pool' }, tolerations: [DEDICATED] };

function pod(name: string, spec: PodLike['spec'], phase?: string): PodLike {
  return { metadata: { name }, spec, ...(phase === undefined ? {} : { status: { phase } }) };
}

describe('findUnisolatedPods', () => {
  it('reports what each Pod lacks, in input order, and nothing for complying Pods', () => {
    const pods = [
      pod('patched', { nodeSelector: { pool: 'team-a-pool', disk: 'ssd' }, tolerations: [DEDICATED] }),
      pod('bare', {}),
      pod('selector-only', { nodeSelector: { pool: 'team-a-pool' } }),
      pod('toleration-only', { tolerations: [{ ...DEDICATED }] }),
      pod('wrong-value', { nodeSelector: { pool: 'other' }, tolerations: [DEDICATED] }),
    ];
    const ALL = { missingNodeSelector: { pool: 'team-a-pool' }, missingTolerations: [DEDICATED] };
    expect(findUnisolatedPods(SPEC, pods)).toEqual([
      { name: 'bare', missing: ['nodeSelector', 'tolerations'], ...ALL },
      { name: 'selector-only', missing: ['tolerations'], missingNodeSelector: {}, missingTolerations: [DEDICATED] },
      {
        name: 'toleration-only',
        missing: ['nodeSelector'],
        missingNodeSelector: { pool: 'team-a-pool' },
        missingTolerations: [],
      },
      {
        name: 'wrong-value',
        missing: ['nodeSelector'],
        missingNodeSelector: { pool: 'team-a-pool' },
        missingTolerations: [],
      },
    ]);
  });

  it('compares tolerations semantically (implicit Equal, empty value) and ignores extra ones', () => {
    const exists: Toleration = { key: 'gpu', operator: 'Exists', effect: 'NoSchedule' };
    const spec: NodeIsolationSpec = { nodeSelector: {}, tolerations: [DEDICATED, exists] };
    const respelled = [
      { key: 'node.kubernetes.io/not-ready', operator: 'Exists', effect: 'NoExecute', tolerationSeconds: 300 },
      { key: 'gpu', operator: 'Exists', value: '', effect: 'NoSchedule' },
      { key: 'dedicated', value: 'team-a-pool', effect: 'NoSchedule' },
    ];
    expect(findUnisolatedPods(spec, [pod('respelled', { tolerations: respelled })])).toEqual([]);
    // Another effect, or seconds the mandate does not have, is another toleration.
    const near = [
      { ...DEDICATED, effect: 'NoExecute' },
      { ...exists, tolerationSeconds: 10 },
    ];
    // Both mandated tolerations are named, in canonical form.
    expect(findUnisolatedPods(spec, [pod('near', { tolerations: near })])).toEqual([
      { name: 'near', missing: ['tolerations'], missingNodeSelector: {}, missingTolerations: [DEDICATED, exists] },
    ]);
  });

  it('checks only the fields the mandate names', () => {
    const selectorOnly: NodeIsolationSpec = { nodeSelector: { pool: 'a' }, tolerations: [] };
    const tolerationsOnly: NodeIsolationSpec = { nodeSelector: {}, tolerations: [DEDICATED] };
    expect(findUnisolatedPods(selectorOnly, [pod('p', { nodeSelector: { pool: 'a' } })])).toEqual([]);
    expect(findUnisolatedPods(tolerationsOnly, [pod('p', { tolerations: [DEDICATED] })])).toEqual([]);
    expect(findUnisolatedPods(tolerationsOnly, [pod('p', { nodeSelector: { pool: 'a' } })])).toEqual([
      { name: 'p', missing: ['tolerations'], missingNodeSelector: {}, missingTolerations: [DEDICATED] },
    ]);
  });

  it('skips finished Pods and unnamed entries; a running or pending one counts', () => {
    const pods = [
      pod('done', {}, 'Succeeded'),
      pod('crashed', {}, 'Failed'),
      pod('pending', {}, 'Pending'),
      pod('running', {}, 'Running'),
      pod('unknown', {}, 'Unknown'),
      { spec: {} },
      { metadata: { name: '' }, spec: {} },
    ];
    expect(findUnisolatedPods(SPEC, pods).map((p) => p.name)).toEqual(['pending', 'running', 'unknown']);
  });

  it('never throws on odd shapes: a field that is not a map or list is missing', () => {
    const odd = [
      pod('null-fields', { nodeSelector: null, tolerations: null }),
      pod('wrong-types', { nodeSelector: ['pool'], tolerations: { key: 'dedicated' } }),
      pod('junk-entries', { nodeSelector: { pool: 'team-a-pool' }, tolerations: [null, 'x', 7, DEDICATED] }),
      { metadata: { name: 'no-spec' } },
      { metadata: { name: 'spec-not-object' }, spec: 'x' as unknown as PodLike['spec'] },
    ];
    expect(findUnisolatedPods(SPEC, odd).map((p) => [p.name, p.missing])).toEqual([
      ['null-fields', ['nodeSelector', 'tolerations']],
      ['wrong-types', ['nodeSelector', 'tolerations']],
      ['no-spec', ['nodeSelector', 'tolerations']],
      ['spec-not-object', ['nodeSelector', 'tolerations']],
    ]);
  });

  it('names exactly the selector pairs and tolerations a Pod lacks, and keeps its uid', () => {
    const gpu: Toleration = { key: 'gpu', operator: 'Exists', effect: 'NoSchedule' };
    const spec: NodeIsolationSpec = { nodeSelector: { pool: 'a', zone: 'z1' }, tolerations: [DEDICATED, gpu] };
    const found = findUnisolatedPods(spec, [
      {
        metadata: { name: 'half', uid: 'u-1' },
        spec: {
          nodeSelector: { pool: 'a', zone: 'z2' },
          tolerations: [{ key: 'gpu', operator: 'Exists', effect: 'NoSchedule' }],
        },
      },
    ]);
    expect(found).toEqual([
      {
        name: 'half',
        uid: 'u-1',
        missing: ['nodeSelector', 'tolerations'],
        missingNodeSelector: { zone: 'z1' },
        missingTolerations: [DEDICATED],
      },
    ]);
    // Respelled (implicit Equal) the toleration is named in canonical form.
    expect(
      missingDetails({ nodeSelector: {}, tolerations: [{ key: 'k', value: 'v', effect: 'NoExecute' }] }, {})
        .missingTolerations,
    ).toEqual([{ key: 'k', operator: 'Equal', value: 'v', effect: 'NoExecute' }]);
  });

  it('does not read inherited properties as selector entries', () => {
    const spec: NodeIsolationSpec = { nodeSelector: { constructor: 'x', toString: 'y' }, tolerations: [] };
    expect(missingPlacement(spec, { nodeSelector: {} })).toEqual(['nodeSelector']);
    expect(missingPlacement(spec, { nodeSelector: { constructor: 'x', toString: 'y' } })).toEqual([]);
  });
});

// ---- agreement with the webhook: a Pod is reported exactly when the webhook would patch it ----

const key = fc.constantFrom('pool', 'disk', 'a/b', '~1', 'kubernetes.io/hostname', 'constructor');
const value = fc.constantFrom('team-a-pool', 'ssd', '');
const toleration: fc.Arbitrary<Toleration> = fc.record(
  {
    key: fc.constantFrom('dedicated', 'gpu', ''),
    operator: fc.constantFrom<'Equal' | 'Exists'>('Equal', 'Exists'),
    value: fc.constantFrom('team-a-pool', ''),
    effect: fc.constantFrom<Toleration['effect']>('NoSchedule', 'NoExecute', ''),
    tolerationSeconds: fc.integer({ min: 0, max: 2 }),
  },
  { requiredKeys: [] },
);
const mandate: fc.Arbitrary<NodeIsolationSpec> = fc
  .record({
    nodeSelector: fc.dictionary(key, value, { maxKeys: 3 }),
    tolerations: fc.array(toleration, { maxLength: 3 }),
  })
  .filter((s) => Object.keys(s.nodeSelector).length > 0 || s.tolerations.length > 0)
  .map((s) => ({ nodeSelector: s.nodeSelector, tolerations: dedupeTolerations(s.tolerations) }));
/** The same toleration as a chart may write it: `operator: Equal` left implicit, an empty value spelled out. */
function respell(t: Toleration): Toleration {
  const out: Toleration = { ...t, value: t.value ?? '' };
  if (out.operator === 'Equal') delete out.operator;
  return out;
}
/** Absent, null, a wrong type, or values — some or all of them taken from the mandate, respelled. */
const podOf = (m: NodeIsolationSpec): fc.Arbitrary<PodLike> =>
  fc
    .record(
      {
        nodeSelector: fc.oneof(
          fc.constant(null),
          fc.constant('x'),
          fc.dictionary(key, value, { maxKeys: 3 }),
          fc.subarray(Object.entries(m.nodeSelector)).map((entries) => Object.fromEntries(entries)),
          // Everything mandated, plus keys of the Pod's own.
          fc.dictionary(key, value, { maxKeys: 2 }).map((own) => ({ ...own, ...m.nodeSelector })),
          fc.constant({ ...m.nodeSelector }),
        ),
        tolerations: fc.oneof(
          fc.constant(null),
          fc.constant({}),
          fc
            .tuple(
              fc.array(toleration, { maxLength: 2 }),
              fc.subarray(m.tolerations).map((ts) => ts.map(respell)),
            )
            .map(([own, mandated]) => [...own, ...mandated]),
          fc.array(toleration, { maxLength: 2 }).map((own) => [...own, ...m.tolerations.map(respell)]),
          fc.constant(m.tolerations.map(respell)),
        ),
      },
      { requiredKeys: [] },
    )
    .map((spec) => ({ metadata: { name: 'p' }, spec: JSON.parse(JSON.stringify(spec)) as PodLike['spec'] }));

describe('findUnisolatedPods agrees with the webhook patch', () => {
  it('reports a Pod exactly when buildNodeIsolationPatch would change it', () => {
    const seen = { reported: 0, complying: 0 };
    fc.assert(
      fc.property(
        mandate.chain((m) => fc.tuple(fc.constant(m), podOf(m))),
        ([m, p]) => {
          const reported = findUnisolatedPods(m, [p]).length > 0;
          const patched = buildNodeIsolationPatch(p, m).length > 0;
          expect(reported).toBe(patched);
          seen[reported ? 'reported' : 'complying']++;
        },
      ),
      { numRuns: 2000 },
    );
    // Both outcomes are exercised, not just the easy one.
    expect(seen.reported).toBeGreaterThan(200);
    expect(seen.complying).toBeGreaterThan(200);
  });

  it('after the webhook patch a Pod is never reported', () => {
    fc.assert(
      fc.property(
        mandate.chain((m) => fc.tuple(fc.constant(m), podOf(m))),
        ([m, p]) => {
          const patched = jsonpatch.applyPatch(structuredClone(p), buildNodeIsolationPatch(p, m)).newDocument;
          expect(findUnisolatedPods(m, [patched])).toEqual([]);
        },
      ),
      { numRuns: 1000 },
    );
  });
});
