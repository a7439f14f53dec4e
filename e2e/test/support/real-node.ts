import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import {
  AGENT_SANDBOX_NAMESPACE,
  FatalWaitError,
  imageArchives,
  installAgentSandbox,
  installOpenReportsCrds,
  metricsReaderToken,
  projectImage,
  type RealNodeCluster,
  repoRoot,
  startRealNodeCluster,
  waitFor,
} from '@kubeplus-isolation/e2e';
import { NODE_ISOLATION_ANNOTATION, NODE_ISOLATION_ENABLED_LABEL } from '@kubeplus-isolation/spec';
import { CoreV1Api, type KubeConfig, type V1Pod } from '@kubernetes/client-node';
import { type KubectlResult, kubectl as runKubectl } from '../../src/demo/kubectl.js';
import { createAgent, ensureAgentCrd } from './operator.js';

const run = promisify(execFile);

/** The chart, as a user installs it. */
export const CHART = join(repoRoot(), 'deploy', 'kubeplus-isolation');
/** Where the real-node suites install it, and KubePlus's platform namespace. */
export const RELEASE_NS = 'kubeplus-system';
export const PLATFORM_NS = 'kubeplus';
/** The chart values every real-node suite needs: the instance Kind the operator may act on. */
export const INSTANCE_GROUP_VALUES = [
  '--set',
  'operator.instanceGroups[0].group=cloudark.io',
  '--set',
  'operator.instanceGroups[0].resources[0]=agents',
] as const;

/** A tenant's node-isolation mandate for a pool: its label and the toleration of its taint. */
export function poolMandate(pool: string) {
  return {
    nodeSelector: { pool },
    tolerations: [{ key: 'dedicated', operator: 'Equal', value: pool, effect: 'NoSchedule' }],
  };
}

/**
 * Issue 39: a cloud admin as EKS (access entries), GKE and AKS (Entra ID) make them: bound to
 * `cluster-admin` by a ClusterRoleBinding, in no group but system:authenticated (never
 * system:masters). Creates the binding and returns helm's flags to act as that user (impersonation
 * by the harness's admin: the API server then sees only this user), e.g. for `helm test`.
 */
export async function cloudAdminHelmArgs(cluster: RealNodeCluster, user = 'cloud-admin'): Promise<string[]> {
  await kubectl(cluster, 'create', 'clusterrolebinding', user, '--clusterrole=cluster-admin', `--user=${user}`);
  // RBAC's informer has the binding once the user may do what cluster-admin may (not the guard's verb:
  // that is what the test proves).
  await waitFor(
    `RBAC to bind ${user} to cluster-admin`,
    async () =>
      (await kubectl(cluster, 'auth', 'can-i', 'create', 'namespaces', `--as=${user}`).catch(() => 'no')).trim() ===
      'yes',
    { timeoutMs: 30_000 },
  );
  return ['--kube-as-user', user];
}

/** helm against the cluster; a failure carries helm's stderr and the tails of every log. */
export async function helm(cluster: RealNodeCluster, ...args: string[]): Promise<string> {
  try {
    const { stdout } = await run(
      join(cluster.cp.state.assetsDir, 'helm'),
      ['--kubeconfig', cluster.cp.kubeconfigPath, ...args],
      { maxBuffer: 8 << 20 },
    );
    return stdout;
  } catch (error) {
    const e = error as Error & { stderr?: string };
    throw new Error(`helm ${args.join(' ')} failed: ${e.message}\n${e.stderr ?? ''}\n${cluster.logReport(15)}`);
  }
}

/** `helm install` of the chart into RELEASE_NS with INSTANCE_GROUP_VALUES (+ `extra`), waiting until every Pod is Ready. */
export function installChart(cluster: RealNodeCluster, release: string, ...extra: string[]): Promise<string> {
  return helm(
    cluster,
    'install',
    release,
    CHART,
    '--namespace',
    RELEASE_NS,
    ...INSTANCE_GROUP_VALUES,
    ...extra,
    '--wait',
    '--timeout',
    '180s',
  );
}

/** The webhook image (it carries node): the probe Pods run scripts with it. */
export const probeImage = (): string => projectImage('webhook');

/** kubectl against the cluster, as a user types it; resolves with stdout. */
export async function kubectl(cluster: RealNodeCluster, ...args: string[]): Promise<string> {
  const bin = join(cluster.cp.state.assetsDir, 'kubectl');
  try {
    const { stdout } = await run(bin, ['--kubeconfig', cluster.cp.kubeconfigPath, ...args], { maxBuffer: 8 << 20 });
    return stdout;
  } catch (error) {
    const e = error as Error & { stderr?: string };
    throw new Error(`kubectl ${args.join(' ')} failed: ${e.message}\n${e.stderr ?? ''}`);
  }
}

/** kubectl with `input` on stdin (e.g. `apply -f -`); resolves with its exit code and output, never rejects. */
export function kubectlWithInput(cluster: RealNodeCluster, input: string, ...args: string[]): Promise<KubectlResult> {
  const binary = join(cluster.cp.state.assetsDir, 'kubectl');
  return runKubectl({ binary, kubeconfig: cluster.cp.kubeconfigPath, cwd: cluster.cp.dir }, args, input);
}

/**
 * A Pod that runs one Node.js script on the real node and exits (restricted Pod Security: non-root,
 * read-only root, no capabilities, RuntimeDefault seccomp), never pulling (the image is imported).
 */
export function probePod(name: string, script: string, extra: Partial<NonNullable<V1Pod['spec']>> = {}): V1Pod {
  return {
    metadata: { name },
    spec: {
      restartPolicy: 'Never',
      automountServiceAccountToken: true,
      securityContext: { runAsNonRoot: true, runAsUser: 65532, seccompProfile: { type: 'RuntimeDefault' } },
      containers: [
        {
          name: 'probe',
          image: probeImage(),
          imagePullPolicy: 'Never',
          command: ['node', '-e', script],
          securityContext: {
            allowPrivilegeEscalation: false,
            readOnlyRootFilesystem: true,
            capabilities: { drop: ['ALL'] },
          },
        },
      ],
      ...extra,
    },
  };
}

/** Creates `pod` in `namespace`, waits for it to finish, and returns its phase and log. */
export async function runProbe(
  kc: KubeConfig,
  namespace: string,
  pod: V1Pod,
  timeoutMs = 90_000,
): Promise<{ phase: string; log: string; pod: V1Pod }> {
  const core = kc.makeApiClient(CoreV1Api);
  const name = pod.metadata?.name ?? '';
  await core.createNamespacedPod({ namespace, body: pod });
  const done = await waitFor(
    `probe Pod ${namespace}/${name} to finish`,
    async (observe) => {
      const p = await core.readNamespacedPod({ namespace, name });
      const waiting = p.status?.containerStatuses?.[0]?.state?.waiting;
      observe({ phase: p.status?.phase, waiting, conditions: p.status?.conditions });
      if (waiting?.reason && /Err|Invalid|BackOff/.test(waiting.reason)) {
        throw new FatalWaitError(`probe ${name} cannot start: ${waiting.reason}: ${waiting.message ?? ''}`);
      }
      return p.status?.phase === 'Succeeded' || p.status?.phase === 'Failed' ? p : undefined;
    },
    { timeoutMs, intervalMs: 250 },
  );
  const log = await core.readNamespacedPodLog({ namespace, name });
  return { phase: done.status?.phase ?? '', log: String(log), pod: done };
}

/**
 * A real node with the project's image archives imported (and `extraImages`, e.g. a previous
 * release's), its progress logged as `[real-node]`.
 */
export function startProjectNode(extraImages: readonly string[] = []): Promise<RealNodeCluster> {
  return startRealNodeCluster({
    images: [...imageArchives(), ...extraImages],
    log: (m) => process.stderr.write(`[real-node] ${m}\n`),
  });
}

/**
 * A real node for the Sandbox suites: the upstream Agent Sandbox controller, the OpenReports CRDs,
 * the node labelled for `pool` (prepareChartNode), the platform's classes `runc` and `kata` (no
 * Kata runtime on this node; the harness installs `gvisor`), and the chart installed as `kpi`
 * with `chartArgs`.
 */
export async function startSandboxNode(pool: string, ...chartArgs: string[]): Promise<RealNodeCluster> {
  const cluster = await startProjectNode();
  await prepareSandboxNode(cluster, pool, ...chartArgs);
  return cluster;
}

/** What startSandboxNode does once the node runs (for a suite that starts it with images of its own). */
export async function prepareSandboxNode(
  cluster: RealNodeCluster,
  pool: string,
  ...chartArgs: string[]
): Promise<void> {
  await installAgentSandbox(cluster.cp.kc);
  await installOpenReportsCrds(cluster.cp.kc);
  await prepareChartNode(cluster, { pool });
  await kubectlWithInput(
    cluster,
    'apiVersion: node.k8s.io/v1\nkind: RuntimeClass\nmetadata: {name: runc}\nhandler: runc\n---\n' +
      'apiVersion: node.k8s.io/v1\nkind: RuntimeClass\nmetadata: {name: kata}\nhandler: kata\n',
    'apply',
    '-f',
    '-',
  );
  // The upstream controller runs on the lab's one node, which is also the tenant's pool: a platform
  // exempts its own controllers' namespace from exclusive pools, which also keeps the audit from
  // counting them as foreign Pods on the pool (issue 38). A suite's own chartArgs come after.
  await installChart(
    cluster,
    'kpi',
    '--set-json',
    `global.nodeIsolation.exclusivePools.exemptNamespaces=${JSON.stringify([AGENT_SANDBOX_NAMESPACE])}`,
    ...chartArgs,
  );
}

/**
 * What every chart suite on the real node starts from: the release namespace (restricted Pod
 * Security, as a user would give the chart), KubePlus's platform namespace, the Agent Kind, and,
 * with `pool`, the node labelled for that pool.
 */
export async function prepareChartNode(cluster: RealNodeCluster, opts: { pool?: string } = {}): Promise<void> {
  await kubectl(cluster, 'create', 'namespace', RELEASE_NS);
  await kubectl(cluster, 'label', 'namespace', RELEASE_NS, 'pod-security.kubernetes.io/enforce=restricted');
  await kubectl(cluster, 'create', 'namespace', PLATFORM_NS);
  if (opts.pool !== undefined) await kubectl(cluster, 'label', 'node', cluster.nodeName, `pool=${opts.pool}`);
  await ensureAgentCrd(cluster.cp.kc);
}

/** The pool's mandate is on `pod`: its nodeSelector, and its toleration exactly once. */
export function carriesPoolMandate(pool: string, pod: V1Pod): boolean {
  return (
    pod.spec?.nodeSelector?.pool === pool &&
    (pod.spec?.tolerations ?? []).filter((t) => t.key === 'dedicated' && t.value === pool).length === 1
  );
}

/**
 * A tenant Pod of the imported pause image. `parked`: a nodeSelector no node matches besides
 * whatever the webhook merges, so stored Pods stay Pending instead of running by the dozen on a
 * 2-core node.
 */
export function tenantPod(name: string, opts: { parked?: boolean } = {}): V1Pod {
  return {
    metadata: { name },
    spec: {
      containers: [{ name: 'main', image: 'kubeplus-isolation.local/pause:1', imagePullPolicy: 'Never' }],
      terminationGracePeriodSeconds: 0,
      ...(opts.parked ? { nodeSelector: { 'kubeplus-isolation.e2e/parked': 'true' } } : {}),
    },
  };
}

/**
 * Server-side dry-run Pod CREATEs in `namespace`, back to back, until `done()`: the admission
 * chain runs in full for each, nothing is stored. How many were admitted, and those without the
 * pool's mandate.
 */
export async function admitDryRunWhile(
  kc: KubeConfig,
  namespace: string,
  pool: string,
  done: () => boolean,
): Promise<{ admitted: number; unpatched: string[] }> {
  const core = kc.makeApiClient(CoreV1Api);
  let admitted = 0;
  const unpatched: string[] = [];
  for (let i = 0; !done(); i++) {
    const pod = await core.createNamespacedPod({ namespace, body: tenantPod(`load-${i}`), dryRun: 'All' });
    admitted++;
    if (!carriesPoolMandate(pool, pod)) unpatched.push(`load-${i}`);
  }
  return { admitted, unpatched };
}

/**
 * An Agent in the platform namespace asking for `mandate`: waits until the operator has labelled
 * its tenant namespace and the namespace's default ServiceAccount exists (Pods can be created).
 */
export async function isolateTenant(cluster: RealNodeCluster, tenant: string, mandate: unknown): Promise<void> {
  const core = cluster.cp.kc.makeApiClient(CoreV1Api);
  await createAgent(cluster.cp.kc, PLATFORM_NS, tenant, { [NODE_ISOLATION_ANNOTATION]: JSON.stringify(mandate) });
  await waitFor(
    `namespace ${tenant} isolated`,
    async () =>
      (await core.readNamespace({ name: tenant }).catch(() => undefined))?.metadata?.labels?.[
        NODE_ISOLATION_ENABLED_LABEL
      ] === 'true' || undefined,
    { timeoutMs: 60_000 },
  );
  await waitFor(
    'ServiceAccount default in the tenant namespace',
    () => core.readNamespacedServiceAccount({ name: 'default', namespace: tenant }),
    { timeoutMs: 30_000 },
  );
}

/**
 * A token that may read the release's secure metrics (the chart's default, issue 34): a
 * ServiceAccount in RELEASE_NS bound to `<release>-kubeplus-isolation-metrics-reader`, as a
 * platform binds its Prometheus.
 */
export function releaseMetricsToken(cluster: RealNodeCluster, release: string): Promise<string> {
  return metricsReaderToken(cluster.cp.kc, {
    namespace: RELEASE_NS,
    clusterRole: `${release}-kubeplus-isolation-metrics-reader`,
  });
}
