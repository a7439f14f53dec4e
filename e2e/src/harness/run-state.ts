import { Cluster } from './cluster.js';

/** Environment variable the e2e global setup sets to the shared control plane's state.json. */
export const E2E_STATE_ENV = 'KUBEPLUS_E2E_STATE';

/** Path of the shared control plane's state.json, from KUBEPLUS_E2E_STATE. */
export function e2eStatePath(): string {
  const path = process.env[E2E_STATE_ENV];
  if (!path) {
    throw new Error(
      `${E2E_STATE_ENV} is not set: run e2e suites through \`make test-e2e\` (jest --selectProjects e2e), whose global setup starts the control plane`,
    );
  }
  return path;
}

/** The e2e run's shared control plane (started by e2e/test/global-setup.ts). */
export function connectE2eCluster(): Promise<Cluster> {
  return Cluster.connect(e2eStatePath());
}
