import { randomBytes } from 'node:crypto';

/** `prefix-xxxxxx`: a DNS-1123 name unique to this test run. */
export function uniqueName(prefix: string): string {
  return `${prefix}-${randomBytes(3).toString('hex')}`;
}
