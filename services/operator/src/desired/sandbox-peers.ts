/**
 * Sandbox isolation of several instances in one tenant namespace. Every instance's policy is bound
 * to the namespace, and the API server applies all of them: a Sandbox must satisfy each one. So
 * the namespace is governed by the strictest minimum (and by enforce over advisory), whatever each
 * instance asked for. These pure functions say who the peers of an instance are, which of them
 * govern it, and which namespaces are in that state (for the metric).
 *
 * A RuntimeClass the operator generated for a peer belongs to the same tenant: a peer's class is
 * acceptable to an instance when its handler meets that instance's minimum
 * (`sandbox-policy.ts` `allowedRuntimeClasses`). Classes generated for instances of other
 * namespaces never are.
 */
import {
  compareLevels,
  DEFAULT_PLATFORM_NAMESPACE,
  type InstanceIdentity,
  instanceIdentity,
  levelRank,
  parseSandboxIsolation,
  type RuntimeLevel,
  SANDBOX_ISOLATION_ANNOTATION,
  type SandboxInstanceMeta,
  type SandboxIsolationSpec,
  tenantOf,
} from '@kubeplus-isolation/spec';

export { type SandboxInstanceMeta, tenantOf } from '@kubeplus-isolation/spec';

/** Another instance whose (valid) sandbox isolation is bound to the same tenant namespace. */
export interface SandboxPeer {
  identity: InstanceIdentity;
  spec: SandboxIsolationSpec;
}

function sameIdentity(a: InstanceIdentity, b: InstanceIdentity): boolean {
  return a.group === b.group && a.kind === b.kind && a.namespace === b.namespace && a.name === b.name;
}

/**
 * The instances other than `self` whose valid sandbox isolation is bound to `tenant`, sorted by
 * identity. An invalid annotation binds nothing new (its last good policy stays, but which one is
 * not knowable from the annotation), so it is left out.
 */
export function sandboxPeers(
  instances: Iterable<SandboxInstanceMeta>,
  self: InstanceIdentity,
  tenant: string,
  platformNamespace: string = DEFAULT_PLATFORM_NAMESPACE,
): SandboxPeer[] {
  const peers: SandboxPeer[] = [];
  for (const i of instances) {
    if (sameIdentity(i, self) || tenantOf(i, platformNamespace) !== tenant) continue;
    const parsed = parseSandboxIsolation(i.annotation);
    if (!parsed.ok) continue;
    peers.push({
      identity: { group: i.group, kind: i.kind, namespace: i.namespace, name: i.name },
      spec: parsed.value,
    });
  }
  return peers.sort((a, b) => instanceIdentity(a.identity).localeCompare(instanceIdentity(b.identity)));
}

/** `a` is stricter than `b` in some respect: a stronger minimum, or enforce where `b` is advisory. */
export function isStricter(a: SandboxIsolationSpec, b: SandboxIsolationSpec): boolean {
  return compareLevels(a.minRuntimeClass, b.minRuntimeClass) > 0 || (a.enforce && !b.enforce);
}

/** The peers whose policy is stricter than `spec` in minimum or mode: they, not `spec`, govern there. */
export function stricterPeers(spec: SandboxIsolationSpec, peers: readonly SandboxPeer[]): SandboxPeer[] {
  return peers.filter((p) => isStricter(p.spec, spec));
}

/** The minimum a Sandbox in the namespace must meet: the strongest of the instance's and its peers'. */
export function effectiveMinimum(spec: SandboxIsolationSpec, peers: readonly SandboxPeer[]): RuntimeLevel {
  let min = spec.minRuntimeClass;
  for (const p of peers) if (levelRank(p.spec.minRuntimeClass) > levelRank(min)) min = p.spec.minRuntimeClass;
  return min;
}

/** `minimum kata, enforced` / `minimum runsc, advisory`. */
export function describeSpec(spec: SandboxIsolationSpec): string {
  return `minimum ${spec.minRuntimeClass}, ${spec.enforce ? 'enforced' : 'advisory'}`;
}

/**
 * The Warning an instance gets while stricter peers govern its namespace (undefined when none
 * does): who governs, with what, and what that means for this instance's own class.
 */
export function stricterPolicyMessage(
  spec: SandboxIsolationSpec,
  tenant: string,
  stricter: readonly SandboxPeer[],
): string | undefined {
  if (stricter.length === 0) return undefined;
  const who = stricter.map((p) => `${instanceIdentity(p.identity)} (${describeSpec(p.spec)})`).join(', ');
  return `namespace ${tenant} is also governed by the stricter sandbox isolation of ${who}; every policy bound to the namespace applies, so a Sandbox there must satisfy the strictest, not this instance's ${describeSpec(spec)}`;
}

/**
 * How many tenant namespaces have two or more sandbox-isolated instances asking for different
 * minimums or modes (each such namespace is governed by its strictest policy, and the weaker
 * instances carry a StricterSandboxPolicy Warning).
 */
export function mixedPolicyNamespaces(
  instances: Iterable<SandboxInstanceMeta>,
  platformNamespace: string = DEFAULT_PLATFORM_NAMESPACE,
): number {
  const seen = new Map<string, string>();
  const mixed = new Set<string>();
  for (const i of instances) {
    const tenant = tenantOf(i, platformNamespace);
    if (tenant === undefined) continue;
    const parsed = parseSandboxIsolation(i.annotation);
    if (!parsed.ok) continue;
    const policy = describeSpec(parsed.value);
    const first = seen.get(tenant);
    if (first === undefined) seen.set(tenant, policy);
    else if (first !== policy) mixed.add(tenant);
  }
  return mixed.size;
}

/** An instance cache entry as SandboxInstanceMeta, when it asks for sandbox isolation. */
export function sandboxInstanceMeta(
  kind: { group: string; kind: string },
  metadata: { name?: string; namespace?: string; annotations?: Record<string, string> } | undefined,
): SandboxInstanceMeta | undefined {
  const annotation = metadata?.annotations?.[SANDBOX_ISOLATION_ANNOTATION];
  if (annotation === undefined || !metadata?.name || !metadata.namespace) return undefined;
  return { group: kind.group, kind: kind.kind, namespace: metadata.namespace, name: metadata.name, annotation };
}

/** The `mode` label values of kubeplus_operator_sandbox_isolation_instances. */
export const SANDBOX_MODES = ['enforce', 'advisory'] as const;
export type SandboxMode = (typeof SANDBOX_MODES)[number];

/** Instances with a valid sandbox isolation, by mode (invalid annotations are not counted). */
export function countSandboxModes(instances: Iterable<SandboxInstanceMeta>): Record<SandboxMode, number> {
  const out: Record<SandboxMode, number> = { enforce: 0, advisory: 0 };
  for (const i of instances) {
    const parsed = parseSandboxIsolation(i.annotation);
    if (parsed.ok) out[parsed.value.enforce ? 'enforce' : 'advisory']++;
  }
  return out;
}
