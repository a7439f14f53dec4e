/**
 * The JSON shapes the admission path reads a decoded review and its Pod by (review.ts, patch.ts,
 * patch-check.ts): a JSON object, and a member of one as fast-json-patch sees it.
 */

export type JsonObject = Record<string, unknown>;

/** A JSON object: not null, not an array. */
export function isObject(v: unknown): v is JsonObject {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** Whether `obj` has `key` as a JSON member (own, not undefined): what `compare` treats as present. */
export function hasMember(obj: JsonObject, key: string): boolean {
  return Object.hasOwn(obj, key) && obj[key] !== undefined;
}
