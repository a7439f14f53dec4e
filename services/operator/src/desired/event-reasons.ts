/** Reasons of the Events the reconcilers record on instances (`kubectl describe` shows them). */
export const EventReason = {
  /** Warning: `kubeplus.io/node-isolation` does not validate; the last applied isolation stays. */
  InvalidNodeIsolation: 'InvalidNodeIsolation',
  /** Warning: `kubeplus.io/sandbox-isolation` does not validate; the last applied policy stays. */
  InvalidSandboxIsolation: 'InvalidSandboxIsolation',
  /** Warning: the instance is in the platform namespace and its name cannot name a namespace. */
  InvalidTenantNamespace: 'InvalidTenantNamespace',
  /**
   * Warning: the namespace the instance names is not the tenant's (a system namespace, the
   * release's, the platform's, or an existing one not created for it: `decideTenantNamespace`);
   * never labelled or annotated. The message says why and what to do.
   */
  TenantNamespaceRefused: 'TenantNamespaceRefused',
  /** Normal: a namespace that is not this instance's tenant namespace carried its keys (an older release claimed it); they were removed. */
  TenantNamespaceReleased: 'TenantNamespaceReleased',
  /**
   * Warning: `kubeplus-sandbox-<instance>` belongs to another instance (one of the same name
   * elsewhere); not taken over. The message names the holder; the namespace stays governed by
   * this instance's own policies, allowing the platform's classes that meet the minimum.
   */
  RuntimeClassConflict: 'RuntimeClassConflict',
  /**
   * Warning: an admission policy or binding name is held by an object another owner made (names
   * carry the instance's whole identity, so never another instance's by construction); not taken
   * over, and nothing is pruned meanwhile.
   */
  AdmissionPolicyConflict: 'AdmissionPolicyConflict',
  /** Warning: another instance isolates the tenant namespace; not taken over. */
  NodeIsolationConflict: 'NodeIsolationConflict',
  /** Warning: advisory mode, but the cluster serves no MutatingAdmissionPolicy API to default with. */
  MutatingAdmissionPolicyUnavailable: 'MutatingAdmissionPolicyUnavailable',
  /**
   * Warning: another instance binds a stricter sandbox policy (minimum or mode) to the same tenant
   * namespace; every policy applies, so the strictest governs, not this instance's.
   */
  StricterSandboxPolicy: 'StricterSandboxPolicy',
  /** Warning: advisory mode, but no RuntimeClass to default to. */
  NoDefaultRuntimeClass: 'NoDefaultRuntimeClass',
  /**
   * Warning: the annotation's `runtimeClassName` names a RuntimeClass that does not exist, is not
   * the platform's (kubeplus-isolation generated it), or whose handler is weaker than the
   * minimum: it is neither recommended nor defaulted to, and no class is generated instead.
   */
  PlatformRuntimeClassUnusable: 'PlatformRuntimeClassUnusable',
  /**
   * Warning: the tenant namespace's own node-isolation mandate reaches another namespace's
   * exclusive pool (selects its labels or tolerates its taints). The exclusive-pools policy does
   * not refuse what a mandate prescribes, so the tenant's Pods may land there: give each pool a
   * taint value of its own (exclusive-pools-overlaps.ts).
   */
  ExclusivePoolsOverlap: 'ExclusivePoolsOverlap',
  NamespaceCreated: 'NamespaceCreated',
  NodeIsolationApplied: 'NodeIsolationApplied',
  NodeIsolationRemoved: 'NodeIsolationRemoved',
  SandboxIsolationApplied: 'SandboxIsolationApplied',
  SandboxIsolationRemoved: 'SandboxIsolationRemoved',
  /**
   * Normal: a warm-pool Sandbox (not yet claimed) created before its class got its current handler
   * was deleted: the policies would refuse to hand it out (it may run the old handler), and a claim
   * would retry it forever; its pool re-creates it under the current handler
   * (stale-warm-sandboxes.ts).
   */
  StaleWarmSandboxDeleted: 'StaleWarmSandboxDeleted',
} as const;

export type EventReason = (typeof EventReason)[keyof typeof EventReason];
