/**
 * A tenant namespace's compliance report in the OpenReports format (`openreports.io/v1alpha1`
 * Report, CRD of github.com/openreports/reports-api v0.2.1), and whether the one in the cluster
 * must be written. Pure and deterministic: the same findings always give a deep-equal Report, and
 * nothing in it changes between audits unless a finding or a count does (no timestamps, no
 * resourceVersions), so an unchanged namespace costs no write.
 *
 * One Report per namespace, named `kubeplus-isolation`: one `fail` result per Pod lacking the
 * mandated node placement (policy `node-isolation`) and per Sandbox weaker than the namespace's
 * current minimum (policy `sandbox-isolation`); under policy `node-isolation` too, with a `rule`,
 * where Pods really run (issue 38): per Pod on a node outside its pool (`off-pool`) or tolerating
 * another tenant's pool taints (`tolerates-beyond-mandate`), and per pool node with Pods of other
 * namespaces (`foreign-pods-on-pool`: how many, never whose); at most `maxResults` of them; `summary` counts
 * every object checked (pass) and every finding (fail) exactly, and the annotation
 * `kubeplus.io/report-results-omitted` says how many findings the cap left out.
 *
 * An instance bound to the namespace whose isolation annotation the operator rejects is an
 * `error` result of that annotation's policy naming the instance and the parse errors (issue 39:
 * the API server accepts a bad annotation and GitOps tools show the instance Healthy; the Event
 * expires in an hour, the Report stays while the annotation is bad). They come first.
 */

import type { JudgedClass, MisplacedPod, UnisolatedPod, WeakSandbox } from '@kubeplus-isolation/spec';
import {
  COMPLIANCE_REPORT_NAME,
  FOREIGN_PODS_ON_POOL_RULE,
  MANAGED_BY_LABEL,
  MANAGED_BY_VALUE,
  OFF_POOL_RULE,
  type RuntimeLevel,
  STARTED_BEFORE_CLASS_HANDLER,
  TOLERATES_BEYOND_MANDATE_RULE,
  type Toleration,
} from '@kubeplus-isolation/spec';

export const REPORT_GROUP = 'openreports.io';
export const REPORT_VERSION = 'v1alpha1';
export const REPORT_API_VERSION = `${REPORT_GROUP}/${REPORT_VERSION}`;
export const REPORT_PLURAL = 'reports';
export const REPORT_NAME = COMPLIANCE_REPORT_NAME;
export const REPORT_SOURCE = 'kubeplus-isolation';
export const NODE_ISOLATION_POLICY = 'node-isolation';
export const SANDBOX_ISOLATION_POLICY = 'sandbox-isolation';
export const RESULTS_OMITTED_ANNOTATION = 'kubeplus.io/report-results-omitted';
/** Default cap on a Report's results (the summary stays exact). */
export const DEFAULT_MAX_RESULTS = 100;

export type ResultValue = 'pass' | 'fail' | 'warn' | 'error' | 'skip';

export interface ObjectRef {
  apiVersion: string;
  kind: string;
  namespace?: string;
  name: string;
  uid?: string;
}

export interface ReportResult {
  source: string;
  policy: string;
  /** The finding's stable name, for the placement findings (issue 38): off-pool, tolerates-beyond-mandate, foreign-pods-on-pool. */
  rule?: string;
  result: ResultValue;
  message: string;
  properties: Record<string, string>;
  resources: ObjectRef[];
}

export interface ReportSummary {
  pass: number;
  fail: number;
  warn: number;
  error: number;
  skip: number;
}

export interface Report {
  apiVersion: typeof REPORT_API_VERSION;
  kind: 'Report';
  metadata: {
    name: string;
    namespace: string;
    labels: Record<string, string>;
    annotations: Record<string, string>;
    resourceVersion?: string;
  };
  scope: ObjectRef;
  source: string;
  summary: ReportSummary;
  results: ReportResult[];
}

/** The node-isolation audit of one namespace (audit/report.ts Findings). */
export interface PodFindings {
  /** Pods examined. */
  checked: number;
  /** Pods lacking the placement: the exact count. */
  unisolated: number;
  /** The first of them, in LIST order (may be fewer than `unisolated`). */
  pods: readonly UnisolatedPod[];
  /**
   * Where the Pods really run (issue 38): off-pool and tolerates-beyond-mandate Pods, foreign Pods
   * on the namespace's pool nodes. Absent: not judged.
   */
  placement?: PlacementReport | undefined;
  /** Pods with at least one finding of either kind (for the summary's pass count). Default `unisolated`. */
  failingPods?: number;
}

/** The placement findings the Report shows (audit/placement.ts PlacementFindings). */
export interface PlacementReport {
  /** Exact counts. */
  offPool: number;
  beyondMandate: number;
  /** The first misplaced Pods. */
  pods: readonly MisplacedPod[];
  /** Pool nodes with foreign Pods: the node and how many (never whose). */
  foreign: ReadonlyArray<{ node: string; count: number }>;
}

/** The sandbox-isolation check of one namespace. */
export interface SandboxFindings {
  minimum: RuntimeLevel;
  /** The Sandbox apiVersion the results name (the one listed). */
  apiVersion: string;
  checked: number;
  /** Sandboxes weaker than the minimum: the exact count. */
  weakCount: number;
  /** The first of them (may be fewer than `weakCount`). */
  weak: readonly WeakSandbox[];
}

/** An instance's isolation annotation the operator rejects (invalid-annotations.ts). */
export interface InvalidAnnotation {
  instance: ObjectRef;
  /** The annotation key, e.g. kubeplus.io/node-isolation. */
  annotation: string;
  /** The policy it belongs to: node-isolation or sandbox-isolation. */
  policy: string;
  /** The operator's parse errors, each led by the JSON path. */
  errors: readonly string[];
}

export interface ReportInput {
  namespace: string;
  /** Undefined when the namespace has no valid node isolation. */
  pods?: PodFindings | undefined;
  /** Undefined when no sandbox isolation is bound to the namespace (or no Sandbox API is served). */
  sandboxes?: SandboxFindings | undefined;
  /** Instances bound to the namespace whose isolation annotation is invalid. */
  invalidAnnotations?: readonly InvalidAnnotation[] | undefined;
  maxResults: number;
}

/** `dedicated=pool-a:NoSchedule`, `gpu Exists:NoSchedule`, `* Exists`, `… for 300s`. */
export function formatToleration(t: Toleration): string {
  const key = t.key ?? '';
  const base = t.operator === 'Exists' ? `${key === '' ? '*' : key} Exists` : `${key}=${t.value ?? ''}`;
  const effect = t.effect ? `:${t.effect}` : '';
  const seconds = t.tolerationSeconds === undefined ? '' : ` for ${t.tolerationSeconds}s`;
  return `${base}${effect}${seconds}`;
}

/** `pool=pool-a, zone=z1` (mandate order). */
export function formatSelector(pairs: Readonly<Record<string, string>>): string {
  return Object.entries(pairs)
    .map(([k, v]) => `${k}=${v}`)
    .join(', ');
}

/** What a Pod lacks, naming every missing selector pair and toleration. */
export function missingPlacementText(pod: Pick<UnisolatedPod, 'missingNodeSelector' | 'missingTolerations'>): string {
  const parts: string[] = [];
  const selector = formatSelector(pod.missingNodeSelector);
  if (selector !== '') parts.push(`nodeSelector ${selector}`);
  if (pod.missingTolerations.length > 0) {
    parts.push(
      `${pod.missingTolerations.length === 1 ? 'toleration' : 'tolerations'} ${pod.missingTolerations.map(formatToleration).join(', ')}`,
    );
  }
  return parts.join('; ');
}

export function podResult(namespace: string, pod: UnisolatedPod): ReportResult {
  const properties: Record<string, string> = {};
  const selector = formatSelector(pod.missingNodeSelector);
  if (selector !== '') properties.missingNodeSelector = selector;
  if (pod.missingTolerations.length > 0)
    properties.missingTolerations = pod.missingTolerations.map(formatToleration).join(', ');
  return {
    source: REPORT_SOURCE,
    policy: NODE_ISOLATION_POLICY,
    result: 'fail',
    message:
      `Pod ${pod.name} lacks the mandated node placement: ${missingPlacementText(pod)}. ` +
      'It was admitted without it (the node-isolation admission fails open, e.g. while the webhook was unavailable); ' +
      'the operator never changes Pods: recreate it to place it.',
    properties,
    resources: [
      { apiVersion: 'v1', kind: 'Pod', namespace, name: pod.name, ...(pod.uid === undefined ? {} : { uid: pod.uid }) },
    ],
  };
}

/** A Pod of the namespace running on a node outside its pool (after a re-pooling, typically). */
export function offPoolResult(
  namespace: string,
  pod: MisplacedPod & Required<Pick<MisplacedPod, 'offPool'>>,
): ReportResult {
  const { node, missingNodeLabels } = pod.offPool;
  return {
    source: REPORT_SOURCE,
    policy: NODE_ISOLATION_POLICY,
    rule: OFF_POOL_RULE,
    result: 'fail',
    message:
      `Pod ${pod.name} runs on node ${node}, outside the namespace's node pool: the node's labels lack ${formatSelector(missingNodeLabels)}. ` +
      'The node was re-pooled (relabelled) under the running Pod, or the Pod was placed before its mandate; Kubernetes does not ' +
      'move a running Pod and the operator never changes Pods: delete it, and its controller recreates it on the pool.',
    properties: { node, missingNodeLabels: formatSelector(missingNodeLabels) },
    resources: [podRef(namespace, pod)],
  };
}

/** A Pod of the namespace whose tolerations reach another isolated namespace's pool. */
export function beyondMandateResult(
  namespace: string,
  pod: MisplacedPod & Required<Pick<MisplacedPod, 'beyondMandate'>>,
): ReportResult {
  const tolerations = pod.beyondMandate.tolerations.map(formatToleration).join(', ');
  return {
    source: REPORT_SOURCE,
    policy: NODE_ISOLATION_POLICY,
    rule: TOLERATES_BEYOND_MANDATE_RULE,
    result: 'fail',
    message:
      `Pod ${pod.name} tolerates beyond its mandate: ${pod.beyondMandate.tolerations.length === 1 ? 'toleration' : 'tolerations'} ${tolerations} ` +
      "also tolerate the taints that keep another tenant's dedicated node pool, so only its nodeSelector keeps it off that pool, " +
      'and a node re-pooled for that tenant does not evict it. Tolerations can be added to a running Pod by an UPDATE; ' +
      'recreate the Pod with its mandated tolerations only.',
    properties: { tolerations },
    resources: [podRef(namespace, pod)],
  };
}

/** Pods of other namespaces on a node of this namespace's pool: how many, never whose. */
export function foreignPodsResult(node: string, count: number): ReportResult {
  return {
    source: REPORT_SOURCE,
    policy: NODE_ISOLATION_POLICY,
    rule: FOREIGN_PODS_ON_POOL_RULE,
    result: 'fail',
    message:
      `${count} ${count === 1 ? 'Pod' : 'Pods'} of other namespaces ${count === 1 ? 'runs' : 'run'} on node ${node} of this namespace's dedicated node pool ` +
      '(not exempt platform Pods). Which ones is for the platform to see: the operator logs them and records a ForeignPodOnPool ' +
      'Warning Event on each.',
    properties: { node, foreignPods: String(count) },
    resources: [{ apiVersion: 'v1', kind: 'Node', name: node }],
  };
}

function podRef(namespace: string, pod: { name: string; uid?: string }): ObjectRef {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    namespace,
    name: pod.name,
    ...(pod.uid === undefined ? {} : { uid: pod.uid }),
  };
}

/** The placement results, in order: per Pod off-pool then beyond-mandate, then per node foreign Pods. */
export function placementResults(namespace: string, placement: PlacementReport | undefined): ReportResult[] {
  if (placement === undefined) return [];
  const out: ReportResult[] = [];
  for (const pod of placement.pods) {
    if (pod.offPool !== undefined) out.push(offPoolResult(namespace, { ...pod, offPool: pod.offPool }));
    if (pod.beyondMandate !== undefined)
      out.push(beyondMandateResult(namespace, { ...pod, beyondMandate: pod.beyondMandate }));
  }
  for (const f of placement.foreign) out.push(foreignPodsResult(f.node, f.count));
  return out;
}

/** How a judged class reads in a message: `RuntimeClass "x" (handler h, level l)`, or why it has none. */
function classText(c: JudgedClass, verb: string): string {
  if (c.runtimeClassName === '') return 'sets no runtimeClassName';
  if (c.handler === undefined) return `names RuntimeClass ${JSON.stringify(c.runtimeClassName)}, which does not exist`;
  return `${verb} RuntimeClass ${JSON.stringify(c.runtimeClassName)} (handler ${c.handler}, ${c.level === undefined ? 'level unknown' : `level ${c.level}`})`;
}

export function sandboxResult(
  namespace: string,
  apiVersion: string,
  minimum: RuntimeLevel,
  sandbox: WeakSandbox,
): ReportResult {
  const { pod, startedBeforeHandler: before } = sandbox;
  const message =
    before !== undefined
      ? `Sandbox ${sandbox.name}'s Pod ${pod?.name ?? ''} was created (${before.createdAt}) before RuntimeClass ` +
        `${JSON.stringify(before.runtimeClassName)} got its current handler (${before.since}): it may run the class's ` +
        `previous handler, weaker than the namespace's minimum ${minimum} (RuntimeClass.handler is immutable: the ` +
        'class was deleted and created again, e.g. when the minimum was raised). ' +
        `Delete Pod ${pod?.name ?? ''} and the controller recreates it under the current handler.`
      : pod === undefined
        ? `Sandbox ${sandbox.name} ${classText(sandbox, 'runs')}: weaker than the namespace's minimum ${minimum}. ` +
          'It was admitted before the minimum was raised (a tightening is not retroactive for existing Sandboxes); ' +
          `recreate it with a RuntimeClass whose handler is ${minimum} or stronger.`
        : `Sandbox ${sandbox.name} asks for RuntimeClass ${JSON.stringify(sandbox.runtimeClassName)}, but its Pod ${pod.name} ` +
          `${classText(pod, 'runs')}: weaker than the namespace's minimum ${minimum}. ` +
          "The Pod was not made from the Sandbox's template: the Sandbox controller adopted an existing Pod as it was " +
          "(before the minimum was raised, or before its Pod policy was in force), or the Pod names the Sandbox's UID " +
          'as its controller under another kind; ' +
          `delete Pod ${pod.name} and the controller recreates it from the template.`;
  return {
    source: REPORT_SOURCE,
    policy: SANDBOX_ISOLATION_POLICY,
    result: 'fail',
    message,
    properties: {
      minimum,
      runtimeClassName: sandbox.runtimeClassName,
      ...(sandbox.handler === undefined ? {} : { handler: sandbox.handler }),
      level: sandbox.level ?? 'unknown',
      ...(before === undefined
        ? {}
        : { reason: STARTED_BEFORE_CLASS_HANDLER, classHandlerSince: before.since, createdAt: before.createdAt }),
      ...(pod === undefined
        ? {}
        : {
            pod: pod.name,
            podRuntimeClassName: pod.runtimeClassName,
            ...(pod.handler === undefined ? {} : { podHandler: pod.handler }),
            podLevel: pod.level ?? 'unknown',
          }),
    },
    resources: [
      {
        apiVersion,
        kind: 'Sandbox',
        namespace,
        name: sandbox.name,
        ...(sandbox.uid === undefined ? {} : { uid: sandbox.uid }),
      },
      ...(pod === undefined ? [] : [{ apiVersion: 'v1', kind: 'Pod', namespace, name: pod.name }]),
    ],
  };
}

export function invalidAnnotationResult(finding: InvalidAnnotation): ReportResult {
  const { instance, annotation, errors } = finding;
  return {
    source: REPORT_SOURCE,
    policy: finding.policy,
    result: 'error',
    message:
      `${instance.kind} ${instance.namespace}/${instance.name}: ${annotation} is invalid: ${errors.join('; ')}. ` +
      'The operator keeps the isolation it last applied from it (none if it never had a valid one); ' +
      'fix the annotation (`kubeplus-isolation validate` checks it before you merge).',
    properties: { annotation, errors: errors.join('; ') },
    resources: [instance],
  };
}

/**
 * How many results of each policy fit in `max`: each gets at least half (rounded up for the
 * first) when both have more, and whatever the other leaves otherwise.
 */
export function shareResults(pods: number, sandboxes: number, max: number): { pods: number; sandboxes: number } {
  const cap = Math.max(0, max);
  const podRoom = Math.min(pods, Math.max(cap - sandboxes, Math.ceil(cap / 2)));
  return { pods: podRoom, sandboxes: Math.min(sandboxes, cap - podRoom) };
}

/** Whether the namespace has anything to report (else its Report is deleted). */
export function reportable(input: Pick<ReportInput, 'pods' | 'sandboxes' | 'invalidAnnotations'>): boolean {
  return input.pods !== undefined || input.sandboxes !== undefined || (input.invalidAnnotations?.length ?? 0) > 0;
}

/** The namespace's Report. */
export function buildReport(input: ReportInput): Report {
  const { namespace, pods, sandboxes } = input;
  const podResults = [
    ...(pods?.pods ?? []).map((p) => podResult(namespace, p)),
    ...placementResults(namespace, pods?.placement),
  ];
  const sandboxResults =
    sandboxes === undefined
      ? []
      : sandboxes.weak.map((s) => sandboxResult(namespace, sandboxes.apiVersion, sandboxes.minimum, s));
  const invalid = input.invalidAnnotations ?? [];
  const annotationResults = invalid.slice(0, Math.max(0, input.maxResults)).map(invalidAnnotationResult);
  const room = shareResults(podResults.length, sandboxResults.length, input.maxResults - annotationResults.length);
  const results = [...annotationResults, ...podResults.slice(0, room.pods), ...sandboxResults.slice(0, room.sandboxes)];
  const placement = pods?.placement;
  const placementFails =
    placement === undefined ? 0 : placement.offPool + placement.beyondMandate + placement.foreign.length;
  const fail = (pods?.unisolated ?? 0) + placementFails + (sandboxes?.weakCount ?? 0);
  const error = invalid.length;
  const pass =
    Math.max(0, (pods?.checked ?? 0) - (pods?.failingPods ?? pods?.unisolated ?? 0)) +
    Math.max(0, (sandboxes?.checked ?? 0) - (sandboxes?.weakCount ?? 0));
  return {
    apiVersion: REPORT_API_VERSION,
    kind: 'Report',
    metadata: {
      name: REPORT_NAME,
      namespace,
      labels: { [MANAGED_BY_LABEL]: MANAGED_BY_VALUE },
      annotations: { [RESULTS_OMITTED_ANNOTATION]: String(fail + error - results.length) },
    },
    scope: { apiVersion: 'v1', kind: 'Namespace', name: namespace },
    source: REPORT_SOURCE,
    summary: { pass, fail, warn: 0, error, skip: 0 },
    results,
  };
}

/** A Report as read from the cluster: anything, only the fields the operator writes are compared. */
export interface ExistingReport {
  metadata?: {
    resourceVersion?: string;
    labels?: Record<string, string>;
    annotations?: Record<string, string>;
  };
  scope?: unknown;
  source?: unknown;
  summary?: unknown;
  results?: unknown;
}

/** Sorted keys, recursively: the same content always gives the same text. */
function canonical(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonical).join(',')}]`;
  if (typeof value === 'object' && value !== null) {
    const entries = Object.entries(value as Record<string, unknown>)
      .filter(([, v]) => v !== undefined)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonical(v)}`).join(',')}}`;
  }
  return JSON.stringify(value ?? null);
}

/** What the operator owns of a Report: compared, and replaced on a write. */
function owned(report: ExistingReport, desired: Report): unknown {
  const pick = (from: Record<string, string> | undefined, keys: readonly string[]) =>
    Object.fromEntries(keys.map((k) => [k, from?.[k] ?? null]));
  return {
    labels: pick(report.metadata?.labels, Object.keys(desired.metadata.labels)),
    annotations: pick(report.metadata?.annotations, Object.keys(desired.metadata.annotations)),
    scope: report.scope ?? null,
    source: report.source ?? null,
    summary: report.summary ?? null,
    results: report.results ?? [],
  };
}

export type ReportChange =
  | { action: 'create'; report: Report }
  | { action: 'update'; report: Report }
  | { action: 'none' };

/**
 * What to do about `desired` given the Report in the cluster: create it, replace it (keeping
 * labels and annotations others added, at the read resourceVersion, so a concurrent change
 * fails with 409 rather than being lost), or nothing when what the operator owns is unchanged.
 */
export function reportChange(existing: ExistingReport | undefined, desired: Report): ReportChange {
  if (existing === undefined) return { action: 'create', report: desired };
  if (canonical(owned(existing, desired)) === canonical(owned(desired, desired))) return { action: 'none' };
  const resourceVersion = existing.metadata?.resourceVersion;
  return {
    action: 'update',
    report: {
      ...desired,
      metadata: {
        ...desired.metadata,
        labels: { ...existing.metadata?.labels, ...desired.metadata.labels },
        annotations: { ...existing.metadata?.annotations, ...desired.metadata.annotations },
        ...(resourceVersion === undefined ? {} : { resourceVersion }),
      },
    },
  };
}

/** Whether a Report in the cluster is the operator's (so it may delete it). */
export function isOwnReport(existing: ExistingReport): boolean {
  return existing.metadata?.labels?.[MANAGED_BY_LABEL] === MANAGED_BY_VALUE;
}
