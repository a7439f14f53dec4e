import { describe, expect, it } from '@jest/globals';
import { canonicalNodeIsolation, MAX_ANNOTATION_LENGTH, parseNodeIsolation } from '../src/index.js';

// The design document's own annotation (seed 000, "Annotation on the instance").
const SEED = `{
  "nodeSelector": {"pool": "team-a-pool"},
  "tolerations": [
    {"key": "dedicated", "operator": "Equal", "value": "team-a-pool", "effect": "NoSchedule"}
  ]
}`;

function errorsOf(text: unknown): string[] {
  const r = parseNodeIsolation(text);
  if (r.ok) throw new Error(`expected errors, got ${JSON.stringify(r.value)}`);
  return r.errors;
}

describe('parseNodeIsolation', () => {
  it("accepts the design document's example", () => {
    expect(parseNodeIsolation(SEED)).toEqual({
      ok: true,
      value: {
        nodeSelector: { pool: 'team-a-pool' },
        tolerations: [{ key: 'dedicated', operator: 'Equal', value: 'team-a-pool', effect: 'NoSchedule' }],
      },
    });
  });

  it('accepts nodeSelector alone and tolerations alone', () => {
    expect(parseNodeIsolation('{"nodeSelector":{"pool":"a"}}')).toEqual({
      ok: true,
      value: { nodeSelector: { pool: 'a' }, tolerations: [] },
    });
    expect(parseNodeIsolation('{"tolerations":[{"key":"k","operator":"Exists"}]}')).toEqual({
      ok: true,
      value: { nodeSelector: {}, tolerations: [{ key: 'k', operator: 'Exists' }] },
    });
  });

  it('never throws, whatever the input', () => {
    for (const input of [undefined, null, 42, {}, [], '', ' ', 'null', '[]', '"x"', '{', '{"nodeSelector":null}']) {
      expect(() => parseNodeIsolation(input)).not.toThrow();
      expect(parseNodeIsolation(input).ok).toBe(false);
    }
  });

  it('rejects non-string input, non-JSON and non-objects with a message', () => {
    expect(errorsOf(undefined)).toEqual(['annotation value must be a string']);
    expect(errorsOf('{nope')[0]).toMatch(/^not valid JSON: /);
    expect(errorsOf('[1]')).toEqual(['must be a JSON object with nodeSelector and/or tolerations']);
  });

  it('rejects a spec that mandates nothing', () => {
    expect(errorsOf('{}')).toEqual(['must mandate at least one nodeSelector entry or one toleration']);
    expect(errorsOf('{"nodeSelector":{},"tolerations":[]}')).toEqual([
      'must mandate at least one nodeSelector entry or one toleration',
    ]);
  });

  it('rejects unknown fields', () => {
    expect(errorsOf('{"nodeSelector":{"a":"b"},"mode":"dedicated"}')).toEqual([
      'only nodeSelector and tolerations are allowed',
    ]);
    expect(errorsOf('{"tolerations":[{"key":"a","colour":"red"}]}')).toContain(
      'tolerations[0] must NOT have additional properties',
    );
  });

  it('checks nodeSelector keys as Kubernetes qualified names, one message per bad key', () => {
    const errors = errorsOf(
      JSON.stringify({
        nodeSelector: { 'bad key': 'x', 'a/b/c': 'y', '-lead': 'z', 'UPPER.example.com/x': 'w', ['n'.repeat(64)]: 'v' },
      }),
    );
    expect(errors).toHaveLength(5);
    expect(errors[0]).toMatch(/^nodeSelector\["bad key"\] key must be a qualified name/);
    expect(errors.some((e) => e.startsWith('nodeSelector["a/b/c"] key must be'))).toBe(true);
    expect(errors.some((e) => e.startsWith('nodeSelector["UPPER.example.com/x"] key must be'))).toBe(true);
  });

  it('accepts prefixed keys and values at the length limit', () => {
    const r = parseNodeIsolation(
      JSON.stringify({ nodeSelector: { 'node.kubernetes.io/pool': 'v'.repeat(63), 'k8s.io/a_b.c-d': '' } }),
    );
    expect(r.ok).toBe(true);
  });

  it('checks nodeSelector values as label values', () => {
    expect(errorsOf('{"nodeSelector":{"pool":"bad value!"}}')).toEqual([
      "nodeSelector.pool must be a label value: empty, or at most 63 characters of letters, digits, '-', '_' or '.', starting and ending with a letter or digit",
    ]);
    expect(errorsOf(JSON.stringify({ nodeSelector: { pool: 'v'.repeat(64) } }))[0]).toMatch(
      /^nodeSelector.pool must be/,
    );
    expect(errorsOf('{"nodeSelector":{"pool":3}}')[0]).toMatch(/^nodeSelector.pool must be a label value/);
  });

  it("applies Kubernetes' toleration rules with JSON paths", () => {
    const errors = errorsOf(
      JSON.stringify({
        tolerations: [
          { key: 'a', operator: 'Exists', value: 'x' },
          { key: 'a', effect: 'Bogus' },
          { key: 'a', effect: 'NoSchedule', tolerationSeconds: 5 },
          { value: 'v' },
          { key: 'a', operator: 'In' },
          { key: 'bad key' },
          { key: 'a', value: 'bad value!' },
          { key: 'a', tolerationSeconds: 1.5, effect: 'NoExecute' },
          7,
        ],
      }),
    );
    expect(errors).toEqual([
      'tolerations[0].value must be empty when operator is Exists',
      'tolerations[1].effect must be one of NoSchedule, PreferNoSchedule, NoExecute (or empty for all effects)',
      'tolerations[2].effect must be NoExecute when tolerationSeconds is set',
      'tolerations[3] operator must be Exists when key is empty (such a toleration matches every taint)',
      'tolerations[4].operator must be one of Exists, Equal (empty means Equal)',
      expect.stringMatching(/^tolerations\[5\].key must be empty or a qualified name/),
      expect.stringMatching(/^tolerations\[6\].value must be a label value/),
      'tolerations[7].tolerationSeconds must be an integer number of seconds',
      'tolerations[8] must be an object',
    ]);
  });

  it('reports tolerationSeconds without any effect', () => {
    expect(errorsOf('{"tolerations":[{"key":"a","tolerationSeconds":30}]}')).toEqual([
      'tolerations[0] effect must be NoExecute when tolerationSeconds is set',
    ]);
  });

  it('accepts the toleration shapes Kubernetes accepts', () => {
    const r = parseNodeIsolation(
      JSON.stringify({
        tolerations: [
          { operator: 'Exists' },
          { key: 'a', operator: 'Exists', effect: 'NoExecute', tolerationSeconds: -1 },
          { key: 'b', value: 'v' },
          { key: 'c', operator: 'Equal', value: '', effect: '' },
        ],
      }),
    );
    expect(r).toEqual({
      ok: true,
      value: {
        nodeSelector: {},
        tolerations: [
          { operator: 'Exists' },
          { key: 'a', operator: 'Exists', effect: 'NoExecute', tolerationSeconds: -1 },
          { key: 'b', operator: 'Equal', value: 'v' },
          { key: 'c', operator: 'Equal' },
        ],
      },
    });
  });

  it('caps the size of the annotation and of each list', () => {
    expect(errorsOf(`{"nodeSelector":{"a":"${'b'.repeat(MAX_ANNOTATION_LENGTH)}"}}`)[0]).toMatch(
      /^annotation value is \d+ characters; at most 16384 are allowed$/,
    );
    const many: Record<string, string> = {};
    for (let i = 0; i < 33; i++) many[`k${i}`] = 'v';
    expect(errorsOf(JSON.stringify({ nodeSelector: many }))).toEqual(['nodeSelector must have at most 32 entries']);
    const tols = Array.from({ length: 33 }, (_, i) => ({ key: `k${i}`, operator: 'Exists' }));
    expect(errorsOf(JSON.stringify({ tolerations: tols }))).toEqual(['tolerations must have at most 32 entries']);
  });

  it('normalizes: sorted nodeSelector, explicit operator, semantic duplicates dropped', () => {
    const r = parseNodeIsolation(
      JSON.stringify({
        nodeSelector: { z: '1', a: '2' },
        tolerations: [
          { key: 'd', value: 'p', effect: 'NoSchedule' },
          { effect: 'NoSchedule', value: 'p', key: 'd', operator: 'Equal' },
          { key: 'e', operator: 'Exists', value: '' },
        ],
      }),
    );
    expect(r.ok && Object.keys(r.value.nodeSelector)).toEqual(['a', 'z']);
    expect(r.ok && r.value.tolerations).toEqual([
      { key: 'd', operator: 'Equal', value: 'p', effect: 'NoSchedule' },
      { key: 'e', operator: 'Exists' },
    ]);
  });
});

describe('canonicalNodeIsolation', () => {
  it('serializes equal specs to identical bytes whatever the input order', () => {
    const a = parseNodeIsolation(
      '{"nodeSelector":{"b":"2","a":"1"},"tolerations":[{"effect":"NoSchedule","key":"k","value":"v"}]}',
    );
    const b = parseNodeIsolation(
      '{"tolerations":[{"key":"k","operator":"Equal","value":"v","effect":"NoSchedule"}],"nodeSelector":{"a":"1","b":"2"}}',
    );
    if (!a.ok || !b.ok) throw new Error('fixtures must parse');
    expect(canonicalNodeIsolation(a.value)).toBe(canonicalNodeIsolation(b.value));
    expect(canonicalNodeIsolation(a.value)).toBe(
      '{"nodeSelector":{"a":"1","b":"2"},"tolerations":[{"key":"k","operator":"Equal","value":"v","effect":"NoSchedule"}]}',
    );
  });

  it('is a fixed point of parse', () => {
    const first = parseNodeIsolation(SEED);
    if (!first.ok) throw new Error('seed must parse');
    const text = canonicalNodeIsolation(first.value);
    const again = parseNodeIsolation(text);
    expect(again).toEqual(first);
    if (again.ok) expect(canonicalNodeIsolation(again.value)).toBe(text);
  });
});
