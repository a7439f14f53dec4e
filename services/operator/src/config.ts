/**
 * The operator's flags, in the conventions both services share (@kubeplus-isolation/service
 * flags.ts): each with an environment variable fallback (flag > variable > default), durations
 * written as Go writes them (`15s`, `1m30s`, `500ms`), --help and --version; parsing is pure and
 * the bootstrap prints the message and exits 2 on an error.
 */
import {
  boolean,
  duration,
  fail,
  usage as flagUsage,
  formatDuration,
  integer,
  LOG_LEVELS,
  type LogLevel,
  ok,
  oneOf,
  type Parsed,
  parseFlags,
  parseLogLevel,
  port,
  type Flag as SharedFlag,
  text,
} from '@kubeplus-isolation/service';
import {
  DEFAULT_HANDLER_LEVELS,
  DEFAULT_LEVEL_HANDLERS,
  type HandlerLevels,
  handlerMeetsMinimum,
  isDns1123Label,
  isDns1123Subdomain,
  parseHandlerLevels,
  RUNTIME_LEVELS,
  type RuntimeLevel,
} from '@kubeplus-isolation/spec';
import { DEFAULT_PLATFORM_NAMESPACE } from './desired/instance.js';
import { SANDBOX_POLICY_LAYOUTS, type SandboxPolicyLayout } from './desired/sandbox-policy.js';
import { type InstanceKindSelection, parseInstanceKinds } from './instance-kinds/registry.js';
import { JITTER_FACTOR } from './runtime/leader-election.js';
import { UNINSTALL_MODES, type UninstallMode } from './uninstall/plan.js';

export interface Config {
  kubeconfig: string | undefined;
  /** `--platform-namespace`; empty: found from KubePlus's webhook at start (kube/platform-namespace.ts). */
  platformNamespace: string;
  instanceKinds: InstanceKindSelection;
  leaderElect: boolean;
  leaderElectionNamespace: string;
  leaderElectionId: string;
  /** Unset: generated at start (`$POD_NAME` or the host name, plus a random suffix). */
  leaderElectionIdentity: string | undefined;
  leaseDurationMs: number;
  renewDeadlineMs: number;
  retryPeriodMs: number;
  concurrency: number;
  metricsPort: number;
  /** Serve /metrics only to callers a TokenReview and SubjectAccessReview allow, over HTTPS (with the probes). */
  metricsSecure: boolean;
  /** The metrics port's serving certificate and key (PEM); unset: a self-signed pair made at start. */
  metricsTlsCertFile: string | undefined;
  metricsTlsKeyFile: string | undefined;
  bindAddress: string | undefined;
  handlerLevels: HandlerLevels;
  levelHandlers: Readonly<Record<RuntimeLevel, string>>;
  logLevel: LogLevel;
  drainTimeoutMs: number;
  shutdownTimeoutMs: number;
  /** Period of the fail-open audit of isolated namespaces' Pods; 0: no audit. */
  auditIntervalMs: number;
  /** Write a compliance Report (openreports.io) per audited namespace (needs the audit on). */
  reports: boolean;
  /** Results per Report at most (the summary counts stay exact). */
  reportMaxResults: number;
  /** Namespaces shown at most in kubeplus_operator_unisolated_pods_by_namespace. */
  unisolatedNamespacesMetricLimit: number;
  /**
   * Namespaces whose Pods are never foreign on a tenant's pool, besides kube-system, kube-public,
   * kube-node-lease and the operator's own (the release's) namespace: platform DaemonSets' (CNI,
   * log and metrics agents).
   */
  poolExemptNamespaces: string[];
  /** Which admission engine applies node isolation to Pods (what the operator writes for it). */
  nodeIsolationEngine: NodeIsolationEngine;
  /** The chart's refusal policy reads the NodeIsolation parameter: write it under every engine (issue 38). */
  nodeIsolationRefusal: boolean;
  /** How sandbox isolation's admission policies are laid out (desired/sandbox-policy.ts, sandbox-shared-policy.ts). */
  sandboxPolicyLayout: SandboxPolicyLayout;
  /** Set: run the uninstall cleanup once (uninstall/) and exit, instead of reconciling. */
  uninstall: UninstallMode | undefined;
  /** With uninstall: the operator Deployment to scale to zero first (in the leader-election namespace). */
  uninstallStopDeployment: string | undefined;
  /** Issue and rotate the certificates of webhook configurations labelled for it (controllers/webhook-certificates). */
  webhookCertificates: boolean;
  /** Write every isolated namespace's pool into the ExclusivePools parameter (controllers/exclusive-pools). */
  exclusivePools: boolean;
  webhookCaValidityMs: number;
  webhookCertValidityMs: number;
  webhookCertPropagationDelayMs: number;
}

/**
 * `webhook`: the mutating webhook reads the namespace's label and annotation (the default).
 * `admission-policy`: the chart's MutatingAdmissionPolicy reads the NodeIsolation parameter the
 * operator writes into each isolated namespace. `both`: both are kept up to date (switching
 * engines without a window in which a Pod is admitted unisolated).
 */
export const NODE_ISOLATION_ENGINES = ['webhook', 'admission-policy', 'both'] as const;
export type NodeIsolationEngine = (typeof NODE_ISOLATION_ENGINES)[number];

/**
 * Whether the operator writes the NodeIsolation parameters: the admission-policy engine's
 * MutatingAdmissionPolicy reads them, and so does the refusal policy, whatever the engine.
 */
export function writesNodeIsolationParams(engine: NodeIsolationEngine, refusal = false): boolean {
  return engine !== 'webhook' || refusal;
}

export const PROGRAM = 'kubeplus-isolation-operator';
export const DEFAULT_LEADER_ELECTION_NAMESPACE = 'kubeplus-isolation';
export const DEFAULT_LEADER_ELECTION_ID = 'kubeplus-isolation-operator';
/** Where a pod's service account namespace is mounted. */
export const IN_CLUSTER_NAMESPACE_FILE = '/var/run/secrets/kubernetes.io/serviceaccount/namespace';

type Flag = SharedFlag<keyof Values>;

/**
 * What the flags parse to before the settings are checked against each other: the namespace may
 * still be unset (defaulted from the Pod's), the level handlers only the ones given.
 */
type Values = Omit<Config, 'leaderElectionNamespace' | 'levelHandlers'> & {
  leaderElectionNamespace: string | undefined;
  levelHandlers: Partial<Record<RuntimeLevel, string>>;
};

function dnsLabel(what: string): (raw: string) => Parsed {
  return (raw) =>
    isDns1123Label(raw)
      ? ok(raw)
      : fail(`must be a ${what} (at most 63 lowercase letters, digits or '-'), got ${JSON.stringify(raw)}`);
}

function dnsSubdomain(what: string): (raw: string) => Parsed {
  return (raw) =>
    isDns1123Subdomain(raw)
      ? ok(raw)
      : fail(`must be a ${what} (lowercase letters, digits, '-' and '.'), got ${JSON.stringify(raw)}`);
}

function isLevel(s: string): s is RuntimeLevel {
  return (RUNTIME_LEVELS as readonly string[]).includes(s);
}

/** `level=handler` pairs, e.g. `kata=kata-qemu,runsc=gvisor`. */
function levelHandlers(raw: string): Parsed {
  const out: Partial<Record<RuntimeLevel, string>> = {};
  const errors: string[] = [];
  for (const item of raw
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s !== '')) {
    const eq = item.indexOf('=');
    const level = eq < 0 ? '' : item.slice(0, eq).trim();
    const handler = eq < 0 ? '' : item.slice(eq + 1).trim();
    if (!isLevel(level)) {
      errors.push(`"${item}": expected level=handler with level one of ${RUNTIME_LEVELS.join(', ')}`);
    } else if (!isDns1123Label(handler)) {
      errors.push(`"${item}": the handler must be a DNS label (at most 63 lowercase letters, digits or '-')`);
    } else {
      out[level] = handler;
    }
  }
  return errors.length > 0 ? fail(errors.join('; ')) : ok(out);
}

/** 0 (off), or from 1s to 24h. */
function auditInterval(raw: string): Parsed {
  const parsed = duration(0, 86_400_000)(raw);
  if (parsed.ok && parsed.value !== 0 && (parsed.value as number) < 1_000) {
    return fail(`must be 0 (no audit) or from 1s to 24h, got ${JSON.stringify(raw)}`);
  }
  return parsed;
}

export const FLAGS: readonly Flag[] = [
  {
    key: 'kubeconfig',
    name: 'kubeconfig',
    env: 'KUBECONFIG',
    placeholder: '<path>',
    default: undefined,
    defaultHelp: 'none (in-cluster service account)',
    help: 'Kubeconfig file to reach the API server; without it the in-cluster service account is used.',
    parse: text,
  },
  {
    key: 'platformNamespace',
    name: 'platform-namespace',
    env: 'PLATFORM_NAMESPACE',
    placeholder: '<namespace>',
    default: '',
    defaultHelp: `"" (found from KubePlus's MutatingWebhookConfiguration, else "${DEFAULT_PLATFORM_NAMESPACE}")`,
    help: `KubePlus's own namespace (its README and CI use default): an instance created there isolates the namespace named after it (KubePlus's, or created by the operator if absent); an instance anywhere else is isolated in its own namespace. Empty: the namespace of the service behind a MutatingWebhookConfiguration whose rules name the group platformapi.kubeplus (KubePlus's registration; the operator exits, to be restarted, if that changes), else "${DEFAULT_PLATFORM_NAMESPACE}". Whatever it is, the operator never labels or annotates a system namespace (default, kube-*), its own namespace (--leader-election-namespace), the platform namespace, nor an existing namespace named after an instance in the platform namespace that was not created for it.`,
    parse: (raw) => (raw === '' ? ok('') : dnsLabel('namespace name')(raw)),
  },
  {
    key: 'instanceKinds',
    name: 'instance-kinds',
    env: 'INSTANCE_KINDS',
    placeholder: '<kinds>',
    default: '',
    help: 'Instance Kinds to watch besides every CRD labelled registered-by=kubeplus: comma-separated group/version/Kind entries or whole API groups, e.g. cloudark.io/v1/Agent,platformapi.kubeplus. CRDs registered or removed at run time are picked up without a restart.',
    parse: (raw) => {
      const r = parseInstanceKinds(raw);
      return r.ok ? ok(r.value) : fail(r.errors.join('; '));
    },
  },
  {
    key: 'leaderElect',
    name: 'leader-elect',
    env: 'LEADER_ELECT',
    placeholder: '<true|false>',
    default: 'true',
    help: 'Elect a leader on a coordination.k8s.io Lease: only the holder reconciles; the other replicas keep warm caches and take over when it stops. false: reconcile unconditionally (one replica only).',
    parse: boolean,
  },
  {
    key: 'leaderElectionNamespace',
    name: 'leader-election-namespace',
    env: 'LEADER_ELECTION_NAMESPACE',
    placeholder: '<namespace>',
    default: undefined,
    defaultHelp: `$POD_NAMESPACE, else the in-cluster service account namespace, else "${DEFAULT_LEADER_ELECTION_NAMESPACE}"`,
    help: 'Namespace of the leader-election Lease.',
    parse: dnsLabel('namespace name'),
  },
  {
    key: 'leaderElectionId',
    name: 'leader-election-id',
    env: 'LEADER_ELECTION_ID',
    placeholder: '<name>',
    default: DEFAULT_LEADER_ELECTION_ID,
    help: 'Name of the leader-election Lease. Replicas sharing it form one election.',
    parse: dnsSubdomain('Lease name'),
  },
  {
    key: 'leaderElectionIdentity',
    name: 'leader-election-identity',
    env: 'LEADER_ELECTION_IDENTITY',
    placeholder: '<identity>',
    default: undefined,
    defaultHelp: '$POD_NAME (else the host name) plus "_" and a random UUID',
    help: "This replica's holder identity in the Lease (also the reportingInstance of its Events). Must be unique per replica.",
    parse: text,
  },
  {
    key: 'leaseDurationMs',
    name: 'lease-duration',
    env: 'LEASE_DURATION',
    placeholder: '<duration>',
    default: '15s',
    help: 'How long a standby waits after the last observed Lease renewal before taking over (the longest handover after a leader dies).',
    parse: duration(1_000, 3_600_000),
  },
  {
    key: 'renewDeadlineMs',
    name: 'renew-deadline',
    env: 'RENEW_DEADLINE',
    placeholder: '<duration>',
    default: '10s',
    help: `How long the leader keeps retrying a failed renewal before it stops reconciling and exits (status 1). Must be less than --lease-duration and more than ${JITTER_FACTOR} × --retry-period.`,
    parse: duration(100, 3_600_000),
  },
  {
    key: 'retryPeriodMs',
    name: 'retry-period',
    env: 'RETRY_PERIOD',
    placeholder: '<duration>',
    default: '2s',
    help: 'Interval between Lease acquire/renew attempts (the handover time after a graceful stop, which releases the Lease).',
    parse: duration(100, 3_600_000),
  },
  {
    key: 'concurrency',
    name: 'concurrency',
    env: 'CONCURRENCY',
    placeholder: '<n>',
    default: '8',
    help: 'Concurrent reconciles per controller (distinct keys only; a key never runs twice at once).',
    parse: integer(1, 64, 'a whole number'),
  },
  {
    key: 'metricsPort',
    name: 'metrics-port',
    env: 'METRICS_PORT',
    placeholder: '<port>',
    default: '8080',
    help: 'Port serving GET /metrics (Prometheus), /healthz (liveness) and /readyz (caches synced and not stale; not leadership): HTTPS with --metrics-secure, else plain HTTP. 0 picks a free port (logged).',
    parse: port,
  },
  {
    key: 'metricsSecure',
    name: 'metrics-secure',
    env: 'METRICS_SECURE',
    placeholder: '<true|false>',
    default: 'true',
    help: "Serve the metrics port over HTTPS (TLS 1.2+) and /metrics only to a caller whose bearer token a TokenReview authenticates and whose user a SubjectAccessReview allows to get the non-resource URL /metrics (kubebuilder's secure metrics; the chart's <release>-kubeplus-isolation-metrics-reader ClusterRole grants it): 401 without or with an invalid token, 403 when not allowed. Decisions are cached (allowed 1m, denied 10s) by a keyed hash of the token, so a scrape costs no API call. /healthz and /readyz stay unauthenticated (the kubelet probes them, over HTTPS). Needs create on tokenreviews and subjectaccessreviews. false: plain HTTP, /metrics open to anyone who reaches the port.",
    parse: boolean,
  },
  {
    key: 'metricsTlsCertFile',
    name: 'metrics-tls-cert-file',
    env: 'METRICS_TLS_CERT_FILE',
    placeholder: '<path>',
    default: undefined,
    defaultHelp: 'none (a self-signed certificate made at start)',
    help: 'PEM serving certificate (chain) of the metrics port with --metrics-secure, e.g. from cert-manager; reloaded without restart when it changes. Needs --metrics-tls-key-file.',
    parse: text,
  },
  {
    key: 'metricsTlsKeyFile',
    name: 'metrics-tls-key-file',
    env: 'METRICS_TLS_KEY_FILE',
    placeholder: '<path>',
    default: undefined,
    defaultHelp: 'none',
    help: 'PEM private key of --metrics-tls-cert-file; reloaded with it.',
    parse: text,
  },
  {
    key: 'bindAddress',
    name: 'bind-address',
    env: 'BIND_ADDRESS',
    placeholder: '<address>',
    default: undefined,
    defaultHelp: 'none (0.0.0.0: every IPv4 address)',
    help: 'Address the HTTP port listens on, e.g. 127.0.0.1 or :: (IPv6 and, where the OS allows, IPv4).',
    parse: text,
  },
  {
    key: 'handlerLevels',
    name: 'runtime-handler-levels',
    env: 'RUNTIME_HANDLER_LEVELS',
    placeholder: '<handler=level,...>',
    default: '',
    help: 'Isolation level (runc < runsc < kata) of further RuntimeClass handlers, added to the built-in ones (runc, crun=runc; runsc, gvisor, runsc-*=runsc; kata, kata-*=kata); a trailing * marks a prefix, e.g. my-vm=kata,sandbox-*=runsc.',
    parse: (raw) => {
      const r = parseHandlerLevels(raw, DEFAULT_HANDLER_LEVELS);
      return r.ok ? ok(r.value) : fail(r.errors.join('; '));
    },
  },
  {
    key: 'levelHandlers',
    name: 'level-handlers',
    env: 'LEVEL_HANDLERS',
    placeholder: '<level=handler,...>',
    default: '',
    defaultHelp: '"" (runc=runc,runsc=runsc,kata=kata)',
    help: 'Handler of the generated kubeplus-sandbox-<instance> RuntimeClass per minimum level, e.g. kata=kata-qemu. Each handler must meet its level under --runtime-handler-levels.',
    parse: levelHandlers,
  },
  {
    key: 'logLevel',
    name: 'log-level',
    env: 'LOG_LEVEL',
    placeholder: '<level>',
    default: 'info',
    help: `Least severe level logged (JSON lines on stdout): ${LOG_LEVELS.join(', ')}.`,
    parse: (raw) => {
      try {
        return ok(parseLogLevel(raw));
      } catch {
        return fail(`must be one of ${LOG_LEVELS.join(', ')}, got ${JSON.stringify(raw)}`);
      }
    },
  },
  {
    key: 'drainTimeoutMs',
    name: 'drain-timeout',
    env: 'DRAIN_TIMEOUT',
    placeholder: '<duration>',
    default: '10s',
    help: 'On SIGTERM, how long in-flight reconciles may finish (while the Lease is still held) before they are aborted.',
    parse: duration(0, 600_000),
  },
  {
    key: 'shutdownTimeoutMs',
    name: 'shutdown-timeout',
    env: 'SHUTDOWN_TIMEOUT',
    placeholder: '<duration>',
    default: '25s',
    help: "Bound on the whole graceful shutdown (drain, Lease release, close) after SIGTERM/SIGINT; past it the process exits with status 1. Keep it below the pod's terminationGracePeriodSeconds.",
    parse: duration(1_000, 600_000),
  },
  {
    key: 'auditIntervalMs',
    name: 'audit-interval',
    env: 'AUDIT_INTERVAL',
    placeholder: '<duration>',
    default: '5m',
    help: 'Period of the fail-open audit (leader only): the Pods of every namespace labelled kubeplus.io/node-isolation-enabled=true are listed and those lacking its mandated nodeSelector or tolerations (admitted while the webhook failed open) are counted (kubeplus_operator_unisolated_pods), logged and reported by a Warning Event on the owning instance; where its Pods really run is judged too (a Pod on a node outside its pool, a Pod tolerating the pool taints of another isolated namespace, Pods of other namespaces on the nodes of the pool: kubeplus_operator_pool_placement_pods). A namespace is also audited when it becomes isolated, its mandate or owner changes, or a node of its pool is relabelled or retainted. Pods are never changed. 0 disables the audit.',
    parse: auditInterval,
  },
  {
    key: 'reports',
    name: 'reports',
    env: 'REPORTS',
    placeholder: '<true|false>',
    default: 'true',
    help: "Write one compliance Report (openreports.io/v1alpha1, named kubeplus-isolation) per audited tenant namespace at every audit (leader only; needs --audit-interval > 0): a fail result per Pod lacking its mandated node placement (policy node-isolation, naming the missing selector pairs and tolerations) and per Sandbox whose runtime class is weaker than the namespace's current sandbox-isolation minimum (policy sandbox-isolation), with exact pass/fail counts. Reuses the audit's Pod LIST; written only when its content changed. A namespace is also audited at once when its sandbox-isolation policy or its instance's generated RuntimeClass changes. Without the OpenReports CRDs it says so once (a ReportsApiUnavailable Warning Event on the operator Pod, kubeplus_operator_reports_api_available 0) and starts writing when they appear.",
    parse: boolean,
  },
  {
    key: 'reportMaxResults',
    name: 'report-max-results',
    env: 'REPORT_MAX_RESULTS',
    placeholder: '<n>',
    default: '100',
    help: 'Results per compliance Report at most (shared between the policies); the summary counts every finding, and the annotation kubeplus.io/report-results-omitted says how many results were left out.',
    parse: integer(1, 1000, 'a whole number'),
  },
  {
    key: 'unisolatedNamespacesMetricLimit',
    name: 'unisolated-namespaces-metric-limit',
    env: 'UNISOLATED_NAMESPACES_METRIC_LIMIT',
    placeholder: '<n>',
    default: '20',
    help: 'Namespaces shown at most in kubeplus_operator_unisolated_pods_by_namespace: only those with unisolated Pods, the ones with the most first. Bounded so a cluster with many tenants cannot grow the series without limit; 0 turns the per-namespace series off.',
    parse: integer(0, 1000, 'a whole number'),
  },
  {
    key: 'poolExemptNamespaces',
    name: 'pool-exempt-namespaces',
    env: 'POOL_EXEMPT_NAMESPACES',
    placeholder: '<namespaces>',
    default: '',
    help: "Comma-separated namespaces whose Pods the audit never reports as foreign on a tenant's dedicated node pool, besides kube-system, kube-public, kube-node-lease and the operator's own namespace (--leader-election-namespace): the platform's DaemonSets (CNI, log and metrics agents) that run on every node. The chart sets it from global.nodeIsolation.exclusivePools.exemptNamespaces.",
    parse: (raw) => {
      const names = raw
        .split(',')
        .map((n) => n.trim())
        .filter((n) => n !== '');
      const bad = names.filter((n) => !isDns1123Label(n));
      return bad.length > 0 ? fail(`not namespace names: ${bad.join(', ')}`) : ok([...new Set(names)]);
    },
  },
  {
    key: 'nodeIsolationEngine',
    name: 'node-isolation-engine',
    env: 'NODE_ISOLATION_ENGINE',
    placeholder: '<engine>',
    default: 'webhook',
    help: `Admission engine that applies node isolation to Pods: ${NODE_ISOLATION_ENGINES.join(', ')}. The namespace label and resolved annotation are always written; admission-policy and both also write a NodeIsolation object (isolation.kubeplus.io/v1alpha1, named node-isolation) into each isolated namespace, the parameter of the chart's MutatingAdmissionPolicy, and delete it when isolation is removed. Use both while switching engines.`,
    parse: oneOf(NODE_ISOLATION_ENGINES),
  },
  {
    key: 'nodeIsolationRefusal',
    name: 'node-isolation-refusal',
    env: 'NODE_ISOLATION_REFUSAL',
    placeholder: '<true|false>',
    default: 'false',
    help: "Refusal mode is on (the chart's global.nodeIsolation.refuseUnplaced): its ValidatingAdmissionPolicy refuses a Pod of an isolated namespace that lacks the mandate after mutation, judged against the namespace's NodeIsolation object (isolation.kubeplus.io/v1alpha1, named node-isolation), and refuses every Pod of a labelled namespace without one. So the operator writes that object under every engine, before the namespace's label goes on, and deletes it only after the label went.",
    parse: boolean,
  },
  {
    key: 'sandboxPolicyLayout',
    name: 'sandbox-policy-layout',
    env: 'SANDBOX_POLICY_LAYOUT',
    placeholder: '<layout>',
    default: 'per-instance',
    help: `How sandbox isolation's admission policies are laid out: ${SANDBOX_POLICY_LAYOUTS.join(', ')}. per-instance: a ValidatingAdmissionPolicy (and in advisory mode a MutatingAdmissionPolicy) and binding per instance, as the design document describes. shared: ONE ValidatingAdmissionPolicy (kubeplus-isolation-sandbox) and ONE MutatingAdmissionPolicy (kubeplus-isolation-sandbox-default) for the cluster, parameterised per instance by a cluster-scoped SandboxIsolation object (isolation.kubeplus.io/v1alpha1; the CRD comes with the chart), each instance keeping its own binding and its RuntimeClass: the same decisions, without one compiled policy per tenant in the API server; start-up fails, naming the CRD, when the cluster does not serve it. Switching prunes the other layout's per-instance objects at each instance's next reconcile.`,
    parse: oneOf(SANDBOX_POLICY_LAYOUTS),
  },
  {
    key: 'uninstall',
    name: 'uninstall',
    env: 'UNINSTALL',
    placeholder: '<mode>',
    default: undefined,
    defaultHelp: 'none (reconcile)',
    help: `Instead of reconciling, clean up for an uninstall and exit (the chart's pre-delete hook): ${UNINSTALL_MODES.join(' or ')}. Both remove the finalizer isolation.kubeplus.io/cleanup from every instance that still carries it (releases up to 0.2.0 added it; this operator never adds one), so instances delete normally once the operator is gone; all also deletes every object the operator generated (RuntimeClasses, admission policies and bindings, NodeIsolation parameters) and removes its keys from Namespaces (which stay). Exit status 0 when done, 1 on a failure (run it again).`,
    parse: oneOf(UNINSTALL_MODES),
  },
  {
    key: 'uninstallStopDeployment',
    name: 'uninstall-stop-deployment',
    env: 'UNINSTALL_STOP_DEPLOYMENT',
    placeholder: '<name>',
    default: undefined,
    defaultHelp: 'none',
    help: "With --uninstall: first scale this Deployment (the operator's, in --leader-election-namespace) to zero and wait until its Pods are gone, so no running operator puts back what the cleanup removes.",
    parse: dnsSubdomain('Deployment name'),
  },
  {
    key: 'exclusivePools',
    name: 'exclusive-pools',
    env: 'EXCLUSIVE_POOLS',
    placeholder: '<true|false>',
    default: 'false',
    help: "Write (leader only) the cluster-scoped ExclusivePools object exclusive-pools (isolation.kubeplus.io/v1alpha1; CRD and policy from the chart, global.nodeIsolation.exclusivePools): every node-isolated namespace's pool, indexed for the chart's ValidatingAdmissionPolicy, which keeps other namespaces' Pods from selecting a pool's labels or tolerating its taints. Recomputed from every namespace labelled kubeplus.io/node-isolation-enabled=true, written only when it changed.",
    parse: boolean,
  },
  {
    key: 'webhookCertificates',
    name: 'webhook-certificates',
    env: 'WEBHOOK_CERTIFICATES',
    placeholder: '<true|false>',
    default: 'true',
    help: "Issue and rotate (leader only) the CA and serving certificate of every MutatingWebhookConfiguration labelled isolation.kubeplus.io/certificates=operator: kept in the Secret its isolation.kubeplus.io/certificates-secret annotation names, for the hosts of its certificates-dns-names/-ip-addresses annotations, the CA written into its caBundle. The serving certificate is renewed at 2/3 of its lifetime; a new CA is trusted for --webhook-cert-propagation-delay before it signs, and a retired one stays trusted until it expires: no admission sees a certificate its caBundle does not trust. Writes only what RBAC grants (the chart: its own webhook's Secret and configuration).",
    parse: boolean,
  },
  {
    key: 'webhookCaValidityMs',
    name: 'webhook-ca-validity',
    env: 'WEBHOOK_CA_VALIDITY',
    placeholder: '<duration>',
    default: '43800h',
    help: 'Lifetime of a webhook CA the operator issues (default 5 years); the next CA joins the caBundle at 2/3 of it. At least 2 × --webhook-cert-validity.',
    parse: duration(60_000, 100 * 8_760 * 3_600_000),
  },
  {
    key: 'webhookCertValidityMs',
    name: 'webhook-cert-validity',
    env: 'WEBHOOK_CERT_VALIDITY',
    placeholder: '<duration>',
    default: '2160h',
    help: 'Lifetime of a webhook serving certificate (default 90 days; never beyond its CA); renewed at 2/3 of it. At least 4 × --webhook-cert-propagation-delay.',
    parse: duration(30_000, 10 * 8_760 * 3_600_000),
  },
  {
    key: 'webhookCertPropagationDelayMs',
    name: 'webhook-cert-propagation-delay',
    env: 'WEBHOOK_CERT_PROPAGATION_DELAY',
    placeholder: '<duration>',
    default: '2m',
    help: 'How long a caBundle change takes to reach every API server: a new CA signs only after being trusted this long. (A retired CA stays trusted until it expires, so webhook Pods, which see a mounted Secret change within the kubelet sync period plus jitter, need no such bound.)',
    parse: duration(1_000, 3_600_000),
  },
];

export function usage(): string {
  return flagUsage({
    program: PROGRAM,
    summary: [
      'Reconciles the kubeplus.io/node-isolation and kubeplus.io/sandbox-isolation annotations of',
      'KubePlus instance custom resources into tenant Namespaces, RuntimeClasses and admission policies.',
    ],
    flags: FLAGS,
    exitStatus: '0 after a graceful shutdown, 1 on failure or lost leadership, 2 for invalid flags.',
  });
}

export type ConfigResult =
  | { kind: 'config'; config: Config }
  | { kind: 'help' }
  | { kind: 'version' }
  | { kind: 'error'; message: string };

export interface ConfigSources {
  env: Readonly<Record<string, string | undefined>>;
  /** The in-cluster service account namespace, if mounted (main.ts reads IN_CLUSTER_NAMESPACE_FILE). */
  inClusterNamespace?: () => string | undefined;
}

function checkCombination(v: Values): string | undefined {
  const d = formatDuration;
  if (v.leaderElect) {
    if (v.leaseDurationMs <= v.renewDeadlineMs) {
      return `--lease-duration (${d(v.leaseDurationMs)}) must be greater than --renew-deadline (${d(v.renewDeadlineMs)})`;
    }
    if (v.renewDeadlineMs <= JITTER_FACTOR * v.retryPeriodMs) {
      return `--renew-deadline (${d(v.renewDeadlineMs)}) must be greater than ${JITTER_FACTOR} × --retry-period (${d(v.retryPeriodMs)})`;
    }
    if (v.shutdownTimeoutMs <= v.drainTimeoutMs + v.renewDeadlineMs) {
      return `--shutdown-timeout (${d(v.shutdownTimeoutMs)}) must be greater than --drain-timeout + --renew-deadline (${d(v.drainTimeoutMs + v.renewDeadlineMs)}): draining, then releasing the Lease, may take that long`;
    }
  } else if (v.shutdownTimeoutMs <= v.drainTimeoutMs) {
    return `--shutdown-timeout (${d(v.shutdownTimeoutMs)}) must be greater than --drain-timeout (${d(v.drainTimeoutMs)})`;
  }
  if (v.webhookCertificates) {
    if (v.webhookCertValidityMs < 4 * v.webhookCertPropagationDelayMs) {
      return `--webhook-cert-validity (${d(v.webhookCertValidityMs)}) must be at least 4 × --webhook-cert-propagation-delay (${d(v.webhookCertPropagationDelayMs)}): a certificate is renewed with a third of its lifetime left, and every webhook Pod must load the new one before the old one expires`;
    }
    if (v.webhookCaValidityMs < 2 * v.webhookCertValidityMs) {
      return `--webhook-ca-validity (${d(v.webhookCaValidityMs)}) must be at least 2 × --webhook-cert-validity (${d(v.webhookCertValidityMs)})`;
    }
  }
  if ((v.metricsTlsCertFile === undefined) !== (v.metricsTlsKeyFile === undefined)) {
    return '--metrics-tls-cert-file and --metrics-tls-key-file go together: give both or neither';
  }
  if (v.metricsTlsCertFile !== undefined && !v.metricsSecure) {
    return '--metrics-tls-cert-file is only meaningful with --metrics-secure=true';
  }
  if (v.uninstallStopDeployment !== undefined && v.uninstall === undefined) {
    return '--uninstall-stop-deployment is only meaningful with --uninstall';
  }
  for (const level of RUNTIME_LEVELS) {
    const handler = v.levelHandlers[level];
    if (handler !== undefined && !handlerMeetsMinimum(handler, level, v.handlerLevels)) {
      return `--level-handlers: ${level}=${handler}: handler "${handler}" is not known to isolate at level ${level}; declare it with --runtime-handler-levels=${handler}=${level}`;
    }
  }
  return undefined;
}

function defaultLeaderElectionNamespace(sources: ConfigSources): string {
  const fromPod = sources.env.POD_NAMESPACE?.trim();
  if (fromPod) return fromPod;
  const inCluster = sources.inClusterNamespace?.()?.trim();
  if (inCluster) return inCluster;
  return DEFAULT_LEADER_ELECTION_NAMESPACE;
}

export function parseConfig(argv: readonly string[], sources: ConfigSources): ConfigResult {
  // Go-style `--leader-elect` alone means true.
  const parsed = parseFlags(FLAGS, argv, { env: sources.env, bareBooleans: ['leader-elect', 'metrics-secure'] });
  if (parsed.kind !== 'values') return parsed;
  const out = parsed.values;
  const v = out as unknown as Values;
  const problem = checkCombination(v);
  if (problem !== undefined) return { kind: 'error', message: problem };
  let leaderElectionNamespace = v.leaderElectionNamespace;
  if (leaderElectionNamespace === undefined) {
    leaderElectionNamespace = defaultLeaderElectionNamespace(sources);
    if (!isDns1123Label(leaderElectionNamespace)) {
      return {
        kind: 'error',
        message: `--leader-election-namespace: the default ${JSON.stringify(leaderElectionNamespace)} (from POD_NAMESPACE or the in-cluster namespace) is not a namespace name`,
      };
    }
  }
  return {
    kind: 'config',
    config: {
      ...v,
      leaderElectionNamespace,
      levelHandlers: { ...DEFAULT_LEVEL_HANDLERS, ...v.levelHandlers },
    },
  };
}
