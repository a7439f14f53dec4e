/** The version a service reports (--version, build_info): its package.json's, next to its dist/. */
import { readFileSync } from 'node:fs';

/** `version` of the package.json one directory above the calling module's (dist/main.js → package.json). */
export function packageVersion(moduleUrl: string): string {
  try {
    const pkg = JSON.parse(readFileSync(new URL('../package.json', moduleUrl), 'utf8')) as { version?: unknown };
    return typeof pkg.version === 'string' ? pkg.version : 'unknown';
  } catch {
    return 'unknown';
  }
}
