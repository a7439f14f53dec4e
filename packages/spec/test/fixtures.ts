/**
 * Annotation inputs (after JSON.parse) the spec package's tests judge: the generated validators
 * against ajv at run time (generated-validators.test.ts), and the command-line tool's validate
 * against the parsers (packages/cli/test/validate.test.ts).
 */
const long = (c: string, n: number): string => c.repeat(n);

/** The inputs of parse-node-isolation.test.ts (after JSON.parse), and a few more edge cases. */
export const NODE_CASES: unknown[] = [
  {
    nodeSelector: { pool: 'team-a-pool' },
    tolerations: [{ key: 'dedicated', operator: 'Equal', value: 'team-a-pool', effect: 'NoSchedule' }],
  },
  { nodeSelector: { pool: 'a' } },
  { tolerations: [{ key: 'k', operator: 'Exists' }] },
  ...[null, 42, {}, [], '', ' ', 'x', [1], { nodeSelector: null }, { nodeSelector: {}, tolerations: [] }],
  { nodeSelector: { a: 'b' }, mode: 'dedicated' },
  { tolerations: [{ key: 'a', colour: 'red' }] },
  { nodeSelector: { 'bad key': 'x', 'a/b/c': 'y', '-lead': 'z', 'UPPER.example.com/x': 'w', [long('n', 64)]: 'v' } },
  { nodeSelector: { 'node.kubernetes.io/pool': long('v', 63), 'k8s.io/a_b.c-d': '' } },
  { nodeSelector: { pool: 'bad value!' } },
  { nodeSelector: { pool: long('v', 64) } },
  { nodeSelector: { pool: 3 } },
  {
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
  },
  { tolerations: [{ key: 'a', tolerationSeconds: 30 }] },
  {
    tolerations: [
      { operator: 'Exists' },
      { key: 'a', operator: 'Exists', effect: 'NoExecute', tolerationSeconds: -1 },
      { key: 'b', value: 'v' },
      { key: 'c', operator: 'Equal', value: '', effect: '' },
    ],
  },
  { nodeSelector: Object.fromEntries(Array.from({ length: 33 }, (_, i) => [`k${i}`, 'v'])) },
  { tolerations: Array.from({ length: 33 }, (_, i) => ({ key: `k${i}`, operator: 'Exists' })) },
  {
    nodeSelector: { z: '1', a: '2' },
    tolerations: [
      { key: 'd', value: 'p', effect: 'NoSchedule' },
      { effect: 'NoSchedule', value: 'p', key: 'd', operator: 'Equal' },
      { key: 'e', operator: 'Exists', value: '' },
    ],
  },
  // Beyond those tests: wrong container types, an emoji key (minLength counts code points), ~ and /.
  { nodeSelector: [], tolerations: {} },
  { nodeSelector: 'pool=a', tolerations: 'none' },
  { tolerations: [{ key: '😀', operator: 'Exists' }, { key: '', operator: 'Equal' }, { key: null }] },
  { nodeSelector: { 'a~b': 'x', 'example.com/a': 'x~y' } },
  { tolerations: [[], null, 'x', { tolerationSeconds: 'soon', effect: 'NoExecute', operator: 'Exists' }] },
];

/** The inputs of parse-sandbox-isolation.test.ts (after JSON.parse), and a few more. */
export const SANDBOX_CASES: unknown[] = [
  { minRuntimeClass: 'kata', enforce: true },
  { minRuntimeClass: 'runsc' },
  { minRuntimeClass: 'runc', enforce: false },
  { minRuntimeClass: 'gvisor', enforce: 'yes', mode: 1 },
  {},
  { enforce: false, minRuntimeClass: 'kata' },
  ...[null, 'kata', 1, [], [{ minRuntimeClass: 'kata' }], { minRuntimeClass: null, enforce: null }],
  { minRuntimeClass: 'runsc', runtimeClassName: 'gvisor' },
  { minRuntimeClass: 'kata', enforce: false, runtimeClassName: 'kata-qemu.example.com' },
  { minRuntimeClass: 'runsc', runtimeClassName: 'GVisor' },
  { minRuntimeClass: 'runsc', runtimeClassName: '' },
  { minRuntimeClass: 'runsc', runtimeClassName: 42 },
  { minRuntimeClass: 'runsc', runtimeClassName: long('a', 254) },
];
