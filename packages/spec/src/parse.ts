import { formatErrors, MAX_ANNOTATION_LENGTH, validateNodeIsolation, validateSandboxIsolation } from './schemas.js';
import { dedupeTolerations } from './tolerations.js';
import type { NodeIsolationSpec, ParseResult, SandboxIsolationSpec, Toleration } from './types.js';

function parseJson(text: unknown): ParseResult<unknown> {
  if (typeof text !== 'string') return { ok: false, errors: ['annotation value must be a string'] };
  if (text.length > MAX_ANNOTATION_LENGTH) {
    return {
      ok: false,
      errors: [`annotation value is ${text.length} characters; at most ${MAX_ANNOTATION_LENGTH} are allowed`],
    };
  }
  try {
    return { ok: true, value: JSON.parse(text) as unknown };
  } catch (e) {
    return { ok: false, errors: [`not valid JSON: ${(e as Error).message}`] };
  }
}

/**
 * Parses and validates a `kubeplus.io/node-isolation` (or `-resolved`) annotation value.
 * Never throws. The value returned is canonical: nodeSelector keys sorted, tolerations
 * normalized and de-duplicated, so `canonicalNodeIsolation(value)` is a fixed point.
 */
export function parseNodeIsolation(text: unknown): ParseResult<NodeIsolationSpec> {
  const json = parseJson(text);
  if (!json.ok) return json;
  if (!validateNodeIsolation(json.value)) return { ok: false, errors: formatErrors(validateNodeIsolation.errors) };
  const raw = json.value as { nodeSelector?: Record<string, string>; tolerations?: Toleration[] };
  const value = canonicalize(raw.nodeSelector ?? {}, raw.tolerations ?? []);
  if (Object.keys(value.nodeSelector).length === 0 && value.tolerations.length === 0) {
    return { ok: false, errors: ['must mandate at least one nodeSelector entry or one toleration'] };
  }
  return { ok: true, value };
}

function canonicalize(nodeSelector: Record<string, string>, tolerations: readonly Toleration[]): NodeIsolationSpec {
  const sorted: Record<string, string> = {};
  for (const k of Object.keys(nodeSelector).sort()) sorted[k] = nodeSelector[k] as string;
  return { nodeSelector: sorted, tolerations: dedupeTolerations(tolerations) };
}

/**
 * The exact text the operator writes to `kubeplus.io/node-isolation-resolved`: stable key
 * order, so an unchanged spec always serializes to the same bytes and a reconcile of an
 * up-to-date namespace issues no write.
 */
export function canonicalNodeIsolation(spec: NodeIsolationSpec): string {
  const c = canonicalize(spec.nodeSelector, spec.tolerations);
  return JSON.stringify({ nodeSelector: c.nodeSelector, tolerations: c.tolerations });
}

/** Parses and validates a `kubeplus.io/sandbox-isolation` annotation value. Never throws. */
export function parseSandboxIsolation(text: unknown): ParseResult<SandboxIsolationSpec> {
  const json = parseJson(text);
  if (!json.ok) return json;
  if (!validateSandboxIsolation(json.value))
    return { ok: false, errors: formatErrors(validateSandboxIsolation.errors) };
  const v = json.value as SandboxIsolationSpec; // `enforce` filled with its default by ajv
  const value: SandboxIsolationSpec = { minRuntimeClass: v.minRuntimeClass, enforce: v.enforce };
  if (v.runtimeClassName !== undefined) value.runtimeClassName = v.runtimeClassName;
  return { ok: true, value };
}
