/**
 * The annotation validators are ajv standalone code generated at build time
 * (codegen/generate-validators.ts → src/generated/validators.ts). These tests hold them to what
 * they replace: ajv compiling the same schemas at run time, with the options src/schemas.ts used
 * before, must give the same verdict, the same error objects and the same defaults on every
 * input; and loading the built package must not load ajv's compiler.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { isDeepStrictEqual } from 'node:util';
import { beforeAll, describe, expect, it } from '@jest/globals';
import { Ajv, type ValidateFunction } from 'ajv';
import ajvErrorsModule from 'ajv-errors';
import fc from 'fast-check';
import { generateValidatorsModule } from '../codegen/compiler.js';
import { formats } from '../src/formats.js';
import {
  type AnnotationValidator,
  nodeIsolationSchema,
  sandboxIsolationSchema,
  validateNodeIsolation,
  validateSandboxIsolation,
} from '../src/schemas.js';
import { NODE_CASES, SANDBOX_CASES } from './fixtures.js';

const PACKAGE = join(import.meta.dirname, '..');
const ROOT = join(PACKAGE, '../..');
const GENERATED = join(PACKAGE, 'src/generated/validators.ts');

/** ajv compiling at run time, configured as src/schemas.ts was before the validators were generated. */
function referenceValidators(): { node: ValidateFunction; sandbox: ValidateFunction } {
  const ajv = new Ajv({
    allErrors: true,
    useDefaults: true,
    strict: true,
    strictRequired: false,
    allowUnionTypes: true,
  });
  (ajvErrorsModule as unknown as (typeof ajvErrorsModule)['default'])(ajv);
  for (const [name, format] of Object.entries(formats)) ajv.addFormat(name, format);
  return { node: ajv.compile(nodeIsolationSchema), sandbox: ajv.compile(sandboxIsolationSchema) };
}
const reference = referenceValidators();

interface Outcome {
  valid: boolean;
  errors: unknown;
  /** The input after validation: `useDefaults` fills in defaults in place. */
  data: unknown;
}

function outcome(validate: AnnotationValidator | ValidateFunction, input: unknown): Outcome {
  const data = structuredClone(input);
  const valid = validate(data) as boolean;
  return { valid, errors: valid ? null : structuredClone(validate.errors), data };
}

/** Checks one input against both validators; returns the verdict. */
function agree(kind: 'node' | 'sandbox', input: unknown): boolean {
  const generated = outcome(kind === 'node' ? validateNodeIsolation : validateSandboxIsolation, input);
  const compiled = outcome(reference[kind], input);
  // jest's deep equality (with its diff) only on a mismatch: thousands of fuzzed inputs.
  if (!isDeepStrictEqual(generated, compiled)) expect({ input, ...generated }).toEqual({ input, ...compiled });
  return generated.valid;
}

const long = (c: string, n: number): string => c.repeat(n);

describe('src/generated/validators.ts', () => {
  it('is what the generator makes of the current schemas (else run make generate)', () => {
    expect(existsSync(GENERATED)).toBe(true);
    expect(readFileSync(GENERATED, 'utf8') === generateValidatorsModule()).toBe(true);
  });
});

describe('generated validators agree with ajv compiling the schemas at run time', () => {
  it('on the parse tests’ inputs: verdict, error objects, defaults', () => {
    const node = NODE_CASES.map((input) => agree('node', input));
    const sandbox = SANDBOX_CASES.map((input) => agree('sandbox', input));
    // Both verdicts occur, so agreement is not agreement on one answer.
    expect(new Set(node)).toEqual(new Set([true, false]));
    expect(new Set(sandbox)).toEqual(new Set([true, false]));
  });

  // Values near the schema: tolerations valid by construction and arbitrary ones, names, label
  // values, operators, effects and numbers mostly valid, missing fields, an occasional extra
  // field or wrong type, lists around the 32-entry caps.
  const mostly = <T>(valid: fc.Arbitrary<T>, invalid: fc.Arbitrary<unknown>, weight = 6) =>
    fc.oneof({ weight, arbitrary: valid as fc.Arbitrary<unknown> }, { weight: 1, arbitrary: invalid });
  const withExtraField = <T extends object>(value: fc.Arbitrary<T>, extra: Record<string, unknown>) =>
    mostly(
      value,
      value.map((v) => ({ ...v, ...extra })),
      12,
    );
  const validName = fc.constantFrom('a', 'pool', 'node.kubernetes.io/pool', 'k8s.io/a_b.c-d', long('n', 63));
  const qualifiedName = fc.oneof(
    { weight: 6, arbitrary: validName },
    { weight: 1, arbitrary: fc.constantFrom('', 'bad key', 'a/b/c', '-lead', 'UPPER.example.com/x', long('n', 64)) },
    { weight: 1, arbitrary: fc.string({ maxLength: 12 }) },
  );
  const validLabelValue = fc.constantFrom('', 'v', 'team-a-pool', long('v', 63), 'a.b_c-d');
  const labelValue = fc.oneof(
    { weight: 8, arbitrary: validLabelValue },
    { weight: 1, arbitrary: fc.constantFrom('bad value!', long('v', 64), '-x', 'x-') },
    { weight: 1, arbitrary: fc.string({ maxLength: 12 }) },
    { weight: 1, arbitrary: fc.anything({ maxDepth: 1 }) },
  );
  const effect = fc.constantFrom('', 'NoSchedule', 'PreferNoSchedule', 'NoExecute');
  const validToleration = fc.oneof(
    fc.record(
      { key: validName, operator: fc.constant('Equal'), value: validLabelValue, effect },
      { requiredKeys: ['key'] },
    ),
    fc.record({ key: validName, operator: fc.constant('Exists'), effect }, { requiredKeys: ['operator'] }),
    fc.record({ operator: fc.constant('Exists'), effect }, { requiredKeys: ['operator'] }),
    fc.record({
      key: validName,
      operator: fc.constant('Exists'),
      effect: fc.constant('NoExecute'),
      tolerationSeconds: fc.integer(),
    }),
  );
  const anyToleration = fc.record(
    {
      key: mostly(qualifiedName, fc.constantFrom(null, 3)),
      operator: mostly(fc.constantFrom('Exists', 'Equal'), fc.constantFrom('', 'In', null, 1)),
      value: labelValue,
      effect: mostly(effect, fc.constantFrom('Bogus', 5)),
      tolerationSeconds: mostly(fc.integer(), fc.oneof(fc.double(), fc.constant('30'))),
    },
    { requiredKeys: [] },
  );
  const toleration = fc.oneof(
    { weight: 6, arbitrary: withExtraField(validToleration, { colour: 'red' }) },
    { weight: 3, arbitrary: withExtraField(anyToleration, { colour: 'red' }) },
    { weight: 1, arbitrary: fc.anything({ maxDepth: 1 }) },
  );
  const nodeIsolation = mostly(
    withExtraField(
      fc.record(
        {
          nodeSelector: mostly(
            fc.dictionary(qualifiedName, labelValue, { maxKeys: 34 }),
            fc.anything({ maxDepth: 1 }),
            12,
          ),
          tolerations: mostly(fc.array(toleration, { maxLength: 34 }), fc.anything({ maxDepth: 1 }), 12),
        },
        { requiredKeys: [] },
      ),
      { mode: 'dedicated' },
    ),
    fc.anything(),
    12,
  );
  const sandboxIsolation = mostly(
    withExtraField(
      fc.record(
        {
          minRuntimeClass: mostly(fc.constantFrom('runc', 'runsc', 'kata'), fc.anything({ maxDepth: 0 })),
          enforce: mostly(fc.boolean(), fc.anything({ maxDepth: 0 })),
          runtimeClassName: mostly(
            fc.constantFrom('gvisor', 'kata-qemu', 'a.b-c', 'GVisor', '', '-x', 'x.', 'a'.repeat(254)),
            fc.anything({ maxDepth: 0 }),
          ),
        },
        { requiredKeys: [] },
      ),
      { mode: 1 },
    ),
    fc.anything(),
    12,
  );

  it('on fuzzed node-isolation values', () => {
    const verdicts = new Set<boolean>();
    fc.assert(
      fc.property(nodeIsolation, (input) => void verdicts.add(agree('node', input))),
      { numRuns: 1_000 },
    );
    expect(verdicts).toEqual(new Set([true, false]));
  });

  it('on fuzzed sandbox-isolation values', () => {
    const verdicts = new Set<boolean>();
    fc.assert(
      fc.property(sandboxIsolation, (input) => void verdicts.add(agree('sandbox', input))),
      {
        numRuns: 1_000,
      },
    );
    expect(verdicts).toEqual(new Set([true, false]));
  });
});

/**
 * The built package (dist/), loaded by a fresh Node.js process that validates a valid and an
 * invalid annotation of each kind: a resolve hook records every module it loads, ES module or
 * CommonJS. It must load the generated code and ajv's small runtime helper, and nothing of ajv's
 * compiler (ajv/dist/ajv.js, core.js, compile/, vocabularies/) or of ajv-errors.
 */
describe('the built package at run time', () => {
  beforeAll(() => {
    if (!existsSync(GENERATED)) throw new Error(`${GENERATED} is missing: run make generate (make build does)`);
    execFileSync(join(ROOT, 'node_modules/.bin/tsc'), ['-b', 'packages/spec'], { cwd: ROOT, stdio: 'pipe' });
  }, 120_000);

  it('loads the generated validators and no part of ajv’s compiler', () => {
    const dir = mkdtempSync(join(tmpdir(), 'spec-graph-'));
    const hook = join(dir, 'record-modules.mjs');
    const list = join(dir, 'modules.txt');
    writeFileSync(
      hook,
      [
        "import { writeFileSync } from 'node:fs';",
        "import { registerHooks } from 'node:module';",
        'const seen = new Set();',
        'registerHooks({ resolve(specifier, context, next) { const r = next(specifier, context); seen.add(r.url); return r; } });',
        "process.on('exit', () => writeFileSync(process.env.MODULE_LIST_FILE, [...seen].join('\\n')));",
      ].join('\n'),
    );
    const script = [
      `const spec = await import(${JSON.stringify(join(PACKAGE, 'dist/index.js'))});`,
      'const results = [',
      `  spec.parseNodeIsolation('{"nodeSelector":{"pool":"a"}}'),`,
      `  spec.parseNodeIsolation('{"tolerations":[{"value":"bad value!","tolerationSeconds":1}]}'),`,
      `  spec.parseSandboxIsolation('{"minRuntimeClass":"kata"}'),`,
      `  spec.parseSandboxIsolation('{"minRuntimeClass":"gvisor"}'),`,
      '];',
      'process.stdout.write(JSON.stringify(results.map((r) => r.ok)));',
    ].join('\n');
    const stdout = execFileSync(process.execPath, ['--import', hook, '--input-type=module', '-e', script], {
      cwd: dir,
      env: { ...process.env, MODULE_LIST_FILE: list, NODE_OPTIONS: '' },
      encoding: 'utf8',
    });
    expect(JSON.parse(stdout)).toEqual([true, false, true, false]);

    const modules = readFileSync(list, 'utf8').split('\n');
    expect(modules).toContainEqual(expect.stringMatching(/\/packages\/spec\/dist\/generated\/validators\.js$/));
    expect(modules).toContainEqual(expect.stringMatching(/\/ajv\/dist\/runtime\/ucs2length\.js$/));
    expect(modules.filter((m) => /\/ajv\/dist\/(ajv|core)\.js$|\/ajv\/dist\/(compile|vocabularies)\//.test(m))).toEqual(
      [],
    );
    expect(modules.filter((m) => /\/ajv-errors\//.test(m))).toEqual([]);
  });
});
