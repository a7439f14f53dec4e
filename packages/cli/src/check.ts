/**
 * `check FILE -n NAMESPACE`: what admission would do to a Pod or a Sandbox, from a server-side dry
 * run of its CREATE (every webhook and admission policy runs; nothing is stored). `verdict` is
 * pure: the fields node and sandbox isolation own, before and after, and — when the namespace
 * mandates a placement — what the admitted object would still lack (`missingDetails`, the audit's
 * rule), which is what a webhook outage under failurePolicy Ignore looks like.
 */
import { missingDetails, type NodeIsolationSpec, RUNTIME_CLASS_PATH, type Toleration } from '@kubeplus-isolation/spec';

/** The isolation-owned fields of a Pod spec. */
export const CHECKED_FIELDS = ['nodeSelector', 'tolerations', 'runtimeClassName'] as const;
export type CheckedField = (typeof CHECKED_FIELDS)[number];

export interface FieldChange {
  field: string;
  before: unknown;
  after: unknown;
}

export type Verdict =
  | {
      admitted: true;
      kind: string;
      name: string;
      /** The fields admission changed (path as `spec.nodeSelector`, …), in CHECKED_FIELDS order. */
      changes: FieldChange[];
      /** The admission chain's warnings (an advisory policy's verdict). */
      warnings: string[];
      /** Set when the namespace mandates a placement the admitted object would lack. */
      missing?: { nodeSelector: Record<string, string>; tolerations: Toleration[] };
    }
  | { admitted: false; kind: string; name: string; status?: number; message: string };

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** Path of the Pod spec in `object`: `spec` for a Pod, `spec.podTemplate.spec` for a Sandbox (or SandboxTemplate). */
export function podSpecPath(object: unknown): readonly string[] {
  return isObject(object) && object.kind === 'Pod' ? ['spec'] : RUNTIME_CLASS_PATH.slice(0, -1);
}

function at(object: unknown, path: readonly string[]): Record<string, unknown> {
  let cur: unknown = object;
  for (const key of path) cur = isObject(cur) ? cur[key] : undefined;
  return isObject(cur) ? cur : {};
}

/** Canonical JSON (keys sorted) for comparison. */
function canonical(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(canonical).join(',')}]`;
  if (isObject(v)) {
    const keys = Object.keys(v)
      .filter((k) => v[k] !== undefined)
      .sort();
    return `{${keys.map((k) => `${JSON.stringify(k)}:${canonical(v[k])}`).join(',')}}`;
  }
  return JSON.stringify(v ?? null);
}

/** Empty and absent are the same to the API server for these fields. */
function normal(v: unknown): unknown {
  if (v === undefined || v === null || v === '') return undefined;
  if (Array.isArray(v) && v.length === 0) return undefined;
  if (isObject(v) && Object.keys(v).length === 0) return undefined;
  return v;
}

/** The verdict of an admitted dry run: `sent` as written, `admitted` as the API server returned it. Pure. */
export function admittedVerdict(
  sent: unknown,
  admitted: unknown,
  warnings: readonly string[],
  mandate: NodeIsolationSpec | undefined,
): Verdict {
  const path = podSpecPath(sent);
  const before = at(sent, path);
  const after = at(admitted, path);
  const changes: FieldChange[] = [];
  for (const field of CHECKED_FIELDS) {
    const b = normal(before[field]);
    const a = normal(after[field]);
    if (canonical(b) !== canonical(a)) changes.push({ field: [...path, field].join('.'), before: b, after: a });
  }
  const meta = isObject(admitted) && isObject(admitted.metadata) ? admitted.metadata : {};
  const verdict: Verdict = {
    admitted: true,
    kind: isObject(sent) && typeof sent.kind === 'string' ? sent.kind : '',
    name: typeof meta.name === 'string' ? meta.name : '',
    changes,
    warnings: [...warnings],
  };
  if (mandate !== undefined && verdict.kind === 'Pod') {
    const d = missingDetails(mandate, after as { nodeSelector?: unknown; tolerations?: unknown });
    if (d.missing.length > 0)
      verdict.missing = { nodeSelector: d.missingNodeSelector, tolerations: d.missingTolerations };
  }
  return verdict;
}

function show(v: unknown): string {
  return v === undefined ? '(unset)' : JSON.stringify(v);
}

export function formatVerdict(v: Verdict, namespace: string): string {
  const what = `${v.kind} ${v.name === '' ? '(generated name)' : v.name} in ${namespace}`;
  if (!v.admitted) return `REFUSED: ${what}${v.status === undefined ? '' : ` (HTTP ${v.status})`}\n  ${v.message}\n`;
  const out = [`ADMITTED: ${what}`];
  for (const w of v.warnings) out.push(`  warning: ${w}`);
  if (v.changes.length === 0) out.push('  admission changes none of nodeSelector, tolerations, runtimeClassName');
  for (const c of v.changes) out.push(`  ${c.field}:`, `    - ${show(c.before)}`, `    + ${show(c.after)}`);
  if (v.missing !== undefined) {
    out.push(
      `  WARNING: the namespace mandates a node placement this Pod would still lack: nodeSelector ${JSON.stringify(v.missing.nodeSelector)}, tolerations ${JSON.stringify(v.missing.tolerations)}`,
      '  (no admission engine patched it: is the node-isolation webhook answering? Its failurePolicy Ignore admits Pods unpatched)',
    );
  }
  return `${out.join('\n')}\n`;
}
