// Loaded outside jest's module registry: imports only packages (see global-setup.ts).
import type { ControlPlane } from '@kubeplus-isolation/e2e';

const CONTROL_PLANE_KEY = '__kubeplusIsolationE2eControlPlane';

/** Stops the control plane started by global-setup.ts (its temp dir is kept after a failure if KEEP_E2E_TMP=1). */
export default async function globalTeardown(): Promise<void> {
  const cp = (globalThis as Record<string, unknown>)[CONTROL_PLANE_KEY] as ControlPlane | undefined;
  if (!cp) return;
  await cp.stop();
  const kept = process.env.KEEP_E2E_TMP === '1' ? ` (temp dir ${cp.dir} kept if a test failed)` : '';
  process.stderr.write(`[e2e] control plane stopped${kept}\n`);
}
