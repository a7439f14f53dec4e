/**
 * Settling a tenant namespace (issue 35): the label `kubeplus.io/isolation-settled=true` that
 * ends the webhook's hold of Pod and Sandbox CREATEs in a namespace KubePlus just created. Pure
 * decisions; controllers/instances/settle.ts does the I/O.
 *
 * A namespace is settled for a live instance only once what the instance asks for is in effect:
 * - node isolation: the namespace carries the enabled label and the resolved annotation;
 * - sandbox isolation: the API server enforces the instance's policy binding, proven by a
 *   server-side dry run of a Sandbox with no runtime class (a binding takes effect some time after
 *   it is stored): refused by a ValidatingAdmissionPolicy (enforce), or defaulted by the
 *   MutatingAdmissionPolicy (advisory; where that API is not served, advisory mode only warns and
 *   nothing observable is awaited).
 * An instance asking for neither is settled at once: its Pods are released as they are.
 *
 * Only namespaces KubePlus labeled `managedby=kubeplus` (the only ones the hold selects), never a
 * system or platform namespace, never one being deleted.
 */
import {
  ISOLATION_SETTLED_LABEL,
  ISOLATION_SETTLED_VALUE,
  KUBEPLUS_MANAGED_LABEL,
  KUBEPLUS_MANAGED_VALUE,
  NODE_ISOLATION_ANNOTATION,
  NODE_ISOLATION_ENABLED_LABEL,
  NODE_ISOLATION_ENABLED_VALUE,
  NODE_ISOLATION_RESOLVED_ANNOTATION,
  parseNodeIsolation,
  parseSandboxIsolation,
  RUNTIME_CLASS_PREFIX,
  SANDBOX_ISOLATION_ANNOTATION,
  SHARED_SANDBOX_POLICY_NAME,
} from '@kubeplus-isolation/spec';
import type { Instance } from './instance.js';
import type { NamespaceMergePatch, NamespaceMeta } from './node-isolation.js';

/** Namespaces never settled whatever an instance says (system ones; the platform's is added by the caller). */
export const NEVER_SETTLED = ['default', 'kube-system', 'kube-public', 'kube-node-lease'] as const;

/** The probe's name (a dry run: never stored). */
export const SETTLE_PROBE_NAME = 'kubeplus-isolation-settle-probe';

export type SettlePlan =
  /** Nothing to do now; a later reconcile (an event) may settle it. */
  | { action: 'skip'; reason: 'settled' | 'not-kubeplus' | 'missing' | 'protected' | 'invalid-annotation' }
  /** Node isolation is asked for but not written yet. */
  | { action: 'wait'; reason: 'node-isolation-pending' }
  /** Prove the sandbox policy in effect first (enforce: refusal expected; else defaulting). */
  | { action: 'probe'; enforce: boolean; patch: NamespaceMergePatch }
  | { action: 'settle'; patch: NamespaceMergePatch };

export interface SettleInput {
  instance: Instance;
  /** The tenant namespace the operator governs for this instance. */
  tenant: string;
  namespace: NamespaceMeta | undefined;
  /** Besides NEVER_SETTLED (e.g. the platform namespace, the release namespace). */
  protectedNamespaces: readonly string[];
}

export const SETTLE_PATCH: NamespaceMergePatch = {
  metadata: { labels: { [ISOLATION_SETTLED_LABEL]: ISOLATION_SETTLED_VALUE } },
};

export function isSettled(ns: NamespaceMeta | undefined): boolean {
  return ns?.labels?.[ISOLATION_SETTLED_LABEL] === ISOLATION_SETTLED_VALUE;
}

export function planSettle(input: SettleInput): SettlePlan {
  const { instance, tenant, namespace } = input;
  if ((NEVER_SETTLED as readonly string[]).includes(tenant) || tenant.startsWith('kube-')) {
    return { action: 'skip', reason: 'protected' };
  }
  if (input.protectedNamespaces.includes(tenant)) return { action: 'skip', reason: 'protected' };
  if (namespace === undefined) return { action: 'skip', reason: 'missing' };
  if (isSettled(namespace)) return { action: 'skip', reason: 'settled' };
  if (namespace.labels?.[KUBEPLUS_MANAGED_LABEL] !== KUBEPLUS_MANAGED_VALUE)
    return { action: 'skip', reason: 'not-kubeplus' };

  const nodeText = instance.annotations[NODE_ISOLATION_ANNOTATION];
  if (nodeText !== undefined) {
    if (!parseNodeIsolation(nodeText).ok) return { action: 'skip', reason: 'invalid-annotation' };
    const written =
      namespace.labels?.[NODE_ISOLATION_ENABLED_LABEL] === NODE_ISOLATION_ENABLED_VALUE &&
      namespace.annotations?.[NODE_ISOLATION_RESOLVED_ANNOTATION] !== undefined;
    if (!written) return { action: 'wait', reason: 'node-isolation-pending' };
  }
  const sandboxText = instance.annotations[SANDBOX_ISOLATION_ANNOTATION];
  if (sandboxText !== undefined) {
    const parsed = parseSandboxIsolation(sandboxText);
    if (!parsed.ok) return { action: 'skip', reason: 'invalid-annotation' };
    return { action: 'probe', enforce: parsed.value.enforce, patch: SETTLE_PATCH };
  }
  return { action: 'settle', patch: SETTLE_PATCH };
}

/** A Sandbox of `apiVersion` with no runtime class: below every minimum. Created only as a dry run. */
export function settleProbe(apiVersion: string, namespace: string): Record<string, unknown> {
  return {
    apiVersion,
    kind: 'Sandbox',
    metadata: { name: SETTLE_PROBE_NAME, namespace },
    spec: { podTemplate: { spec: { containers: [{ name: 'probe', image: 'registry.k8s.io/pause:3.10' }] } } },
  };
}

/** The API server's answer to the probe's dry run. */
export type ProbeAnswer =
  | { allowed: true; object: unknown }
  | { allowed: false; code: number; message: string }
  /** The Sandbox kind is not served: no Sandbox can be created, so there is nothing to wait for. */
  | { notServed: true };

function runtimeClassOf(object: unknown): unknown {
  const spec = (object as { spec?: { podTemplate?: { spec?: { runtimeClassName?: unknown } } } } | null)?.spec;
  return spec?.podTemplate?.spec?.runtimeClassName;
}

/**
 * Whether the probe's answer proves the instance's sandbox policy in effect. `mutatingServed`:
 * the cluster serves MutatingAdmissionPolicy (advisory mode defaults an unset runtime class).
 */
export function probeInEffect(answer: ProbeAnswer, enforce: boolean, mutatingServed: boolean): boolean {
  if ('notServed' in answer) return true;
  if (enforce) return !answer.allowed && refusedByOurPolicy(answer.message);
  if (!mutatingServed) return true;
  return answer.allowed && typeof runtimeClassOf(answer.object) === 'string';
}

/**
 * The API server's words for a ValidatingAdmissionPolicy denial (`ValidatingAdmissionPolicy '<policy>'
 * with binding '<binding>' denied request: <message>`), for one of this project's sandbox policies:
 * per instance (`policyName`: the `kubeplus-sandbox-` prefix) or the shared one, with a message of
 * ours (they all end with the annotation's key in parentheses). A platform's own policy refuses the
 * probe as well (managed GKE's `secure-sandbox-policy` refuses any class but `gvisor`), and before
 * ours is in force that refusal would otherwise be taken for it. Policies are cluster-scoped: a
 * tenant cannot create one under our names.
 */
const OUR_POLICY_DENIAL = new RegExp(
  `ValidatingAdmissionPolicy '(?:${RUNTIME_CLASS_PREFIX}[^']+|${SHARED_SANDBOX_POLICY_NAME})' with binding '[^']+' denied request: [\\s\\S]*\\(${SANDBOX_ISOLATION_ANNOTATION.replace(/[.]/g, '\\.')}\\)`,
);

function refusedByOurPolicy(message: string): boolean {
  return OUR_POLICY_DENIAL.test(message);
}
