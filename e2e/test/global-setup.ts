// Loaded by jest outside its module registry (plain Node resolution), so it imports only the
// package — @kubeplus-isolation/e2e, i.e. e2e/dist, built by `make build` — never a relative .ts file.
import {
  E2E_STATE_ENV,
  installSandboxCrds,
  minorOf,
  nodeMinor,
  requestedMinor,
  startControlPlane,
} from '@kubeplus-isolation/e2e';

/** globalThis key under which the ControlPlane is handed to global-teardown.ts (same constant there). */
const CONTROL_PLANE_KEY = '__kubeplusIsolationE2eControlPlane';

/**
 * Starts ONE control plane for the whole e2e run and installs the Agent Sandbox CRDs. Suites find it
 * through KUBEPLUS_E2E_STATE (state.json in the run's temp dir); global-teardown.ts stops it.
 * KUBEPLUS_ISOLATION_K8S=1.<minor> runs it on that minor (the version matrix): the API server must
 * really be that version, and the real-node suites are not run below the node's minor (jest.config.js).
 */
export default async function globalSetup(): Promise<void> {
  const log = (message: string): void => {
    process.stderr.write(`[e2e] ${message}\n`);
  };
  const cp = await startControlPlane({ log });
  (globalThis as Record<string, unknown>)[CONTROL_PLANE_KEY] = cp;
  try {
    const running = minorOf(cp.state.kubernetesVersion);
    const wanted = requestedMinor() ?? nodeMinor();
    if (running !== wanted) {
      throw new Error(
        `the control plane runs Kubernetes ${cp.state.kubernetesVersion}, but ${wanted} was asked for (KUBEPLUS_ISOLATION_K8S=${process.env.KUBEPLUS_ISOLATION_K8S ?? ''}; binaries from ${cp.state.assetsDir})`,
      );
    }
    log(`Kubernetes ${cp.state.kubernetesVersion} (kube-apiserver, kube-controller-manager, kube-scheduler, kubectl)`);
    if (running !== nodeMinor()) {
      log(
        `the real-node suites are not run on ${running}: the real node's kubelet is ${nodeMinor()} and must not be newer than its API server (e2e/test/real-node-suites.json; they run on ${nodeMinor()})`,
      );
    }
    const crds = await installSandboxCrds(cp.kc);
    log(`installed CRDs ${crds.join(', ')}`);
  } catch (error) {
    await cp.stop({ failed: true });
    throw error;
  }
  process.env[E2E_STATE_ENV] = cp.statePath;
  log(`kubeconfig: ${cp.kubeconfigPath}  logs: ${cp.state.logDir}`);
}
