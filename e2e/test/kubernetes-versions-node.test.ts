/**
 * The chart on a real node of each older minor of the version matrix (e2e/README.md "Kubernetes
 * versions"): the node's kubelet and kube-proxy are built from the same minor as the control plane
 * (a kubelet is never newer than its API server), the images are `make images`'s, and the chart is
 * installed as a user installs it.
 *
 * - `helm install --wait`: the webhook and operator Pods are Ready on the node;
 * - the operator (from its Pod) isolates an instance's namespace, and a tenant Pod is patched by
 *   the webhook through its Service and runs on the pool node (labelled and tainted for it);
 * - `helm test` passes (its Pod sees a dry-run Pod admitted with the mandate), run by a cloud admin:
 *   a user bound to cluster-admin by a ClusterRoleBinding, not in system:masters (issue 39).
 *
 * On the newest minor chart-real-node.test.ts and chart-lifecycle.test.ts prove all of this and
 * more on the same kind of node, so this suite is skipped there (it says so).
 */
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { e2eStatePath, minorOf, nodeMinor, type RealNodeCluster, readState, waitFor } from '@kubeplus-isolation/e2e';
import { NODE_ISOLATION_ANNOTATION, NODE_ISOLATION_ENABLED_LABEL } from '@kubeplus-isolation/spec';
import { CoreV1Api } from '@kubernetes/client-node';
import { createAgent } from './support/operator.js';
import {
  cloudAdminHelmArgs,
  helm,
  installChart,
  kubectl,
  PLATFORM_NS,
  poolMandate,
  prepareChartNode,
  probePod,
  RELEASE_NS,
  startProjectNode,
} from './support/real-node.js';

const minor = minorOf(readState(e2eStatePath()).kubernetesVersion);
const newest = minor === nodeMinor();
const RELEASE = 'kpi';
const INSTANCE = 'team-v';
const POOL = 'team-v-pool';
const MANDATE = poolMandate(POOL);

(newest ? describe.skip : describe)(
  `the chart on a real node of Kubernetes ${minor}${newest ? ' [skipped on the newest minor: chart-real-node and chart-lifecycle prove it there]' : ''}`,
  () => {
    let cluster: RealNodeCluster;

    beforeAll(async () => {
      cluster = await startProjectNode();
      await prepareChartNode(cluster, { pool: POOL });
      await installChart(cluster, RELEASE);
    });

    afterAll(async () => {
      await cluster?.stop();
    });

    test("the node is this minor: its kubelet reports the API server's minor", async () => {
      const node = await cluster.cp.kc.makeApiClient(CoreV1Api).readNode({ name: cluster.nodeName });
      expect(minorOf(node.status?.nodeInfo?.kubeletVersion ?? '')).toBe(minor);
      expect(minorOf(cluster.cp.state.kubernetesVersion)).toBe(minor);
    });

    test('helm install: the webhook and operator Pods are Ready on the node', async () => {
      const pods = (await cluster.cp.kc.makeApiClient(CoreV1Api).listNamespacedPod({ namespace: RELEASE_NS })).items;
      const ready = pods.filter((p) => p.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True'));
      // Two replicas each (the chart's defaults).
      expect(ready.map((p) => p.metadata?.labels?.['app.kubernetes.io/name']).sort()).toEqual([
        'operator',
        'operator',
        'webhook',
        'webhook',
      ]);
      expect(ready.every((p) => p.spec?.nodeName === cluster.nodeName)).toBe(true);
    });

    test("the operator isolates an instance's namespace and a tenant Pod is patched through the webhook's Service and runs on the pool node", async () => {
      const core = cluster.cp.kc.makeApiClient(CoreV1Api);
      // The pool node is tainted for the tenant (seed 1 step 1): only a Pod carrying the mandate runs there.
      await kubectl(cluster, 'taint', 'node', cluster.nodeName, `dedicated=${POOL}:NoSchedule`);
      await createAgent(cluster.cp.kc, PLATFORM_NS, INSTANCE, { [NODE_ISOLATION_ANNOTATION]: JSON.stringify(MANDATE) });
      await waitFor(
        `the operator to isolate namespace ${INSTANCE}`,
        async () => {
          const n = await core.readNamespace({ name: INSTANCE }).catch(() => undefined);
          return n?.metadata?.labels?.[NODE_ISOLATION_ENABLED_LABEL] === 'true' || undefined;
        },
        { timeoutMs: 60_000 },
      );
      const pod = probePod('tenant-probe', 'console.log("ran")');
      await waitFor(
        'the webhook to patch a tenant Pod (its namespace is in the informer)',
        async () => {
          const created = await core.createNamespacedPod({ namespace: INSTANCE, body: pod, dryRun: 'All' });
          return created.spec?.nodeSelector?.pool === POOL || undefined;
        },
        { timeoutMs: 30_000 },
      );
      await core.createNamespacedPod({ namespace: INSTANCE, body: pod });
      const done = await waitFor(
        'the tenant Pod to run to completion',
        async () => {
          const p = await core.readNamespacedPod({ namespace: INSTANCE, name: 'tenant-probe' });
          return p.status?.phase === 'Succeeded' || p.status?.phase === 'Failed' ? p : undefined;
        },
        { timeoutMs: 120_000 },
      );
      expect(done.status?.phase).toBe('Succeeded');
      expect(done.spec?.nodeName).toBe(cluster.nodeName);
      expect(done.spec?.nodeSelector).toEqual(MANDATE.nodeSelector);
      expect(done.spec?.tolerations).toEqual(expect.arrayContaining(MANDATE.tolerations));
      // helm test's Pod runs in the release namespace, without the tenant's toleration.
      await kubectl(cluster, 'taint', 'node', cluster.nodeName, 'dedicated-');
    });

    test('helm test passes, run by a cluster-admin user who is not in system:masters (issue 39)', async () => {
      const asCloudAdmin = await cloudAdminHelmArgs(cluster);
      const out = await helm(cluster, 'test', RELEASE, '--namespace', RELEASE_NS, '--timeout', '180s', ...asCloudAdmin);
      expect(out).toMatch(/Phase:\s+Succeeded/);
    });
  },
);
