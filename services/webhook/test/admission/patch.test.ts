import { describe, expect, it } from '@jest/globals';
import type { NodeIsolationSpec, Toleration } from '@kubeplus-isolation/spec';
import jsonpatch, { type Operation } from 'fast-json-patch';
import { buildNodeIsolationPatch } from '../../src/admission/patch.js';
import { patchProblem } from '../../src/admission/patch-check.js';
import { pod, TEAM_A } from '../helpers/fixtures.js';
import { seedGoPatch } from '../helpers/seed-go-patch.js';

type Pod = Record<string, unknown> & { spec: Record<string, unknown> };

/** Applies like the API server: on a copy, every operation validated, throwing on any failure. */
function apply(p: Record<string, unknown>, ops: readonly Operation[]): Pod {
  return jsonpatch.applyPatch(structuredClone(p), [...ops], true, false).newDocument as Pod;
}

const DEDICATED = TEAM_A.tolerations[0] as Toleration;

interface Case {
  name: string;
  spec: Record<string, unknown>;
  iso: NodeIsolationSpec;
  ops: Operation[];
  nodeSelector: unknown;
  tolerations: unknown;
}

const cases: Case[] = [
  {
    name: 'seed example: chart declares neither field → both added whole',
    spec: {},
    iso: TEAM_A,
    ops: [
      { op: 'add', path: '/spec/nodeSelector', value: { pool: 'team-a-pool' } },
      { op: 'add', path: '/spec/tolerations', value: [DEDICATED] },
    ],
    nodeSelector: { pool: 'team-a-pool' },
    tolerations: [DEDICATED],
  },
  {
    name: "seed example: chart's own selector and tolerations are kept, mandate merged in",
    spec: {
      nodeSelector: { 'kubernetes.io/arch': 'amd64' },
      tolerations: [{ key: 'gpu', operator: 'Exists', effect: 'NoSchedule' }],
    },
    iso: TEAM_A,
    ops: [
      { op: 'add', path: '/spec/nodeSelector/pool', value: 'team-a-pool' },
      { op: 'add', path: '/spec/tolerations/1', value: DEDICATED },
    ],
    nodeSelector: { 'kubernetes.io/arch': 'amd64', pool: 'team-a-pool' },
    tolerations: [{ key: 'gpu', operator: 'Exists', effect: 'NoSchedule' }, DEDICATED],
  },
  {
    name: 'seed example: conflicting selector key → isolation wins, other keys stay',
    spec: { nodeSelector: { pool: 'shared-pool', disk: 'ssd' } },
    iso: TEAM_A,
    ops: [
      { op: 'replace', path: '/spec/nodeSelector/pool', value: 'team-a-pool' },
      { op: 'add', path: '/spec/tolerations', value: [DEDICATED] },
    ],
    nodeSelector: { pool: 'team-a-pool', disk: 'ssd' },
    tolerations: [DEDICATED],
  },
  {
    name: 'already compliant Pod → empty patch',
    spec: { nodeSelector: { pool: 'team-a-pool' }, tolerations: [DEDICATED] },
    iso: TEAM_A,
    ops: [],
    nodeSelector: { pool: 'team-a-pool' },
    tolerations: [DEDICATED],
  },
  {
    name: 'toleration already present in another spelling (operator omitted) → not added again',
    spec: { tolerations: [{ key: 'dedicated', value: 'team-a-pool', effect: 'NoSchedule' }] },
    iso: TEAM_A,
    ops: [{ op: 'add', path: '/spec/nodeSelector', value: { pool: 'team-a-pool' } }],
    nodeSelector: { pool: 'team-a-pool' },
    tolerations: [{ key: 'dedicated', value: 'team-a-pool', effect: 'NoSchedule' }],
  },
  {
    name: 'same key but a different effect is a different toleration → added',
    spec: { tolerations: [{ key: 'dedicated', operator: 'Equal', value: 'team-a-pool', effect: 'NoExecute' }] },
    iso: { nodeSelector: {}, tolerations: [DEDICATED] },
    ops: [{ op: 'add', path: '/spec/tolerations/1', value: DEDICATED }],
    nodeSelector: undefined,
    tolerations: [{ key: 'dedicated', operator: 'Equal', value: 'team-a-pool', effect: 'NoExecute' }, DEDICATED],
  },
  {
    name: 'nodeSelector null → replaced by the mandate',
    spec: { nodeSelector: null, tolerations: [DEDICATED] },
    iso: TEAM_A,
    ops: [{ op: 'replace', path: '/spec/nodeSelector', value: { pool: 'team-a-pool' } }],
    nodeSelector: { pool: 'team-a-pool' },
    tolerations: [DEDICATED],
  },
  {
    name: 'nodeSelector empty object → key added into it',
    spec: { nodeSelector: {}, tolerations: [DEDICATED] },
    iso: TEAM_A,
    ops: [{ op: 'add', path: '/spec/nodeSelector/pool', value: 'team-a-pool' }],
    nodeSelector: { pool: 'team-a-pool' },
    tolerations: [DEDICATED],
  },
  {
    name: 'tolerations null → replaced by the mandated list',
    spec: { nodeSelector: { pool: 'team-a-pool' }, tolerations: null },
    iso: TEAM_A,
    ops: [{ op: 'replace', path: '/spec/tolerations', value: [DEDICATED] }],
    nodeSelector: { pool: 'team-a-pool' },
    tolerations: [DEDICATED],
  },
  {
    name: 'tolerations empty list → appended at index 0',
    spec: { nodeSelector: { pool: 'team-a-pool' }, tolerations: [] },
    iso: TEAM_A,
    ops: [{ op: 'add', path: '/spec/tolerations/0', value: DEDICATED }],
    nodeSelector: { pool: 'team-a-pool' },
    tolerations: [DEDICATED],
  },
  {
    name: 'selector keys with "/" and "~" are escaped as RFC 6901 requires (~1 and ~0)',
    spec: { nodeSelector: { 'a~b/c': 'x' } },
    iso: { nodeSelector: { 'node.kubernetes.io/pool': 'p', 'we~ird': 'q' }, tolerations: [] },
    ops: [
      { op: 'add', path: '/spec/nodeSelector/node.kubernetes.io~1pool', value: 'p' },
      { op: 'add', path: '/spec/nodeSelector/we~0ird', value: 'q' },
    ],
    nodeSelector: { 'a~b/c': 'x', 'node.kubernetes.io/pool': 'p', 'we~ird': 'q' },
    tolerations: undefined,
  },
  {
    name: 'mandate of tolerations only leaves an absent nodeSelector absent',
    spec: {},
    iso: { nodeSelector: {}, tolerations: [DEDICATED] },
    ops: [{ op: 'add', path: '/spec/tolerations', value: [DEDICATED] }],
    nodeSelector: undefined,
    tolerations: [DEDICATED],
  },
  {
    name: 'malformed nodeSelector (a list) → replaced by the mandate rather than crashing',
    spec: { nodeSelector: ['pool'] },
    iso: { nodeSelector: { pool: 'team-a-pool' }, tolerations: [] },
    ops: [{ op: 'replace', path: '/spec/nodeSelector', value: { pool: 'team-a-pool' } }],
    nodeSelector: { pool: 'team-a-pool' },
    tolerations: undefined,
  },
];

describe('buildNodeIsolationPatch (table)', () => {
  it.each(cases)('$name', ({ spec, iso, ops, nodeSelector, tolerations }) => {
    const input = pod(spec);
    const patch = buildNodeIsolationPatch(input, iso);
    // Operations on different fields are independent: their order is not part of the contract.
    expect(patch).toHaveLength(ops.length);
    expect(patch).toEqual(expect.arrayContaining(ops));
    const out = apply(input, patch);
    expect(out.spec.nodeSelector).toEqual(nodeSelector);
    expect(out.spec.tolerations).toEqual(tolerations);
    expect(out.spec.containers).toEqual((input.spec as Pod['spec']).containers);
    expect(buildNodeIsolationPatch(out, iso)).toEqual([]);
  });

  it('does not modify the Pod it is given', () => {
    const input = pod({ nodeSelector: { disk: 'ssd' }, tolerations: [] });
    const before = structuredClone(input);
    buildNodeIsolationPatch(input, TEAM_A);
    expect(input).toEqual(before);
  });

  it('a Pod without an object spec yields no operations instead of throwing', () => {
    expect(buildNodeIsolationPatch({ metadata: { name: 'x' } }, TEAM_A)).toEqual([]);
    expect(buildNodeIsolationPatch({ spec: null }, TEAM_A)).toEqual([]);
    expect(buildNodeIsolationPatch('not a pod', TEAM_A)).toEqual([]);
  });

  it('gives each mandate its own answer when the same mandate objects are used Pod after Pod', () => {
    const other: NodeIsolationSpec = {
      nodeSelector: { pool: 'team-b-pool' },
      tolerations: [{ key: 'dedicated', operator: 'Equal', value: 'team-b-pool', effect: 'NoSchedule' }],
    };
    for (let i = 0; i < 3; i++) {
      for (const iso of [TEAM_A, other]) {
        const p = pod({ tolerations: [...(i === 2 ? iso.tolerations : [])] });
        const ops = buildNodeIsolationPatch(p, iso);
        expect(ops.filter((op) => op.path.startsWith('/spec/tolerations'))).toEqual(
          i === 2 ? [] : [{ op: 'add', path: '/spec/tolerations/0', value: iso.tolerations[0] }],
        );
      }
    }
  });

  it('keeps the Pod own duplicate tolerations as they are and adds only what is missing', () => {
    const gpu = { key: 'gpu', operator: 'Exists' as const };
    const out = apply(
      pod({ tolerations: [gpu, gpu] }),
      buildNodeIsolationPatch(pod({ tolerations: [gpu, gpu] }), TEAM_A),
    );
    expect(out.spec.tolerations).toEqual([gpu, gpu, DEDICATED]);
  });
});

describe('seed flaws: the Go snippet in the design document, and how this builder differs', () => {
  it('seed flaw: on reinvocation it appends the mandated tolerations a second time', () => {
    const once = apply(pod(), seedGoPatch(pod() as Pod, TEAM_A));
    const twice = apply(once, seedGoPatch(once, TEAM_A));
    expect(twice.spec.tolerations).toEqual([DEDICATED, DEDICATED]);

    const ours = apply(pod(), buildNodeIsolationPatch(pod(), TEAM_A));
    expect(buildNodeIsolationPatch(ours, TEAM_A)).toEqual([]);
    expect(ours.spec.tolerations).toEqual([DEDICATED]);
  });

  it('seed flaw: it appends a toleration the chart already declares (same toleration, operator left implicit)', () => {
    const chart = pod({ tolerations: [{ key: 'dedicated', value: 'team-a-pool', effect: 'NoSchedule' }] }) as Pod;
    expect(apply(chart, seedGoPatch(chart, TEAM_A)).spec.tolerations).toHaveLength(2);
    expect(apply(chart, buildNodeIsolationPatch(chart, TEAM_A)).spec.tolerations).toHaveLength(1);
  });

  it('seed flaw: an already compliant Pod still gets a non-empty patch, so every admission looks like a mutation', () => {
    const compliant = pod({ nodeSelector: { pool: 'team-a-pool' }, tolerations: [DEDICATED] }) as Pod;
    expect(seedGoPatch(compliant, TEAM_A).length).toBeGreaterThan(0);
    expect(buildNodeIsolationPatch(compliant, TEAM_A)).toEqual([]);
  });

  it('seed flaw: per-entry "/spec/tolerations/-" appends presuppose an array; on a null field they do not apply', () => {
    const nullTolerations = pod({ tolerations: null });
    expect(() => apply(nullTolerations, [{ op: 'add', path: '/spec/tolerations/-', value: DEDICATED }])).toThrow();
    const ours = buildNodeIsolationPatch(nullTolerations, TEAM_A);
    expect(apply(nullTolerations, ours).spec.tolerations).toEqual([DEDICATED]);
  });

  it('seed flaw: "replace" of the whole selector requires the field to exist; the diff picks add/replace per member from the object itself', () => {
    // A hand-built replace on an absent field is what deciding by len() risks when the view
    // the decision is made on and the JSON the patch is applied to disagree.
    expect(() =>
      apply(pod(), [{ op: 'replace', path: '/spec/nodeSelector', value: { pool: 'team-a-pool' } }]),
    ).toThrow();
    for (const nodeSelector of [undefined, null, {}, { disk: 'ssd' }]) {
      const p = pod(nodeSelector === undefined ? {} : { nodeSelector });
      expect(patchProblem(p, buildNodeIsolationPatch(p, TEAM_A))).toBeUndefined();
    }
  });
});

describe('mandated tolerations the Pod already has, spelled differently', () => {
  it('an empty key is the absent key; operator Equal is the implicit one; value "" is no value', () => {
    const everything: NodeIsolationSpec = { nodeSelector: {}, tolerations: [{ operator: 'Exists' }] };
    expect(buildNodeIsolationPatch(pod({ tolerations: [{ key: '', operator: 'Exists' }] }), everything)).toEqual([]);
    const respelled = { key: 'dedicated', value: 'team-a-pool', effect: 'NoSchedule' };
    expect(
      buildNodeIsolationPatch(pod({ nodeSelector: TEAM_A.nodeSelector, tolerations: [respelled] }), TEAM_A),
    ).toEqual([]);
    expect(
      buildNodeIsolationPatch(pod({ nodeSelector: TEAM_A.nodeSelector, tolerations: [{ key: 7 }, 'x', null] }), TEAM_A),
    ).toEqual([{ op: 'add', path: '/spec/tolerations/3', value: DEDICATED }]);
  });
});
