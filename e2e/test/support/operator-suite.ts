/**
 * The setup every operator suite shares, called once inside its `describe`: the run's shared
 * cluster, the `agents.cloudark.io` CRD, a Lease namespace, optionally a platform namespace, the
 * suite's operator on its own Lease (LEASE_PRESETS.fast), and the teardown in the one order that
 * leaves nothing behind (Agents deleted while an operator still runs to release them, then the
 * operators stopped, then the namespaces deleted).
 *
 * With `chart`, the operator runs as the chart runs it instead: its ServiceAccount and RBAC
 * rendered from the chart (faults/support/chart-rbac-operator.ts) in a release namespace, which
 * holds the chart's Lease; the operator authenticates as that ServiceAccount (or through
 * `kubeconfigPath`, e.g. a recording proxy forwarding its identity), and no Agent CRD is created
 * (the chart's RBAC would not let it read one).
 *
 * ```ts
 * describe('…', () => {
 *   const suite = operatorSuite({ name: 'op-sbx', waitForServiceAccount: false });
 *   test('…', async () => {
 *     const ns = await suite.tenantNamespace('kpi-op-sbx-a');
 *     await createAgent(suite.kc, ns, 'a', {…});
 *     await suite.operator.waitReconciled(…);
 *   });
 * });
 * ```
 */
import { afterAll, beforeAll } from '@jest/globals';
import {
  type Cluster,
  connectE2eCluster,
  createTestNamespace,
  deleteNamespace,
  isApiStatus,
  type LeasePreset,
  type NamespaceOptions,
  type RunningOperator,
  startOperator,
} from '@kubeplus-isolation/e2e';
import { CoreV1Api, type KubeConfig } from '@kubernetes/client-node';
import {
  applyChartOperatorRbac,
  type ChartRbac,
  operatorKubeconfig,
  startChartOperator,
} from '../faults/support/chart-rbac-operator.js';
import { uniqueName } from './names.js';
import { deleteAgentsAndCrd, ensureAgentCrd } from './operator.js';

export interface OperatorSuiteOptions {
  /**
   * Short name: Lease namespace `kpi-<name>-system-…`, Lease `<name>-lease-…`, operator log
   * `operator-<name>-….log` and Lease identity `<name>_…`.
   */
  name: string;
  /** Flags of the suite's operator, and of every `startOperator` that brings none of its own. */
  args?: readonly string[];
  /** Start the suite's operator in beforeAll (default); false: the tests start theirs with `startOperator`. */
  startOperator?: boolean;
  /** A platform namespace (e.g. `kubeplus`): created unless it exists, deleted in afterAll if created here. */
  platformNamespace?: string;
  /** Whether `tenantNamespace` waits for the namespace's `default` ServiceAccount, to create Pods at once (default true). */
  waitForServiceAccount?: boolean;
  /** After the CRD and the namespaces, before the suite's operator: e.g. nodes, a webhook, the policy engine. */
  beforeOperator?: (suite: OperatorSuite) => Promise<void>;
  /** First in afterAll, before the Agents are deleted: e.g. make sure an operator runs to release them. */
  beforeTeardown?: (suite: OperatorSuite) => Promise<void>;
  /** In afterAll once the operators stopped, before the namespaces are deleted: e.g. strip what they left finalized. */
  afterOperatorsStop?: (suite: OperatorSuite) => Promise<void>;
  /** Last in afterAll, after the operators stopped and the namespaces are gone. */
  afterTeardown?: (suite: OperatorSuite) => Promise<void>;
  /** The operator as the chart runs it: its ServiceAccount and RBAC from `helm template` with `values`. */
  chart?: { values?: Record<string, unknown> };
  /** The kubeconfig operators use unless `startOperator` names one (default: admin; chart: the ServiceAccount's). */
  kubeconfigPath?: (suite: OperatorSuite) => string;
  /**
   * The Lease timings of the suite's operators (not with `chart`). Default `fast` (a 3 s renew
   * deadline); `default` (the operator's own) for a suite that loads the machine enough to delay a
   * renewal by seconds, where a lost lease would stop the only operator mid-test.
   */
  lease?: LeasePreset;
}

export interface SuiteOperatorOptions {
  /** Default: the suite's name. */
  name?: string;
  /** Default: the suite's Lease (chart: always the chart's). */
  leaseName?: string;
  /** Default: the suite's `args`. */
  args?: readonly string[];
  /** Default: the suite's `kubeconfigPath`, else the admin's (chart: the ServiceAccount's). */
  kubeconfigPath?: string;
  /** Another operator build's main.js (e2e/scripts/build-previous-operator.sh), instead of this checkout's (not with `chart`). */
  entry?: string;
}

export interface OperatorSuite {
  readonly cluster: Cluster;
  readonly kc: KubeConfig;
  /** The Lease namespace (chart: the release namespace). */
  readonly leaseNamespace: string;
  /** Chart: the Helm release name (the Lease is `<release>-operator`, the default operator `<release>-op`). */
  readonly release: string;
  /** Chart: the ServiceAccount and RBAC applied. */
  readonly rbac: ChartRbac;
  /** The suite's Lease (`--leader-election-id`): its own, so suites' operators never share an election. */
  readonly leaseName: string;
  /** The suite's operator: started in beforeAll, or the last one `startOperator` started. */
  readonly operator: RunningOperator;
  /** A namespace deleted in afterAll (`opts`: e.g. labels and annotations it is born with). */
  tenantNamespace(prefix: string, opts?: NamespaceOptions): Promise<string>;
  /** An operator on the suite's Lease (fast timings; chart: the chart's Lease and timings), stopped in afterAll unless stopped before. */
  startOperator(opts?: SuiteOperatorOptions): Promise<RunningOperator>;
}

export function operatorSuite(opts: OperatorSuiteOptions): OperatorSuite {
  let cluster: Cluster | undefined;
  let leaseNamespace = '';
  let current: RunningOperator | undefined;
  let createdPlatform = false;
  let rbac: ChartRbac | undefined;
  let serviceAccountKubeconfig: string | undefined;
  const release = uniqueName(`kpi-${opts.name}`);
  const leaseName = opts.chart ? `${release}-operator` : uniqueName(`${opts.name}-lease`);
  const operators: RunningOperator[] = [];
  const namespaces: string[] = [];
  const setUp = (): Cluster => {
    if (cluster === undefined) throw new Error(`operator suite ${opts.name}: used before its beforeAll ran`);
    return cluster;
  };

  const suite: OperatorSuite = {
    get cluster() {
      return setUp();
    },
    get kc() {
      return setUp().kc;
    },
    get leaseNamespace() {
      return leaseNamespace;
    },
    leaseName,
    release,
    get rbac() {
      if (rbac === undefined) throw new Error(`operator suite ${opts.name}: no chart RBAC (chart mode only)`);
      return rbac;
    },
    get operator() {
      if (current === undefined) throw new Error(`operator suite ${opts.name}: no operator started`);
      return current;
    },
    async tenantNamespace(prefix, nsOpts = {}) {
      const ns = await createTestNamespace(setUp().kc, prefix, {
        waitForServiceAccount: opts.waitForServiceAccount ?? true,
        ...nsOpts,
      });
      namespaces.push(ns);
      return ns;
    },
    async startOperator(o = {}) {
      const kubeconfigPath = o.kubeconfigPath ?? opts.kubeconfigPath?.(suite);
      if (rbac !== undefined) {
        if (kubeconfigPath === undefined) {
          serviceAccountKubeconfig ??= await operatorKubeconfig(setUp(), leaseNamespace, rbac);
        }
        const op = await startChartOperator(setUp(), {
          name: o.name ?? `${release}-op`,
          namespace: leaseNamespace,
          rbac,
          kubeconfigPath: kubeconfigPath ?? serviceAccountKubeconfig ?? '',
          args: o.args ?? opts.args ?? [],
        });
        operators.push(op);
        current = op;
        return op;
      }
      const name = o.name ?? opts.name;
      const suffix = uniqueName(name);
      const op = await startOperator(setUp(), {
        name: `operator-${suffix}`,
        ...(o.entry === undefined ? {} : { entry: o.entry }),
        ...(kubeconfigPath === undefined ? {} : { kubeconfigPath }),
        leaderElection: {
          namespace: leaseNamespace,
          id: o.leaseName ?? leaseName,
          identity: `${name}_${suffix.slice(name.length + 1)}`,
          lease: opts.lease ?? 'fast',
        },
        args: o.args ?? opts.args ?? [],
      });
      operators.push(op);
      current = op;
      return op;
    },
  };

  beforeAll(async () => {
    cluster = await connectE2eCluster();
    const kc = cluster.kc;
    if (!opts.chart) await ensureAgentCrd(kc);
    if (opts.platformNamespace !== undefined) {
      try {
        await kc.makeApiClient(CoreV1Api).createNamespace({ body: { metadata: { name: opts.platformNamespace } } });
        createdPlatform = true;
      } catch (error) {
        if (!isApiStatus(error, 409)) throw error;
      }
    }
    leaseNamespace = await suite.tenantNamespace(`kpi-${opts.name}-${opts.chart ? 'release' : 'system'}`);
    if (opts.chart) rbac = await applyChartOperatorRbac(cluster, release, leaseNamespace, opts.chart.values ?? {});
    await opts.beforeOperator?.(suite);
    if (opts.startOperator ?? true) await suite.startOperator();
  });

  afterAll(async () => {
    if (cluster === undefined) return;
    const kc = cluster.kc;
    await opts.beforeTeardown?.(suite);
    // While an operator still runs, so it releases (and cleans up after) every instance.
    if (!opts.chart) await deleteAgentsAndCrd(kc);
    await Promise.all(operators.map((op) => op.stop()));
    await opts.afterOperatorsStop?.(suite);
    // In parallel: the namespace controller takes seconds per namespace.
    await Promise.all(
      [...namespaces, ...(createdPlatform && opts.platformNamespace ? [opts.platformNamespace] : [])].map((ns) =>
        deleteNamespace(kc, ns),
      ),
    );
    await rbac?.remove();
    await opts.afterTeardown?.(suite);
  });

  return suite;
}
