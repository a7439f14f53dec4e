/**
 * `make clean-node`: removes every trace of e2e, demo and bench runs that died without cleaning up
 * (SIGKILLed together with their watchdogs): real nodes' processes, gVisor sandboxes, cgroup roots
 * and veths, control planes' processes and temp dirs, the kubelet's host sysctls. Live runs are
 * left alone. Every run also does this before it starts (harness/dead-runs.ts). Exit status 1 when
 * something could not be removed.
 */
import { describeSweep, sweepDeadRuns } from '../harness/dead-runs.js';

if (process.argv.includes('--help') || process.argv.includes('-h')) {
  process.stdout.write(
    'Usage: node e2e/dist/clean-node/main.js\n\nRemoves what dead kubeplus-isolation test runs left on this host (real nodes, control planes, cgroups, veths, sysctls); live runs are untouched. Needs root, as the real node does.\n',
  );
  process.exit(0);
}
const report = sweepDeadRuns();
const text = describeSweep(report);
process.stdout.write(`${text === '' ? 'clean-node: nothing left by dead runs' : text}\n`);
process.exit(report.problems.length > 0 ? 1 : 0);
