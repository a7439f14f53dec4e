/**
 * The reconciler's hooks as metrics: the runtime's OperatorMetrics (reconciles, queues, leader,
 * informers, invalid annotations) plus the series only this operator has. Every label value is
 * fixed by code, so cardinality is bounded; every series starts at 0.
 */
import { NODE_ISOLATION_ANNOTATION, SANDBOX_ISOLATION_ANNOTATION } from '@kubeplus-isolation/spec';
import { Counter, Gauge } from 'prom-client';
import { TENANT_NAMESPACE_REFUSALS, type TenantNamespaceRefusal } from '../../desired/instance.js';
import { SANDBOX_MODES, type SandboxMode } from '../../desired/sandbox-peers.js';
import { PLATFORM_CLASS_PROBLEMS } from '../../desired/sandbox-platform-class.js';
import { INSTANCE_KIND_STATES, type InstanceKindState } from '../../instance-kinds/kind-health.js';
import type { OperatorMetrics } from '../../runtime/runtime-metrics.js';
import type { AnnotationName, ConflictKind, ReconcilerHooks } from './reconciler.js';

/** The annotation keys whose parse failures are counted (OperatorMetrics `annotations`). */
export const COUNTED_ANNOTATIONS = [NODE_ISOLATION_ANNOTATION, SANDBOX_ISOLATION_ANNOTATION] as const;

const ANNOTATION_KEYS: Readonly<Record<AnnotationName, string>> = {
  'node-isolation': NODE_ISOLATION_ANNOTATION,
  'sandbox-isolation': SANDBOX_ISOLATION_ANNOTATION,
};

const CONFLICT_KINDS: readonly ConflictKind[] = ['Namespace', 'RuntimeClass', 'AdmissionPolicy'];

export interface WiringMetrics {
  hooks: ReconcilerHooks;
  /** How many instance Kinds are watched, by state (kind-health.ts); read at scrape time. */
  trackInstanceKinds(count: () => Readonly<Record<InstanceKindState, number>>): void;
  /** How many tenant namespaces carry differing sandbox policies (desired/sandbox-peers.ts); read at scrape time. */
  trackMixedPolicyNamespaces(count: () => number): void;
  /** How many cached instances ask for sandbox isolation, by mode (sandbox-peers.ts `countSandboxModes`); read at scrape time. */
  trackSandboxModes(count: () => Readonly<Record<SandboxMode, number>>): void;
  /** A tenant namespace was labeled kubeplus.io/isolation-settled (controllers/instances/settle.ts). */
  namespaceSettled(): void;
  /** How many instances the tenant-namespace guard refuses, by reason (tenant-refusals.ts); read at scrape time. */
  trackTenantRefusals(count: () => Readonly<Record<TenantNamespaceRefusal, number>>): void;
}

export function createWiringMetrics(metrics: OperatorMetrics): WiringMetrics {
  const registers = [metrics.registry];
  const unavailable = new Counter({
    name: 'kubeplus_operator_mutating_policy_unavailable_total',
    help: 'Advisory-mode reconciles on a cluster serving no MutatingAdmissionPolicy API: an unset runtimeClassName is warned about, not defaulted.',
    registers,
  });
  const platformClassUnusable = new Counter({
    name: 'kubeplus_operator_platform_runtime_class_unusable_total',
    help: 'Sandbox-isolation reconciles whose annotation names a platform RuntimeClass (runtimeClassName) that cannot be used, by reason: missing (no such class), below-minimum (its handler is weaker than the minimum, or unknown) or not-platform (kubeplus-isolation generated it). Nothing is then recommended or defaulted to; each instance carries a PlatformRuntimeClassUnusable Warning Event.',
    labelNames: ['reason'] as const,
    registers,
  });
  const settled = new Counter({
    name: 'kubeplus_operator_namespaces_settled_total',
    help: 'Tenant namespaces labeled kubeplus.io/isolation-settled once what their instance asks for was in effect: the webhook then stops holding their Pod and Sandbox CREATEs.',
    registers,
  });
  const staleWarm = new Counter({
    name: 'kubeplus_operator_stale_warm_sandboxes_deleted_total',
    help: 'Warm-pool Sandboxes (not yet claimed) the operator deleted in enforced tenant namespaces because they were created before their RuntimeClass got its current handler (a raised minimum re-creates kubeplus-sandbox-<instance>; a platform class may be re-created): they may run the old handler, the policies never hand them out, and a claim would retry one forever. Their pools re-create them under the current handler; each deletion also gives a StaleWarmSandboxDeleted Event on the instance.',
    registers,
  });
  const conflicts = new Counter({
    name: 'kubeplus_operator_conflicts_total',
    help: 'Reconciles that found an object held by another instance and left it alone, by kind (Namespace, RuntimeClass, AdmissionPolicy).',
    labelNames: ['kind'] as const,
    registers,
  });
  let countKinds: () => Readonly<Record<InstanceKindState, number>> | undefined = () => undefined;
  new Gauge({
    name: 'kubeplus_operator_instance_kinds',
    help: 'Instance Kinds (CRDs) currently selected, by the state of their cache: synced, pending (first list not done), stale (watch down past 60s) or forbidden (RBAC refuses list/watch: not watched, retried, excluded from readiness). sum() for the total.',
    labelNames: ['state'] as const,
    registers,
    collect() {
      const counts = countKinds();
      for (const state of INSTANCE_KIND_STATES) this.set({ state }, counts?.[state] ?? 0);
    },
  });
  let countMixed: () => number = () => 0;
  new Gauge({
    name: 'kubeplus_operator_sandbox_mixed_policy_namespaces',
    help: 'Tenant namespaces where two or more instances bind sandbox isolation with different minimums or modes: every policy applies, so the strictest governs, and the weaker instances carry a StricterSandboxPolicy Warning.',
    registers,
    collect() {
      this.set(countMixed());
    },
  });
  let countModes: () => Readonly<Record<SandboxMode, number>> | undefined = () => undefined;
  new Gauge({
    name: 'kubeplus_operator_sandbox_isolation_instances',
    help: 'Instances whose kubeplus.io/sandbox-isolation is valid, by mode: enforce (weaker Sandboxes are denied) or advisory (warned about, an unset runtime class defaulted). The sandbox policies in force.',
    labelNames: ['mode'] as const,
    registers,
    collect() {
      const counts = countModes();
      for (const mode of SANDBOX_MODES) this.set({ mode }, counts?.[mode] ?? 0);
    },
  });
  let countRefused: () => Readonly<Record<TenantNamespaceRefusal, number>> | undefined = () => undefined;
  new Gauge({
    name: 'kubeplus_operator_tenant_namespace_refused_instances',
    help: "Instances whose namespace the operator refuses to label or annotate, by reason: system-namespace (default, kube-*), release-namespace (kubeplus-isolation's own), platform-namespace (KubePlus's own) or not-created-for-instance (an existing namespace named after an instance in the platform namespace, not created for it). Each carries a TenantNamespaceRefused Warning Event saying what to do.",
    labelNames: ['reason'] as const,
    registers,
    collect() {
      const counts = countRefused();
      for (const reason of TENANT_NAMESPACE_REFUSALS) this.set({ reason }, counts?.[reason] ?? 0);
    },
  });
  unavailable.inc(0);
  for (const reason of PLATFORM_CLASS_PROBLEMS) platformClassUnusable.inc({ reason }, 0);
  staleWarm.inc(0);
  for (const kind of CONFLICT_KINDS) conflicts.inc({ kind }, 0);

  return {
    hooks: {
      invalidAnnotation: (annotation) => metrics.invalidAnnotation(ANNOTATION_KEYS[annotation]),
      mutatingPolicyUnavailable: () => unavailable.inc(),
      platformRuntimeClassUnusable: (reason) => platformClassUnusable.inc({ reason }),
      conflict: (kind) => conflicts.inc({ kind }),
      staleWarmSandboxesDeleted: (count) => staleWarm.inc(count),
    },
    trackInstanceKinds(count) {
      countKinds = count;
    },
    namespaceSettled: () => settled.inc(),
    trackMixedPolicyNamespaces(count) {
      countMixed = count;
    },
    trackSandboxModes(count) {
      countModes = count;
    },
    trackTenantRefusals(count) {
      countRefused = count;
    },
  };
}
