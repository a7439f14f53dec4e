/**
 * e2e/test/real-node-suites.json (read by jest.config.js) is what an older control plane (the version matrix) leaves out: a
 * suite that starts a real node but is not listed would fail there with a kubelet newer than its API
 * server, and a listed suite that starts none would be skipped for nothing.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { expect, test } from '@jest/globals';
import { repoRoot } from '@kubeplus-isolation/e2e';

const STARTS_A_REAL_NODE = /\b(startRealNodeCluster|startProjectNode|startSandboxNode|interruptNodeRun)\(/;

function suites(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const path = join(dir, e.name);
    if (e.isDirectory()) return suites(path);
    return e.name.endsWith('.test.ts') ? [relative(repoRoot(), path)] : [];
  });
}

/** Runs a node of the control plane's own minor on every minor of the matrix, so it is not listed. */
const EVERY_MINOR = 'e2e/test/kubernetes-versions-node.test.ts';

test('real-node-suites.json lists exactly the suites that start a real node (but the per-minor one)', () => {
  const starting = suites(join(repoRoot(), 'e2e', 'test'))
    .filter((f) => f !== EVERY_MINOR)
    .filter((f) => STARTS_A_REAL_NODE.test(readFileSync(join(repoRoot(), f), 'utf8')))
    .sort();
  const listed = JSON.parse(readFileSync(join(repoRoot(), 'e2e', 'test', 'real-node-suites.json'), 'utf8')) as string[];
  expect([...listed].sort()).toEqual(starting);
});
