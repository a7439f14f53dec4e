#!/usr/bin/env node
/**
 * Entry point of `kubeplus-isolation` and of the kubectl plugin `kubectl-kubeplus_isolation`
 * (`kubectl kubeplus-isolation …`). Exit statuses: see `--help` (cli.ts EXIT).
 */
import { readFileSync } from 'node:fs';
import { run } from './cli.js';

/** The package's version (package.json next to dist/), which `make release` stamps. */
function version(): string {
  try {
    const pkg = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version?: unknown };
    return typeof pkg.version === 'string' ? pkg.version : 'unknown';
  } catch {
    return 'unknown';
  }
}

process.exitCode = await run(process.argv.slice(2), {
  stdout: (s) => process.stdout.write(s),
  stderr: (s) => process.stderr.write(s),
  stdin: () => readFileSync(0, 'utf8'),
  version: version(),
});
