/**
 * The exclusive-pools policy (deploy/kubeplus-isolation/files/exclusive-pools.yaml: the
 * ExclusivePools CRD and the ValidatingAdmissionPolicy) installed on the shared test cluster for
 * one suite with a binding as the chart renders it (templates/exclusive-pools.yaml), and Pod
 * writes judged by it: admitted (with the API server's Warning headers) or refused.
 */
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { type Cluster, isApiStatus, repoRoot, waitFor } from '@kubeplus-isolation/e2e';
import {
  AdmissionregistrationV1Api,
  ApiextensionsV1Api,
  CoreV1Api,
  CustomObjectsApi,
  type KubeConfig,
  type KubernetesObject,
  KubernetesObjectApi,
  loadAllYaml,
  type V1Pod,
  type V1ValidatingAdmissionPolicyBinding,
} from '@kubernetes/client-node';
import { mergePatch, statusMessage } from './operator.js';
import { admissionWarnings } from './operator-sandbox.js';

const run = promisify(execFile);

export const EXCLUSIVE_POOLS = {
  group: 'isolation.kubeplus.io',
  version: 'v1alpha1',
  plural: 'exclusivepools',
  name: 'exclusive-pools',
} as const;
export const EXCLUSIVE_POOLS_POLICY = 'kubeplus-isolation-exclusive-pools';
/** The namespaces the chart always exempts (its release namespace is added). */
export const SYSTEM_NAMESPACES = ['kube-system', 'kube-public', 'kube-node-lease'] as const;

export type ValidationAction = 'Deny' | 'Warn' | 'Audit';

export function exclusivePoolsObjects(): KubernetesObject[] {
  const text = readFileSync(join(repoRoot(), 'deploy', 'kubeplus-isolation', 'files', 'exclusive-pools.yaml'), 'utf8');
  return (loadAllYaml(text) as (KubernetesObject | null)[]).filter((o): o is KubernetesObject => o !== null);
}

/** The binding the chart renders (templates/exclusive-pools.yaml) for these values. */
export function exclusivePoolsBinding(
  actions: readonly ValidationAction[],
  exempt: readonly string[],
): V1ValidatingAdmissionPolicyBinding {
  return {
    apiVersion: 'admissionregistration.k8s.io/v1',
    kind: 'ValidatingAdmissionPolicyBinding',
    metadata: { name: EXCLUSIVE_POOLS_POLICY },
    spec: {
      policyName: EXCLUSIVE_POOLS_POLICY,
      validationActions: [...actions],
      paramRef: { name: EXCLUSIVE_POOLS.name, parameterNotFoundAction: 'Allow' },
      matchResources: {
        namespaceSelector: {
          matchExpressions: [
            { key: 'kubernetes.io/metadata.name', operator: 'NotIn', values: [...SYSTEM_NAMESPACES, ...exempt] },
          ],
        },
      },
    },
  };
}

export interface ExclusivePoolsInstall {
  setActions(actions: readonly ValidationAction[]): Promise<void>;
  uninstall(): Promise<void>;
}

/** Creates the CRD, the policy and the binding (retrying while a previous suite's copy terminates). */
export async function installExclusivePools(
  kc: KubeConfig,
  actions: readonly ValidationAction[],
  exempt: readonly string[],
): Promise<ExclusivePoolsInstall> {
  const api = KubernetesObjectApi.makeApiClient(kc);
  const objects = [...exclusivePoolsObjects(), exclusivePoolsBinding(actions, exempt) as KubernetesObject];
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
            if (isApiStatus(error, 409)) return false;
            throw error;
          }
        },
        { timeoutMs: 60_000 },
      );
      created.push(obj);
      if (obj.kind === 'CustomResourceDefinition') {
        await waitFor(
          'the ExclusivePools CRD to be established',
          async () => {
            const crd = await kc
              .makeApiClient(ApiextensionsV1Api)
              .readCustomResourceDefinition({ name: obj.metadata?.name ?? '' });
            return crd.status?.conditions?.some((c) => c.type === 'Established' && c.status === 'True') === true;
          },
          { timeoutMs: 30_000 },
        );
      }
    }
  } catch (error) {
    await uninstall();
    throw error;
  }
  return {
    uninstall,
    async setActions(next) {
      await kc
        .makeApiClient(AdmissionregistrationV1Api)
        .patchValidatingAdmissionPolicyBinding(
          { name: EXCLUSIVE_POOLS_POLICY, body: { spec: { validationActions: [...next] } } },
          mergePatch,
        );
    },
  };
}

export interface ExclusivePoolsParam {
  spec?: {
    namespaces?: number;
    selectors?: Record<string, Array<{ selector: Record<string, string>; owners: string[] }>>;
    taints?: Record<string, unknown>;
    mandated?: Record<string, { selector: Record<string, string>; tolerations: string[][] }>;
    /** Pool node name → the namespaces owning a pool it is in. */
    nodes?: Record<string, string[]>;
  };
}

export async function readExclusivePools(kc: KubeConfig): Promise<ExclusivePoolsParam | undefined> {
  try {
    return (await kc
      .makeApiClient(CustomObjectsApi)
      .getClusterCustomObject({ ...EXCLUSIVE_POOLS })) as ExclusivePoolsParam;
  } catch (error) {
    if (isApiStatus(error, 404)) return undefined;
    throw error;
  }
}

export type PodAdmission =
  | { allowed: true; pod: V1Pod; warnings: string[] }
  | { allowed: false; code: number; message: string };

async function judged(call: () => Promise<{ data: V1Pod; headers: Record<string, string> }>): Promise<PodAdmission> {
  try {
    const res = await call();
    return { allowed: true, pod: res.data, warnings: admissionWarnings(res.headers.warning) };
  } catch (error) {
    if (isApiStatus(error, 403) || isApiStatus(error, 422)) {
      return { allowed: false, code: (error as { code: number }).code, message: statusMessage(error) };
    }
    throw error;
  }
}

export function createPod(kc: KubeConfig, namespace: string, body: V1Pod, dryRun = false): Promise<PodAdmission> {
  return judged(() =>
    kc
      .makeApiClient(CoreV1Api)
      .createNamespacedPodWithHttpInfo({ namespace, body, ...(dryRun ? { dryRun: 'All' } : {}) }),
  );
}

/** A JSON merge patch of a Pod (an UPDATE through admission). */
export function patchPod(kc: KubeConfig, namespace: string, name: string, body: object): Promise<PodAdmission> {
  return judged(() =>
    kc.makeApiClient(CoreV1Api).patchNamespacedPodWithHttpInfo({ namespace, name, body }, mergePatch),
  );
}

/**
 * The chart's tamper guard of the parameter (templates/tamper-protection.yaml: the
 * `<release>-kubeplus-isolation-exclusive-pools-guard` policy and binding) rendered by `helm
 * template` with the chart's defaults, created on the cluster; returns its removal.
 */
export async function installExclusivePoolsGuard(cluster: Cluster, release: string): Promise<() => Promise<void>> {
  const { stdout } = await run(
    join(cluster.state.assetsDir, 'helm'),
    [
      'template',
      release,
      join(repoRoot(), 'deploy', 'kubeplus-isolation'),
      '--namespace',
      `${release}-system`,
      '--show-only',
      'templates/tamper-protection.yaml',
    ],
    { maxBuffer: 16 * 1024 * 1024, env: { ...process.env, KUBECONFIG: '/dev/null' } },
  );
  const objects = (loadAllYaml(stdout) as (KubernetesObject | null)[]).filter(
    (o): o is KubernetesObject => o?.metadata?.name?.endsWith('-exclusive-pools-guard') === true,
  );
  if (objects.length !== 2)
    throw new Error(`expected the guard's policy and binding, rendered ${objects.length} objects`);
  const api = KubernetesObjectApi.makeApiClient(cluster.kc);
  const created: KubernetesObject[] = [];
  const remove = async (): Promise<void> => {
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
      await api.create(obj);
      created.push(obj);
    }
  } catch (error) {
    await remove();
    throw error;
  }
  return remove;
}
