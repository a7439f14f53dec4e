/**
 * The node-isolation JSON Patch (RFC 6902): pure, total, idempotent.
 *
 * Approach (as Pepr does): build the desired `{nodeSelector, tolerations}` sub-document of
 * the Pod's spec and let fast-json-patch's `compare` diff it against the sub-document the
 * API server sent. The diff is computed against the exact object the patch will be applied
 * to, so every operation's target exists (or is an object member `add` creates): a field
 * that is absent gets `add`, a field that is present but `null` gets `replace`, an empty
 * map or list gets per-member `add`s, and keys containing `/` or `~` are escaped by
 * `compare` itself (RFC 6901). Hand-built paths decided by "is it empty?" — the seed's Go
 * snippet — break on exactly these shapes.
 */
import { type NodeIsolationSpec, type Toleration, tolerationKey } from '@kubeplus-isolation/spec';
import jsonpatch, { type Operation } from 'fast-json-patch';

type JsonObject = Record<string, unknown>;

function isObject(v: unknown): v is JsonObject {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** The two PodSpec fields node isolation owns, exactly as present in `spec` (absent stays absent). */
function ownedFields(spec: JsonObject): JsonObject {
  const out: JsonObject = {};
  for (const field of ['nodeSelector', 'tolerations'] as const) {
    if (Object.hasOwn(spec, field) && spec[field] !== undefined) out[field] = spec[field];
  }
  return out;
}

/**
 * The Pod's selector with every mandated pair set (isolation wins on conflict, the Pod's
 * other keys stay), or `undefined` when the Pod already satisfies the mandate.
 * A selector that is not a JSON object (absent, null, or malformed) is replaced by the mandate.
 */
function desiredNodeSelector(current: unknown, mandated: Readonly<Record<string, string>>): JsonObject | undefined {
  const keys = Object.keys(mandated);
  if (keys.length === 0) return undefined;
  if (isObject(current) && keys.every((k) => Object.hasOwn(current, k) && current[k] === mandated[k])) {
    return undefined;
  }
  // Spread (not assignment) so a key such as "__proto__" stays a plain data property.
  return isObject(current) ? { ...current, ...mandated } : { ...mandated };
}

/**
 * The Pod's tolerations followed by each mandated toleration it does not already have
 * (semantic identity via `tolerationKey`), or `undefined` when nothing is missing.
 * The Pod's own entries are kept as they are, duplicates included: they are not ours to edit.
 */
function desiredTolerations(current: unknown, mandated: readonly Toleration[]): unknown[] | undefined {
  const existing = Array.isArray(current) ? (current as unknown[]) : [];
  const have = new Set<string>();
  for (const t of existing) if (isObject(t)) have.add(tolerationKey(t as Toleration));
  const missing: Toleration[] = [];
  for (const t of mandated) {
    const key = tolerationKey(t);
    if (have.has(key)) continue;
    have.add(key);
    missing.push(t);
  }
  if (missing.length === 0) return undefined;
  return [...existing, ...missing];
}

/**
 * JSON Patch operations that make `pod.spec` carry the mandated nodeSelector and tolerations.
 * Empty when nothing needs to change — in particular for a Pod this function already patched,
 * so `reinvocationPolicy: IfNeeded` never stacks a second copy. Never throws on odd input:
 * a Pod without an object `spec` yields no operations (the API server rejects it anyway).
 */
export function buildNodeIsolationPatch(pod: unknown, spec: NodeIsolationSpec): Operation[] {
  if (!isObject(pod) || !isObject(pod.spec)) return [];
  const original = ownedFields(pod.spec);
  const desired: JsonObject = { ...original };
  const nodeSelector = desiredNodeSelector(original.nodeSelector, spec.nodeSelector);
  if (nodeSelector !== undefined) desired.nodeSelector = nodeSelector;
  const tolerations = desiredTolerations(original.tolerations, spec.tolerations);
  if (tolerations !== undefined) desired.tolerations = tolerations;
  if (nodeSelector === undefined && tolerations === undefined) return [];
  return jsonpatch.compare(original, desired).map((op) => ({ ...op, path: `/spec${op.path}` }));
}

/**
 * Why `patch` would not apply to `pod`, or undefined when it applies cleanly. Checked on a
 * copy of just the two fields the patch touches, so the cost does not grow with the Pod.
 */
export function patchProblem(pod: unknown, patch: readonly Operation[]): string | undefined {
  if (patch.length === 0) return undefined;
  const spec = isObject(pod) && isObject(pod.spec) ? ownedFields(pod.spec) : undefined;
  const error = jsonpatch.validate([...patch], spec === undefined ? {} : { spec });
  return error === undefined ? undefined : `${error.name}: ${error.message.split('\n', 1)[0]}`;
}
