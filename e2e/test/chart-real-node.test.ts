/**
 * The Helm chart installed as a user installs it, on the harness's real node: the chart archive
 * `make package` produces (deploy/package.sh, image references filled in) and the images `make
 * images` built without a container engine, imported into the node's containerd; `helm install`
 * of the archive with the instance Kind the operator may act on, both NetworkPolicies on and a
 * PriorityClass for the webhook (the production guidance of the chart README), runs the webhook
 * and the operator as Pods.
 *
 * - webhook (2 replicas) and operator (2 replicas) Pods are Ready on the node;
 * - the operator reaches the API server from its Pod with its ServiceAccount: a leader holds the
 *   Lease and an annotated instance's tenant namespace gets the label and resolved annotation;
 * - the API server calls the webhook through its Service with the chart's TLS: a tenant
 *   Deployment's Pods carry the mandate, the webhook Pods count the patches, and the Pods are
 *   Running on the pool node (labeled and tainted for the tenant, as seed 1 step 4 shows);
 * - exclusive pools (validationActions [Deny]): the foreign Pod (the pool's label and
 *   `{operator: Exists}`, from a namespace without isolation) is refused and never bound to the
 *   pool's node, while the tenant's Pods keep running there;
 * - the archive carries the maintainers, sources and image references; its NetworkPolicies are
 *   admitted and select exactly the release's Pods, and the webhook Pods run at the priority of
 *   their PriorityClass. The node's CNI (bridge) does not enforce NetworkPolicies: what is proven
 *   here is that the policies the chart renders are valid and aimed at the right Pods and peers
 *   (the API server's address and port), and that the services work with them in place.
 */

import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import {
  isApiStatus,
  type RealNodeCluster,
  repoRoot,
  scrapeSecureMetrics,
  sumMetric,
  waitFor,
} from '@kubeplus-isolation/e2e';
import {
  NODE_ISOLATION_ANNOTATION,
  NODE_ISOLATION_ENABLED_LABEL,
  NODE_ISOLATION_RESOLVED_ANNOTATION,
} from '@kubeplus-isolation/spec';
import { AppsV1Api, CoordinationV1Api, CoreV1Api, type V1Pod } from '@kubernetes/client-node';
import { createAgent } from './support/operator.js';
import {
  carriesPoolMandate,
  helm,
  INSTANCE_GROUP_VALUES,
  isolateTenant,
  kubectl,
  PLATFORM_NS,
  poolMandate,
  prepareChartNode,
  probeImage,
  RELEASE_NS,
  releaseMetricsToken,
  startProjectNode,
  tenantPod,
} from './support/real-node.js';

const run = promisify(execFile);
const RELEASE = 'kpi';
const PRIORITY_CLASS = 'kubeplus-isolation-webhook';
const PRIORITY = 1_000_000;
const INSTANCE = 'team-a';
const POOL = 'team-a-pool';
const MANDATE = poolMandate(POOL);

describe('the chart on a real node', () => {
  let cluster: RealNodeCluster;
  let archive: string;
  let apiServerCidr: string;
  let apiServerPort: number;

  beforeAll(async () => {
    cluster = await startProjectNode();
    // The namespace a user would give the chart runs under the restricted Pod Security Standard.
    await prepareChartNode(cluster);
    await kubectl(
      cluster,
      'create',
      'priorityclass',
      PRIORITY_CLASS,
      `--value=${PRIORITY}`,
      '--description=node isolation admission: evict other Pods before these',
    );
    const packaged = await run(join(repoRoot(), 'deploy', 'package.sh'), {
      env: {
        ...process.env,
        PACKAGE_CHART_ONLY: '1',
        PACKAGE_OUT_DIR: join(cluster.cp.dir, 'package'),
        HELM: join(cluster.cp.state.assetsDir, 'helm'),
      },
    });
    archive = packaged.stdout.trim().split('\n').at(-1) ?? '';
    const apiServer = new URL(cluster.cp.kc.getCurrentCluster()?.server ?? '');
    apiServerCidr = `${cluster.layout.network.hostIp}/32`;
    apiServerPort = Number(apiServer.port || 443);
    const networkPolicy = (component: string): string[] => [
      '--set',
      `${component}.networkPolicy.enabled=true`,
      '--set',
      `${component}.networkPolicy.apiServerCIDRs[0]=${apiServerCidr}`,
      '--set-json',
      `${component}.networkPolicy.apiServerPorts=[443,${apiServerPort}]`,
    ];
    await helm(
      cluster,
      'install',
      RELEASE,
      archive,
      '--namespace',
      RELEASE_NS,
      ...INSTANCE_GROUP_VALUES,
      ...networkPolicy('webhook'),
      ...networkPolicy('operator'),
      '--set',
      `webhook.priorityClassName=${PRIORITY_CLASS}`,
      // Exclusive pools refusing (the chart's default only warns): the foreign Pod below.
      '--set-json',
      'global.nodeIsolation.exclusivePools.validationActions=["Deny"]',
      // The spec.nodeName test's control namespace, and a tenant whose Pods exclusive pools let
      // through, so the kubelet's own check (the layer beneath the policy) is what is seen.
      '--set-json',
      'global.nodeIsolation.exclusivePools.exemptNamespaces=["unisolated","team-c"]',
      '--wait',
      '--timeout',
      '180s',
    );
  });

  afterAll(async () => {
    await cluster?.stop();
  });

  test('webhook and operator Pods (2 each) are Ready on the node, from the imported images', async () => {
    const apps = cluster.cp.kc.makeApiClient(AppsV1Api);
    for (const name of [`${RELEASE}-webhook`, `${RELEASE}-operator`]) {
      const d = await apps.readNamespacedDeployment({ name, namespace: RELEASE_NS });
      expect({ name, ready: d.status?.readyReplicas }).toEqual({ name, ready: 2 });
    }
    const pods = (await cluster.cp.kc.makeApiClient(CoreV1Api).listNamespacedPod({ namespace: RELEASE_NS })).items;
    expect(pods).toHaveLength(4);
    for (const pod of pods) {
      expect(pod.spec?.nodeName).toBe(cluster.nodeName);
      expect(pod.status?.containerStatuses?.[0]?.ready).toBe(true);
      expect(pod.status?.containerStatuses?.[0]?.imageID).toMatch(/^sha256:|@sha256:/);
    }
    const images = cluster.nodeExec(join(cluster.layout.binDir, 'ctr'), [
      '--address',
      cluster.layout.containerdSocket,
      '-n',
      'k8s.io',
      'images',
      'ls',
      '-q',
    ]);
    expect(images).toContain(probeImage());
    expect(images).toContain(probeImage().replace('-webhook:', '-operator:'));
    process.stderr.write(`[real-node] ${await kubectl(cluster, 'get', 'pods', '-n', RELEASE_NS, '-o', 'wide')}\n`);
  });

  test("the operator reaches the API server from its Pod: it leads and isolates an instance's namespace", async () => {
    const lease = await waitFor(
      'an operator Pod to hold the Lease',
      async () => {
        const l = await cluster.cp.kc
          .makeApiClient(CoordinationV1Api)
          .readNamespacedLease({ name: `${RELEASE}-operator`, namespace: RELEASE_NS })
          .catch(() => undefined);
        return l?.spec?.holderIdentity ? l : undefined;
      },
      { timeoutMs: 60_000 },
    );
    expect(lease.spec?.holderIdentity).toMatch(new RegExp(`^${RELEASE}-operator-`));
    await createAgent(cluster.cp.kc, PLATFORM_NS, INSTANCE, { [NODE_ISOLATION_ANNOTATION]: JSON.stringify(MANDATE) });
    const core = cluster.cp.kc.makeApiClient(CoreV1Api);
    const ns = await waitFor(
      `the operator to isolate namespace ${INSTANCE}`,
      async () => {
        const n = await core.readNamespace({ name: INSTANCE }).catch(() => undefined);
        return n?.metadata?.labels?.[NODE_ISOLATION_ENABLED_LABEL] === 'true' ? n : undefined;
      },
      { timeoutMs: 60_000 },
    );
    expect(JSON.parse(ns.metadata?.annotations?.[NODE_ISOLATION_RESOLVED_ANNOTATION] ?? '{}')).toEqual(MANDATE);
  });

  test('a tenant Deployment is patched by the webhook through its Service and runs on the pool node', async () => {
    await kubectl(cluster, 'label', 'node', cluster.nodeName, `pool=${POOL}`);
    await kubectl(cluster, 'taint', 'node', cluster.nodeName, `dedicated=${POOL}:NoSchedule`);
    const deployment = {
      apiVersion: 'apps/v1',
      kind: 'Deployment',
      metadata: { name: 'agent-runtime', namespace: INSTANCE },
      spec: {
        replicas: 3,
        selector: { matchLabels: { app: 'agent-runtime' } },
        template: {
          metadata: { labels: { app: 'agent-runtime' } },
          spec: {
            containers: [
              {
                name: 'agent',
                image: probeImage(),
                imagePullPolicy: 'Never',
                command: ['node', '-e', 'setInterval(() => {}, 1000); process.on("SIGTERM", () => process.exit(0))'],
              },
            ],
          },
        },
      },
    };
    await cluster.cp.kc
      .makeApiClient(AppsV1Api)
      .createNamespacedDeployment({ namespace: INSTANCE, body: deployment as never });
    const core = cluster.cp.kc.makeApiClient(CoreV1Api);
    const pods = await waitFor(
      'three agent-runtime Pods Running',
      async (observe) => {
        const list = (await core.listNamespacedPod({ namespace: INSTANCE })).items;
        observe(list.map((p) => ({ name: p.metadata?.name, phase: p.status?.phase, node: p.spec?.nodeName })));
        return list.length === 3 && list.every((p: V1Pod) => p.status?.phase === 'Running') ? list : undefined;
      },
      { timeoutMs: 120_000 },
    );
    for (const pod of pods) {
      expect(pod.spec?.nodeSelector).toEqual(MANDATE.nodeSelector);
      expect(pod.spec?.tolerations).toEqual(expect.arrayContaining(MANDATE.tolerations));
      expect(pod.spec?.nodeName).toBe(cluster.nodeName);
    }
    // Each webhook Pod's own counter, read as Prometheus reads the chart's secure metrics: the
    // patches were made by the chart's Pods (reached at their Service's endpoints, over its TLS).
    const webhookPods = (
      await core.listNamespacedPod({ namespace: RELEASE_NS, labelSelector: 'app.kubernetes.io/name=webhook' })
    ).items;
    const token = await releaseMetricsToken(cluster, RELEASE);
    let patched = 0;
    for (const pod of webhookPods) {
      const samples = await scrapeSecureMetrics(pod.status?.podIP ?? '', 8080, token);
      patched += sumMetric(samples, 'kubeplus_webhook_admissions_total', { result: 'patched' });
    }
    expect(patched).toBeGreaterThanOrEqual(3);
    process.stderr.write(`[real-node] ${await kubectl(cluster, 'get', 'pods', '-n', INSTANCE, '-o', 'wide')}\n`);
  });
  test("a tenant cannot put a Pod on another pool's node by naming it (spec.nodeName): exclusive pools refuse it, and beneath them the kubelet by the mandate", async () => {
    // The node is team-a-pool's, labeled and tainted (above). spec.nodeName skips the scheduler
    // and with it the taint check: what keeps team-b off this node is the nodeSelector the webhook
    // merged, which the kubelet checks again when it admits a Pod.
    const core = cluster.cp.kc.makeApiClient(CoreV1Api);
    const onNode = (name: string): V1Pod => {
      const pod = tenantPod(name);
      return { ...pod, spec: { ...pod.spec, containers: pod.spec?.containers ?? [], nodeName: cluster.nodeName } };
    };
    const settled = (namespace: string, name: string) =>
      waitFor(
        `Pod ${namespace}/${name} to run or be refused`,
        async (observe) => {
          const pod = await core.readNamespacedPod({ namespace, name });
          observe({ phase: pod.status?.phase, reason: pod.status?.reason, message: pod.status?.message });
          return pod.status?.phase === 'Running' || pod.status?.phase === 'Failed' ? pod : undefined;
        },
        { timeoutMs: 60_000 },
      );

    // Control: in a namespace without isolation, naming the node runs the Pod despite the taint.
    await kubectl(cluster, 'create', 'namespace', 'unisolated');
    await waitFor(
      'ServiceAccount default in unisolated',
      () => core.readNamespacedServiceAccount({ name: 'default', namespace: 'unisolated' }),
      { timeoutMs: 30_000 },
    );
    await core.createNamespacedPod({ namespace: 'unisolated', body: onNode('named-node') });
    expect((await settled('unisolated', 'named-node')).status?.phase).toBe('Running');

    // The attack: team-b's Pod names team-a's node. Exclusive pools refuse it at admission: the
    // operator put team-a's pool nodes into the ExclusivePools parameter (issue 38).
    const OTHER = 'team-b-pool';
    await isolateTenant(cluster, 'team-b', poolMandate(OTHER));
    await waitFor(
      `the webhook to hold team-b's mandate`,
      async () =>
        carriesPoolMandate(
          OTHER,
          await core.createNamespacedPod({ namespace: 'team-b', body: tenantPod('probe'), dryRun: 'All' }),
        ),
      { timeoutMs: 30_000 },
    );
    const admission = await core.createNamespacedPod({ namespace: 'team-b', body: onNode('named-node') }).then(
      () => 'admitted',
      (error: { code?: number; body?: unknown }) => `${error.code} ${String(error.body)}`,
    );
    expect(admission).toMatch(/^403 .*spec\.nodeName .* is a node of a node pool reserved for another namespace/);

    // Beneath the policy, the kubelet holds the mandate too: team-c, exempt from exclusive pools,
    // names team-a's node; the webhook gives its Pod team-c's nodeSelector, which the node lacks.
    const THIRD = 'team-c-pool';
    await isolateTenant(cluster, 'team-c', poolMandate(THIRD));
    await waitFor(
      `the webhook to hold team-c's mandate`,
      async () =>
        carriesPoolMandate(
          THIRD,
          await core.createNamespacedPod({ namespace: 'team-c', body: tenantPod('probe'), dryRun: 'All' }),
        ),
      { timeoutMs: 30_000 },
    );
    const created = await core.createNamespacedPod({ namespace: 'team-c', body: onNode('named-node') });
    expect(created.spec?.nodeSelector).toEqual({ pool: THIRD });
    const refused = await settled('team-c', 'named-node');
    expect({ phase: refused.status?.phase, reason: refused.status?.reason }).toEqual({
      phase: 'Failed',
      reason: 'NodeAffinity',
    });
    expect(refused.status?.containerStatuses ?? []).toEqual([]);
  });

  test("exclusive pools: the issue's foreign Pod (the pool's label, a toleration of every taint) is refused and never bound to the pool's node", async () => {
    // Issue 38: from a namespace without isolation, nodeSelector {pool: team-a-pool} and
    // tolerations [{operator: Exists}] ran on team-a's tainted node. The operator Pod writes the
    // ExclusivePools parameter; the chart's policy refuses the Pod (validationActions [Deny]).
    const core = cluster.cp.kc.makeApiClient(CoreV1Api);
    const foreign = (name: string): V1Pod => {
      const pod = tenantPod(name);
      return {
        ...pod,
        spec: {
          ...pod.spec,
          containers: pod.spec?.containers ?? [],
          nodeSelector: { pool: POOL },
          tolerations: [{ operator: 'Exists' }],
        },
      };
    };
    await kubectl(cluster, 'create', 'namespace', 'foreign');
    await waitFor(
      'ServiceAccount default in foreign',
      () => core.readNamespacedServiceAccount({ name: 'default', namespace: 'foreign' }),
      { timeoutMs: 30_000 },
    );
    const message = await waitFor(
      'the exclusive-pools policy to refuse the foreign Pod',
      async (observe) => {
        try {
          await core.createNamespacedPod({ namespace: 'foreign', body: foreign('probe'), dryRun: 'All' });
          observe('admitted');
          return undefined;
        } catch (error) {
          observe(String(error).slice(0, 300));
          return isApiStatus(error, 403) ? String((error as { body?: unknown }).body) : undefined;
        }
      },
      { timeoutMs: 60_000 },
    );
    expect(message).toContain('reserves for another namespace');
    await expect(core.createNamespacedPod({ namespace: 'foreign', body: foreign('on-pool') })).rejects.toMatchObject({
      code: 403,
    });
    const pods = (await core.listNamespacedPod({ namespace: 'foreign' })).items;
    expect(pods.filter((p) => p.spec?.nodeName === cluster.nodeName)).toEqual([]);
    // The tenant's own Pods keep running on the pool.
    const own = (await core.listNamespacedPod({ namespace: INSTANCE })).items;
    expect(own.length).toBeGreaterThanOrEqual(3);
    for (const pod of own) expect(pod.spec?.nodeName).toBe(cluster.nodeName);
  });

  test('the packaged chart: its metadata, NetworkPolicies aimed at its own Pods, the webhook at its PriorityClass', async () => {
    const chart = await helm(cluster, 'show', 'chart', archive);
    expect(chart).toMatch(/^maintainers:/m);
    expect(chart).toMatch(/^sources:/m);

    const core = cluster.cp.kc.makeApiClient(CoreV1Api);
    const pods = (await core.listNamespacedPod({ namespace: RELEASE_NS })).items;
    const policies = JSON.parse(await kubectl(cluster, 'get', 'networkpolicies', '-n', RELEASE_NS, '-o', 'json')) as {
      items: Array<{
        metadata: { name: string };
        spec: {
          podSelector: { matchLabels?: Record<string, string> };
          policyTypes?: string[];
          ingress?: Array<{ from?: Array<{ ipBlock?: { cidr: string } }>; ports?: Array<{ port: number | string }> }>;
          egress?: Array<{ to?: Array<{ ipBlock?: { cidr: string } }>; ports?: Array<{ port: number | string }> }>;
        };
      }>;
    };
    const selects = (selector: Record<string, string>, pod: V1Pod): boolean =>
      Object.entries(selector).every(([k, v]) => pod.metadata?.labels?.[k] === v);
    const byComponent = new Map<string, (typeof policies.items)[number]>();
    for (const policy of policies.items) {
      const selected = pods.filter((p) => selects(policy.spec.podSelector.matchLabels ?? {}, p));
      const components = new Set(selected.map((p) => p.metadata?.labels?.['app.kubernetes.io/component']));
      expect({ policy: policy.metadata.name, selected: selected.length, components: [...components] }).toEqual({
        policy: policy.metadata.name,
        selected: 2,
        components: [expect.any(String)],
      });
      byComponent.set([...components][0] ?? '', policy);
    }
    expect([...byComponent.keys()].sort()).toEqual(['operator', 'webhook']);
    for (const policy of byComponent.values()) {
      expect(policy.spec.policyTypes?.sort()).toEqual(['Egress', 'Ingress']);
      // Egress: the API server only, at its address and the port it listens on.
      const egress = policy.spec.egress ?? [];
      expect(egress.flatMap((r) => r.to ?? []).map((t) => t.ipBlock?.cidr)).toContain(apiServerCidr);
      expect(egress.flatMap((r) => r.ports ?? []).map((p) => Number(p.port))).toContain(apiServerPort);
    }
    // The webhook's admission port (named in the policy, as in the Pod) is open to the API server's address only.
    const webhookPod = pods.find((p) => p.metadata?.labels?.['app.kubernetes.io/component'] === 'webhook');
    const portNumber = (port: number | string): number =>
      typeof port === 'number'
        ? port
        : (webhookPod?.spec?.containers.flatMap((c) => c.ports ?? []).find((p) => p.name === port)?.containerPort ??
          -1);
    const webhookIngress = byComponent.get('webhook')?.spec.ingress ?? [];
    const admission = webhookIngress.filter((r) => (r.ports ?? []).some((p) => portNumber(p.port) === 8443));
    expect(admission).toHaveLength(1);
    expect(admission.flatMap((r) => r.from ?? []).map((f) => f.ipBlock?.cidr)).toEqual([apiServerCidr]);

    for (const pod of pods) {
      const component = pod.metadata?.labels?.['app.kubernetes.io/component'];
      // The archive's image references (package.sh fills them in) are the images make images built.
      expect(pod.spec?.containers[0]?.image).toBe(probeImage().replace('-webhook:', `-${component}:`));
      expect({ component, priority: pod.spec?.priority ?? 0, priorityClassName: pod.spec?.priorityClassName }).toEqual(
        component === 'webhook'
          ? { component, priority: PRIORITY, priorityClassName: PRIORITY_CLASS }
          : { component, priority: 0, priorityClassName: undefined },
      );
    }
    process.stderr.write(
      `[real-node] ${await kubectl(cluster, 'get', 'networkpolicies', '-n', RELEASE_NS, '-o', 'wide')}\n`,
    );
  });
});
