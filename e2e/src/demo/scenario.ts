import {
  NAMESPACE_CREATED_FOR_ANNOTATION,
  NODE_ISOLATION_ENABLED_LABEL,
  NODE_ISOLATION_RESOLVED_ANNOTATION,
  NODE_ISOLATION_WEBHOOK_NAME,
  OWNER_NAME_LABEL,
} from '@kubeplus-isolation/spec';
import { CoreV1Api, CustomObjectsApi, type KubeConfig, NodeV1Api, type V1Namespace } from '@kubernetes/client-node';
import { servedPolicyApis } from '../harness/kubernetes-versions.js';
import { scrapeApiServerMetrics, sumMetric } from '../harness/metrics.js';
import { isApiStatus } from '../harness/node-api.js';
import { waitFor } from '../harness/wait.js';
import { DemoEnvironment, type DemoMode } from './environment.js';
import type { KubectlResult } from './kubectl.js';
import type { Report, StepResult } from './report.js';

// The design documents' protocol, from the shared spec, under the names the steps use.
export const ENABLED_LABEL = NODE_ISOLATION_ENABLED_LABEL;
export const RESOLVED_ANNOTATION = NODE_ISOLATION_RESOLVED_ANNOTATION;
export const CREATED_FOR_ANNOTATION = NAMESPACE_CREATED_FOR_ANNOTATION;
export const WEBHOOK_ENTRY_NAME = NODE_ISOLATION_WEBHOOK_NAME;
export { OWNER_NAME_LABEL };

const SANDBOX = { group: 'agents.x-k8s.io', version: 'v1beta1', plural: 'sandboxes' };
export const AGENT = { group: 'cloudark.io', version: 'v1', plural: 'agents' };
const VALIDATING_PLURALS = ['validatingadmissionpolicies', 'validatingadmissionpolicybindings'] as const;
const MUTATING_PLURALS = ['mutatingadmissionpolicies', 'mutatingadmissionpolicybindings'] as const;

export interface SandboxObject {
  metadata: { name: string; uid: string; resourceVersion: string };
  spec: { podTemplate: { spec: { runtimeClassName?: string } } };
}

/** JSON with object keys sorted, so two values compare regardless of key order. */
export function canonical(value: unknown): string {
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

export const json = (value: unknown): string => JSON.stringify(value) ?? 'undefined';
const message = (error: unknown): string => (error instanceof Error ? error.message : String(error));

/**
 * One step of the demo, in a file of its own (steps/, listed in order in steps/index.ts): what the
 * report prints for it and its body, which runs kubectl, prints what a user would see and records
 * checks through the Scenario's helpers.
 */
export interface DemoStep {
  /** As the output numbers it: S1–S4 for the setup, then the design documents' 1–13 (and 9g). */
  readonly id: string;
  /** Its heading; a function when it depends on the mode (real node or fake nodes). */
  readonly title: string | ((demo: Scenario) => string);
  /** The design documents' passage it walks, e.g. "seed 1 step 3" (printed beside the heading). */
  readonly source: string;
  /** Whether it runs in this mode; absent: always. */
  readonly when?: (demo: Scenario) => boolean;
  run(demo: Scenario): Promise<void>;
}

/** What a step leaves for a later one to compare with. */
export interface Carried {
  /** The RuntimeClasses before team-a's instance (step 2), to count what it added (step 4). */
  runtimeClassesBefore: string[];
  /** team-b's Sandboxes as admitted in advisory mode (step 10), to show they stay untouched (step 11). */
  teamBSandboxes: SandboxObject[];
}

/** The demo's shared helpers (commands, checks, reads) and the loop that runs its steps in order. */
export class Scenario {
  readonly env: DemoEnvironment;
  readonly carried: Carried = { runtimeClassesBefore: [], teamBSandboxes: [] };
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

  /** The keys of a namespace's labels and annotations that are this project's (`kubeplus.io/…`), sorted. */
  async isolationKeys(namespace: string): Promise<string[]> {
    const ns = await this.readNamespace(namespace);
    return [...Object.keys(ns?.metadata?.labels ?? {}), ...Object.keys(ns?.metadata?.annotations ?? {})]
      .filter((k) => k.startsWith('kubeplus.io/'))
      .sort();
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

  // ---- the loop ---------------------------------------------------------------------------

  /** Runs one step under the report: its heading, its body's commands and checks, its time. */
  runStep(step: DemoStep): Promise<StepResult> {
    const title = typeof step.title === 'string' ? step.title : step.title(this);
    return this.report.step(step.id, title, step.source, () => step.run(this));
  }

  /** Whether `step` applies here (some run only on the real node, some only on fake ones). */
  applies(step: DemoStep): boolean {
    return step.when?.(this) ?? true;
  }

  /** The setup steps in order; stops at the first that fails (the demo steps need all of them). */
  async setup(steps: readonly DemoStep[]): Promise<boolean> {
    for (const step of steps.filter((s) => this.applies(s))) {
      const result = await this.runStep(step);
      if (result.error !== undefined || result.checks.some((c) => !c.ok)) return false;
    }
    return true;
  }

  /** The design documents' steps in order; a failed one is reported and the next one still runs. */
  async run(steps: readonly DemoStep[]): Promise<void> {
    for (const step of steps.filter((s) => this.applies(s))) await this.runStep(step);
  }
}
