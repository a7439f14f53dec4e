/**
 * A small emulation of how kube-apiserver evaluates the generated policies (variables in order,
 * then validations; matchConditions with their false-wins semantics; JSONPatch mutations),
 * using a real CEL evaluator. The API server itself is exercised by the e2e suite.
 */
import { evaluate } from '@marcbachmann/cel-js';
import jsonpatch, { type Operation } from 'fast-json-patch';
import type { ManagedObject } from '../../src/desired/objects.js';

export type Operation_ = 'CREATE' | 'UPDATE';

export interface AdmissionRequest {
  operation: Operation_;
  object: Record<string, unknown>;
  oldObject?: Record<string, unknown>;
  /** `status`, `binding`: a Pod subresource (a Binding's object is the Binding). Omitted for the object itself, as the API server omits it. */
  subResource?: string;
  /** The resource, when not the kind's usual one (a Binding through the legacy `bindings` resource). */
  resource?: string;
}

interface Variable {
  name: string;
  expression: string;
}
interface Validation {
  expression: string;
  messageExpression: string;
  message: string;
}

/** The resource a request is for, as the API server names it, from the object's kind. */
const RESOURCES: Record<string, { group: string; version: string; resource: string }> = {
  Pod: { group: '', version: 'v1', resource: 'pods' },
  // pods/binding: the request is for the Pod resource, its object the Binding.
  Binding: { group: '', version: 'v1', resource: 'pods' },
  Sandbox: { group: 'agents.x-k8s.io', version: 'v1beta1', resource: 'sandboxes' },
  SandboxTemplate: { group: 'extensions.agents.x-k8s.io', version: 'v1beta1', resource: 'sandboxtemplates' },
};

function context(req: AdmissionRequest, params: unknown = null): Record<string, unknown> {
  const kind = String(req.object.kind ?? '');
  const known = RESOURCES[kind];
  if (known === undefined) throw new Error(`the emulator knows no resource for kind ${JSON.stringify(kind)}`);
  const resource = req.resource === undefined ? known : { ...known, resource: req.resource };
  return {
    object: req.object,
    oldObject: req.oldObject ?? null,
    request: {
      operation: req.operation,
      namespace: 'team-a',
      resource,
      ...(req.subResource === undefined ? {} : { subResource: req.subResource }),
    },
    // A policy with paramKind reads its binding's parameter object; null for one without.
    params,
    variables: {},
  };
}

/** The failure messages of a ValidatingAdmissionPolicy for one request (empty: admitted). */
export function validate(policy: ManagedObject, req: AdmissionRequest, params?: ManagedObject): string[] {
  const spec = policy.spec as { variables: Variable[]; validations: Validation[] };
  const ctx = context(req, params ?? null);
  const variables: Record<string, unknown> = {};
  ctx.variables = variables;
  for (const v of spec.variables) variables[v.name] = evaluate(v.expression, ctx);
  const failures: string[] = [];
  for (const v of spec.validations) {
    const ok = evaluate(v.expression, ctx);
    if (typeof ok !== 'boolean') throw new Error(`validation did not give a bool: ${v.expression}`);
    if (!ok) {
      const message = evaluate(v.messageExpression, ctx);
      if (typeof message !== 'string') throw new Error('messageExpression did not give a string');
      failures.push(message);
    }
  }
  return failures;
}

/**
 * Whether a MutatingAdmissionPolicy's matchConditions select the request: any false skips it;
 * otherwise an error is an error (failurePolicy applies).
 */
export function matches(policy: ManagedObject, req: AdmissionRequest): boolean {
  const spec = policy.spec as { matchConditions: { expression: string }[] };
  let error: unknown;
  for (const c of spec.matchConditions) {
    try {
      if (evaluate(c.expression, context(req)) === false) return false;
    } catch (e) {
      error = e;
    }
  }
  if (error !== undefined) throw error;
  return true;
}

/**
 * Runs the JSONPatch mutations. The evaluator has no CEL message construction, so
 * `JSONPatch{op: …, path: …, value: …}` is read as the equivalent map literal.
 */
export function mutate(policy: ManagedObject, req: AdmissionRequest, params?: ManagedObject): Record<string, unknown> {
  const spec = policy.spec as { mutations: { patchType: string; jsonPatch: { expression: string } }[] };
  let object = structuredClone(req.object);
  for (const m of spec.mutations) {
    if (m.patchType !== 'JSONPatch') throw new Error(`unsupported patchType ${m.patchType}`);
    const asMaps = m.jsonPatch.expression
      .replaceAll('JSONPatch{op: ', '{"op": ')
      .replaceAll(', path: ', ', "path": ')
      .replaceAll(', value: ', ', "value": ');
    const ops = evaluate(asMaps, { ...context(req, params ?? null), object }) as Operation[];
    object = jsonpatch.applyPatch(object, ops, true, false).newDocument;
  }
  return object;
}
