// Jest globalSetup of the unit and chart projects: every temporary file or directory a test (or a
// process it starts) makes through os.tmpdir() lands in one directory of this run, which
// tmpdir-teardown.js removes — a test that forgets to clean up leaves nothing on the machine.
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export default function setup() {
  const dir = mkdtempSync(join(tmpdir(), 'kubeplus-isolation-tests-'));
  process.env.KUBEPLUS_ISOLATION_TEST_TMPDIR = dir;
  process.env.TMPDIR = dir;
}
