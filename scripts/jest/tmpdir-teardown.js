// Jest globalTeardown: removes the run's temporary directory (see tmpdir-setup.js).
import { rmSync } from 'node:fs';

export default function teardown() {
  const dir = process.env.KUBEPLUS_ISOLATION_TEST_TMPDIR;
  if (dir) rmSync(dir, { recursive: true, force: true });
}
