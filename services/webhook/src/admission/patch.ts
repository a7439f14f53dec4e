/**
 * The node-isolation JSON Patch (RFC 6902): pure, total, idempotent. Step 4 of the admission
 * path (admit.ts lists it): the mandate the resolver found, merged into the Pod.
 *
 * Each operation is decided from the exact object the patch will be applied to, by the rules
 * fast-json-patch's `compare` applies when it diffs the Pod's `{nodeSelector, tolerations}`
 * against the desired ones (this module used `compare` itself until its deep copies showed in
 * the webhook's CPU profile; the tests still check the two agree): a field that is absent gets
 * `add`, a field that is present but not of its type (`null`, a string) gets `replace`, a map
 * or list — empty or not — gets per-member `add`s/`replace`s, and keys containing `/` or `~`
 * are escaped (RFC 6901). So every operation's target exists, or is a member `add` creates.
 * Hand-built paths decided by "is it empty?" — the seed's Go snippet — break on exactly these
 * shapes. `patchProblem` (patch-check.ts) checks every patch anyway before it is sent.
 */
import { type NodeIsolationSpec, type Toleration, tolerationKey } from '@kubeplus-isolation/spec';
import type { Operation } from 'fast-json-patch';
import type { JsonObject } from './json.js';
import * as json from './json.js';

// The builder reads module-local consts only: an imported or exported binding is a module cell,
// read (and checked) at every use, which cost the builder 3–5% (bench §1, 50 own tolerations).
const { isObject, hasMember } = json;

/** The two PodSpec fields node isolation owns, as JSON Pointers: the only paths a patch touches. */
const NODE_SELECTOR_PATH = '/spec/nodeSelector';
const TOLERATIONS_PATH = '/spec/tolerations';
/** The pointers' prefixes of a member (a selector key, a list index), built once. */
const NODE_SELECTOR_MEMBER = `${NODE_SELECTOR_PATH}/`;
const TOLERATIONS_MEMBER = `${TOLERATIONS_PATH}/`;

/** The pointers, for the patch's check (patch-check.ts). */
export const FIELD_POINTERS = { nodeSelector: NODE_SELECTOR_PATH, tolerations: TOLERATIONS_PATH } as const;

/** RFC 6901 escaping of one reference token ("~" → "~0", "/" → "~1"). */
function escapeToken(token: string): string {
  return token.indexOf('~') === -1 && token.indexOf('/') === -1
    ? token
    : token.replace(/~/g, '~0').replace(/\//g, '~1');
}

/**
 * Operations setting every mandated selector pair (isolation wins on conflict, the Pod's other
 * keys stay): per-member `add`/`replace` on a selector that is a JSON object, the whole mandate
 * as `add` where the field is absent and as `replace` where it holds anything else (null, a
 * string, an array).
 */
function nodeSelectorOps(podSpec: JsonObject, mandated: Readonly<Record<string, string>>, ops: Operation[]): void {
  const keys = Object.keys(mandated);
  if (keys.length === 0) return;
  if (!hasMember(podSpec, 'nodeSelector')) {
    ops.push({ op: 'add', path: NODE_SELECTOR_PATH, value: { ...mandated } });
    return;
  }
  const current = podSpec.nodeSelector;
  if (!isObject(current)) {
    ops.push({ op: 'replace', path: NODE_SELECTOR_PATH, value: { ...mandated } });
    return;
  }
  for (const key of keys) {
    const value = mandated[key] as string;
    if (!hasMember(current, key)) ops.push({ op: 'add', path: `${NODE_SELECTOR_MEMBER}${escapeToken(key)}`, value });
    else if (current[key] !== value)
      ops.push({ op: 'replace', path: `${NODE_SELECTOR_MEMBER}${escapeToken(key)}`, value });
  }
}

/** The `key` of a toleration as `tolerationKey` identifies it (empty and absent are the same). */
function tolerationKeyField(t: Toleration): unknown {
  return t.key === undefined || t.key === '' ? '' : t.key;
}

/** What the builder needs of a mandate's tolerations: their keys, and each one's identity. */
interface MandatedTolerations {
  keyFields: ReadonlySet<unknown>;
  ids: readonly string[];
}

/**
 * Per mandated tolerations list, computed on first use: a mandate is parsed once per Namespace
 * event and never changed afterwards (the cache replaces it), so its identities need not be
 * computed again for every Pod.
 */
const mandatedTolerations = new WeakMap<readonly Toleration[], MandatedTolerations>();

function mandatedOf(mandated: readonly Toleration[]): MandatedTolerations {
  let m = mandatedTolerations.get(mandated);
  if (m === undefined) {
    m = { keyFields: new Set(mandated.map(tolerationKeyField)), ids: mandated.map(tolerationKey) };
    mandatedTolerations.set(mandated, m);
  }
  return m;
}

/**
 * Operations appending each mandated toleration the Pod does not already have (semantic
 * identity via `tolerationKey`) after the Pod's own, which stay as they are, duplicates
 * included: they are not ours to edit. Appends go to explicit indices of a list that is an
 * array; an absent field gets the missing tolerations as `add`, any other value (null, an
 * object) is replaced by them.
 */
function tolerationOps(podSpec: JsonObject, mandated: readonly Toleration[], ops: Operation[]): void {
  if (mandated.length === 0) return;
  const present = hasMember(podSpec, 'tolerations');
  const current = podSpec.tolerations;
  const existing = Array.isArray(current) ? (current as unknown[]) : [];
  const { keyFields, ids } = mandatedOf(mandated);
  // Only a toleration with a mandated key can be a mandated toleration: the others' identity
  // (a JSON string per toleration) is not worth computing.
  const have = new Set<string>();
  for (const t of existing) {
    if (isObject(t) && keyFields.has(tolerationKeyField(t as Toleration))) have.add(tolerationKey(t as Toleration));
  }
  const missing: Toleration[] = [];
  for (const [i, t] of mandated.entries()) {
    const id = ids[i] as string;
    if (have.has(id)) continue;
    have.add(id);
    missing.push({ ...t });
  }
  if (missing.length === 0) return;
  if (!present) ops.push({ op: 'add', path: TOLERATIONS_PATH, value: missing });
  else if (!Array.isArray(current)) ops.push({ op: 'replace', path: TOLERATIONS_PATH, value: missing });
  else
    for (const [i, t] of missing.entries())
      ops.push({ op: 'add', path: `${TOLERATIONS_MEMBER}${existing.length + i}`, value: t });
}

/**
 * JSON Patch operations that make `pod.spec` carry the mandated nodeSelector and tolerations.
 * Empty when nothing needs to change — in particular for a Pod this function already patched,
 * so `reinvocationPolicy: IfNeeded` never stacks a second copy. Never throws on odd input:
 * a Pod without an object `spec` yields no operations (the API server rejects it anyway).
 * Operation values are fresh objects, never the (cached) mandate itself.
 */
export function buildNodeIsolationPatch(pod: unknown, spec: NodeIsolationSpec): Operation[] {
  if (!isObject(pod) || !isObject(pod.spec)) return [];
  const ops: Operation[] = [];
  nodeSelectorOps(pod.spec, spec.nodeSelector, ops);
  tolerationOps(pod.spec, spec.tolerations, ops);
  return ops;
}
