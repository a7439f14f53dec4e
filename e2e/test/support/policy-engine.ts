/**
^ * The admission-policy engine of node isolation (deploy/kubeplus-isolation/files/node-isolation-params-crd.yaml and node-isolation-engine.yaml: the
 * NodeIsolation CRD, one MutatingAdmissionPolicy and its binding) installed on the shared test
 * cluster for one suite, and removed after it.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { isDeepStrictEqual } from 'node:util';
import { isApiStatus, repoRoot, testPod, waitFor } from '@kubeplus-isolation/e2e';
import {
  NODE_ISOLATION_PARAMS_API_VERSION,
  NODE_ISOLATION_PARAMS_KIND,
  NODE_ISOLATION_PARAMS_NAME,
} from '@kubeplus-isolation/spec';
import {
  ApiextensionsV1Api,
  CoreV1Api,
  CustomObjectsApi,
  type KubeConfig,
  type KubernetesObject,
  KubernetesObjectApi,
  loadAllYaml,
} from '@kubernetes/client-node';

const [PARAMS_GROUP = '', PARAMS_VERSION = ''] = NODE_ISOLATION_PARAMS_API_VERSION.split('/');
export const NODE_ISOLATION_PARAMS = {
  group: PARAMS_GROUP,
  version: PARAMS_VERSION,
  plural: 'nodeisolations',
  kind: NODE_ISOLATION_PARAMS_KIND,
  name: NODE_ISOLATION_PARAMS_NAME,
} as const;
const CRD = `${NODE_ISOLATION_PARAMS.plural}.${NODE_ISOLATION_PARAMS.group}`;

export interface PolicyEngine {
  /** The fixture's objects, in the order they were created. */
  objects: readonly KubernetesObject[];
  uninstall(): Promise<void>;
}

/** The chart's verbatim files (deploy/kubeplus-isolation/files/), their objects in file order. */
export function chartFileObjects(...files: string[]): KubernetesObject[] {
  return files.flatMap((name) => {
    const text = readFileSync(join(repoRoot(), 'deploy', 'kubeplus-isolation', 'files', name), 'utf8');
    return (loadAllYaml(text) as (KubernetesObject | null)[]).filter((o): o is KubernetesObject => o !== null);
  });
}

/** The engine as the chart installs it: the NodeIsolation CRD (its own file, shared with refusal mode), then the engine. */
export function policyEngineObjects(): KubernetesObject[] {
  return chartFileObjects('node-isolation-params-crd.yaml', 'node-isolation-engine.yaml');
}

/**
 * Creates the fixture's objects (the engine's, unless others are given, e.g. refusal mode's;
 * the NodeIsolation CRD among them) (retrying while a previous suite's copy is still being deleted)
 * and waits for the CRD to be established.
 */
export async function installPolicyEngine(
  kc: KubeConfig,
  objects: KubernetesObject[] = policyEngineObjects(),
): Promise<PolicyEngine> {
  const api = KubernetesObjectApi.makeApiClient(kc);
  const created: KubernetesObject[] = [];
  const uninstall = async (): Promise<void> => {
    for (const obj of [...created].reverse()) {
      try {
        await api.delete(obj);
      } catch (error) {
        if (!isApiStatus(error, 404)) throw error;
      }
    }
  };
  try {
    for (const obj of objects) {
      await waitFor(
        `${obj.kind}/${obj.metadata?.name} to be created`,
        async (observe) => {
          try {
            await api.create(obj);
            return true;
          } catch (error) {
            observe(String(error));
            if (isApiStatus(error, 409)) return false; // an earlier copy is still terminating
            throw error;
          }
        },
        { timeoutMs: 60_000 },
      );
      created.push(obj);
    }
    await waitFor(
      'the NodeIsolation CRD to be established',
      async () => {
        const crd = await kc.makeApiClient(ApiextensionsV1Api).readCustomResourceDefinition({ name: CRD });
        return crd.status?.conditions?.some((c) => c.type === 'Established' && c.status === 'True') === true;
      },
      { timeoutMs: 30_000 },
    );
  } catch (error) {
    await uninstall();
    throw error;
  }
  return { objects, uninstall };
}

/**
 * Policies and their parameters load asynchronously: waits until a server-side dry-run of a bare
 * Pod in `namespace` comes back with `nodeSelector` (or, `undefined`, with none).
 */
export async function waitForPolicyResult(
  kc: KubeConfig,
  namespace: string,
  nodeSelector: Record<string, string> | undefined,
  timeoutMs = 60_000,
): Promise<void> {
  const body = testPod('policy-probe');
  await waitFor(
    `a dry-run Pod in ${namespace} to come back with nodeSelector ${JSON.stringify(nodeSelector ?? null)}`,
    async (observe) => {
      const pod = await kc.makeApiClient(CoreV1Api).createNamespacedPod({ namespace, body, dryRun: 'All' });
      observe(pod.spec?.nodeSelector ?? null);
      return isDeepStrictEqual(pod.spec?.nodeSelector ?? null, nodeSelector ?? null);
    },
    { timeoutMs },
  );
}

/**
 * Writes `namespace`'s NodeIsolation parameter with `spec` as the operator would, retrying while
 * the CRD's endpoint is not served yet; one already there (409) counts as written.
 */
export async function writeNodeIsolationParameter(kc: KubeConfig, namespace: string, spec: unknown): Promise<void> {
  const { group, version, plural, kind, name } = NODE_ISOLATION_PARAMS;
  await waitFor(
    'the NodeIsolation parameter to be accepted',
    async (observe) => {
      try {
        await kc.makeApiClient(CustomObjectsApi).createNamespacedCustomObject({
          group,
          version,
          plural,
          namespace,
          body: { apiVersion: `${group}/${version}`, kind, metadata: { name }, spec },
        });
        return true;
      } catch (error) {
        observe(String(error));
        if (isApiStatus(error, 409)) return true;
        if (isApiStatus(error, 404)) return false; // the CRD's endpoint is not served yet
        throw error;
      }
    },
    { timeoutMs: 30_000 },
  );
}
