/**
 * The patch's self-check, `patchProblem`: `admit` runs it on every patch before it is sent, since
 * a patch the API server cannot apply makes it reject the Pod (patch errors are not covered by
 * `failurePolicy: Ignore`). Pure, and it never changes the Pod.
 */
import jsonpatch, { type JsonPatchError, type Operation } from 'fast-json-patch';
import type { JsonObject } from './json.js';
import * as json from './json.js';
import { FIELD_POINTERS } from './patch.js';

// Module-local consts, read per operation, as in patch.ts (an imported binding is checked at every use).
const { isObject, hasMember } = json;
const { nodeSelector: NODE_SELECTOR_PATH, tolerations: TOLERATIONS_PATH } = FIELD_POINTERS;

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

/** An index into a list as RFC 6901 writes it: decimal, no leading zero. */
const ARRAY_INDEX = /^(0|[1-9][0-9]*)$/;

/** The two PodSpec fields node isolation owns, exactly as present in `spec` (absent stays absent). */
function ownedFields(spec: JsonObject): JsonObject {
  const out: JsonObject = {};
  for (const field of ['nodeSelector', 'tolerations'] as const) {
    if (hasMember(spec, field)) out[field] = spec[field];
  }
  return out;
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
