import { describe, expect, it } from '@jest/globals';
import { dedupeTolerations, type NodeIsolationSpec, type Toleration, tolerationKey } from '@kubeplus-isolation/spec';
import fc from 'fast-check';
import jsonpatch from 'fast-json-patch';
import { buildNodeIsolationPatch } from '../../src/admission/patch.js';
import { patchProblem } from '../../src/admission/patch-check.js';

type Json = Record<string, unknown>;

// Keys with the characters RFC 6901 escapes, real label keys, and arbitrary strings.
// "__proto__" is excluded: fast-json-patch refuses such paths outright, and Kubernetes label
// keys cannot start with "_".
const key = fc.oneof(
  fc.constantFrom('pool', 'disk', 'a/b', '~', '~1', '/', 'a~0b', 'x/y~z', 'kubernetes.io/hostname', ''),
  fc.string({ maxLength: 12 }).filter((s) => s !== '__proto__'),
);
const labelValue = fc.oneof(fc.constantFrom('team-a-pool', 'ssd', ''), fc.string({ maxLength: 8 }));

const toleration: fc.Arbitrary<Toleration> = fc.record(
  {
    key: fc.constantFrom('dedicated', 'gpu', 'team/x', 'a~b'),
    operator: fc.constantFrom<'Equal' | 'Exists'>('Equal', 'Exists'),
    value: fc.constantFrom('team-a-pool', 'b', ''),
    effect: fc.constantFrom<Toleration['effect']>('NoSchedule', 'NoExecute', 'PreferNoSchedule', ''),
    tolerationSeconds: fc.integer({ min: 0, max: 3600 }),
  },
  { requiredKeys: ['key'] },
);

/** The same toleration written differently (what a chart may do): operator/empty fields implicit. */
function respell(t: Toleration): Toleration {
  const out: Toleration = { ...t };
  if (out.operator === 'Equal') delete out.operator;
  if (out.value === undefined) out.value = '';
  return out;
}

const isolation: fc.Arbitrary<NodeIsolationSpec> = fc
  .record({
    nodeSelector: fc.dictionary(key, labelValue, { maxKeys: 4 }),
    tolerations: fc.array(toleration, { maxLength: 4 }),
  })
  .filter((s) => Object.keys(s.nodeSelector).length > 0 || s.tolerations.length > 0)
  .map((s) => ({ nodeSelector: s.nodeSelector, tolerations: dedupeTolerations(s.tolerations) }));

/** A field as the API server may present it: absent, null, empty, or holding values. */
function field<T>(values: fc.Arbitrary<T>, empty: T): fc.Arbitrary<{ present: boolean; value?: unknown }> {
  return fc.oneof(
    fc.constant({ present: false }),
    fc.constant({ present: true, value: null }),
    fc.constant({ present: true, value: empty }),
    values.map((value) => ({ present: true, value })),
  );
}

/** A Pod (with random unrelated fields) plus the mandate, some Pod tolerations being mandated ones. */
const scenario = isolation.chain((iso) =>
  fc
    .record({
      nodeSelector: field(
        fc.oneof(
          fc.dictionary(key, labelValue, { maxKeys: 4 }),
          // Some keys shared with the mandate, with the same or another value.
          fc
            .subarray(Object.keys(iso.nodeSelector))
            .chain((ks) =>
              fc.tuple(...ks.map(() => labelValue)).map((vs) => Object.fromEntries(ks.map((k, i) => [k, vs[i]]))),
            ),
        ),
        {},
      ),
      tolerations: field(
        fc
          .tuple(
            fc.array(toleration, { maxLength: 3 }),
            fc.subarray(iso.tolerations).map((ts) => ts.map(respell)),
          )
          .chain(([own, mandated]) =>
            fc.shuffledSubarray([...own, ...mandated], { minLength: own.length + mandated.length }),
          ),
        [],
      ),
      otherSpec: fc.dictionary(
        fc.string({ maxLength: 8 }).filter((k) => !['nodeSelector', 'tolerations', '__proto__'].includes(k)),
        fc.jsonValue({ maxDepth: 2 }),
        { maxKeys: 3 },
      ),
      metadata: fc.record({
        name: fc.string({ maxLength: 10 }),
        labels: fc.dictionary(key, labelValue, { maxKeys: 2 }),
      }),
    })
    .map(({ nodeSelector, tolerations, otherSpec, metadata }) => {
      const spec: Json = { containers: [{ name: 'app', image: 'busybox' }], ...otherSpec };
      if (nodeSelector.present) spec.nodeSelector = nodeSelector.value;
      if (tolerations.present) spec.tolerations = tolerations.value;
      // Through JSON, as the API server sends it (no -0, no undefined, no null prototypes).
      const json = JSON.parse(JSON.stringify({ apiVersion: 'v1', kind: 'Pod', metadata, spec }));
      return { iso, pod: json as Json & { spec: Json } };
    }),
);

function without<T extends Json>(o: T, keys: string[]): Json {
  return Object.fromEntries(Object.entries(o).filter(([k]) => !keys.includes(k)));
}

describe('buildNodeIsolationPatch (property)', () => {
  it('yields a valid RFC 6902 patch that applies cleanly, merges as specified, and is idempotent', () => {
    fc.assert(
      fc.property(scenario, ({ iso, pod }) => {
        const original = structuredClone(pod);
        const patch = buildNodeIsolationPatch(pod, iso);

        // Valid RFC 6902, survives the JSON round trip to the API server, applies cleanly.
        expect(jsonpatch.validate(patch, structuredClone(pod))).toBeUndefined();
        expect(JSON.parse(JSON.stringify(patch))).toEqual(patch);
        expect(patchProblem(pod, patch)).toBeUndefined();
        const out = jsonpatch.applyPatch(structuredClone(pod), patch, true, false).newDocument as typeof pod;
        expect(pod).toEqual(original);

        // Only the two owned fields are touched, and nothing is ever removed.
        for (const op of patch) {
          expect(op.path).toMatch(/^\/spec\/(nodeSelector|tolerations)(\/|$)/);
          expect(['add', 'replace']).toContain(op.op);
        }
        expect(without(out.spec, ['nodeSelector', 'tolerations'])).toEqual(
          without(original.spec, ['nodeSelector', 'tolerations']),
        );
        expect(without(out, ['spec'])).toEqual(without(original, ['spec']));

        // nodeSelector: every mandated pair, every non-conflicting original pair.
        const sel = out.spec.nodeSelector as Record<string, string> | undefined;
        for (const [k, v] of Object.entries(iso.nodeSelector)) expect(sel?.[k]).toBe(v);
        const origSel = original.spec.nodeSelector;
        if (typeof origSel === 'object' && origSel !== null && !Array.isArray(origSel)) {
          for (const [k, v] of Object.entries(origSel)) {
            if (!(k in iso.nodeSelector)) expect(sel?.[k]).toBe(v);
          }
        }
        if (Object.keys(iso.nodeSelector).length === 0)
          expect(out.spec.nodeSelector).toEqual(original.spec.nodeSelector);

        // tolerations: the originals first, unchanged, then each missing mandated one exactly once.
        const origTols = Array.isArray(original.spec.tolerations) ? (original.spec.tolerations as Toleration[]) : [];
        const outTols = (out.spec.tolerations ?? []) as Toleration[];
        if (iso.tolerations.length > 0 || Array.isArray(original.spec.tolerations)) {
          expect(outTols.slice(0, origTols.length)).toEqual(origTols);
        }
        const appended = outTols.slice(origTols.length);
        const origKeys = new Set(origTols.map(tolerationKey));
        const expected = iso.tolerations.filter((t) => !origKeys.has(tolerationKey(t)));
        expect(appended).toEqual(expected);
        for (const t of iso.tolerations) expect(outTols.map(tolerationKey)).toContain(tolerationKey(t));

        // A second pass (reinvocation) changes nothing.
        expect(buildNodeIsolationPatch(out, iso)).toEqual([]);
      }),
      { numRuns: 500 },
    );
  }, 60_000);

  it('gives the Pod exactly what diffing with fast-json-patch compare gives it (the builder this one replaced)', () => {
    /** The former builder: the desired {nodeSelector, tolerations} diffed against the Pod's by `compare`. */
    function compareBuilder(pod: Json & { spec: Json }, iso: NodeIsolationSpec) {
      const original: Json = {};
      for (const f of ['nodeSelector', 'tolerations']) if (pod.spec[f] !== undefined) original[f] = pod.spec[f];
      const desired: Json = { ...original };
      const cur = original.nodeSelector;
      const isObj = typeof cur === 'object' && cur !== null && !Array.isArray(cur);
      const keys = Object.keys(iso.nodeSelector);
      if (
        keys.length > 0 &&
        !(isObj && keys.every((k) => Object.hasOwn(cur, k) && (cur as Json)[k] === iso.nodeSelector[k]))
      ) {
        desired.nodeSelector = isObj ? { ...(cur as Json), ...iso.nodeSelector } : { ...iso.nodeSelector };
      }
      const existing = Array.isArray(original.tolerations) ? (original.tolerations as Toleration[]) : [];
      const have = new Set(existing.filter((t) => typeof t === 'object' && t !== null).map(tolerationKey));
      const missing = iso.tolerations.filter((t) => !have.has(tolerationKey(t)));
      if (missing.length > 0) desired.tolerations = [...existing, ...missing];
      return jsonpatch.compare(original, desired).map((op) => ({ ...op, path: `/spec${op.path}` }));
    }
    fc.assert(
      fc.property(scenario, ({ iso, pod }) => {
        const ours = buildNodeIsolationPatch(pod, iso);
        const theirs = compareBuilder(pod, iso);
        expect(ours.length === 0).toBe(theirs.length === 0);
        const apply = (patch: typeof ours) =>
          jsonpatch.applyPatch(structuredClone(pod), patch, true, false).newDocument;
        expect(apply(ours)).toEqual(apply(theirs));
        expect(new Set(ours.map((op) => `${op.op} ${op.path}`))).toEqual(
          new Set(theirs.map((op) => `${op.op} ${op.path}`)),
        );
      }),
      { numRuns: 500 },
    );
  }, 60_000);
});
