#!/usr/bin/env node
/**
 * `make demo`: walks the two design documents' demo steps on a fresh local control plane with
 * the real webhook and operator processes. Exit status 0 when every step passed, 1 otherwise,
 * 2 for bad arguments; Ctrl-C tears everything down (exit 130).
 *
 *   node e2e/dist/demo/main.js [--keep]      (KEEP=1 is the same as --keep)
 */
import { dirname } from 'node:path';
import { realNodePreflight } from '../harness/node/preflight.js';
import type { DemoMode } from './environment.js';
import { bold, dim, Report, red } from './report.js';
import { Scenario } from './scenario.js';
import { DEMO_STEPS, SETUP_STEPS } from './steps/index.js';

const USAGE = `usage: make demo [ARGS="--keep --fake-nodes"] [KEEP=1]
       node e2e/dist/demo/main.js [--keep] [--fake-nodes]

Starts etcd, kube-apiserver, kube-controller-manager and kube-scheduler (temp dir) and, where the
machine can run one (root, overlayfs, cgroups), a real node node-a (kubelet, containerd with runc and gVisor's runsc) with
fake nodes node-b and node-c, and installs the Helm chart with helm: the webhook and the operator
run as Pods on node-a. Elsewhere (or with --fake-nodes) all three nodes are fake and the webhook
and the operator run as processes. Then it walks the demo steps of both design documents (node
isolation; sandbox isolation), printing each kubectl command, what was expected, what was seen
and a ✔/✘ mark. Exit status 0 only if every step passed.

  --keep        leave the cluster running afterwards (prints the KUBECONFIG to use); Ctrl-C stops it
  --fake-nodes  fake nodes and service processes even where a real node could run
  --help        this text
`;

function parseArgs(argv: readonly string[]): { keep: boolean; fakeNodes: boolean } | undefined {
  let keep = process.env.KEEP === '1' || process.env.KEEP === 'true';
  let fakeNodes = false;
  for (const arg of argv) {
    if (arg === '--keep') keep = true;
    else if (arg === '--fake-nodes') fakeNodes = true;
    else if (arg === '--help' || arg === '-h') {
      process.stdout.write(USAGE);
      process.exit(0);
    } else {
      process.stderr.write(`demo: unknown argument ${JSON.stringify(arg)}\n${USAGE}`);
      return undefined;
    }
  }
  return { keep, fakeNodes };
}

/** A real node where the machine allows one (saying why not, otherwise), unless --fake-nodes. */
function chooseMode(fakeNodes: boolean): DemoMode {
  if (fakeNodes) return 'fake-nodes';
  const missing = realNodePreflight();
  if (missing.length === 0) return 'real-node';
  process.stdout.write(
    `${dim(`This machine cannot run a real node (missing: ${missing.join('; ')}); the demo uses fake nodes and runs the services as processes.`)}\n`,
  );
  return 'fake-nodes';
}

async function main(): Promise<number> {
  const args = parseArgs(process.argv.slice(2));
  if (!args) return 2;
  const began = performance.now();
  const report = new Report();
  const scenario = new Scenario(report, chooseMode(args.fakeNodes));
  const env = scenario.env;

  // Ctrl-C: the harness's own handler (harness/process.ts), which runs next, kills every process
  // it started (components and services), runs the control plane's cleanup (temp dir) and
  // re-raises the signal.
  const onSignal = (signal: NodeJS.Signals): void => {
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
    process.stderr.write(`\n${red(`demo: ${signal}: tearing everything down`)}\n`);
    if (!env.cp) process.exit(130);
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);

  process.stdout.write(
    `${bold('kubeplus-isolation demo')}: node isolation (seed 1) and sandbox isolation (seed 2) on a local control plane\n`,
  );
  let ok = false;
  try {
    if (await scenario.setup(SETUP_STEPS)) {
      await scenario.run(DEMO_STEPS);
    } else {
      process.stdout.write(red('\nsetup failed; the demo steps were not run\n'));
    }
    ok = report.summary(performance.now() - began);
    if (!ok && env.cp) {
      process.stdout.write(
        `\n${dim('log tails of every component and service (full logs in')} ${env.cp.state.logDir}${dim('):')}\n`,
      );
      process.stdout.write(`${env.logReport(20)}\n`);
    }
    if (args.keep && env.cp) {
      const cp = env.cp;
      process.stdout.write(
        `\n${bold('The cluster keeps running.')} In another terminal:\n` +
          `  export KUBECONFIG=${cp.kubeconfigPath}\n` +
          `  export PATH=${dirname(env.assets?.kubectl ?? '')}:$PATH   # kubectl ${cp.state.kubernetesVersion}\n` +
          `  kubectl get nodes,pods -A -o wide\n` +
          `Manifests: ${env.manifestsDir}   Logs: ${cp.state.logDir}\n` +
          `Press Ctrl-C here to stop it (everything is removed, including ${cp.dir}).\n`,
      );
      await new Promise<never>(() => {
        // Until Ctrl-C: the fake nodes' heartbeats live in this process.
        setInterval(() => {}, 1 << 30);
      });
    }
  } finally {
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
    await env.stop();
  }
  return ok ? 0 : 1;
}

main().then(
  (code) => process.exit(code),
  (error: unknown) => {
    process.stderr.write(`demo: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
    process.exit(1);
  },
);
