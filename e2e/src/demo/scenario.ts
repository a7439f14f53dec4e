import { release } from 'node:os';
import {
  AppsV1Api,
  CoreV1Api,
  CustomObjectsApi,
  type KubeConfig,
  NodeV1Api,
  type V1Namespace,
  type V1Pod,
} from '@kubernetes/client-node';
import { installAgentSandbox } from '../harness/agent-sandbox.js';
import { installOpenReportsCrds, installSandboxCrds } from '../harness/crds.js';
import { projectImage } from '../harness/images.js';
import { servedPolicyApis } from '../harness/kubernetes-versions.js';
import { scrapeApiServerMetrics, sumMetric } from '../harness/metrics.js';
import { isApiStatus } from '../harness/node-api.js';
import { waitFor } from '../harness/wait.js';
import { DemoEnvironment, type DemoMode, NODES, REAL_NODE, RELEASE, RELEASE_NAMESPACE } from './environment.js';
import type { KubectlResult } from './kubectl.js';
import {
  AGENT_CRD,
  AGENT_DEPLOYMENT,
  IMAGE,
  kernelLine,
  kernelProbeSandbox,
  NODE_ISOLATION,
  PLATFORM_NAMESPACE,
  POOL,
  policyOf,
  RUNC_RUNTIME_CLASS,
  runtimeClassOf,
  sandbox,
  TEAM_A_AGENT,
  TEAM_A_INSTANCE,
  TEAM_A_NAMESPACE,
  TEAM_B_INSTANCE,
  TEAM_B_NAMESPACE,
  TEAM_G_AGENT,
  TEAM_G_INSTANCE,
  TEAM_G_NAMESPACE,
  teamBAgent,
  UNRELATED_NAMESPACE,
} from './manifests.js';
import type { Report, StepResult } from './report.js';

// The design documents' protocol, spelled out.
const ENABLED_LABEL = 'kubeplus.io/node-isolation-enabled';
const RESOLVED_ANNOTATION = 'kubeplus.io/node-isolation-resolved';
const CREATED_FOR_ANNOTATION = 'kubeplus.io/created-for';
const OWNER_NAME_LABEL = 'kubeplus.io/owner-name';
const WEBHOOK_ENTRY_NAME = 'node-isolation.kubeplus.io';
const SANDBOX = { group: 'agents.x-k8s.io', version: 'v1beta1', plural: 'sandboxes' };
const AGENT = { group: 'cloudark.io', version: 'v1', plural: 'agents' };
const VALIDATING_PLURALS = ['validatingadmissionpolicies', 'validatingadmissionpolicybindings'] as const;
const MUTATING_PLURALS = ['mutatingadmissionpolicies', 'mutatingadmissionpolicybindings'] as const;

interface SandboxObject {
  metadata: { name: string; uid: string; resourceVersion: string };
  spec: { podTemplate: { spec: { runtimeClassName?: string } } };
}

/** JSON with object keys sorted, so two values compare regardless of key order. */
function canonical(value: unknown): string {
  const sort = (v: unknown): unknown =>
    Array.isArray(v)
      ? v.map(sort)
      : v !== null && typeof v === 'object'
        ? Object.fromEntries(
            Object.entries(v as Record<string, unknown>)
              .sort(([a], [b]) => a.localeCompare(b))
              .map(([k, x]) => [k, sort(x)]),
          )
        : v;
  return JSON.stringify(sort(value));
}

const json = (value: unknown): string => JSON.stringify(value) ?? 'undefined';
const message = (error: unknown): string => (error instanceof Error ? error.message : String(error));

export class Scenario {
  readonly env: DemoEnvironment;
  #kc: KubeConfig | undefined;

  constructor(
    readonly report: Report,
    mode: DemoMode,
  ) {
    this.env = new DemoEnvironment(mode);
  }

  get realNode(): boolean {
    return this.env.mode === 'real-node';
  }

  get kc(): KubeConfig {
    this.#kc ??= this.env.controlPlane.kc;
    return this.#kc;
  }
  get core(): CoreV1Api {
    return this.kc.makeApiClient(CoreV1Api);
  }
  get custom(): CustomObjectsApi {
    return this.kc.makeApiClient(CustomObjectsApi);
  }

  // ---- helpers: commands and checks --------------------------------------------------------

  /** Runs kubectl and prints the command and its output (stdout, then stderr). */
  async sh(args: readonly string[], opts: { display?: string; maxLines?: number } = {}): Promise<KubectlResult> {
    const res = await this.env.kubectl(args);
    const output = [res.stdout, res.stderr]
      .map((s) => s.replace(/\n+$/, ''))
      .filter((s) => s.trim() !== '')
      .join('\n');
    this.report.command(opts.display ?? res.display, output, opts.maxLines);
    return res;
  }

  /** Saves a manifest, prints it, and `kubectl apply -f`s it. */
  async apply(file: string, yaml: string): Promise<KubectlResult> {
    this.env.writeManifest(file, yaml);
    this.report.file(file, yaml);
    return this.sh(['apply', '-f', file]);
  }

  check(what: string, expected: string, seen: string, ok: boolean): boolean {
    return this.report.check(what, expected, seen, ok);
  }

  /** Polls until `probe` yields a value; records a check either way. */
  async eventually<T>(
    what: string,
    expected: string,
    probe: (observe: (state: unknown) => void) => Promise<T | undefined | false>,
    describe: (value: T) => string,
    timeoutMs = 60_000,
  ): Promise<T | undefined> {
    try {
      const value = await waitFor(what, probe, { timeoutMs, intervalMs: 250 });
      this.check(what, expected, describe(value), true);
      return value;
    } catch (error) {
      this.check(what, expected, message(error), false);
      return undefined;
    }
  }

  async readNamespace(name: string): Promise<V1Namespace | undefined> {
    try {
      return await this.core.readNamespace({ name });
    } catch (error) {
      if (isApiStatus(error, 404)) return undefined;
      throw error;
    }
  }

  async runtimeClassNames(): Promise<string[]> {
    const list = await this.kc.makeApiClient(NodeV1Api).listRuntimeClass();
    return list.items.map((rc) => rc.metadata?.name ?? '').sort();
  }

  async runtimeClassHandler(name: string): Promise<string | undefined> {
    try {
      return (await this.kc.makeApiClient(NodeV1Api).readRuntimeClass({ name })).handler;
    } catch (error) {
      if (isApiStatus(error, 404)) return undefined;
      throw error;
    }
  }

  /** Names of the admission policies and bindings owned by `instance` (by the operator's owner label). */
  async policiesOf(instance: string): Promise<string[]> {
    const names: string[] = [];
    const mutating = await this.mutatingPolicyVersion();
    const lists = [
      ...VALIDATING_PLURALS.map((plural) => ({ plural, version: 'v1' })),
      ...(mutating === undefined ? [] : MUTATING_PLURALS.map((plural) => ({ plural, version: mutating }))),
    ];
    for (const { plural, version } of lists) {
      const list = (await this.custom.listClusterCustomObject({
        group: 'admissionregistration.k8s.io',
        version,
        plural,
        labelSelector: `${OWNER_NAME_LABEL}=${instance}`,
      })) as { items: { metadata: { name: string } }[] };
      names.push(...list.items.map((o) => `${plural}/${o.metadata.name}`));
    }
    return names.sort();
  }

  #mutating: Promise<string | undefined> | undefined;
  /**
   * The MutatingAdmissionPolicy version this cluster serves (`v1` from 1.36), or undefined: then
   * advisory mode does not default, and the demo shows the fallback the operator really takes.
   */
  mutatingPolicyVersion(): Promise<string | undefined> {
    this.#mutating ??= servedPolicyApis(this.kc).then((s) => s.mutating?.split('/')[1]);
    return this.#mutating;
  }

  /** `kubectl get` of the admission-policy kinds this cluster serves. */
  async policyKinds(): Promise<string> {
    return (await this.mutatingPolicyVersion()) === undefined
      ? 'validatingadmissionpolicies'
      : 'validatingadmissionpolicies,mutatingadmissionpolicies';
  }

  async sandboxes(namespace: string): Promise<SandboxObject[]> {
    const list = (await this.custom.listNamespacedCustomObject({ ...SANDBOX, namespace })) as {
      items: SandboxObject[];
    };
    return list.items;
  }

  /**
   * The API server loads new admission policies asynchronously. Before showing an outcome,
   * wait (server-side dry run, nothing stored) until the policy in question is in force.
   */
  async untilInForce(
    what: string,
    file: string,
    inForce: (res: KubectlResult) => boolean,
    extraArgs: readonly string[] = [],
  ): Promise<void> {
    const started = performance.now();
    await waitFor(
      what,
      async (observe) => {
        const res = await this.env.kubectl(['apply', '--dry-run=server', '-f', file, ...extraArgs]);
        observe({ code: res.code, stdout: res.stdout, stderr: res.stderr });
        return inForce(res);
      },
      { timeoutMs: 60_000, intervalMs: 250 },
    );
    this.report.note(
      `${what}: in force after ${((performance.now() - started) / 1000).toFixed(1)} s (checked with kubectl apply --dry-run=server)`,
    );
  }

  async webhookCounts(): Promise<{ webhook: number; apiServer: number }> {
    const [mine, apiServer] = await Promise.all([this.env.webhookMetrics(), scrapeApiServerMetrics(this.kc)]);
    return {
      webhook: sumMetric(mine, 'kubeplus_webhook_admissions_total'),
      apiServer: sumMetric(apiServer, 'apiserver_admission_webhook_admission_duration_seconds_count', {
        name: WEBHOOK_ENTRY_NAME,
      }),
    };
  }

  /** Fake-node mode: the webhook and the operator as processes. */
  private startServices(): Promise<StepResult> {
    const r = this.report;
    return r.step(
      'S4',
      'Start the node-isolation webhook (registered from the chart’s webhook-entry.json) and the operator',
      'setup',
      async () => {
        const webhook = await this.env.startWebhook();
        const operator = await this.env.startOperator();
        r.note(`webhook ${webhook.url} (metrics ${webhook.metricsUrl}, log ${webhook.logPath})`);
        r.note(`operator ${this.env.operatorUrl} (log ${operator.logPath})`);
        const res = await this.sh(['get', 'mutatingwebhookconfigurations']);
        this.check(
          'webhook registered',
          'kubeplus-node-isolation',
          res.stdout.trim(),
          /kubeplus-node-isolation/.test(res.stdout),
        );
      },
    );
  }

  /** Real-node mode: `helm install` of the chart; its webhook and operator run as Pods on node-a. */
  private installChart(): Promise<StepResult> {
    const r = this.report;
    return r.step(
      'S4',
      `Install the Helm chart (helm install): webhook and operator Pods on ${REAL_NODE}`,
      'setup',
      async () => {
        const args = this.env.chartInstallArgs();
        const res = await this.env.helm(args);
        r.command(res.display, [res.stdout, res.stderr].filter((x) => x.trim() !== '').join('\n'), 12);
        this.check('helm install succeeded (--wait: every Pod Ready)', 'exit 0', `exit ${res.code}`, res.code === 0);
        const pods = await this.sh(['get', 'pods', '-n', RELEASE_NAMESPACE, '-o', 'wide']);
        const running = pods.stdout.split('\n').filter((l) => /\s1\/1\s+Running\s/.test(l) && l.includes(REAL_NODE));
        this.check(
          'two webhook and two operator Pods Running and Ready on the real node',
          `4 × 1/1 Running on ${REAL_NODE}`,
          `${running.length} × 1/1 Running on ${REAL_NODE}`,
          running.length === 4,
        );
        const mwc = await this.sh(['get', 'mutatingwebhookconfigurations']);
        this.check(
          'the chart’s webhook registered (its Service, its CA)',
          `${RELEASE}-webhook`,
          mwc.stdout.trim(),
          mwc.stdout.includes(`${RELEASE}-webhook`),
        );
      },
    );
  }

  // ---- the steps --------------------------------------------------------------------------

  async setup(): Promise<boolean> {
    const r = this.report;
    const steps: (() => Promise<StepResult>)[] = [
      () =>
        r.step(
          'S1',
          this.realNode
            ? `Start a control plane (etcd, kube-apiserver, kube-controller-manager, kube-scheduler) and join the real node ${REAL_NODE} (kubelet, containerd with runc and gVisor's runsc, CNI, kube-proxy; the images of \`make images\` imported)`
            : 'Start a control plane: etcd, kube-apiserver, kube-controller-manager, kube-scheduler',
          'setup',
          async () => {
            const cp = await this.env.startControlPlane((m) => r.note(m));
            const version = await this.sh(['version']);
            this.check(
              'API server ready',
              'kubectl reaches the API server',
              version.code === 0 ? 'reachable' : version.stderr,
              version.code === 0,
            );
            r.note(`kubeconfig ${cp.kubeconfigPath}; logs in ${cp.state.logDir}`);
          },
        ),
      () =>
        r.step(
          'S2',
          this.realNode
            ? `Add nodes ${this.env.fakeNodeNames.join(', ')} (fake kubelets: Ready, heartbeating; Pods are bound, never run) beside the real ${REAL_NODE}`
            : `Add nodes ${NODES.join(', ')} (fake kubelets: Ready, heartbeating; Pods are bound, never run)`,
          'setup',
          async () => {
            await this.env.startNodes();
            const res = await this.sh(['get', 'nodes']);
            const ready = NODES.filter((n) => new RegExp(`^${n}\\s+Ready\\s`, 'm').test(res.stdout));
            this.check(
              'all three nodes Ready',
              NODES.join(', '),
              ready.join(', ') || res.stdout,
              ready.length === NODES.length,
            );
          },
        ),
      () =>
        r.step(
          'S3',
          this.realNode
            ? 'Install Agent Sandbox (the upstream controller and its CRDs), the Agent Kind (registered-by: kubeplus), a plain "runc" RuntimeClass'
            : 'Install the Agent Sandbox CRDs, the Agent Kind (registered-by: kubeplus), a plain "runc" RuntimeClass',
          'setup',
          async () => {
            if (this.realNode) {
              // On node-a: node-b and node-c are fake and run nothing.
              const { crds } = await installAgentSandbox(this.kc, {
                nodeSelector: { 'kubernetes.io/hostname': REAL_NODE },
              });
              r.note(
                `the upstream Agent Sandbox controller (v0.5.0, --extensions) runs as a Pod on ${REAL_NODE}; its CRDs are installed unmodified, the conversion webhook served by it: ${crds.join(', ')}`,
              );
            } else {
              const crds = await installSandboxCrds(this.kc);
              r.note(
                `Agent Sandbox CRDs installed unmodified except their conversion webhook (no Agent Sandbox controller runs here): ${crds.join(', ')}`,
              );
            }
            // The compliance reports' API, as a platform running Policy Reporter or Kyverno has it.
            const reportCrds = await installOpenReportsCrds(this.kc);
            r.note(`OpenReports CRDs (github.com/openreports/reports-api, pinned module): ${reportCrds.join(', ')}`);
            const agent = await this.apply('agent-crd.yaml', AGENT_CRD);
            const established = await this.sh([
              'wait',
              '--for=condition=Established',
              'crd/agents.cloudark.io',
              '--timeout=60s',
            ]);
            const rc = await this.apply('runc-runtimeclass.yaml', RUNC_RUNTIME_CLASS);
            const ns = await this.sh(['create', 'namespace', PLATFORM_NAMESPACE]);
            this.check(
              'Agent Kind served, "runc" RuntimeClass and platform namespace created',
              'kubectl exit 0 each',
              json([agent.code, established.code, rc.code, ns.code]),
              [agent.code, established.code, rc.code, ns.code].every((c) => c === 0),
            );
          },
        ),
      () => (this.realNode ? this.installChart() : this.startServices()),
    ];
    for (const step of steps) {
      const result = await step();
      if (result.error !== undefined || result.checks.some((c) => !c.ok)) return false;
    }
    return true;
  }

  async run(): Promise<void> {
    const r = this.report;
    let runtimeClassesBefore: string[] = [];

    await r.step('1', 'Taint and label node-a for the dedicated pool', 'seed 1, demo step 1', async () => {
      await this.sh(['taint', 'nodes', 'node-a', `dedicated=${POOL}:NoSchedule`]);
      await this.sh(['label', 'nodes', 'node-a', `pool=${POOL}`]);
      await this.sh([
        'get',
        'nodes',
        '-o',
        'custom-columns=NAME:.metadata.name,POOL:.metadata.labels.pool,TAINTS:.spec.taints[*].key',
      ]);
      const nodes = await Promise.all(NODES.map((name) => this.core.readNode({ name })));
      const describe = nodes.map((n) => ({
        node: n.metadata?.name,
        pool: n.metadata?.labels?.pool,
        taints: (n.spec?.taints ?? []).map((t) => `${t.key}=${t.value ?? ''}:${t.effect}`),
      }));
      const [a, ...rest] = describe;
      this.check(
        'node-a carries the taint and the label; node-b and node-c carry neither',
        `node-a pool=${POOL}, taint dedicated=${POOL}:NoSchedule; others plain`,
        json(describe),
        a?.pool === POOL &&
          json(a?.taints) === json([`dedicated=${POOL}:NoSchedule`]) &&
          rest.every((n) => n.pool === undefined && n.taints.length === 0),
      );
    });

    await r.step(
      '2',
      `Create Agent "${TEAM_A_INSTANCE}" with kubeplus.io/node-isolation and kubeplus.io/sandbox-isolation`,
      'seed 1 step 2, seed 2 step 2',
      async () => {
        runtimeClassesBefore = await this.runtimeClassNames();
        const res = await this.apply('agent-team-a.yaml', TEAM_A_AGENT);
        this.check('instance accepted', 'kubectl exit 0', `exit ${res.code}`, res.code === 0);
        r.note(
          `The instance is in the platform namespace "${PLATFORM_NAMESPACE}", so KubePlus gives it a namespace of its own named after it: "${TEAM_A_NAMESPACE}" (see DEMO.md).`,
        );
        await this.eventually(
          `the operator creates namespace ${TEAM_A_NAMESPACE} for the instance`,
          `namespace ${TEAM_A_NAMESPACE} with ${CREATED_FOR_ANNOTATION} naming the instance`,
          async (observe) => {
            const ns = await this.readNamespace(TEAM_A_NAMESPACE);
            observe(ns?.metadata ?? 'not found');
            const createdFor = ns?.metadata?.annotations?.[CREATED_FOR_ANNOTATION];
            return createdFor?.endsWith(`/${PLATFORM_NAMESPACE}/${TEAM_A_INSTANCE}`) ? createdFor : undefined;
          },
          (createdFor) => `${CREATED_FOR_ANNOTATION}: ${createdFor}`,
        );
        await this.sh(['get', 'agents', '-n', PLATFORM_NAMESPACE]);
      },
    );

    await r.step(
      '3',
      `Namespace ${TEAM_A_NAMESPACE} carries the label and the resolved annotation`,
      'seed 1 step 3',
      async () => {
        const res = await this.sh([
          'get',
          'namespace',
          TEAM_A_NAMESPACE,
          '-o',
          'jsonpath={.metadata.labels}{"\\n"}{.metadata.annotations}',
        ]);
        const [labelsLine = '{}', annotationsLine = '{}'] = res.stdout.split('\n');
        const labels = JSON.parse(labelsLine || '{}') as Record<string, string>;
        const annotations = JSON.parse(annotationsLine || '{}') as Record<string, string>;
        this.check(`label ${ENABLED_LABEL}`, '"true"', json(labels[ENABLED_LABEL]), labels[ENABLED_LABEL] === 'true');
        let resolved: unknown;
        try {
          resolved = JSON.parse(annotations[RESOLVED_ANNOTATION] ?? '');
        } catch {
          resolved = annotations[RESOLVED_ANNOTATION];
        }
        this.check(
          `annotation ${RESOLVED_ANNOTATION}`,
          canonical(NODE_ISOLATION),
          canonical(resolved),
          canonical(resolved) === canonical(NODE_ISOLATION),
        );
      },
    );

    await r.step(
      '4',
      `Exactly one RuntimeClass for the instance: ${runtimeClassOf(TEAM_A_INSTANCE)}, handler kata`,
      'seed 2 step 2',
      async () => {
        const rcName = runtimeClassOf(TEAM_A_INSTANCE);
        await this.eventually(
          `RuntimeClass ${rcName} exists`,
          'created by the operator',
          async () => (await this.runtimeClassHandler(rcName)) !== undefined,
          () => 'exists',
        );
        const list = await this.env.kubectl(['get', 'runtimeclass', '-o', 'name']);
        const matching = list.stdout.split('\n').filter((l) => l.includes(rcName));
        r.command(`kubectl get runtimeclass -o name | grep ${rcName}`, matching.join('\n'));
        this.check(
          'one RuntimeClass for the instance',
          `runtimeclass.node.k8s.io/${rcName}`,
          matching.join(', '),
          json(matching) === json([`runtimeclass.node.k8s.io/${rcName}`]),
        );
        const handler = await this.sh(['get', 'runtimeclass', rcName, '-o', 'jsonpath={.handler}']);
        this.check('its handler', 'kata', handler.stdout, handler.stdout === 'kata');
        const after = await this.runtimeClassNames();
        const added = after.filter((n) => !runtimeClassesBefore.includes(n));
        this.check(
          'RuntimeClasses added to the cluster by an instance with BOTH annotations',
          `exactly [${rcName}]`,
          `[${added.join(', ')}] (before: [${runtimeClassesBefore.join(', ')}])`,
          json(added) === json([rcName]),
        );
        await this.sh([
          'get',
          'validatingadmissionpolicies,validatingadmissionpolicybindings',
          '-l',
          `${OWNER_NAME_LABEL}=${TEAM_A_INSTANCE}`,
        ]);
      },
    );

    await r.step(
      '5',
      this.realNode
        ? 'A Deployment without nodeSelector/tolerations: its Pods get the mandate and run only on node-a'
        : 'A Deployment without nodeSelector/tolerations: its Pods get the mandate and land only on node-a',
      'seed 1 step 4, seed 2 step 3',
      async () => {
        await this.apply('agent-runtime-deployment.yaml', AGENT_DEPLOYMENT);
        const pods = await this.eventually(
          'the controllers create 3 Pods and the scheduler binds them',
          '3 Pods, each with spec.nodeName',
          async (observe) => {
            const list = await this.core.listNamespacedPod({
              namespace: TEAM_A_NAMESPACE,
              labelSelector: 'app=agent-runtime',
            });
            observe(
              list.items.map((p) => ({
                name: p.metadata?.name,
                node: p.spec?.nodeName,
                conditions: p.status?.conditions,
              })),
            );
            return list.items.length === 3 && list.items.every((p) => p.spec?.nodeName) ? list.items : undefined;
          },
          (items: V1Pod[]) => items.map((p) => `${p.metadata?.name} → ${p.spec?.nodeName}`).join(', '),
          90_000,
        );
        const template = (
          await this.kc
            .makeApiClient(AppsV1Api)
            .readNamespacedDeployment({ name: 'agent-runtime', namespace: TEAM_A_NAMESPACE })
        ).spec?.template.spec;
        this.check(
          'the Deployment itself declares neither field',
          'nodeSelector and tolerations unset in the Pod template',
          json({ nodeSelector: template?.nodeSelector, tolerations: template?.tolerations }),
          template?.nodeSelector === undefined && template?.tolerations === undefined,
        );
        await this.sh(['get', 'pods', '-n', TEAM_A_NAMESPACE, '-o', 'jsonpath={.items[*].spec.nodeSelector}']);
        await this.sh([
          'get',
          'pods',
          '-n',
          TEAM_A_NAMESPACE,
          '-o',
          'jsonpath={range .items[*]}{.metadata.name}{"\\t"}{.spec.tolerations[?(@.key=="dedicated")]}{"\\n"}{end}',
        ]);
        await this.sh(['get', 'pods', '-n', TEAM_A_NAMESPACE, '-o', 'wide']);
        if (pods) {
          const seen = pods.map((p) => ({
            pod: p.metadata?.name,
            nodeSelector: p.spec?.nodeSelector,
            dedicated: (p.spec?.tolerations ?? []).filter((t) => t.key === 'dedicated'),
            node: p.spec?.nodeName,
          }));
          this.check(
            'every Pod carries the mandated nodeSelector',
            json(NODE_ISOLATION.nodeSelector),
            json([...new Set(seen.map((s) => json(s.nodeSelector)))]),
            seen.every((s) => canonical(s.nodeSelector) === canonical(NODE_ISOLATION.nodeSelector)),
          );
          this.check(
            'every Pod carries the mandated toleration, once',
            json(NODE_ISOLATION.tolerations),
            json([...new Set(seen.map((s) => json(s.dedicated)))]),
            seen.every((s) => canonical(s.dedicated) === canonical(NODE_ISOLATION.tolerations)),
          );
          this.check(
            'every Pod is bound to node-a',
            'node-a ×3',
            seen.map((s) => s.node).join(', '),
            seen.every((s) => s.node === 'node-a'),
          );
          if (this.realNode) {
            await this.eventually(
              'every Pod Running on the real node (containerd, runc)',
              'Running ×3',
              async () => {
                const list = await this.core.listNamespacedPod({
                  namespace: TEAM_A_NAMESPACE,
                  labelSelector: 'app=agent-runtime',
                });
                return list.items.length === 3 && list.items.every((p) => p.status?.phase === 'Running')
                  ? list.items
                  : undefined;
              },
              (items: V1Pod[]) => items.map((p) => `${p.metadata?.name} ${p.status?.phase}`).join(', '),
              90_000,
            );
          }
        }
      },
    );

    await r.step('6', 'A Pod in a namespace without the label never reaches the webhook', 'seed 1 step 5', async () => {
      await this.sh(['create', 'namespace', UNRELATED_NAMESPACE]);
      await waitFor(
        `ServiceAccount ${UNRELATED_NAMESPACE}/default`,
        () => this.core.readNamespacedServiceAccount({ name: 'default', namespace: UNRELATED_NAMESPACE }),
        { timeoutMs: 30_000 },
      );
      const before = await this.webhookCounts();
      await this.sh(['run', 'hello', '-n', UNRELATED_NAMESPACE, `--image=${IMAGE}`, '--restart=Never']);
      const after = await this.webhookCounts();
      r.command(
        this.realNode
          ? `curl -sk -H "Authorization: Bearer $(kubectl create token demo-metrics-reader -n ${RELEASE_NAMESPACE})" https://<each webhook Pod's IP>:8080/metrics | grep -E '^kubeplus_webhook_admissions_total'   # summed over result and Pods; the chart's metrics are secure: a token allowed to get /metrics`
          : `curl -s ${this.env.webhook?.metricsUrl ?? ''} | grep -E '^kubeplus_webhook_admissions_total'   # summed over result`,
        `before: ${before.webhook}   after: ${after.webhook}`,
      );
      r.command(
        `kubectl get --raw /metrics | grep 'apiserver_admission_webhook_admission_duration_seconds_count{name="${WEBHOOK_ENTRY_NAME}"'   # summed`,
        `before: ${before.apiServer}   after: ${after.apiServer}`,
      );
      this.check(
        'the webhook counted no admission',
        `${before.webhook} → ${before.webhook}`,
        `${before.webhook} → ${after.webhook}`,
        after.webhook === before.webhook,
      );
      this.check(
        'the API server made no call to it',
        `${before.apiServer} → ${before.apiServer}`,
        `${before.apiServer} → ${after.apiServer}`,
        after.apiServer === before.apiServer,
      );
      const log = await this.env.webhookLog();
      const count = (ns: string): number => log.split('\n').filter((l) => l.includes(`"namespace":"${ns}"`)).length;
      r.command(
        `${this.env.webhookLogCommand()} | grep -c '"namespace":"${UNRELATED_NAMESPACE}"'; … | grep -c '"namespace":"${TEAM_A_NAMESPACE}"'   # the webhook logs every request it gets (log level debug)`,
        `${count(UNRELATED_NAMESPACE)}\n${count(TEAM_A_NAMESPACE)}`,
      );
      this.check(
        'the webhook log names team-a’s admissions, never the unrelated namespace',
        `${UNRELATED_NAMESPACE}: 0 lines, ${TEAM_A_NAMESPACE}: > 0`,
        `${UNRELATED_NAMESPACE}: ${count(UNRELATED_NAMESPACE)}, ${TEAM_A_NAMESPACE}: ${count(TEAM_A_NAMESPACE)}`,
        count(UNRELATED_NAMESPACE) === 0 && count(TEAM_A_NAMESPACE) > 0,
      );
      const pod = await this.eventually(
        'the unrelated Pod is scheduled like any other',
        'bound to node-b or node-c (node-a is tainted), no nodeSelector',
        async () => {
          const p = await this.core.readNamespacedPod({ name: 'hello', namespace: UNRELATED_NAMESPACE });
          return p.spec?.nodeName ? p : undefined;
        },
        (p: V1Pod) => `bound to ${p.spec?.nodeName}, nodeSelector ${json(p.spec?.nodeSelector)}`,
      );
      if (pod) {
        this.check(
          'its placement',
          'node-b or node-c, nodeSelector undefined',
          `${pod.spec?.nodeName}, nodeSelector ${json(pod.spec?.nodeSelector)}`,
          ['node-b', 'node-c'].includes(pod.spec?.nodeName ?? '') && pod.spec?.nodeSelector === undefined,
        );
      }
    });

    await r.step(
      '7',
      'No sandbox-isolation instance, no constraint: a Sandbox without runtimeClassName is accepted',
      'seed 2, acceptance 1',
      async () => {
        const res = await this.apply('sandbox-unrelated.yaml', sandbox('scratch', UNRELATED_NAMESPACE));
        this.check(
          'accepted in the unrelated namespace',
          'kubectl exit 0, no warning',
          `exit ${res.code}${res.stderr ? `; ${res.stderr.trim()}` : ''}`,
          res.code === 0 && !/warning/i.test(res.stderr),
        );
      },
    );

    await r.step(
      '8',
      `A Sandbox in ${TEAM_A_NAMESPACE} without runtimeClassName (or with runc) is denied`,
      'seed 2 step 4',
      async () => {
        this.env.writeManifest('sandbox-no-runtimeclass.yaml', sandbox('code-interpreter', TEAM_A_NAMESPACE));
        await this.untilInForce(
          'team-a’s enforce policy',
          'sandbox-no-runtimeclass.yaml',
          (res) => res.code !== 0 && /denied/i.test(res.stderr),
        );
        const unset = await this.apply('sandbox-no-runtimeclass.yaml', sandbox('code-interpreter', TEAM_A_NAMESPACE));
        this.check(
          'no runtimeClassName: denied at admission',
          'kubectl fails: "... denied request ..."',
          unset.stderr.trim() || `exit ${unset.code}`,
          unset.code !== 0 && /denied/i.test(unset.stderr),
        );
        const runc = await this.apply('sandbox-runc.yaml', sandbox('code-interpreter', TEAM_A_NAMESPACE, 'runc'));
        this.check(
          'runtimeClassName runc: denied',
          'kubectl fails: "... denied request ..."',
          runc.stderr.trim() || `exit ${runc.code}`,
          runc.code !== 0 && /denied/i.test(runc.stderr),
        );
        const stored = await this.sandboxes(TEAM_A_NAMESPACE);
        this.check(
          'nothing was stored',
          'no Sandbox in team-a',
          json(stored.map((s) => s.metadata.name)),
          stored.length === 0,
        );
      },
    );

    await r.step(
      '9',
      `A Sandbox referencing ${runtimeClassOf(TEAM_A_INSTANCE)} is accepted`,
      'seed 2 step 5',
      async () => {
        const rc = runtimeClassOf(TEAM_A_INSTANCE);
        const res = await this.apply('sandbox-kata.yaml', sandbox('code-interpreter', TEAM_A_NAMESPACE, rc));
        await this.sh(['get', 'sandbox', '-n', TEAM_A_NAMESPACE]);
        const stored = await this.sandboxes(TEAM_A_NAMESPACE);
        this.check(
          'accepted and stored',
          `Sandbox code-interpreter with runtimeClassName ${rc}`,
          `exit ${res.code}; ${json(stored.map((s) => [s.metadata.name, s.spec.podTemplate.spec.runtimeClassName]))}`,
          res.code === 0 && stored.length === 1 && stored[0]?.spec.podTemplate.spec.runtimeClassName === rc,
        );
        if (!this.realNode) {
          r.note(
            'It does not "start" here: no Agent Sandbox controller runs (nothing turns the Sandbox into a Pod) and the fake nodes run no containers, let alone Kata VMs. Admission is what this demo proves.',
          );
          return;
        }
        // The upstream controller turns it into a Pod; node isolation places it on the pool.
        const pod = await this.eventually(
          'the Agent Sandbox controller creates its Pod and the scheduler binds it',
          `a Pod with runtimeClassName ${rc}, the team's nodeSelector, bound to node-a`,
          async () => {
            const p = await this.core
              .readNamespacedPod({ namespace: TEAM_A_NAMESPACE, name: 'code-interpreter' })
              .catch(() => undefined);
            return p?.spec?.nodeName ? p : undefined;
          },
          (p: V1Pod) =>
            `${p.metadata?.name}: runtimeClassName ${p.spec?.runtimeClassName}, nodeSelector ${json(p.spec?.nodeSelector)}, node ${p.spec?.nodeName}`,
          60_000,
        );
        await this.sh(['get', 'pods', '-n', TEAM_A_NAMESPACE, 'code-interpreter', '-o', 'wide']);
        if (pod) {
          this.check(
            'placed by node isolation, governed by sandbox isolation',
            `runtimeClassName ${rc}, nodeSelector ${json(NODE_ISOLATION.nodeSelector)}, node-a`,
            `runtimeClassName ${pod.spec?.runtimeClassName}, nodeSelector ${json(pod.spec?.nodeSelector)}, ${pod.spec?.nodeName}`,
            pod.spec?.runtimeClassName === rc &&
              canonical(pod.spec?.nodeSelector) === canonical(NODE_ISOLATION.nodeSelector) &&
              pod.spec?.nodeName === REAL_NODE,
          );
        }
        await this.eventually(
          'the kubelet reports why it cannot start it: this node has no Kata runtime',
          'Event FailedCreatePodSandBox naming the kata handler',
          async () =>
            (
              await this.core.listNamespacedEvent({
                namespace: TEAM_A_NAMESPACE,
                fieldSelector: 'involvedObject.name=code-interpreter,reason=FailedCreatePodSandBox',
              })
            ).items.find((e) => /kata/.test(e.message ?? '')),
          (e) => `${e.reason}: ${e.message}`,
          60_000,
        );
        await this.sh([
          'get',
          'sandbox',
          '-n',
          TEAM_A_NAMESPACE,
          'code-interpreter',
          '-o',
          'jsonpath={.status.conditions}',
        ]);
        r.note(
          'The Sandbox is admitted, turned into a Pod by the upstream controller and placed on the tenant pool; it cannot start on this machine, which has no Kata runtime (containerd has runc and gVisor, and no kata handler is ever mapped to another runtime to make it look started). Step 9g shows the level that does run here: gVisor.',
        );
      },
    );

    // Beside the kata tenant's honest outcome: a tenant at runsc, whose Sandbox runs inside gVisor.
    if (this.realNode) await this.gvisorTenant();

    let existing: SandboxObject[] = [];
    await r.step(
      '10',
      `Agent "${TEAM_B_INSTANCE}" with only sandbox-isolation, enforce: false (advisory)`,
      'seed 2 step 6',
      async () => {
        const rc = runtimeClassOf(TEAM_B_INSTANCE);
        await this.sh(['create', 'namespace', TEAM_B_NAMESPACE]);
        r.note(
          `${TEAM_B_NAMESPACE} is an existing tenant namespace: the instance is created inside it, so the operator never deletes it (see DEMO.md).`,
        );
        const res = await this.apply('agent-team-b.yaml', teamBAgent('{"minRuntimeClass": "runsc", "enforce": false}'));
        this.check('instance accepted', 'kubectl exit 0', `exit ${res.code}`, res.code === 0);
        await this.eventually(
          `RuntimeClass ${rc} with handler runsc`,
          'handler runsc',
          async () => (await this.runtimeClassHandler(rc)) === 'runsc' && 'runsc',
          (h) => h,
        );
        await this.sh(['get', await this.policyKinds(), '-l', `${OWNER_NAME_LABEL}=${TEAM_B_INSTANCE}`]);
        const ns = await this.readNamespace(TEAM_B_NAMESPACE);
        this.check(
          'no node isolation asked, none applied',
          `namespace ${TEAM_B_NAMESPACE} without ${ENABLED_LABEL}`,
          json(ns?.metadata?.labels),
          ns?.metadata?.labels?.[ENABLED_LABEL] === undefined,
        );

        this.env.writeManifest('sandbox-team-b-unset.yaml', sandbox('notebook', TEAM_B_NAMESPACE));
        this.env.writeManifest('sandbox-team-b-runc.yaml', sandbox('legacy-tool', TEAM_B_NAMESPACE, 'runc'));
        // Defaulting needs a MutatingAdmissionPolicy API (Kubernetes 1.36; 1.34-1.35 when enabled).
        // Without one the operator falls back, as documented: it says so on the instance, installs
        // the warning policy only, and an unset class stays unset.
        const defaults = (await this.mutatingPolicyVersion()) !== undefined;
        if (defaults) {
          await this.untilInForce(
            'team-b’s defaulting policy',
            'sandbox-team-b-unset.yaml',
            (dry) => dry.code === 0 && dry.stdout.trim() === rc,
            ['-o', 'jsonpath={.spec.podTemplate.spec.runtimeClassName}'],
          );
        } else {
          r.note(
            `This cluster (Kubernetes ${this.env.controlPlane.state.kubernetesVersion}) serves no MutatingAdmissionPolicy API: advisory mode cannot default, and the operator says so on the instance.`,
          );
          await this.eventually(
            'a Warning Event on the instance: MutatingAdmissionPolicyUnavailable',
            'Warning MutatingAdmissionPolicyUnavailable',
            async () => {
              const events = await this.core.listNamespacedEvent({
                namespace: TEAM_B_NAMESPACE,
                fieldSelector: `involvedObject.name=${TEAM_B_INSTANCE}`,
              });
              const hit = events.items.find((e) => e.reason === 'MutatingAdmissionPolicyUnavailable');
              return hit !== undefined && `${hit.type} ${hit.reason}: ${hit.message}`;
            },
            (seen) => seen,
          );
          await this.sh(['get', 'events', '-n', TEAM_B_NAMESPACE, '--field-selector', 'type=Warning']);
        }
        await this.untilInForce(
          'team-b’s warning policy',
          'sandbox-team-b-runc.yaml',
          (dry) => dry.code === 0 && /warning/i.test(dry.stderr),
        );
        const unset = await this.apply('sandbox-team-b-unset.yaml', sandbox('notebook', TEAM_B_NAMESPACE));
        const runc = await this.apply('sandbox-team-b-runc.yaml', sandbox('legacy-tool', TEAM_B_NAMESPACE, 'runc'));
        await this.sh([
          'get',
          'sandbox',
          '-n',
          TEAM_B_NAMESPACE,
          '-o',
          'custom-columns=NAME:.metadata.name,RUNTIMECLASS:.spec.podTemplate.spec.runtimeClassName',
        ]);
        existing = await this.sandboxes(TEAM_B_NAMESPACE);
        const byName = Object.fromEntries(
          existing.map((s) => [s.metadata.name, s.spec.podTemplate.spec.runtimeClassName]),
        );
        this.check(
          defaults
            ? 'unset runtimeClassName: admitted with the namespace default applied'
            : 'unset runtimeClassName: admitted, left unset (no MutatingAdmissionPolicy to default with), with a warning',
          defaults ? `notebook → ${rc}` : 'notebook → unset, "Warning: ..." on stderr',
          `exit ${unset.code}; notebook → ${byName.notebook ?? 'unset'}${defaults ? '' : `; ${unset.stderr.trim() || 'no warning'}`}`,
          unset.code === 0 &&
            (defaults ? byName.notebook === rc : byName.notebook === undefined && /warning/i.test(unset.stderr)),
        );
        this.check(
          'explicit weaker runc: admitted, with a warning',
          'kubectl exit 0 and "Warning: ..." on stderr',
          `exit ${runc.code}; ${runc.stderr.trim() || 'no warning'}`,
          runc.code === 0 && byName['legacy-tool'] === 'runc' && /warning/i.test(runc.stderr),
        );
      },
    );

    await r.step(
      '11',
      `Tighten ${TEAM_B_INSTANCE} (runsc → kata, enforce): existing Sandboxes are left alone, new ones are held to it`,
      'seed 2, how to handle 5',
      async () => {
        const annotate = await this.sh([
          'annotate',
          'agent',
          TEAM_B_INSTANCE,
          '-n',
          TEAM_B_NAMESPACE,
          '--overwrite',
          'kubeplus.io/sandbox-isolation={"minRuntimeClass": "kata", "enforce": true}',
        ]);
        this.check('annotation updated', 'kubectl exit 0', `exit ${annotate.code}`, annotate.code === 0);
        const rc = runtimeClassOf(TEAM_B_INSTANCE);
        await this.eventually(
          `RuntimeClass ${rc} now has handler kata`,
          'kata',
          async () => (await this.runtimeClassHandler(rc)) === 'kata' && 'kata',
          (h) => h,
        );
        this.env.writeManifest('sandbox-team-b-runc-2.yaml', sandbox('legacy-tool-2', TEAM_B_NAMESPACE, 'runc'));
        const enforcePair = ['validatingadmissionpolicies', 'validatingadmissionpolicybindings'].map(
          (plural) => `${plural}/${policyOf(TEAM_B_NAMESPACE, TEAM_B_INSTANCE, 'enforce')}`,
        );
        await this.eventually(
          'the advisory policies are replaced by the enforce pair',
          enforcePair.join(', '),
          async (observe) => {
            const now = await this.policiesOf(TEAM_B_INSTANCE);
            observe(now);
            return json(now) === json(enforcePair) && now;
          },
          (now) => now.join(', '),
        );
        await this.sh(['get', await this.policyKinds(), '-l', `${OWNER_NAME_LABEL}=${TEAM_B_INSTANCE}`]);
        await this.untilInForce(
          'team-b’s enforce policy (and the advisory ones unloaded)',
          'sandbox-team-b-runc-2.yaml',
          (res) => res.code !== 0 && /denied/i.test(res.stderr) && !/warning/i.test(res.stderr),
        );
        const now = await this.sandboxes(TEAM_B_NAMESPACE);
        const before = existing.map((s) => [
          s.metadata.name,
          s.metadata.uid,
          s.metadata.resourceVersion,
          s.spec.podTemplate.spec.runtimeClassName,
        ]);
        const after = now.map((s) => [
          s.metadata.name,
          s.metadata.uid,
          s.metadata.resourceVersion,
          s.spec.podTemplate.spec.runtimeClassName,
        ]);
        this.check(
          'existing Sandboxes untouched (same uid, resourceVersion, runtimeClassName)',
          json(before),
          json(after),
          json(before) === json(after) && before.length === 2,
        );
        const label = await this.sh(['label', 'sandbox', 'legacy-tool', '-n', TEAM_B_NAMESPACE, 'reviewed=true']);
        this.check(
          'an existing runc Sandbox can still be updated (its class is not judged again)',
          'kubectl exit 0',
          `exit ${label.code}${label.stderr ? `; ${label.stderr.trim()}` : ''}`,
          label.code === 0,
        );
        const denied = await this.apply(
          'sandbox-team-b-runc-2.yaml',
          sandbox('legacy-tool-2', TEAM_B_NAMESPACE, 'runc'),
        );
        this.check(
          'a NEW runc Sandbox is now denied',
          'kubectl fails: "... denied request ..."',
          denied.stderr.trim() || `exit ${denied.code}`,
          denied.code !== 0 && /denied/i.test(denied.stderr),
        );
        // Not retroactive, but visible: the namespace's compliance Report (OpenReports) fails the
        // Sandboxes admitted before the tightening (the operator's audit, every 5 s in the demo).
        // legacy-tool (runc); notebook names the instance's own class, which now has handler kata.
        // Weaker than kata now: the runc one, and (where advisory mode could not default it) the unset one.
        const weak = existing
          .filter((s) => [undefined, 'runc'].includes(s.spec.podTemplate.spec.runtimeClassName))
          .map((s) => s.metadata.name)
          .sort();
        await this.eventually(
          `the compliance Report of ${TEAM_B_NAMESPACE} fails the Sandboxes weaker than kata (${weak.join(', ')})`,
          `sandbox-isolation fail: ${weak.join(', ')}`,
          async (observe) => {
            const res = await this.env.kubectl([
              'get',
              'reports.openreports.io',
              'kubeplus-isolation',
              '-n',
              TEAM_B_NAMESPACE,
              '-o',
              'json',
            ]);
            if (res.code !== 0) return false;
            const report = JSON.parse(res.stdout) as {
              results?: Array<{ policy: string; result: string; resources?: Array<{ name: string }> }>;
            };
            const failing = (report.results ?? [])
              .filter((x) => x.policy === 'sandbox-isolation' && x.result === 'fail')
              .flatMap((x) => x.resources?.map((o) => o.name) ?? [])
              .sort();
            observe(failing);
            return json(failing) === json(weak) && failing;
          },
          (failing) => `sandbox-isolation fail: ${failing.join(', ')}`,
        );
        await this.sh(['get', 'reports', '-n', TEAM_B_NAMESPACE]);
      },
    );

    await r.step(
      '12',
      `Delete ${TEAM_B_INSTANCE}: its policies and RuntimeClass go, its Sandboxes and namespace stay`,
      'seed 2, acceptance 6',
      async () => {
        const rc = runtimeClassOf(TEAM_B_INSTANCE);
        const sandboxesBefore = (await this.sandboxes(TEAM_B_NAMESPACE)).map((s) => s.metadata.uid).sort();
        await this.sh(['delete', 'agent', TEAM_B_INSTANCE, '-n', TEAM_B_NAMESPACE]);
        await this.eventually(
          'admission policies and bindings removed',
          'none labelled for the instance',
          async (observe) => {
            const left = await this.policiesOf(TEAM_B_INSTANCE);
            observe(left);
            return left.length === 0 && 'none left';
          },
          (v) => v,
        );
        await this.eventually(
          `RuntimeClass ${rc} removed`,
          'not found',
          async () => (await this.runtimeClassHandler(rc)) === undefined && 'not found',
          (v) => v,
        );
        await this.sh(['get', 'sandbox', '-n', TEAM_B_NAMESPACE]);
        const sandboxesAfter = (await this.sandboxes(TEAM_B_NAMESPACE)).map((s) => s.metadata.uid).sort();
        this.check(
          'the Sandboxes are still there (same uids)',
          json(sandboxesBefore),
          json(sandboxesAfter),
          sandboxesBefore.length === 2 && json(sandboxesBefore) === json(sandboxesAfter),
        );
        const ns = await this.readNamespace(TEAM_B_NAMESPACE);
        this.check(
          `namespace ${TEAM_B_NAMESPACE} (not created by KubePlus) stays`,
          'Active',
          ns?.status?.phase ?? 'not found',
          ns?.status?.phase === 'Active',
        );
      },
    );

    await r.step(
      '13',
      `Delete ${TEAM_A_INSTANCE}: namespace ${TEAM_A_NAMESPACE} (and its label) is gone, with its RuntimeClass and policies`,
      'seed 1 step 6, seed 2 acceptance 6',
      async () => {
        const rc = runtimeClassOf(TEAM_A_INSTANCE);
        const policiesBefore = await this.policiesOf(TEAM_A_INSTANCE);
        r.note(`owned before deletion: runtimeclasses/${rc}, ${policiesBefore.join(', ')}`);
        await this.sh(['delete', 'agent', TEAM_A_INSTANCE, '-n', PLATFORM_NAMESPACE]);
        const started = performance.now();
        await this.eventually(
          `namespace ${TEAM_A_NAMESPACE} finalized and removed by the namespace controller`,
          'gone (404)',
          async (observe) => {
            const ns = await this.readNamespace(TEAM_A_NAMESPACE);
            observe(
              ns
                ? { phase: ns.status?.phase, conditions: ns.status?.conditions?.filter((c) => c.status === 'True') }
                : 'gone',
            );
            return ns === undefined && `gone after ${((performance.now() - started) / 1000).toFixed(1)} s`;
          },
          (v) => v,
          120_000,
        );
        const get = await this.sh(['get', 'namespace', TEAM_A_NAMESPACE]);
        this.check(
          `kubectl get namespace ${TEAM_A_NAMESPACE}`,
          'not found',
          get.stderr.trim() || get.stdout.trim(),
          get.code !== 0 && /NotFound|not found/.test(get.stderr),
        );
        const labeled = await this.sh(['get', 'namespaces', '-l', `${ENABLED_LABEL}=true`]);
        this.check(
          'no namespace carries the isolation label any more',
          'No resources found',
          (labeled.stdout + labeled.stderr).trim(),
          labeled.code === 0 && labeled.stdout.trim() === '',
        );
        this.check(
          `RuntimeClass ${rc} removed`,
          'not found',
          (await this.runtimeClassHandler(rc)) === undefined ? 'not found' : 'still there',
          (await this.runtimeClassHandler(rc)) === undefined,
        );
        const policies = await this.policiesOf(TEAM_A_INSTANCE);
        this.check('admission policies and bindings removed', 'none', json(policies), policies.length === 0);
        const agents = (await this.custom.listClusterCustomObject(AGENT)) as { items: unknown[] };
        this.check('no Agent instance left', '0', String(agents.items.length), agents.items.length === 0);
      },
    );
  }

  /**
   * Step 9g (real node only): team-g, at minimum runsc, on the same pool; its Sandbox on the
   * generated class runs inside gVisor, proven by the kernel its container reads. The instance is
   * deleted at the end, so step 13 finds the cluster as the documents expect.
   */
  private async gvisorTenant(): Promise<void> {
    const r = this.report;
    await r.step(
      '9g',
      `A tenant at minRuntimeClass runsc: its Sandbox runs inside gVisor on ${REAL_NODE}`,
      'issue 22',
      async () => {
        const rc = runtimeClassOf(TEAM_G_INSTANCE);
        await this.apply('agent-team-g.yaml', TEAM_G_AGENT);
        await this.eventually(
          `RuntimeClass ${rc} (handler runsc) and namespace ${TEAM_G_NAMESPACE}`,
          'handler runsc, the namespace isolated',
          async () => {
            const handler = await this.runtimeClassHandler(rc);
            const ns = await this.readNamespace(TEAM_G_NAMESPACE);
            const sa = await this.core
              .readNamespacedServiceAccount({ name: 'default', namespace: TEAM_G_NAMESPACE })
              .catch(() => undefined);
            return handler === 'runsc' && ns?.metadata?.labels?.[ENABLED_LABEL] === 'true' && sa !== undefined
              ? `handler ${handler}, ${ENABLED_LABEL}=true`
              : undefined;
          },
          (v) => v,
        );
        await this.sh(['get', 'runtimeclass', rc, 'gvisor']);
        const manifest = kernelProbeSandbox('gvisor-interpreter', TEAM_G_NAMESPACE, projectImage('webhook'), rc);
        // The policy reaches the API server a moment after the operator writes it (DEMO.md).
        await waitFor(
          'the runsc policy in force in team-g',
          async () => {
            const res = await this.env.kubectl(
              ['apply', '--dry-run=server', '-f', '-'],
              sandbox('probe', TEAM_G_NAMESPACE, 'runc'),
            );
            return res.code !== 0 || undefined;
          },
          { timeoutMs: 60_000, intervalMs: 250 },
        ).catch(() => undefined);
        const res = await this.apply('sandbox-gvisor.yaml', manifest);
        this.check(
          'accepted',
          `Sandbox gvisor-interpreter with runtimeClassName ${rc}`,
          `exit ${res.code}`,
          res.code === 0,
        );
        const pod = await this.eventually(
          'the Agent Sandbox controller creates its Pod, placed by node isolation, and it runs',
          `Running on ${REAL_NODE} with runtimeClassName ${rc} and the pool's nodeSelector`,
          async () => {
            const p = await this.core
              .readNamespacedPod({ namespace: TEAM_G_NAMESPACE, name: 'gvisor-interpreter' })
              .catch(() => undefined);
            return p?.status?.phase === 'Running' &&
              p.spec?.runtimeClassName === rc &&
              canonical(p.spec?.nodeSelector) === canonical(NODE_ISOLATION.nodeSelector) &&
              p.spec?.nodeName === REAL_NODE
              ? p
              : undefined;
          },
          (p: V1Pod) =>
            `${p.metadata?.name}: Running on ${p.spec?.nodeName}, runtimeClassName ${p.spec?.runtimeClassName}, nodeSelector ${json(p.spec?.nodeSelector)}`,
          120_000,
        );
        await this.sh(['get', 'sandbox,pods', '-n', TEAM_G_NAMESPACE, '-o', 'wide']);
        if (pod) {
          const host = release();
          const log = await this.eventually(
            "the kernel the Sandbox's container reads (its log: uname -r and /proc/version, from inside)",
            `gVisor's kernel (4.19.0-gvisor-like), not the host's ${host}`,
            async () => {
              const res = await this.env.kubectl(['logs', '-n', TEAM_G_NAMESPACE, 'gvisor-interpreter']);
              const line = kernelLine(res.stdout);
              return line !== '' && /gvisor/i.test(line) && !line.includes(host) ? line : undefined;
            },
            (line) => line,
            30_000,
          );
          if (log) r.note(`PROOF: Sandbox ${TEAM_G_NAMESPACE}/gvisor-interpreter runs inside gVisor: ${log}`);
        }
        await this.sh(['delete', 'agent', TEAM_G_INSTANCE, '-n', PLATFORM_NAMESPACE]);
        await this.eventually(
          `namespace ${TEAM_G_NAMESPACE} removed with its Sandbox (the instance deleted)`,
          'gone (404)',
          async () => (await this.readNamespace(TEAM_G_NAMESPACE)) === undefined || undefined,
          () => 'gone',
          120_000,
        );
      },
    );
  }
}
