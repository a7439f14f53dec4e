/**
 * The operator as the chart runs it, without installing the whole chart: the operator's
 * ServiceAccount and RBAC rendered by `helm template` from deploy/kubeplus-isolation (only
 * charts/operator/templates/{serviceaccount,rbac}.yaml: no webhook, no tamper-protection
 * policies), applied to the e2e cluster, and the operator process authenticated as that
 * ServiceAccount — so every API call it makes is authorized by exactly the chart's rules.
 * Used by the audit and forbidden-Kind fault suites.
 */
import { execFile } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import {
  type Cluster,
  type InstanceKind,
  installCrds,
  instanceKindCrd,
  isApiStatus,
  type LeasePreset,
  type RunningOperator,
  repoRoot,
  startOperator,
  waitFor,
  writeServiceAccountKubeconfig,
} from '@kubeplus-isolation/e2e';
import {
  ApiextensionsV1Api,
  AuthorizationV1Api,
  type KubeConfig,
  type KubernetesObject,
  KubernetesObjectApi,
  loadAllYaml,
} from '@kubernetes/client-node';

const run = promisify(execFile);
const CHART = join(repoRoot(), 'deploy', 'kubeplus-isolation');

export interface ChartRbac {
  /** `system:serviceaccount:<namespace>:<release>-operator` */
  readonly user: string;
  readonly serviceAccount: string;
  /** The chart's Lease name (`<release>-operator`), the only one its Role lets it renew. */
  readonly leaseName: string;
  /** The rendered objects, as applied. */
  readonly objects: readonly KubernetesObject[];
  /** Deletes the cluster-scoped objects (the namespaced ones go with the namespace). */
  remove(): Promise<void>;
}

/**
 * Renders the operator's ServiceAccount and RBAC for release `release` in `namespace` with the
 * umbrella chart's `values` (e.g. `{ operator: { instanceGroups: [...] } }`) and creates them.
 */
export async function applyChartOperatorRbac(
  cluster: Cluster,
  release: string,
  namespace: string,
  values: Record<string, unknown>,
): Promise<ChartRbac> {
  const valuesFile = join(cluster.dir, `${release}-rbac-values.json`);
  writeFileSync(valuesFile, JSON.stringify(values));
  const { stdout } = await run(
    join(cluster.state.assetsDir, 'helm'),
    [
      'template',
      release,
      CHART,
      '--namespace',
      namespace,
      '--values',
      valuesFile,
      '--show-only',
      'charts/operator/templates/serviceaccount.yaml',
      '--show-only',
      'charts/operator/templates/rbac.yaml',
    ],
    { maxBuffer: 16 * 1024 * 1024, env: { ...process.env, KUBECONFIG: '/dev/null' } },
  );
  const objects = (loadAllYaml(stdout) as KubernetesObject[]).filter((o) => o?.kind);
  const api = KubernetesObjectApi.makeApiClient(cluster.kc);
  for (const obj of objects) await api.create(obj);
  const serviceAccount = `${release}-operator`;
  return {
    user: `system:serviceaccount:${namespace}:${serviceAccount}`,
    serviceAccount,
    leaseName: `${release}-operator`,
    objects,
    async remove() {
      for (const obj of objects.filter((o) => o.metadata?.namespace === undefined)) {
        try {
          await api.delete(obj);
        } catch (error) {
          if (!isApiStatus(error, 404)) throw error;
        }
      }
    },
  };
}

/** Whether `kc`'s identity may `verb` `resource` in `group` (a SelfSubjectAccessReview). */
export async function can(kc: KubeConfig, verb: string, group: string, resource: string): Promise<boolean> {
  const review = await kc.makeApiClient(AuthorizationV1Api).createSelfSubjectAccessReview({
    body: { spec: { resourceAttributes: { verb, group, resource } } },
  });
  return review.status?.allowed === true;
}

/**
 * Starts the operator as the chart's Deployment configures it (leader election on the chart's
 * Lease in the release namespace, its Pod's namespace and name in the environment) against
 * `kubeconfigPath`, plus `args`; returns once /readyz answers 200.
 */
export function startChartOperator(
  cluster: Cluster,
  opts: {
    name: string;
    namespace: string;
    rbac: ChartRbac;
    kubeconfigPath: string;
    args?: readonly string[];
    lease?: LeasePreset;
  },
): Promise<RunningOperator> {
  return startOperator(cluster, {
    name: opts.name,
    kubeconfigPath: opts.kubeconfigPath,
    leaderElection: { namespace: opts.namespace, id: opts.rbac.leaseName, lease: opts.lease ?? 'default' },
    args: opts.args ?? [],
    env: { POD_NAMESPACE: opts.namespace, POD_NAME: opts.name },
  });
}

/** A kubeconfig authenticating as the chart's operator ServiceAccount (bound token). */
export function operatorKubeconfig(cluster: Cluster, namespace: string, rbac: ChartRbac): Promise<string> {
  return writeServiceAccountKubeconfig(cluster, {
    namespace,
    serviceAccount: rbac.serviceAccount,
    path: join(cluster.dir, `${rbac.serviceAccount}.kubeconfig`),
    create: false,
  });
}

/** A namespaced CRD labelled `registered-by: kubeplus` (as KubePlus registers Kinds), Established. */
export async function createInstanceCrd(kc: KubeConfig, crd: InstanceKind): Promise<void> {
  await installCrds(kc, [instanceKindCrd(crd)], 30_000);
}

/** Deletes the CRD (after its instances' finalizers were stripped) and waits until it is gone. */
export async function deleteInstanceCrd(kc: KubeConfig, crd: InstanceKind): Promise<void> {
  const ext = kc.makeApiClient(ApiextensionsV1Api);
  const name = `${crd.plural}.${crd.group}`;
  try {
    await ext.deleteCustomResourceDefinition({ name });
  } catch (error) {
    if (!isApiStatus(error, 404)) throw error;
  }
  await waitFor(
    `CRD ${name} to be gone`,
    async () => {
      try {
        await ext.readCustomResourceDefinition({ name });
        return false;
      } catch (error) {
        if (isApiStatus(error, 404)) return true;
        throw error;
      }
    },
    { timeoutMs: 60_000, intervalMs: 250 },
  );
}
