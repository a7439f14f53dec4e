// Loaded by jest outside its module registry (plain Node resolution), so it imports only the
// package — @kubeplus-isolation/e2e, i.e. e2e/dist, built by `make build` — never a relative .ts file.
import { E2E_STATE_ENV, installSandboxCrds, startControlPlane } from '@kubeplus-isolation/e2e';

/** globalThis key under which the ControlPlane is handed to global-teardown.ts (same constant there). */
const CONTROL_PLANE_KEY = '__kubeplusIsolationE2eControlPlane';

/**
 * Starts ONE control plane for the whole e2e run and installs the Agent Sandbox CRDs. Suites find it
 * through KUBEPLUS_E2E_STATE (state.json in the run's temp dir); global-teardown.ts stops it.
 */
export default async function globalSetup(): Promise<void> {
  const log = (message: string): void => {
    process.stderr.write(`[e2e] ${message}\n`);
  };
  const cp = await startControlPlane({ log });
  (globalThis as Record<string, unknown>)[CONTROL_PLANE_KEY] = cp;
  try {
    const crds = await installSandboxCrds(cp.kc);
    log(`installed CRDs ${crds.join(', ')}`);
  } catch (error) {
    await cp.stop({ failed: true });
    throw error;
  }
  process.env[E2E_STATE_ENV] = cp.statePath;
  log(`kubeconfig: ${cp.kubeconfigPath}  logs: ${cp.state.logDir}`);
}
