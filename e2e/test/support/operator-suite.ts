/**
 * The setup every operator suite shares, called once inside its `describe`: the run's shared
 * cluster, the `agents.cloudark.io` CRD, a Lease namespace, optionally a platform namespace, the
 * suite's operator on its own Lease (LEASE_PRESETS.fast), and the teardown in the one order that
 * leaves nothing behind (Agents deleted while an operator still runs to release them, then the
 * operators stopped, then the namespaces deleted).
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
  type NamespaceOptions,
  type RunningOperator,
  startOperator,
} from '@kubeplus-isolation/e2e';
import { CoreV1Api, type KubeConfig } from '@kubernetes/client-node';
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
  /** Last in afterAll, after the operators stopped and the namespaces are gone. */
  afterTeardown?: (suite: OperatorSuite) => Promise<void>;
}

export interface SuiteOperatorOptions {
  /** Default: the suite's name. */
  name?: string;
  /** Default: the suite's Lease. */
  leaseName?: string;
  /** Default: the suite's `args`. */
  args?: readonly string[];
  /** Default: the admin kubeconfig. */
  kubeconfigPath?: string;
  /** Another operator build's main.js (e2e/scripts/build-previous-operator.sh), instead of this checkout's. */
  entry?: string;
}

export interface OperatorSuite {
  readonly cluster: Cluster;
  readonly kc: KubeConfig;
  readonly leaseNamespace: string;
  /** The suite's Lease (`--leader-election-id`): its own, so suites' operators never share an election. */
  readonly leaseName: string;
  /** The suite's operator: started in beforeAll, or the last one `startOperator` started. */
  readonly operator: RunningOperator;
  /** Whether an operator started by the suite still runs. */
  readonly running: boolean;
  /** A namespace deleted in afterAll (`opts`: e.g. labels and annotations it is born with). */
  tenantNamespace(prefix: string, opts?: NamespaceOptions): Promise<string>;
  /** An operator on the suite's Lease (fast timings), stopped in afterAll unless stopped before. */
  startOperator(opts?: SuiteOperatorOptions): Promise<RunningOperator>;
}

export function operatorSuite(opts: OperatorSuiteOptions): OperatorSuite {
  let cluster: Cluster | undefined;
  let leaseNamespace = '';
  let current: RunningOperator | undefined;
  let createdPlatform = false;
  const leaseName = uniqueName(`${opts.name}-lease`);
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
    get operator() {
      if (current === undefined) throw new Error(`operator suite ${opts.name}: no operator started`);
      return current;
    },
    get running() {
      return operators.some((op) => op.process.exited() === undefined);
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
      const name = o.name ?? opts.name;
      const suffix = uniqueName(name);
      const op = await startOperator(setUp(), {
        name: `operator-${suffix}`,
        ...(o.entry === undefined ? {} : { entry: o.entry }),
        ...(o.kubeconfigPath === undefined ? {} : { kubeconfigPath: o.kubeconfigPath }),
        leaderElection: {
          namespace: leaseNamespace,
          id: o.leaseName ?? leaseName,
          identity: `${name}_${suffix.slice(name.length + 1)}`,
          lease: 'fast',
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
    await ensureAgentCrd(kc);
    if (opts.platformNamespace !== undefined) {
      try {
        await kc.makeApiClient(CoreV1Api).createNamespace({ body: { metadata: { name: opts.platformNamespace } } });
        createdPlatform = true;
      } catch (error) {
        if (!isApiStatus(error, 409)) throw error;
      }
    }
    leaseNamespace = await suite.tenantNamespace(`kpi-${opts.name}-system`);
    await opts.beforeOperator?.(suite);
    if (opts.startOperator ?? true) await suite.startOperator();
  });

  afterAll(async () => {
    if (cluster === undefined) return;
    const kc = cluster.kc;
    await opts.beforeTeardown?.(suite);
    // While an operator still runs, so it releases (and cleans up after) every instance.
    await deleteAgentsAndCrd(kc);
    await Promise.all(operators.map((op) => op.stop()));
    // In parallel: the namespace controller takes seconds per namespace.
    await Promise.all(
      [...namespaces, ...(createdPlatform && opts.platformNamespace ? [opts.platformNamespace] : [])].map((ns) =>
        deleteNamespace(kc, ns),
      ),
    );
    await opts.afterTeardown?.(suite);
  });

  return suite;
}
