/**
 * The CLI's version. The standalone bundle (packages/cli/bundle/pack.ts) has the release's version
 * compiled in (esbuild `define`): krew installs that one file alone. Otherwise (the workspace build)
 * its package.json's, read next to the running module (`../package.json`), as the services'
 * `--version` reads theirs.
 */
import { readFileSync } from 'node:fs';

declare const __KUBEPLUS_ISOLATION_VERSION__: string | undefined;

export function cliVersion(moduleUrl: string = import.meta.url): string {
  if (typeof __KUBEPLUS_ISOLATION_VERSION__ === 'string') return __KUBEPLUS_ISOLATION_VERSION__;
  try {
    const pkg = JSON.parse(readFileSync(new URL('../package.json', moduleUrl), 'utf8')) as { version?: unknown };
    return typeof pkg.version === 'string' ? pkg.version : 'unknown';
  } catch {
    return 'unknown';
  }
}
