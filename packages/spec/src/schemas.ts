/**
 * The annotation validators: the schemas of annotation-schemas.ts compiled to plain functions at
 * build time (codegen/generate-validators.ts writes src/generated/validators.ts; see README.md),
 * and the messages their errors become. Importing this module loads no part of ajv's compiler,
 * only the generated code and the one small ajv runtime helper it calls.
 */
import type { ErrorObject } from 'ajv';
import * as generated from './generated/validators.js';
import { QUALIFIED_NAME_RULE } from './k8s-validation.js';

export * from './annotation-schemas.js';

/**
 * A generated validator: true if `data` is valid (filling in defaults, e.g. `enforce: true`);
 * otherwise false, with the reasons in `errors` (ajv's error objects, with ajv-errors' messages).
 */
export interface AnnotationValidator {
  (data: unknown): boolean;
  errors?: ErrorObject[] | null;
}

export const validateNodeIsolation: AnnotationValidator = generated.validateNodeIsolation;
export const validateSandboxIsolation: AnnotationValidator = generated.validateSandboxIsolation;

/** `/tolerations/0/effect` → `tolerations[0].effect`; `/nodeSelector/a~1b` → `nodeSelector["a/b"]`. */
export function jsonPathOf(instancePath: string): string {
  if (instancePath === '') return '';
  let out = '';
  for (const raw of instancePath.slice(1).split('/')) {
    const seg = raw.replace(/~1/g, '/').replace(/~0/g, '~');
    if (/^\d+$/.test(seg)) out += `[${seg}]`;
    else if (/^[A-Za-z_$][\w$]*$/.test(seg)) out += out === '' ? seg : `.${seg}`;
    else out += `[${JSON.stringify(seg)}]`;
  }
  return out;
}

/** Human-readable, de-duplicated messages, each led by the JSON path it concerns. */
export function formatErrors(errors: readonly ErrorObject[] | null | undefined): string[] {
  const out: string[] = [];
  for (const e of errors ?? []) {
    // `if` only says "must match then schema" and `propertyNames` only "property name is
    // invalid": the errors beside them carry the real message.
    if (e.keyword === 'if' || e.keyword === 'propertyNames') continue;
    const base = jsonPathOf(e.instancePath);
    const badKey = (e as ErrorObject & { propertyName?: string }).propertyName;
    const line =
      badKey !== undefined
        ? `${base}[${JSON.stringify(badKey)}] key must be ${QUALIFIED_NAME_RULE}`
        : base === ''
          ? (e.message ?? 'is invalid')
          : `${base} ${e.message ?? 'is invalid'}`;
    if (!out.includes(line)) out.push(line);
  }
  return out;
}
