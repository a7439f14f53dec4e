#!/usr/bin/env node
/**
 * Entry point of `kubeplus-isolation` and of the kubectl plugin `kubectl-kubeplus_isolation`
 * (`kubectl kubeplus-isolation …`). Exit statuses: see `--help` (cli.ts EXIT).
 */
import { readFileSync } from 'node:fs';
import { run } from './cli.js';
import { cliVersion } from './version.js';

process.exitCode = await run(process.argv.slice(2), {
  stdout: (s) => process.stdout.write(s),
  stderr: (s) => process.stderr.write(s),
  stdin: () => readFileSync(0, 'utf8'),
  version: cliVersion(),
});
