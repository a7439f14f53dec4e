import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { describe, expect, it } from '@jest/globals';
import { PER_BYTE, PER_CONTAINER, PER_SEPARATOR, parseCost } from '../../src/http/parse-cost.js';

setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;

/** The V8 heap JSON.parse of `text` keeps, measured around a full collection. */
function parsedHeap(text: string): number {
  gc();
  const before = process.memoryUsage().heapUsed;
  const value: unknown = JSON.parse(text);
  gc();
  const after = process.memoryUsage().heapUsed;
  expect(value).toBeDefined(); // keeps the value alive until measured
  return after - before;
}

const N = 200_000;
const array = (element: (i: number) => string, n = N) =>
  `[${Array.from({ length: n }, (_, i) => element(i)).join(',')}]`;

describe('parseCost', () => {
  it('charges every byte, each { or [, and each , or :', () => {
    expect(parseCost(Buffer.from(''))).toBe(0);
    expect(parseCost(Buffer.from('"abc"'))).toBe(5 * PER_BYTE);
    expect(parseCost(Buffer.from('{"a":[1,2]}'))).toBe(11 * PER_BYTE + 2 * PER_CONTAINER + 2 * PER_SEPARATOR);
  });

  // The shapes of parse-cost.ts's table, and more: the heap JSON.parse keeps, plus the Buffer and
  // the text it read (2 × the bytes), stays under the estimate. A test that fails when V8's
  // layout grows past the estimate.
  it.each([
    ['empty objects', array(() => '{}')],
    ['empty arrays', array(() => '[]')],
    ['nested', array(() => '{"a":[{}]}')],
    ['small integers', array(() => '0')],
    ['doubles', array((i) => `${i}.5`)],
    ['distinct short strings', array((i) => `"${i.toString(36)}"`)],
    ['objects with distinct keys', `{${Array.from({ length: N }, (_, i) => `"k${i}":0`).join(',')}}`],
    ['tolerations', array(() => '{"operator":"Exists"}')],
    ['env', array((i) => `{"name":"E${i}","value":"v"}`)],
    ['one long string of \\u003c', `{"a":"${'\\u003c'.repeat(N)}"}`],
  ])('%s: the parsed heap stays under the estimate', (_name, text) => {
    const bytes = Buffer.from(text);
    const measured = parsedHeap(text) + 2 * bytes.length;
    expect(measured).toBeLessThan(parseCost(bytes));
  });

  it('estimates a typical Pod review at 5-12 times its size', () => {
    const review = JSON.stringify({
      apiVersion: 'admission.k8s.io/v1',
      kind: 'AdmissionReview',
      request: {
        uid: 'u',
        object: {
          metadata: { name: 'p', labels: { app: 'a' } },
          spec: { containers: [{ name: 'c', image: 'i', env: [{ name: 'A', value: 'b' }] }] },
        },
      },
    });
    const cost = parseCost(Buffer.from(review));
    expect(cost).toBeGreaterThan(review.length * PER_BYTE);
    expect(cost).toBeLessThan(review.length * 12);
  });
});
