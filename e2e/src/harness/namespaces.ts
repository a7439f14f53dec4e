import { CoreV1Api, type KubeConfig } from '@kubernetes/client-node';
import { isApiStatus } from './node-api.js';
import { waitFor } from './wait.js';

export interface NamespaceOptions {
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
  /** Wait for the ServiceAccount admission prerequisite (default/default SA) before returning (default true). */
  waitForServiceAccount?: boolean;
}

/** Creates a namespace named `<prefix>-<random>` and returns its name. */
export async function createTestNamespace(
  kc: KubeConfig,
  prefix: string,
  opts: NamespaceOptions = {},
): Promise<string> {
  const core = kc.makeApiClient(CoreV1Api);
  const ns = await core.createNamespace({
    body: { metadata: { generateName: `${prefix}-`, labels: opts.labels, annotations: opts.annotations } },
  });
  const name = ns.metadata?.name;
  if (!name) throw new Error(`created namespace with prefix ${prefix} has no name`);
  if (opts.waitForServiceAccount ?? true) {
    // Pods are rejected by the ServiceAccount admission plugin until the controller has created it.
    await waitFor(
      `ServiceAccount default in namespace ${name}`,
      () => core.readNamespacedServiceAccount({ name: 'default', namespace: name }),
      {
        timeoutMs: 30_000,
      },
    );
  }
  return name;
}

/** Deletes a namespace and waits until the namespace controller has finalized it (404). */
export async function deleteNamespace(kc: KubeConfig, name: string, timeoutMs = 120_000): Promise<void> {
  const core = kc.makeApiClient(CoreV1Api);
  try {
    await core.deleteNamespace({ name });
  } catch (error) {
    if (isApiStatus(error, 404)) return;
    throw error;
  }
  await waitFor(
    `namespace ${name} to be finalized and removed`,
    async (observe) => {
      try {
        const ns = await core.readNamespace({ name });
        observe({ phase: ns.status?.phase, conditions: ns.status?.conditions?.filter((c) => c.status === 'True') });
        return false;
      } catch (error) {
        if (isApiStatus(error, 404)) return true;
        throw error;
      }
    },
    { timeoutMs, intervalMs: 500 },
  );
}
