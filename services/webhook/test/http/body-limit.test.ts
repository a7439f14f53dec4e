import { readFileSync } from 'node:fs';
import { describe, expect, it } from '@jest/globals';
import {
  DEFAULT_API_SERVER_MAX_REQUEST_BODY_BYTES,
  JSON_ESCAPE_EXPANSION,
  OBJECTS_PER_REVIEW,
  REVIEW_ENVELOPE_BYTES,
  reviewBodyLimit,
} from '../../src/http/body-limit.js';

const MiB = 1024 * 1024;
/** The webhook's registration (the chart's and the e2e harness's single source). */
const ENTRY = new URL('../../../../deploy/kubeplus-isolation/charts/webhook/files/webhook-entry.json', import.meta.url);

/** What Go's encoding/json writes for a string (its HTML-safe escaping: `<` `>` `&` → \u00XX, U+2028/9 too). */
function goJsonString(s: string): string {
  return JSON.stringify(s).replace(/[<>&\u2028\u2029]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
}

describe('reviewBodyLimit', () => {
  it('is 6 × the API server’s request limit per object, plus the envelope', () => {
    expect(reviewBodyLimit(DEFAULT_API_SERVER_MAX_REQUEST_BODY_BYTES)).toBe(19 * MiB);
    expect(reviewBodyLimit(MiB)).toBe(7 * MiB);
    // An UPDATE review carries object and oldObject.
    expect(reviewBodyLimit(3 * MiB, 2)).toBe(37 * MiB);
    expect(OBJECTS_PER_REVIEW).toBe(1);
    expect(REVIEW_ENVELOPE_BYTES).toBe(MiB);
  });

  it('six bytes per byte is the encoder’s worst case: a body of nothing but `<` grows exactly sixfold', () => {
    for (const c of ['<', '>', '&', '\u0001', '\u001f']) {
      const raw = c.repeat(1000);
      const sent = Buffer.byteLength(raw); // one byte each as raw JSON (control characters: in protobuf)
      expect(Buffer.byteLength(goJsonString(raw)) - 2).toBeLessThanOrEqual(JSON_ESCAPE_EXPANSION * sent);
    }
    const lt = '<'.repeat(1000);
    expect(Buffer.byteLength(goJsonString(lt)) - 2).toBe(JSON_ESCAPE_EXPANSION * 1000);
    // Multi-byte characters grow less: U+2028 is 3 bytes of UTF-8, 6 escaped.
    expect(Buffer.byteLength(goJsonString('\u2028'))).toBe(8);
  });

  it('a review of the largest request the API server accepts, escaped at worst, fits under the default', () => {
    const request = DEFAULT_API_SERVER_MAX_REQUEST_BODY_BYTES;
    const review = JSON_ESCAPE_EXPANSION * request + 64 * 1024; // + a review envelope of 64 KiB
    expect(review).toBeLessThanOrEqual(reviewBodyLimit(request));
    // The old fixed 4 MiB did not hold 0.75 MB of `<`.
    expect(JSON_ESCAPE_EXPANSION * 750_000).toBeGreaterThan(4 * MiB);
  });

  it('counts the objects the registered operations put in a review (CREATE: object; UPDATE would add oldObject)', () => {
    const entry = JSON.parse(readFileSync(ENTRY, 'utf8')) as { rules: { operations: string[] }[] };
    const operations = new Set(entry.rules.flatMap((r) => r.operations));
    const objects = operations.has('UPDATE') || operations.has('*') ? 2 : 1;
    expect(OBJECTS_PER_REVIEW).toBe(objects);
  });
});
