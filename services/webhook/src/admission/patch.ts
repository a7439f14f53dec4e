/**
 * The node-isolation JSON Patch (RFC 6902): pure, total, idempotent.
 *
 * Each operation is decided from the exact object the patch will be applied to, by the rules
 * fast-json-patch's `compare` applies when it diffs the Pod's `{nodeSelector, tolerations}`
 * against the desired ones (this module used `compare` itself until its deep copies showed in
 * the webhook's CPU profile; the tests still check the two agree): a field that is absent gets
 * `add`, a field that is present but not of its type (`null`, a string) gets `replace`, a map
 * or list — empty or not — gets per-member `add`s/`replace`s, and keys containing `/` or `~`
 * are escaped (RFC 6901). So every operation's target exists, or is a member `add` creates.
 * Hand-built paths decided by "is it empty?" — the seed's Go snippet — break on exactly these
 * shapes. `patchProblem` checks every patch anyway before it is sent.
 */
import { type NodeIsolationSpec, type Toleration, tolerationKey } from '@kubeplus-isolation/spec';
import jsonpatch, { type JsonPatchError, type Operation } from 'fast-json-patch';

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

/** RFC 6901 escaping of one reference token ("~" → "~0", "/" → "~1"). */
function escapeToken(token: string): string {
  return token.indexOf('~') === -1 && token.indexOf('/') === -1
    ? token
    : token.replace(/~/g, '~0').replace(/\//g, '~1');
}

/** Whether `obj` has `key` as a JSON member (own, not undefined): what `compare` treats as present. */
function hasMember(obj: JsonObject, key: string): boolean {
  return Object.hasOwn(obj, key) && obj[key] !== undefined;
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
    ops.push({ op: 'add', path: '/spec/nodeSelector', value: { ...mandated } });
    return;
  }
  const current = podSpec.nodeSelector;
  if (!isObject(current)) {
    ops.push({ op: 'replace', path: '/spec/nodeSelector', value: { ...mandated } });
    return;
  }
  for (const key of keys) {
    const value = mandated[key] as string;
    if (!hasMember(current, key)) ops.push({ op: 'add', path: `/spec/nodeSelector/${escapeToken(key)}`, value });
    else if (current[key] !== value) ops.push({ op: 'replace', path: `/spec/nodeSelector/${escapeToken(key)}`, value });
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
  if (!present) ops.push({ op: 'add', path: '/spec/tolerations', value: missing });
  else if (!Array.isArray(current)) ops.push({ op: 'replace', path: '/spec/tolerations', value: missing });
  else
    for (const [i, t] of missing.entries())
      ops.push({ op: 'add', path: `/spec/tolerations/${existing.length + i}`, value: t });
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

/** A copy of `v` one level deep: a new array or object holding the same members. */
function shallowCopy(v: unknown): unknown {
  if (Array.isArray(v)) return [...v];
  // Spread keeps a "__proto__" member (JSON.parse makes it an own property) a data property.
  return isObject(v) ? { ...v } : v;
}

/** Segments of a JSON Pointer: "/spec/nodeSelector/pool" has 4 ("", "spec", "nodeSelector", "pool"). */
function pointerSegments(path: string): number {
  let n = 1;
  for (let i = path.indexOf('/'); i !== -1; i = path.indexOf('/', i + 1)) n++;
  return n;
}

/** A JSON value (what survives the trip to the API server unchanged): no undefined, functions or symbols anywhere. */
function isJsonValue(v: unknown): boolean {
  switch (typeof v) {
    case 'string':
    case 'boolean':
      return true;
    case 'number':
      return Number.isFinite(v);
    case 'object':
      if (v === null) return true;
      if (Array.isArray(v)) return v.every(isJsonValue);
      for (const key of Object.keys(v)) if (!isJsonValue((v as JsonObject)[key])) return false;
      return true;
    default:
      return false;
  }
}

/** What an owned field holds while the operations are followed: absent, a map (its members), a list (its length), or another value. */
type FieldState =
  | { kind: 'absent' | 'other' }
  | { kind: 'map'; base: JsonObject | undefined; added: Set<string> | undefined }
  | { kind: 'list'; length: number };

const ABSENT: FieldState = { kind: 'absent' };
const OTHER: FieldState = { kind: 'other' };

function stateOf(value: unknown, present: boolean): FieldState {
  if (!present) return ABSENT;
  if (Array.isArray(value)) return { kind: 'list', length: value.length };
  return isObject(value) ? { kind: 'map', base: value, added: undefined } : OTHER;
}

const NODE_SELECTOR_PATH = '/spec/nodeSelector';
const TOLERATIONS_PATH = '/spec/tolerations';
const ARRAY_INDEX = /^(0|[1-9][0-9]*)$/;

/**
 * Whether every operation provably applies, judged from the two fields' shapes alone (no copy,
 * no patch library): `add`/`replace` of a whole field, `add`/`replace` of a map member, `add` at
 * a list index up to its length — every shape `buildNodeIsolationPatch` emits, with the state
 * each operation leaves for the next. False means "not proven" (another shape, or one that
 * does not apply), never "does not apply".
 */
function provablyApplies(podSpec: JsonObject, patch: readonly Operation[]): boolean {
  let nodeSelector: FieldState | undefined;
  let tolerations: FieldState | undefined;
  for (const op of patch) {
    if (op.op !== 'add' && op.op !== 'replace') return false;
    const path = op.path;
    let isNodeSelector: boolean;
    let end: number;
    if (path.startsWith(NODE_SELECTOR_PATH)) {
      isNodeSelector = true;
      end = NODE_SELECTOR_PATH.length;
    } else if (path.startsWith(TOLERATIONS_PATH)) {
      isNodeSelector = false;
      end = TOLERATIONS_PATH.length;
    } else {
      return false;
    }
    // "/spec/nodeSelectorX" is another field; "/spec/nodeSelector/…" a member.
    if (path.length > end && path.charCodeAt(end) !== 0x2f) return false;
    if (!isJsonValue(op.value)) return false;
    if (isNodeSelector && nodeSelector === undefined) {
      nodeSelector = stateOf(podSpec.nodeSelector, hasMember(podSpec, 'nodeSelector'));
    } else if (!isNodeSelector && tolerations === undefined) {
      tolerations = stateOf(podSpec.tolerations, hasMember(podSpec, 'tolerations'));
    }
    const state = (isNodeSelector ? nodeSelector : tolerations) as FieldState;
    if (path.length === end) {
      if (op.op === 'replace' && state.kind === 'absent') return false;
      if (isNodeSelector) nodeSelector = stateOf(op.value, true);
      else tolerations = stateOf(op.value, true);
      continue;
    }
    const token = path.slice(end + 1);
    if (token.includes('/')) return false;
    if (state.kind === 'map') {
      let key = token;
      if (token.includes('~')) {
        if (/~[^01]|~$/.test(token)) return false;
        key = token.replace(/~1/g, '/').replace(/~0/g, '~');
      }
      if (key === '__proto__') return false;
      const exists = state.added?.has(key) === true || (state.base !== undefined && hasMember(state.base, key));
      if (op.op === 'replace' && !exists) return false;
      if (state.added === undefined) state.added = new Set([key]);
      else state.added.add(key);
    } else if (state.kind === 'list') {
      if (op.op !== 'add' || !ARRAY_INDEX.test(token) || Number(token) > state.length) return false;
      state.length += 1;
    } else {
      return false;
    }
  }
  return true;
}

/**
 * Why `patch` would not apply to `pod`, or undefined when it applies cleanly, judged on the two
 * fields it may touch (so the cost does not grow with the Pod). The shapes the builder emits are
 * proven applicable structurally (`provablyApplies`). Anything else — or a patch that does not
 * apply, to name the problem — is applied, with fast-json-patch's validation, to a document
 * holding just the two fields: copied one level deep when every operation reaches at most a
 * member of them (applying then writes only to the copies, never to the Pod), deep otherwise.
 */
export function patchProblem(pod: unknown, patch: readonly Operation[]): string | undefined {
  if (patch.length === 0) return undefined;
  if (isObject(pod) && isObject(pod.spec) && provablyApplies(pod.spec, patch)) return undefined;
  const spec = isObject(pod) && isObject(pod.spec) ? ownedFields(pod.spec) : undefined;
  const shallow = patch.every((op) => op.op !== 'move' && op.op !== 'copy' && pointerSegments(op.path) <= 4);
  let error: JsonPatchError | undefined;
  if (shallow) {
    if (spec !== undefined) for (const field of Object.keys(spec)) spec[field] = shallowCopy(spec[field]);
    try {
      // The operations as the API server will get them (through JSON), applied with validation to the copies.
      jsonpatch.applyPatch(spec === undefined ? {} : { spec }, jsonpatch.deepClone([...patch]), true, true);
    } catch (e) {
      if (!(e instanceof jsonpatch.JsonPatchError)) throw e;
      error = e;
    }
  } else {
    error = jsonpatch.validate([...patch], spec === undefined ? {} : { spec });
  }
  return error === undefined ? undefined : `${error.name}: ${error.message.split('\n', 1)[0]}`;
}
