import { describe, expect, it } from '@jest/globals';
import type { Toleration } from '@kubeplus-isolation/spec';
import jsonpatch, { type Operation } from 'fast-json-patch';
import { buildNodeIsolationPatch } from '../../src/admission/patch.js';
import { patchProblem } from '../../src/admission/patch-check.js';
import { pod, TEAM_A } from '../helpers/fixtures.js';

const DEDICATED = TEAM_A.tolerations[0] as Toleration;

describe('patchProblem', () => {
  it('reports a patch that would not apply to the Pod', () => {
    const problem = patchProblem(pod(), [{ op: 'replace', path: '/spec/tolerations/3', value: DEDICATED }]);
    expect(problem).toMatch(/OPERATION_PATH_UNRESOLVABLE/);
  });

  it('accepts an empty patch and a patch that applies', () => {
    expect(patchProblem(pod(), [])).toBeUndefined();
    expect(patchProblem(pod(), buildNodeIsolationPatch(pod(), TEAM_A))).toBeUndefined();
  });

  it('agrees with fast-json-patch validate on a deep copy, for the shapes the builder meets and for odd patches', () => {
    const OTHER = { key: 'x', operator: 'Exists', effect: 'NoExecute' };
    const pods = [
      pod(),
      pod({ nodeSelector: null, tolerations: null }),
      pod({ nodeSelector: { disk: 'ssd', pool: 'other' }, tolerations: [OTHER] }),
      pod({ nodeSelector: 'not-a-map', tolerations: { not: 'a list' } }),
      { spec: 'not-an-object' },
      null,
    ];
    const patches: Operation[][] = [
      [{ op: 'add', path: '/spec/tolerations/-', value: DEDICATED }],
      [{ op: 'add', path: '/spec/tolerations/1', value: DEDICATED }],
      [{ op: 'add', path: '/spec/tolerations/2', value: DEDICATED }],
      [{ op: 'replace', path: '/spec/nodeSelector/pool', value: 'team-a-pool' }],
      [{ op: 'remove', path: '/spec/nodeSelector/disk' }],
      [{ op: 'test', path: '/spec/nodeSelector/disk', value: 'ssd' }],
      [{ op: 'replace', path: '/spec/tolerations/0/key', value: 'y' }],
      [{ op: 'copy', from: '/spec/tolerations/0', path: '/spec/tolerations/-' }],
      [
        { op: 'add', path: '/spec/nodeSelector/a', value: 'b' },
        { op: 'remove', path: '/spec/nodeSelector/a' },
      ],
      // Shapes the structural proof takes, and near misses it must leave to fast-json-patch.
      [{ op: 'add', path: '/spec/tolerations/0', value: DEDICATED }],
      [{ op: 'add', path: '/spec/tolerations/01', value: DEDICATED }],
      [{ op: 'replace', path: '/spec/tolerations/0', value: DEDICATED }],
      [{ op: 'add', path: '/spec/nodeSelector/a~1b~0c', value: 'v' }],
      [{ op: 'replace', path: '/spec/nodeSelector/a~1b', value: 'v' }],
      [{ op: 'add', path: '/spec/nodeSelector/a~2b', value: 'v' }],
      [{ op: 'add', path: '/spec/nodeSelector/x/y', value: 'v' }],
      [{ op: 'add', path: '/spec/nodeSelector/', value: 'v' }],
      [{ op: 'replace', path: '/spec/nodeSelector', value: { pool: 'p' } }],
      [{ op: 'replace', path: '/spec/tolerations', value: [DEDICATED] }],
      [{ op: 'add', path: '/spec/containers/0', value: {} }],
      [{ op: 'add', path: '/spec/nodeSelectorX', value: {} }],
      [{ op: 'add', path: '/spec/tolerationsX/0', value: DEDICATED }],
      [{ op: 'add', path: '/spec/nodeSelector~1pool', value: 'v' }],
      [{ op: 'add', path: '/spec/nodeSelector/a', value: undefined }],
      [{ op: 'add', path: '/spec/nodeSelector', value: { a: undefined } }],
      [
        { op: 'add', path: '/spec/tolerations', value: [] },
        { op: 'add', path: '/spec/tolerations/0', value: DEDICATED },
        { op: 'add', path: '/spec/tolerations/1', value: DEDICATED },
      ],
      [
        { op: 'add', path: '/spec/nodeSelector', value: {} },
        { op: 'add', path: '/spec/nodeSelector/k', value: 'v' },
        { op: 'replace', path: '/spec/nodeSelector/k', value: 'w' },
      ],
      [
        { op: 'add', path: '/spec/nodeSelector', value: 'x' },
        { op: 'add', path: '/spec/nodeSelector/k', value: 'v' },
      ],
    ];
    const reference = (p: unknown, patch: Operation[]) => {
      const spec =
        typeof p === 'object' && p !== null && typeof (p as { spec?: unknown }).spec === 'object'
          ? (p as { spec: Record<string, unknown> }).spec
          : undefined;
      const owned =
        spec === undefined
          ? undefined
          : Object.fromEntries(Object.entries(spec).filter(([k]) => k === 'nodeSelector' || k === 'tolerations'));
      const error = jsonpatch.validate(patch, owned === undefined ? {} : { spec: owned });
      return error === undefined ? undefined : `${error.name}: ${error.message.split('\n', 1)[0]}`;
    };
    for (const p of [...pods, ...pods.map((x) => (x === null ? x : buildNodeIsolationPatch(x, TEAM_A) && x))]) {
      for (const patch of [...patches, buildNodeIsolationPatch(p, TEAM_A)]) {
        const before = JSON.stringify(p);
        expect(patchProblem(p, patch)).toEqual(reference(p, patch));
        // Checking never changes the Pod (the patch is applied to copies).
        expect(JSON.stringify(p)).toBe(before);
      }
    }
  });
});
