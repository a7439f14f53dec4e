import { execFile } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { CoreV1Api } from '@kubernetes/client-node';
import { type Assets, resolveAssets } from '../harness/assets.js';
import { type ControlPlane, startControlPlane } from '../harness/control-plane.js';
import { type FakeNodes, startFakeNodes } from '../harness/fake-nodes.js';
import { imageArchives } from '../harness/images.js';
import { type MetricSample, scrapeMetrics } from '../harness/metrics.js';
import { type RealNodeCluster, startRealNodeCluster } from '../harness/node/real-node.js';
import { startOperator } from '../harness/operator.js';
import { repoRoot } from '../harness/repo.js';
import { metricsReaderToken, scrapeSecureMetrics } from '../harness/secure-metrics.js';
import { type RunningService, type RunningWebhook, startWebhook } from '../harness/services.js';
import { registerWebhook } from '../harness/webhook-config.js';
import { type KubePlusStandIn, type StandInKind, startKubePlusStandIn } from '../kubeplus-standin/index.js';
import { type KubectlResult, kubectl } from './kubectl.js';
import { POOL } from './manifests.js';

export const NODES = ['node-a', 'node-b', 'node-c'] as const;
/** On a real node: node-a is it (the tenant pool); node-b and node-c stay fake. */
export const REAL_NODE = 'node-a';
export const RELEASE = 'kubeplus-isolation';
export const RELEASE_NAMESPACE = 'kubeplus-system';
const WEBHOOK_POD_SELECTOR = 'app.kubernetes.io/name=webhook';
const OPERATOR_POD_SELECTOR = 'app.kubernetes.io/name=operator';
/** The operator's flags in fake-node mode: the fail-open audit (and the compliance Reports) every 5 s, for step 11. */
const OPERATOR_ARGS = ['--audit-interval=5s'];

const run = promisify(execFile);

/**
 * Where the demo runs its services:
 * - `real-node`: node-a is a real node (kubelet, containerd with runc and gVisor's runsc; e2e/README.md "A real node")
 *   and the chart is installed with helm: the webhook and the operator run as Pods on node-a from
 *   the images `make images` built, and the tenant's Pods really run there;
 * - `fake-nodes`: all three nodes are fake (Pods are bound, never run) and the services run as
 *   processes: for a machine that cannot run a node.
 */
export type DemoMode = 'real-node' | 'fake-nodes';

/** Everything the demo runs; built up step by step, torn down by stop() (on Ctrl-C by the harness: main.ts). */
export class DemoEnvironment {
  assets: Assets | undefined;
  cp: ControlPlane | undefined;
  realNode: RealNodeCluster | undefined;
  nodes: FakeNodes | undefined;
  webhook: RunningWebhook | undefined;
  operator: RunningService | undefined;
  operatorUrl = '';
  manifestsDir = '';
  /** The KubePlus STAND-IN (steps 14–16; e2e/src/kubeplus-standin/, not KubePlus). */
  kubeplus: KubePlusStandIn | undefined;
  #stopping: Promise<void> | undefined;

  constructor(readonly mode: DemoMode) {}

  get controlPlane(): ControlPlane {
    if (!this.cp) throw new Error('the control plane is not running');
    return this.cp;
  }

  /** The fake nodes this mode adds. */
  get fakeNodeNames(): string[] {
    return this.mode === 'real-node' ? NODES.filter((n) => n !== REAL_NODE) : [...NODES];
  }

  async startControlPlane(log: (message: string) => void): Promise<ControlPlane> {
    this.assets = await resolveAssets();
    if (this.mode === 'real-node') {
      this.realNode = await startRealNodeCluster({
        nodeName: REAL_NODE,
        images: imageArchives(),
        controlPlane: { assets: this.assets },
        log,
      });
      this.cp = this.realNode.cp;
    } else {
      this.cp = await startControlPlane({ assets: this.assets, log });
    }
    this.manifestsDir = join(this.cp.dir, 'manifests');
    mkdirSync(this.manifestsDir, { recursive: true });
    return this.cp;
  }

  async startNodes(): Promise<FakeNodes> {
    this.nodes = await startFakeNodes(this.controlPlane.kc, this.fakeNodeNames, {
      onError: (message) => process.stderr.write(`fake nodes: ${message}\n`),
    });
    return this.nodes;
  }

  /**
   * The webhook process (every admission logged: --log-level=debug) and its registration from the
   * chart's entries: the node-isolation entry and, before it, the hold entry (acts only in
   * namespaces KubePlus labels `managedby=kubeplus`, until the operator settles them: step 15).
   */
  async startWebhook(): Promise<RunningWebhook> {
    const cp = this.controlPlane;
    this.webhook = await startWebhook(cp, { extraArgs: ['--log-level=debug'] });
    await registerWebhook(cp.kc, { url: this.webhook.url, caPem: this.webhook.caPem, hold: {} });
    return this.webhook;
  }

  /**
   * The operator process, one replica without leader election. Platform namespace: `platformNamespace`
   * (`--platform-namespace`), else found from KubePlus's webhook registration, else `kubeplus`.
   */
  async startOperator(platformNamespace?: string): Promise<RunningService> {
    const operator = await startOperator(this.controlPlane, {
      leaderElection: false,
      args: [
        ...OPERATOR_ARGS,
        ...(platformNamespace === undefined ? [] : [`--platform-namespace=${platformNamespace}`]),
      ],
    });
    this.operatorUrl = operator.baseUrl;
    this.operator = operator;
    return operator;
  }

  /**
   * The operator told KubePlus's namespace, as a user of the chart sets `operator.platformNamespace`:
   * real node, `helm upgrade --reuse-values` (the operator's Pods roll); fake nodes, the operator
   * process stopped and started again with `--platform-namespace` (what the Deployment's rollout does).
   */
  async setPlatformNamespace(namespace: string): Promise<KubectlResult> {
    if (this.mode === 'real-node') {
      return this.helm([
        'upgrade',
        RELEASE,
        join(repoRoot(), 'deploy', 'kubeplus-isolation'),
        '--namespace',
        RELEASE_NAMESPACE,
        '--reuse-values',
        '--set',
        `operator.platformNamespace=${namespace}`,
        '--wait',
        '--timeout',
        '180s',
      ]);
    }
    await this.operator?.stop();
    await this.startOperator(namespace);
    return {
      code: 0,
      stdout: `operator restarted: ${this.operatorUrl}`,
      stderr: '',
      display: `operator --platform-namespace=${namespace}   # the chart: --set operator.platformNamespace=${namespace}`,
    };
  }

  /** The operator's log (JSON lines): the process's file, or every operator Pod's container log. */
  async operatorLog(): Promise<string> {
    if (this.mode === 'fake-nodes') return readFileSync(this.operator?.logPath ?? '', 'utf8');
    const res = await this.kubectl(['logs', '-n', RELEASE_NAMESPACE, '-l', OPERATOR_POD_SELECTOR, '--tail=-1']);
    if (res.code !== 0) throw new Error(`kubectl logs: ${res.stderr}`);
    return res.stdout;
  }

  /**
   * The KubePlus STAND-IN in `namespace`, its webhook registered BY URL (https://127.0.0.1:<port>):
   * the real-node API server runs with aggregator routing, which resolves a webhook Service only to
   * endpoints and refuses the ExternalName Service the stand-in uses elsewhere (an endpoint may not
   * be on loopback), while a URL reaches the stand-in on loopback in both modes.
   */
  async startKubePlus(namespace: string, kinds: readonly StandInKind[]): Promise<KubePlusStandIn> {
    this.kubeplus = await startKubePlusStandIn({
      cluster: this.controlPlane,
      kubeplusNamespace: namespace,
      kinds,
      registration: 'url',
    });
    return this.kubeplus;
  }

  /** The helm arguments of the real-node install: the chart's defaults, plus what DEMO.md lists. */
  chartInstallArgs(): string[] {
    return [
      'install',
      RELEASE,
      join(repoRoot(), 'deploy', 'kubeplus-isolation'),
      '--namespace',
      RELEASE_NAMESPACE,
      '--create-namespace',
      // The instance Kind the operator may read and finalize (the chart grants no wildcard).
      '--set',
      'operator.instanceGroups[0].group=cloudark.io',
      '--set',
      'operator.instanceGroups[0].resources[0]=agents',
      // Every admission in the webhook's log, for step 6.
      '--set',
      'webhook.logLevel=debug',
      // The fail-open audit, which also writes the compliance Reports, every 5 s (default 5m), for step 11.
      '--set',
      'operator.extraArgs[0]=--audit-interval=5s',
      // The system Pods on the one node that runs Pods (node-b and node-c are fake).
      '--set',
      `webhook.nodeSelector.kubernetes\\.io/hostname=${REAL_NODE}`,
      '--set',
      `operator.nodeSelector.kubernetes\\.io/hostname=${REAL_NODE}`,
      // …which step 1 taints for the tenants' pool: the Pods a later rollout makes (step 14's
      // upgrade) must tolerate it, or they stay Pending and the rollout never ends.
      ...['webhook', 'operator'].flatMap((c) => [
        '--set',
        `${c}.tolerations[0].key=dedicated`,
        '--set',
        `${c}.tolerations[0].operator=Equal`,
        '--set',
        `${c}.tolerations[0].value=${POOL}`,
        '--set',
        `${c}.tolerations[0].effect=NoSchedule`,
      ]),
      '--wait',
      '--timeout',
      '180s',
    ];
  }

  /** `helm <args>` against the cluster; never rejects on a non-zero exit. */
  async helm(args: readonly string[]): Promise<KubectlResult> {
    if (!this.assets) throw new Error('no helm yet');
    const display = ['helm', ...args.map((a) => (a.startsWith('/') ? a.replace(`${repoRoot()}/`, '') : a))].join(' ');
    try {
      const { stdout, stderr } = await run(
        this.assets.helm,
        ['--kubeconfig', this.controlPlane.kubeconfigPath, ...args],
        {
          cwd: repoRoot(),
          maxBuffer: 16 << 20,
        },
      );
      return { code: 0, stdout, stderr, display };
    } catch (error) {
      const e = error as Error & { code?: number; stdout?: string; stderr?: string };
      return {
        code: typeof e.code === 'number' ? e.code : 1,
        stdout: e.stdout ?? '',
        stderr: e.stderr ?? e.message,
        display,
      };
    }
  }

  /** A token that may read the chart's secure metrics (its metrics-reader ClusterRole), made once. */
  #metricsToken: Promise<string> | undefined;

  /**
   * The webhook's metrics: the process's, or every webhook Pod's, concatenated. The chart's are
   * secure (issue 34): read as Prometheus reads them, over HTTPS at each Pod's address with the
   * token of a ServiceAccount bound to the chart's metrics-reader ClusterRole (the API server's Pod
   * proxy cannot carry it).
   */
  async webhookMetrics(): Promise<MetricSample[]> {
    if (this.mode === 'fake-nodes') {
      if (!this.webhook) throw new Error('the webhook is not running');
      return scrapeMetrics(this.webhook.metricsUrl);
    }
    this.#metricsToken ??= metricsReaderToken(this.controlPlane.kc, {
      namespace: RELEASE_NAMESPACE,
      clusterRole: `${RELEASE}-metrics-reader`,
      name: 'demo-metrics-reader',
    });
    const token = await this.#metricsToken;
    const pods = await this.controlPlane.kc
      .makeApiClient(CoreV1Api)
      .listNamespacedPod({ namespace: RELEASE_NAMESPACE, labelSelector: WEBHOOK_POD_SELECTOR });
    const samples: MetricSample[] = [];
    for (const pod of pods.items) samples.push(...(await scrapeSecureMetrics(pod.status?.podIP ?? '', 8080, token)));
    return samples;
  }

  /** Where the webhook's log is, as a command a user would run. */
  webhookLogCommand(): string {
    return this.mode === 'fake-nodes'
      ? `cat ${this.webhook?.logPath ?? ''}`
      : `kubectl logs -n ${RELEASE_NAMESPACE} -l ${WEBHOOK_POD_SELECTOR} --tail=-1`;
  }

  /** The webhook's log: the process's file, or every webhook Pod's container log. */
  async webhookLog(): Promise<string> {
    if (this.mode === 'fake-nodes') return readFileSync(this.webhook?.logPath ?? '', 'utf8');
    const res = await this.kubectl(['logs', '-n', RELEASE_NAMESPACE, '-l', WEBHOOK_POD_SELECTOR, '--tail=-1']);
    if (res.code !== 0) throw new Error(`kubectl logs: ${res.stderr}`);
    return res.stdout;
  }

  async webhookPods(): Promise<string[]> {
    const pods = await this.controlPlane.kc
      .makeApiClient(CoreV1Api)
      .listNamespacedPod({ namespace: RELEASE_NAMESPACE, labelSelector: WEBHOOK_POD_SELECTOR });
    return pods.items.map((p) => p.metadata?.name ?? '');
  }

  kubectl(args: readonly string[], stdin?: string): Promise<KubectlResult> {
    if (!this.assets) throw new Error('no kubectl yet');
    return kubectl(
      { binary: this.assets.kubectl, kubeconfig: this.controlPlane.kubeconfigPath, cwd: this.manifestsDir },
      args,
      stdin,
    );
  }

  writeManifest(name: string, yaml: string): string {
    const path = join(this.manifestsDir, name);
    writeFileSync(path, yaml);
    return path;
  }

  /** Tails of every log (components, services, and the real node's), for a failure. */
  logReport(lines = 20): string {
    return this.realNode ? this.realNode.logReport(lines) : (this.cp?.logReport(lines) ?? '');
  }

  /** Graceful: services first (they would only log errors once the API server is gone), then nodes, then the control plane. */
  stop(): Promise<void> {
    this.#stopping ??= (async () => {
      // The stand-in's leftovers in the cluster (bounded: the cluster goes next anyway), its server, its temp dir.
      const kubeplus = this.kubeplus;
      if (kubeplus) {
        await Promise.race([kubeplus.cleanup().catch(() => {}), new Promise((r) => setTimeout(r, 20_000).unref())]);
        await kubeplus.stop().catch(() => {});
      }
      await Promise.allSettled([this.operator?.stop(), this.webhook?.stop()]);
      await this.nodes?.stop({ deleteNodes: false }).catch(() => {});
      if (this.realNode) await this.realNode.stop();
      else await this.cp?.stop();
    })();
    return this.#stopping;
  }
}
