/** Reasons of the Events the reconcilers record on instances (`kubectl describe` shows them). */
export const EventReason = {
  /** Warning: `kubeplus.io/node-isolation` does not validate; the last applied isolation stays. */
  InvalidNodeIsolation: 'InvalidNodeIsolation',
  /** Warning: `kubeplus.io/sandbox-isolation` does not validate; the last applied policy stays. */
  InvalidSandboxIsolation: 'InvalidSandboxIsolation',
  /** Warning: the instance is in the platform namespace and its name cannot name a namespace. */
  InvalidTenantNamespace: 'InvalidTenantNamespace',
  /** Warning: `kubeplus-sandbox-<instance>` belongs to another instance; not taken over. */
  RuntimeClassConflict: 'RuntimeClassConflict',
  /** Warning: an admission policy or binding name belongs to another instance; not taken over. */
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
  NamespaceCreated: 'NamespaceCreated',
  NodeIsolationApplied: 'NodeIsolationApplied',
  NodeIsolationRemoved: 'NodeIsolationRemoved',
  SandboxIsolationApplied: 'SandboxIsolationApplied',
  SandboxIsolationRemoved: 'SandboxIsolationRemoved',
  NamespaceDeleted: 'NamespaceDeleted',
} as const;

export type EventReason = (typeof EventReason)[keyof typeof EventReason];
