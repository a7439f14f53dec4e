// Loaded outside jest's module registry: imports only packages (see global-setup.ts).
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Circus } from '@jest/types';
import { E2E_STATE_ENV, FAILURE_MARKER, logReport, readState } from '@kubeplus-isolation/e2e';
import { TestEnvironment } from 'jest-environment-node';

const TAIL_LINES = 25;

function testPath(test: Circus.TestEntry | undefined): string {
  const names: string[] = [];
  for (let block: Circus.TestEntry | Circus.DescribeBlock | undefined = test; block; block = block.parent) {
    if (block.name !== 'ROOT_DESCRIBE_BLOCK') names.unshift(block.name);
  }
  return names.join(' › ');
}

/**
 * The e2e test environment: Node's, plus, when a test or hook fails, (1) a FAILED marker in the
 * control plane's temp dir (so teardown keeps it when KEEP_E2E_TMP=1) and (2) the tails of every
 * component and service log on stderr, so the failure explains itself without digging.
 */
export default class E2eEnvironment extends TestEnvironment {
  handleTestEvent(event: Circus.Event): void {
    if (event.name !== 'test_fn_failure' && event.name !== 'hook_failure') return;
    const statePath = process.env[E2E_STATE_ENV];
    if (!statePath) return;
    const state = readState(statePath);
    writeFileSync(join(state.dir, FAILURE_MARKER), `${new Date().toISOString()}\n`, { flag: 'a' });
    const what = event.name === 'test_fn_failure' ? `test "${testPath(event.test)}"` : `${event.hook.type} hook`;
    process.stderr.write(
      `\n[e2e] ${what} failed; log tails follow (full logs in ${state.logDir}):\n${logReport(state.logDir, TAIL_LINES)}\n[e2e] end of log tails\n`,
    );
  }
}
