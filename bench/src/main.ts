/**
 * `make bench`: runs every benchmark (or those in BENCH_ONLY), writes bench/results/latest.json,
 * then renders docs/benchmarks.md and its plots from it (BENCH_REPORT_ONLY=1: render only).
 * See bench/README.md.
 */
import { execFileSync } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import {
  agentSandboxImage,
  agentSandboxVersion,
  type ControlPlane,
  createTestNamespace,
  type FakeNodes,
  installAgentSandbox,
  loadWebhookEntry,
  NODE_PLACEMENT_ADMISSION_PLUGINS,
  RUNSC_HANDLER,
  RUNSC_RUNTIME_CLASS,
  type RunningService,
  type RunningWebhook,
  registerWebhook,
  repoRoot,
  resolveAssets,
  sandboxCrdsDir,
  scrapeApiServerMetrics,
  startControlPlane,
  startFakeNodes,
  startRealNodeCluster,
  startService,
  startWebhook,
  waitFor,
} from '@kubeplus-isolation/e2e';
import type { NodeIsolationSpec } from '@kubeplus-isolation/spec';
import {
  canonicalNodeIsolation,
  NODE_ISOLATION_ENABLED_LABEL,
  NODE_ISOLATION_RESOLVED_ANNOTATION,
} from '@kubeplus-isolation/spec';
import { MUTATE_PODS_PATH } from '@kubeplus-isolation/webhook/dist/http/app.js';
import {
  AdmissionregistrationV1Api,
  type KubeConfig,
  type KubernetesObject,
  KubernetesObjectApi,
} from '@kubernetes/client-node';
import { runChartComplexityBench } from './chart-complexity.js';
import { policyEngineFileObjects } from './chart-files.js';
import { type BenchConfig, loadConfig, operatorPoints, type Section, WEBHOOK_DOCKERFILE } from './config.js';
import type { Dispatch } from './dispatch-webhook.js';
import { runEngineTrims } from './engine-trims.js';
import { installExclusivePoolsBench, runExclusivePoolsBench } from './exclusive-pools.js';
import { createNodeIsolationParam, createRuntimeClass, RawApi } from './kube.js';
import { runLoad } from './load.js';
import { webhookFootprint } from './memory.js';
import { type HeapSummary, heapGrowth, readMemoryMap, takeHeapSnapshot } from './memory-anatomy.js';
import { type NativeProfile, nativeProfileUnavailable, profileNative, totalUsPerAdmission } from './native-profile.js';
import { runPatchBench } from './patch-bench.js';
import { renderPlots } from './plot.js';
import { runPodCreateBench, type WebhookCallTotals } from './pod-create.js';
import { poolMandate } from './pods.js';
import { freePort } from './ports.js';
import { allCpus, canPin, machineInfo, machineSnapshot, pinToCpus, rssBytes } from './proc.js';
import { summarizeProfile } from './profile.js';
import { installRefusalPolicy, REFUSAL_BENCH_LABEL, runRefusalBench } from './refusal.js';
import { renderReport } from './report.js';
import {
  type BenchResults,
  type HeapAnatomyTarget,
  type HeapPoint,
  type MemoryAnatomyResult,
  mergeResults,
  type WebhookNativeProfile,
} from './results.js';
import { installSandboxPodPolicy, runSandboxPodsBench } from './sandbox-pods.js';
import { type OperatorScaleResult, runOperatorScale, runWebhookScale } from './scale.js';
import { runPolicyScale } from './scale-policy.js';
import { RUNC_RUNTIME_CLASS, runStrengthBench } from './strength.js';
import { installTrivialPolicy } from './trivial-policy.js';
import { reviewBody, runWebhookLoad } from './webhook-bench.js';

const log = (line: string): void => {
  process.stdout.write(`[bench ${new Date().toISOString().slice(11, 19)}] ${line}\n`);
};

function isolatedNamespaceMetadata(mandate: NodeIsolationSpec): {
  labels: Record<string, string>;
  annotations: Record<string, string>;
} {
  return {
    labels: { [NODE_ISOLATION_ENABLED_LABEL]: 'true' },
    annotations: { [NODE_ISOLATION_RESOLVED_ANNOTATION]: canonicalNodeIsolation(mandate) },
  };
}

/** The namespace annotations PodNodeSelector and PodTolerationRestriction read, for the same mandate. */
function pluginNamespaceAnnotations(mandate: NodeIsolationSpec): Record<string, string> {
  return {
    'scheduler.alpha.kubernetes.io/node-selector': Object.entries(mandate.nodeSelector)
      .map(([k, v]) => `${k}=${v}`)
      .join(','),
    'scheduler.alpha.kubernetes.io/defaultTolerations': JSON.stringify(mandate.tolerations),
  };
}

/** Dry-run Pods until the API server applies the expected selector in `namespace` (config loads asynchronously). */
async function waitForPlacement(api: RawApi, namespace: string, pool: string | undefined): Promise<void> {
  await waitFor(
    `Pods in ${namespace} to get nodeSelector ${pool ?? '(none)'}`,
    async (observe) => {
      const res = await api.request('POST', `/api/v1/namespaces/${namespace}/pods?dryRun=All`, {
        apiVersion: 'v1',
        kind: 'Pod',
        metadata: { name: 'probe' },
        spec: { containers: [{ name: 'main', image: 'registry.k8s.io/pause:3.10' }] },
      });
      if (res.status !== 201)
        throw new Error(`dry-run Pod in ${namespace}: HTTP ${res.status}: ${res.body.slice(0, 300)}`);
      const pod = JSON.parse(res.body) as {
        spec: { nodeSelector?: Record<string, string>; tolerations?: { key?: string; value?: string }[] };
      };
      observe({ nodeSelector: pod.spec.nodeSelector, tolerations: pod.spec.tolerations });
      if (pool === undefined) return pod.spec.nodeSelector === undefined;
      return (
        pod.spec.nodeSelector?.pool === pool &&
        (pod.spec.tolerations ?? []).some((t) => t.key === 'dedicated' && t.value === pool)
      );
    },
    { timeoutMs: 30_000, intervalMs: 200 },
  );
}

async function versions(api: RawApi): Promise<BenchResults['versions']> {
  const v = JSON.parse((await api.request('GET', '/version')).body) as { gitVersion?: string };
  let etcd: string | undefined;
  try {
    const assets = await resolveAssets(['etcd']);
    etcd = /etcd Version:\s*(\S+)/.exec(execFileSync(assets.etcd, ['--version'], { encoding: 'utf8' }))?.[1];
  } catch {
    etcd = undefined;
  }
  return { kubernetes: v.gitVersion, etcd };
}

/** HEAD and the measured sources that differ from it (the work tree is shared while this runs). */
function sourceState(): { commit?: string; uncommitted?: string[] } {
  try {
    // Not trimmed: a porcelain line starts with its two status columns, the first often a space.
    const git = (...args: string[]): string => execFileSync('git', args, { cwd: repoRoot(), encoding: 'utf8' });
    const commit = git('rev-parse', '--short=12', 'HEAD').trim();
    const uncommitted = git('status', '--porcelain', '--', 'services', 'packages', 'e2e')
      .split('\n')
      .filter(Boolean)
      .map((l) => l.slice(3));
    return { commit, uncommitted };
  } catch {
    return {};
  }
}

async function runAll(cfg: BenchConfig): Promise<BenchResults> {
  const started = Date.now();
  const want = (s: Section): boolean => cfg.sections.includes(s);
  const pinned = canPin();
  log(`machine: ${JSON.stringify(machineInfo())}`);
  log(
    `webhook NODE_OPTIONS: ${JSON.stringify(cfg.webhookNodeOptions)} (${cfg.webhookNodeOptionsFrom === 'env' ? 'BENCH_WEBHOOK_NODE_OPTIONS' : WEBHOOK_DOCKERFILE}); malloc env: ${JSON.stringify(cfg.webhookMallocEnv ?? {})} (${WEBHOOK_DOCKERFILE})`,
  );
  const results: BenchResults = {
    startedAt: new Date(started).toISOString(),
    finishedAt: '',
    durationSeconds: 0,
    config: cfg,
    machine: machineInfo(),
    versions: sourceState(),
    loadStart: await machineSnapshot(new Set()),
    pinned,
    errors: {},
  };
  log(`load at start: ${JSON.stringify(results.loadStart)}`);
  const section = async (name: Section, body: () => Promise<void>): Promise<void> => {
    if (!want(name)) return;
    log(`== ${name}`);
    const t0 = Date.now();
    try {
      await body();
      log(`== ${name} done in ${((Date.now() - t0) / 1000).toFixed(0)} s`);
    } catch (error) {
      results.errors[name] = (error as Error).stack ?? String(error);
      log(`== ${name} FAILED: ${(error as Error).message}`);
    }
  };

  await section('patch', async () => {
    results.patch = await runPatchBench(
      { rounds: cfg.rounds, containers: [1, 10, 100], tolerations: [0, 10, 50], timeMs: cfg.patchTimeMs },
      log,
    );
  });

  await section('strength', async () => {
    const measured = await measureStrength(cfg);
    results.strength = measured.result;
    results.versions = { ...results.versions, kubernetes: results.versions.kubernetes ?? measured.kubernetes };
  });

  // Each point on a control plane of its own, so that no point inherits another's (or another
  // section's) objects, and the growth from point to point is the operator's.
  await section('scale-operator', async () => {
    const points: OperatorScaleResult[] = [];
    const runs = operatorPoints(cfg.operatorInstances).flatMap((instances) =>
      (cfg.operatorSandbox ?? [true]).map((sandbox) => ({ instances, sandbox })),
    );
    for (const { instances, sandbox } of runs) {
      log(`starting a control plane for ${instances} operator instances${sandbox ? '' : ' (node isolation only)'}`);
      const own = await startControlPlane({});
      const ownApi = await RawApi.connect(own.kc, 32);
      try {
        results.versions = { ...(await versions(ownApi)), ...results.versions };
        points.push(
          await runOperatorScale(
            own,
            ownApi,
            {
              instances,
              createConcurrency: 16,
              platformNamespace: 'kubeplus',
              group: 'apps.bench.kubeplus.io',
              timeoutSeconds: cfg.operatorTimeoutSeconds,
              sandbox,
              sandboxLayout: cfg.operatorSandboxLayout ?? 'per-instance',
              metricsPort: await freePort(),
              concurrency: cfg.operatorConcurrency,
              nodeOptions: cfg.operatorNodeOptions ?? '',
              components: own.processes.filter((p) =>
                ['kube-apiserver', 'kube-controller-manager', 'etcd'].includes(p.name),
              ),
            },
            log,
          ),
        );
      } finally {
        ownApi.close();
        await own.stop();
      }
    }
    results.scaleOperator = points;
  });

  const clusterSections: Section[] = [
    'webhook',
    'podcreate',
    'engine-trims',
    'chart',
    'scale-webhook',
    'scale-policy',
    'sandbox-pods',
    'refusal',
    'exclusive-pools',
  ];
  if (!clusterSections.some(want)) return finish(results, started);

  log('starting a control plane with PodNodeSelector + PodTolerationRestriction');
  const cp = await startControlPlane({ extraAdmissionPlugins: NODE_PLACEMENT_ADMISSION_PLUGINS });
  let webhook: RunningWebhook | undefined;
  let reference: RunningService | undefined;
  let nodes: FakeNodes | undefined;
  const api = await RawApi.connect(cp.kc, Math.max(cfg.podConcurrency, 32));
  /** Pins `pid` to CPU 0 and this process (the load generator) to CPU 1; returns the undo. */
  const pin = (pid: number): (() => void) => {
    if (!pinned) return () => undefined;
    pinToCpus(pid, '0');
    pinToCpus(process.pid, '1');
    return () => {
      pinToCpus(pid, allCpus());
      pinToCpus(process.pid, allCpus());
    };
  };
  try {
    results.versions = { ...results.versions, ...(await versions(api)) };
    log(`control plane ready: Kubernetes ${results.versions.kubernetes}, etcd ${results.versions.etcd}`);
    const pool = 'bench-pool';
    const mandate = poolMandate(pool);
    const iso = isolatedNamespaceMetadata(mandate);
    const nsC = await createTestNamespace(cp.kc, 'bench-webhook', iso);
    // Always set, so an empty value means none (not this process's own NODE_OPTIONS).
    // The image's malloc tunables too, as the image runs it.
    const imageEnv = { ...cfg.webhookMallocEnv, NODE_OPTIONS: cfg.webhookNodeOptions };
    webhook = await startWebhook(cp, { env: imageEnv });
    results.webhookMemory = { idleRssMiB: rssBytes(webhook.process.pid) / MiB };
    results.versions.webhookFlags = [
      ...(cfg.webhookNodeOptions ? [`NODE_OPTIONS="${cfg.webhookNodeOptions}"`] : []),
      ...Object.entries(cfg.webhookMallocEnv ?? {}).map(([k, v]) => `${k}=${v}`),
      ...webhookFlags(webhook.logPath),
    ];
    await registerWebhook(cp.kc, { url: webhook.url, caPem: webhook.caPem });
    await waitForPlacement(api, nsC, pool);
    reference = await startReferenceWebhook(cp, pool, imageEnv);
    const referenceUrl = `${referenceBase(reference)}/mutate`;
    const running = webhook;

    await section('webhook', async () => {
      const referencePid = (reference as RunningService).process.pid;
      const referenceIdleRssMiB = rssBytes(referencePid) / MiB;
      const mapsBefore = { webhook: readMemoryMap(running.process.pid), reference: readMemoryMap(referencePid) };
      const viaExpress = await startDispatchWebhook(cp, 'express', nsC, mandate, imageEnv);
      const nodeMessages = await startDispatchWebhook(cp, 'express-node-messages', nsC, mandate, imageEnv);
      const direct = await startDispatchWebhook(cp, 'direct', nsC, mandate, imageEnv);
      let result: Awaited<ReturnType<typeof runWebhookLoad>>;
      try {
        result = await runWebhookLoad(
          {
            namespace: nsC,
            targets: [
              {
                name: 'webhook',
                url: running.url,
                pid: running.process.pid,
                containerCounts: WEBHOOK_CONTAINER_COUNTS,
              },
              { name: 'reference', url: referenceUrl, pid: referencePid, containerCounts: WEBHOOK_CONTAINER_COUNTS },
              { name: 'express', url: viaExpress.url, pid: viaExpress.service.process.pid, containerCounts: [1] },
              {
                name: 'express-node-messages',
                url: nodeMessages.url,
                pid: nodeMessages.service.process.pid,
                containerCounts: [1],
              },
              { name: 'direct', url: direct.url, pid: direct.service.process.pid, containerCounts: [1] },
            ],
            rounds: cfg.rounds,
            durationSeconds: cfg.loadSeconds,
            connections: cfg.loadConnections,
            pin,
          },
          log,
        );
      } finally {
        await viaExpress.service.stop().catch(() => undefined);
        await nodeMessages.service.stop().catch(() => undefined);
        await direct.service.stop().catch(() => undefined);
      }
      results.webhook = result;
      const maps = {
        webhook: { before: mapsBefore.webhook, after: readMemoryMap(running.process.pid) },
        reference: { before: mapsBefore.reference, after: readMemoryMap(referencePid) },
      };
      if (results.webhookMemory) results.webhookMemory.afterLoadRssMiB = rssBytes(running.process.pid) / MiB;
      results.webhookMemory = {
        ...results.webhookMemory,
        idleRssMiB: results.webhookMemory?.idleRssMiB ?? Number.NaN,
        footprint: webhookFootprint(),
        referenceIdleRssMiB,
        referenceAfterLoadRssMiB: rssBytes(referencePid) / MiB,
      };
      if (cfg.profileSeconds > 0) {
        results.webhookProfile = await profileWebhook(cp, nsC, cfg, pin);
        results.webhookNative = await nativeProfiles(cp, nsC, cfg, pin, [
          { name: 'webhook', url: running.url, pid: running.process.pid },
          { name: 'reference', url: referenceUrl, pid: referencePid },
        ]);
        results.webhookMemoryAnatomy = await memoryAnatomy(cp, nsC, pool, cfg, pin, maps);
      }
    });

    await section('podcreate', async () => {
      const nsA = await createTestNamespace(cp.kc, 'bench-plain');
      const nsB = await createTestNamespace(cp.kc, 'bench-plugins', {
        annotations: pluginNamespaceAnnotations(mandate),
      });
      const nsD = await createTestNamespace(cp.kc, 'bench-reference', { labels: { [REFERENCE_LABEL]: 'true' } });
      await registerReferenceWebhook(cp, referenceUrl);
      const nsE = await createTestNamespace(cp.kc, 'bench-policy', { labels: { [POLICY_LABEL]: 'true' } });
      await installPolicyEngine(cp, api, nsE, mandate);
      const nsF = await createTestNamespace(cp.kc, 'bench-trivial-policy', {
        labels: { [TRIVIAL_POLICY_LABEL]: 'true' },
      });
      await installTrivialPolicy(cp.kc, { name: 'kubeplus-bench-trivial', label: TRIVIAL_POLICY_LABEL, pool });
      await waitForPlacement(api, nsA, undefined);
      await waitForPlacement(api, nsB, pool);
      await waitForPlacement(api, nsD, pool);
      await waitForPlacement(api, nsE, pool);
      await waitForPlacement(api, nsF, pool);
      results.podCreate = await runPodCreateBench(
        api,
        {
          rounds: cfg.rounds,
          serialCreates: cfg.podSerial,
          parallelCreates: cfg.podParallel,
          concurrency: cfg.podConcurrency,
          namespaces: { a: nsA, b: nsB, c: nsC, d: nsD, e: nsE, f: nsF },
          webhookNames: { c: loadWebhookEntry().name, d: REFERENCE_WEBHOOK_NAME },
          webhookCalls: () => webhookCallTotals(cp),
        },
        log,
      );
    });

    await section('engine-trims', async () => {
      results.engineTrims = await runEngineTrims(
        cp,
        api,
        {
          rounds: cfg.rounds,
          serialCreates: cfg.podSerial,
          parallelCreates: cfg.podParallel,
          concurrency: cfg.podConcurrency,
        },
        log,
      );
    });

    await section('sandbox-pods', async () => {
      const plain = await createTestNamespace(cp.kc, 'bench-sandbox-plain');
      const governed = await createTestNamespace(cp.kc, 'bench-sandbox-governed');
      const meta = await installSandboxPodPolicy(cp.kc, api, governed);
      results.sandboxPods = await runSandboxPodsBench(
        api,
        {
          rounds: cfg.rounds,
          serialCreates: cfg.podSerial,
          parallelCreates: cfg.podParallel,
          concurrency: cfg.podConcurrency,
          namespaces: { a: plain, g: governed, h: governed },
          policyPluginTotals: () => admissionPluginTotals(cp, 'ValidatingAdmissionPolicy', 'CREATE'),
        },
        meta,
        log,
      );
    });

    await section('refusal', async () => {
      const params = policyEngineFileObjects().find((o) => o.kind === 'CustomResourceDefinition');
      if (params !== undefined) await createIfAbsent(cp.kc, params);
      const bench = { labels: { ...iso.labels, [REFUSAL_BENCH_LABEL]: 'true' }, annotations: iso.annotations };
      const nsR = await createTestNamespace(cp.kc, 'bench-refusal', bench);
      const unparametrised = await createTestNamespace(cp.kc, 'bench-refusal-noparam', bench);
      await createNodeIsolationParam(api, nsR, mandate);
      await waitForPlacement(api, nsR, pool);
      const checks = await installRefusalPolicy(cp.kc, api, nsR, unparametrised);
      results.refusal = await runRefusalBench(
        api,
        {
          rounds: cfg.rounds,
          serialCreates: cfg.podSerial,
          parallelCreates: cfg.podParallel,
          concurrency: cfg.podConcurrency,
          namespaces: { c: nsC, r: nsR },
          policyPluginTotals: () => admissionPluginTotals(cp, 'ValidatingAdmissionPolicy', 'CREATE'),
        },
        checks,
        log,
      );
    });

    await section('exclusive-pools', async () => {
      const namespaces = {
        a: await createTestNamespace(cp.kc, 'bench-xp-plain'),
        x1: await createTestNamespace(cp.kc, 'bench-xp-one'),
        x1000: await createTestNamespace(cp.kc, 'bench-xp-thousand'),
      };
      const meta = await installExclusivePoolsBench(cp.kc, api, namespaces);
      results.exclusivePools = await runExclusivePoolsBench(
        api,
        {
          rounds: cfg.rounds,
          serialCreates: cfg.podSerial,
          parallelCreates: cfg.podParallel,
          concurrency: cfg.podConcurrency,
          namespaces,
        },
        meta,
        log,
      );
    });

    await section('chart', async () => {
      nodes = await startFakeNodes(cp.kc, ['bench-node-1', 'bench-node-2'], {
        labels: { pool },
        taints: [{ key: 'dedicated', value: pool, effect: 'NoSchedule' }],
        capacity: { pods: '1000' },
      });
      const plain = await createTestNamespace(cp.kc, 'bench-chart-plain', iso);
      const chain = await createTestNamespace(cp.kc, 'bench-chart-chain', iso);
      await waitForPlacement(api, chain, pool);
      results.chart = await runChartComplexityBench(
        cp.kc,
        {
          rounds: cfg.rounds,
          replicas: cfg.chainReplicas,
          group: 'chain.bench.kubeplus.io',
          namespaces: { plain, chain },
          webhookMetricsUrl: running.metricsUrl,
          webhookLogPath: running.logPath,
        },
        log,
      );
    });

    await section('scale-policy', async () => {
      // The policy engine is installed by podcreate (setup e).
      if (!want('podcreate'))
        throw new Error('scale-policy needs the podcreate section (it installs the policy engine)');
      results.scalePolicy = await runPolicyScale(
        api,
        {
          isolated: cfg.scaleIsolated,
          createConcurrency: 32,
          rounds: cfg.rounds,
          creates: cfg.podParallel,
          concurrency: cfg.podConcurrency,
          label: POLICY_LABEL,
        },
        log,
      );
    });
    await section('scale-webhook', async () => {
      let unpin: () => void = () => undefined;
      const step = (namespaces: number, isolated: number) =>
        runWebhookScale(
          api,
          {
            namespaces,
            isolated,
            createConcurrency: 32,
            rounds: cfg.rounds,
            loadSeconds: cfg.loadSeconds,
            connections: cfg.loadConnections,
            webhookPid: running.process.pid,
            webhookUrl: running.url,
            webhookMetricsUrl: running.metricsUrl,
            pin: () => {
              unpin = pin(running.process.pid);
            },
            unpin: () => unpin(),
          },
          log,
        );
      results.scaleWebhook = await step(cfg.scaleNamespaces, cfg.scaleIsolated);
      // The larger point: as many more namespaces as make scaleLargeNamespaces, the same share isolated.
      const more = (cfg.scaleLargeNamespaces ?? 0) - cfg.scaleNamespaces;
      if (more > 0 && cfg.scaleNamespaces > 0) {
        results.scaleWebhookLarge = await step(more, Math.round((more * cfg.scaleIsolated) / cfg.scaleNamespaces));
      }
    });
  } finally {
    api.close();
    await nodes?.stop().catch(() => undefined);
    await webhook?.stop().catch(() => undefined);
    await reference?.stop().catch(() => undefined);
    await cp.stop();
  }
  return finish(results, started);
}

/**
 * §7: a real node of its own (the e2e harness, as the e2e suites start it) with the upstream Agent
 * Sandbox controller and a `runc` RuntimeClass beside the harness's `gvisor`; stopped (host
 * restored) whatever happens.
 */
async function measureStrength(
  cfg: BenchConfig,
): Promise<{ result: NonNullable<BenchResults['strength']>; kubernetes?: string }> {
  log('starting a real node (kubelet, containerd with runc and runsc) for the strength section');
  const cluster = await startRealNodeCluster({ log: (m) => log(`[real-node] ${m}`) });
  let failed = true;
  const api = await RawApi.connect(cluster.cp.kc, 4);
  try {
    await installAgentSandbox(cluster.cp.kc);
    await createRuntimeClass(cluster.cp.kc, RUNC_RUNTIME_CLASS);
    const namespace = await createTestNamespace(cluster.cp.kc, 'bench-strength');
    const moduleDir = dirname(dirname(sandboxCrdsDir()));
    const result = await runStrengthBench(
      { kc: cluster.cp.kc, api, namespace, rounds: cfg.rounds, gvisorClass: RUNSC_RUNTIME_CLASS },
      {
        runtimeClasses: {
          runc: { ...RUNC_RUNTIME_CLASS },
          gvisor: { name: RUNSC_RUNTIME_CLASS, handler: RUNSC_HANDLER },
        },
        agentSandboxImage: agentSandboxImage(agentSandboxVersion(moduleDir)),
      },
      log,
    );
    failed = false;
    return { result, kubernetes: (await versions(api)).kubernetes };
  } finally {
    api.close();
    await cluster.stop({ failed });
  }
}

const MiB = 1024 * 1024;

/** The Pod sizes of §2's load (containers per Pod), and of the memory anatomy's round of it. */
const WEBHOOK_CONTAINER_COUNTS = [1, 10, 100];
const REFERENCE_LABEL = 'bench.kubeplus.io/reference-webhook';
const REFERENCE_WEBHOOK_NAME = 'reference.bench.kubeplus.io';

function webhookFlags(logPath: string): string[] {
  // The harness writes the command line as the log's first line: "# <time> <node> <entry> <flags...>".
  const first = readFileSync(logPath, 'utf8').split('\n', 1)[0] ?? '';
  return first.split(' ').slice(4);
}

function referenceBase(service: RunningService): string {
  const port = /--port=(\d+)/.exec(readFileSync(service.logPath, 'utf8').split('\n', 1)[0] ?? '')?.[1];
  return `https://127.0.0.1:${port}`;
}

/** A serving certificate for 127.0.0.1, written into the control plane's pki directory. */
async function servingFiles(
  cp: ControlPlane,
  name: string,
): Promise<{ port: number; certFile: string; keyFile: string }> {
  const port = await freePort();
  const serving = await cp.issueServingCert(['127.0.0.1']);
  const certFile = join(cp.dir, 'pki', `${name}-${port}.crt`);
  const keyFile = join(cp.dir, 'pki', `${name}-${port}.key`);
  writeFileSync(certFile, serving.certPem, { mode: 0o600 });
  writeFileSync(keyFile, serving.keyPem, { mode: 0o600 });
  return { port, certFile, keyFile };
}

/**
 * The bare reference webhook, run with the webhook image's NODE_OPTIONS and malloc settings
 * (`env`), so that its CPU and memory are the floor of a Node.js webhook run as the image runs one.
 */
async function startReferenceWebhook(
  cp: ControlPlane,
  pool: string,
  env: Record<string, string>,
): Promise<RunningService> {
  const { port, certFile, keyFile } = await servingFiles(cp, 'reference');
  return startService(cp, {
    name: `reference-webhook-${port}`,
    entry: join(repoRoot(), 'bench', 'dist', 'reference-webhook.js'),
    args: [`--port=${port}`, `--tls-cert-file=${certFile}`, `--tls-key-file=${keyFile}`, `--pool=${pool}`],
    env,
    readiness: { url: `https://127.0.0.1:${port}/healthz`, tls: { caPem: cp.caPem } },
  });
}

/** The webhook's route behind express or called directly (dispatch-webhook.ts), same env as the webhook. */
async function startDispatchWebhook(
  cp: ControlPlane,
  dispatch: Dispatch,
  namespace: string,
  mandate: NodeIsolationSpec,
  env: Record<string, string>,
): Promise<{ service: RunningService; url: string }> {
  const { port, certFile, keyFile } = await servingFiles(cp, `dispatch-${dispatch}`);
  const service = await startService(cp, {
    name: `dispatch-${dispatch}-webhook-${port}`,
    entry: join(repoRoot(), 'bench', 'dist', 'dispatch-webhook.js'),
    args: [
      `--dispatch=${dispatch}`,
      `--port=${port}`,
      `--tls-cert-file=${certFile}`,
      `--tls-key-file=${keyFile}`,
      `--namespace=${namespace}`,
      `--mandate=${canonicalNodeIsolation(mandate)}`,
    ],
    env,
    readiness: { url: `https://127.0.0.1:${port}/healthz`, tls: { caPem: cp.caPem } },
  });
  return { service, url: `https://127.0.0.1:${port}${MUTATE_PODS_PATH}` };
}

const POLICY_LABEL = 'bench.kubeplus.io/policy-engine';

/** Creates `obj` unless it exists (e.g. the NodeIsolation CRD, which section 3 may have created). */
async function createIfAbsent(kc: KubeConfig, obj: KubernetesObject): Promise<void> {
  try {
    await KubernetesObjectApi.makeApiClient(kc).create(obj);
  } catch (error) {
    if ((error as { code?: number }).code !== 409) throw error;
  }
}

/**
 * The chart's admission-policy engine (deploy/kubeplus-isolation/files/node-isolation-engine.yaml):
 * the CRD and the policy exactly as shipped; the binding as shipped but selecting POLICY_LABEL
 * namespaces (the chart's label would also send them to this webhook, setup c); and the
 * NodeIsolation parameter in `namespace`, as the operator writes it (the canonical spec).
 */
async function installPolicyEngine(
  cp: ControlPlane,
  api: RawApi,
  namespace: string,
  mandate: NodeIsolationSpec,
): Promise<void> {
  const objects = policyEngineFileObjects();
  const client = KubernetesObjectApi.makeApiClient(cp.kc);
  for (const obj of objects) {
    if (obj.kind === 'MutatingAdmissionPolicyBinding') {
      const spec = (obj as KubernetesObject & { spec: { matchResources: unknown } }).spec;
      spec.matchResources = { namespaceSelector: { matchLabels: { [POLICY_LABEL]: 'true' } } };
    }
    await client.create(obj);
  }
  await createNodeIsolationParam(api, namespace, mandate);
}

const TRIVIAL_POLICY_LABEL = 'bench.kubeplus.io/trivial-policy';

/**
 * Setup f: the least a MutatingAdmissionPolicy can be for the same placement: no parameter, no
 * variable, one constant JSON patch adding the pool's nodeSelector and toleration, reinvocation
 * Never. What any policy costs in this API server, whatever its CEL: the floor of setup e.
 */
/** The chart's webhook entry, pointed at the reference webhook and at namespaces labeled for it. */
async function registerReferenceWebhook(cp: ControlPlane, url: string): Promise<void> {
  await cp.kc.makeApiClient(AdmissionregistrationV1Api).createMutatingWebhookConfiguration({
    body: {
      metadata: { name: 'kubeplus-bench-reference' },
      webhooks: [
        {
          ...loadWebhookEntry(),
          name: REFERENCE_WEBHOOK_NAME,
          namespaceSelector: { matchLabels: { [REFERENCE_LABEL]: 'true' } },
          clientConfig: { url, caBundle: Buffer.from(cp.caPem).toString('base64') },
        },
      ],
    },
  });
}

/** Sum (s) and count of apiserver_admission_controller_admission_duration_seconds for one plugin and operation. */
async function admissionPluginTotals(
  cp: ControlPlane,
  plugin: string,
  operation: string,
): Promise<{ sum: number; count: number }> {
  const acc = { sum: 0, count: 0 };
  for (const s of await scrapeApiServerMetrics(cp.kc)) {
    if (s.labels.name !== plugin || s.labels.operation !== operation) continue;
    if (s.name === 'apiserver_admission_controller_admission_duration_seconds_sum') acc.sum += s.value;
    else if (s.name === 'apiserver_admission_controller_admission_duration_seconds_count') acc.count += s.value;
  }
  return acc;
}

async function webhookCallTotals(cp: ControlPlane): Promise<WebhookCallTotals> {
  const out: WebhookCallTotals = {};
  for (const s of await scrapeApiServerMetrics(cp.kc)) {
    const name = s.labels.name;
    if (name === undefined) continue;
    const acc = out[name] ?? { sum: 0, count: 0 };
    if (s.name === 'apiserver_admission_webhook_admission_duration_seconds_sum') acc.sum += s.value;
    else if (s.name === 'apiserver_admission_webhook_admission_duration_seconds_count') acc.count += s.value;
    else continue;
    out[name] = acc;
  }
  return out;
}

/**
 * A second webhook process, identical but started with NODE_OPTIONS=--cpu-prof, under the same
 * pinned load for cfg.profileSeconds; the profile (bench/results/webhook-load.cpuprofile) is
 * summarized over the load window only.
 */
async function profileWebhook(
  cp: ControlPlane,
  namespace: string,
  cfg: BenchConfig,
  pin: (pid: number) => () => void,
): Promise<BenchResults['webhookProfile']> {
  const dir = join(cp.dir, 'profiles');
  mkdirSync(dir, { recursive: true });
  const profiled = await startWebhook(cp, {
    env: { ...cfg.webhookMallocEnv, NODE_OPTIONS: `${cfg.webhookNodeOptions} --cpu-prof --cpu-prof-dir=${dir}`.trim() },
  });
  const body = reviewBody(1, namespace);
  let window: [number, number];
  let rps: number;
  const unpin = pin(profiled.process.pid);
  try {
    await runLoad({ url: profiled.url, bodies: [body], connections: cfg.loadConnections, durationSeconds: 2 });
    const t0 = Number(process.hrtime.bigint() / 1000n);
    const r = await runLoad({
      url: profiled.url,
      bodies: [body],
      connections: cfg.loadConnections,
      durationSeconds: cfg.profileSeconds,
      serverPid: profiled.process.pid,
    });
    window = [t0, Number(process.hrtime.bigint() / 1000n)];
    rps = r.rps;
  } finally {
    unpin();
    await profiled.stop();
  }
  const file = readdirSync(dir).find((f) => f.endsWith('.cpuprofile'));
  if (!file) throw new Error(`no CPU profile written to ${dir}`);
  const kept = join(repoRoot(), 'bench', 'results', 'webhook-load.cpuprofile');
  mkdirSync(dirname(kept), { recursive: true });
  copyFileSync(join(dir, file), kept);
  return {
    seconds: cfg.profileSeconds,
    rps,
    file: 'bench/results/webhook-load.cpuprofile',
    ...summarizeProfile(kept, window),
  };
}

/**
 * perf's view (native-profile.ts) of the running webhook and of the reference, one after the
 * other, each pinned as in §2 under the same load (1-container Pods) for cfg.profileSeconds.
 */
async function nativeProfiles(
  cp: ControlPlane,
  namespace: string,
  cfg: BenchConfig,
  pin: (pid: number) => () => void,
  targets: readonly [{ name: 'webhook'; url: string; pid: number }, { name: 'reference'; url: string; pid: number }],
): Promise<WebhookNativeProfile> {
  const unavailable = nativeProfileUnavailable();
  if (unavailable !== undefined) {
    log(`native profile skipped: ${unavailable}`);
    return { skipped: unavailable };
  }
  const dir = join(cp.dir, 'profiles');
  mkdirSync(dir, { recursive: true });
  const body = reviewBody(1, namespace);
  const profiles: Partial<Record<'webhook' | 'reference', NativeProfile>> = {};
  for (const t of targets) {
    const unpin = pin(t.pid);
    try {
      await runLoad({ url: t.url, bodies: [body], connections: cfg.loadConnections, durationSeconds: 2 });
      const { profile } = await profileNative(
        t.pid,
        join(dir, `${t.name}.perf.data`),
        () =>
          runLoad({
            url: t.url,
            bodies: [body],
            connections: cfg.loadConnections,
            durationSeconds: cfg.profileSeconds,
          }),
        (r) => r.requests - r.non2xx - r.errors,
      );
      profiles[t.name] = profile;
      log(`native profile of the ${t.name}: ${totalUsPerAdmission(profile).toFixed(1)} µs of CPU per admission`);
    } finally {
      unpin();
    }
  }
  const { webhook, reference } = profiles;
  if (!webhook || !reference) throw new Error('native profiles incomplete');
  return { seconds: cfg.profileSeconds, webhook, reference };
}

/**
 * What the §2 load adds to memory. `maps`: the memory maps of §2's own processes before and after
 * its load. Inside V8's heap: a fresh webhook and a fresh reference (each with the image's
 * NODE_OPTIONS plus `--heapsnapshot-signal`), a heap snapshot before and after one round of the §2
 * load (each Pod size for cfg.loadSeconds, pinned as in §2). Those processes' maps are not used:
 * a snapshot's own C++ memory is freed, but glibc keeps much of it.
 */
async function memoryAnatomy(
  cp: ControlPlane,
  namespace: string,
  pool: string,
  cfg: BenchConfig,
  pin: (pid: number) => () => void,
  maps: MemoryAnatomyResult['maps'],
): Promise<MemoryAnatomyResult> {
  const dir = join(cp.dir, 'heap-snapshots');
  mkdirSync(dir, { recursive: true });
  const env = {
    ...cfg.webhookMallocEnv,
    NODE_OPTIONS: `${cfg.webhookNodeOptions} --heapsnapshot-signal=SIGUSR2 --diagnostic-dir=${dir}`.trim(),
  };
  const point = async (pid: number): Promise<{ point: HeapPoint; heap: HeapSummary }> => {
    const heap = await takeHeapSnapshot(pid, dir);
    const heapByTypeMiB = Object.fromEntries(
      Object.entries(heap.byType)
        .sort((a, b) => b[1].bytes - a[1].bytes)
        .map(([type, t]) => [type, t.bytes / MiB]),
    );
    return { point: { heapMiB: heap.totalBytes / MiB, heapByTypeMiB }, heap };
  };
  const measure = async (name: string, pid: number, url: string): Promise<HeapAnatomyTarget> => {
    const before = await point(pid);
    let admissions = 0;
    const unpin = pin(pid);
    try {
      for (const containers of WEBHOOK_CONTAINER_COUNTS) {
        const r = await runLoad({
          url,
          bodies: [reviewBody(containers, namespace)],
          connections: cfg.loadConnections,
          durationSeconds: cfg.loadSeconds,
        });
        admissions += r.requests - r.non2xx - r.errors;
      }
    } finally {
      unpin();
    }
    const after = await point(pid);
    log(`V8 live heap of a fresh ${name}: ${before.point.heapMiB.toFixed(1)} → ${after.point.heapMiB.toFixed(1)} MiB`);
    return { before: before.point, after: after.point, admissions, growth: heapGrowth(before.heap, after.heap, 12) };
  };
  const webhook = await startWebhook(cp, { env });
  let webhookHeap: HeapAnatomyTarget;
  try {
    webhookHeap = await measure('webhook', webhook.process.pid, webhook.url);
  } finally {
    await webhook.stop();
  }
  const reference = await startReferenceWebhook(cp, pool, env);
  let referenceHeap: HeapAnatomyTarget;
  try {
    referenceHeap = await measure('reference', reference.process.pid, `${referenceBase(reference)}/mutate`);
  } finally {
    await reference.stop();
  }
  return {
    maps,
    secondsPerSize: cfg.loadSeconds,
    containerCounts: WEBHOOK_CONTAINER_COUNTS,
    heaps: { webhook: webhookHeap, reference: referenceHeap },
  };
}

async function finish(results: BenchResults, started: number): Promise<BenchResults> {
  results.loadEnd = await machineSnapshot(new Set());
  log(`load at end: ${JSON.stringify(results.loadEnd)}`);
  results.finishedAt = new Date().toISOString();
  results.durationSeconds = (Date.now() - started) / 1000;
  return results;
}

function readResults(path: string): BenchResults {
  return JSON.parse(readFileSync(path, 'utf8')) as BenchResults;
}

async function main(): Promise<void> {
  const cfg = loadConfig();
  const resultsPath = resolve(repoRoot(), cfg.resultsFile);
  let results: BenchResults;
  let failedHere: string[] | undefined;
  if (cfg.reportOnly) {
    results = readResults(resultsPath);
  } else {
    const run = await runAll(cfg);
    results = cfg.merge && existsSync(resultsPath) ? mergeResults(readResults(resultsPath), run) : run;
    if (cfg.merge) log(`merged sections ${cfg.sections.join(', ')} into ${resultsPath}`);
    failedHere = Object.keys(run.errors);
    mkdirSync(dirname(resultsPath), { recursive: true });
    writeFileSync(resultsPath, `${JSON.stringify(results, null, 2)}\n`);
    log(`results: ${resultsPath}`);
  }
  const outDir = resolve(repoRoot(), cfg.outDir);
  mkdirSync(outDir, { recursive: true });
  const plots = await renderPlots(results, outDir);
  const notesFile = join(repoRoot(), 'bench', 'notes.md');
  const notes = existsSync(notesFile) ? readFileSync(notesFile, 'utf8') : undefined;
  writeFileSync(join(outDir, 'benchmarks.md'), renderReport(results, plots, notes));
  log(`report: ${join(outDir, 'benchmarks.md')} (plots: ${plots.map((p) => p.file).join(', ')})`);
  const failed = failedHere ?? Object.keys(results.errors);
  if (failed.length > 0) {
    log(
      `sections that failed: ${failed.join(', ')} (${cfg.merge ? 'not merged: the report keeps their earlier figures, the error is above' : 'see the report'})`,
    );
    process.exitCode = 1;
  }
}

await main();
