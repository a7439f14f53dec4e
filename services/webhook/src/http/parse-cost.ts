/**
 * An upper estimate of the memory a JSON body takes once read and parsed, from its bytes alone,
 * before JSON.parse runs (issue 34): the body budget (body-budget.ts) holds this much for it.
 * Pure.
 *
 * What parsing costs depends on the shape, not the size: measured with Node.js 24 (V8 heap after
 * JSON.parse, per value of a 1,000,000-element array):
 *
 * | JSON per element      | heap per element | × its bytes |
 * |-----------------------|-----------------:|------------:|
 * | `{},`                 | 64 B             | 21          |
 * | `[],`                 | 40 B             | 13          |
 * | `{"a":[{}]},`         | 152 B            | 14          |
 * | `0,` (a small int)    | 8 B              | 4           |
 * | `{"operator":"Exists"},` | 40 B          | 1.8         |
 * | `"k123":0,` (distinct keys of one object) | ~90 B | 10 |
 * | one 18 MB string      | ~18 MB           | 1           |
 *
 * So the estimate charges every byte three times (the Buffer read, the text JSON.parse reads, the
 * parsed strings and numbers), each `{` or `[` `PER_CONTAINER` bytes (an object or array), and each
 * `,` or `:` `PER_SEPARATOR` bytes (the slot of one more value, and its boxed number or string
 * header). Bytes inside strings are counted as if they were structure: that over-estimates a Pod
 * whose strings hold JSON (kubectl's last-applied annotation), never under-estimates one.
 * Every shape above stays under its estimate (test/http/parse-cost.test.ts measures them); a
 * typical Pod review is estimated at 5-12× its size.
 */

/** Memory per byte of the body: the Buffer, the text parsed, the parsed strings. */
export const PER_BYTE = 3;
/** Memory per object or array (`{` or `[`), beyond its bytes: an empty object is 64 B. */
export const PER_CONTAINER = 64;
/** Memory per value separator (`,` or `:`), beyond its bytes: a slot, a boxed value, a dictionary entry and its key. */
export const PER_SEPARATOR = 48;

/** What each byte adds beyond PER_BYTE: a table read per byte, no branch (~1 ns a byte). */
const EXTRA = new Uint8Array(256);
EXTRA[0x7b] = PER_CONTAINER; // {
EXTRA[0x5b] = PER_CONTAINER; // [
EXTRA[0x2c] = PER_SEPARATOR; // ,
EXTRA[0x3a] = PER_SEPARATOR; // :

/**
 * The estimated memory of `body` read and parsed, in bytes. One pass over the bytes: 3.1 µs for a
 * 3.3 KB Pod review against 22-24 µs for its toString and JSON.parse in the same run (20,000 each,
 * Node.js 24, one quiet core; the branching loop it replaced took 5.3-6.6 µs).
 */
export function parseCost(body: Uint8Array): number {
  let extra = 0;
  for (let i = 0; i < body.length; i++) extra += EXTRA[body[i] as number] as number;
  return PER_BYTE * body.length + extra;
}
