/**
 * The object kinds the operator creates and owns wholly (cluster-scoped, and the namespaced
 * NodeIsolation parameter of the admission-policy engine), and a uniform shape for them, so
 * comparison, apply and pruning are written once.
 */

import {
  NODE_ISOLATION_PARAMS_API_VERSION,
  SANDBOX_ISOLATION_PARAMS_API_VERSION,
  SANDBOX_ISOLATION_PARAMS_KIND,
} from '@kubeplus-isolation/spec';

export const RUNTIME_CLASS_API_VERSION = 'node.k8s.io/v1';
export const VALIDATING_POLICY_API_VERSION = 'admissionregistration.k8s.io/v1';
/** The NodeIsolation parameter and its one object per isolated namespace (packages/spec keys.ts). */
export { NODE_ISOLATION_PARAMS_API_VERSION, NODE_ISOLATION_PARAMS_NAME } from '@kubeplus-isolation/spec';

/** The MutatingAdmissionPolicy API versions the operator can write (GA in 1.36, beta before). */
export const MUTATING_POLICY_API_VERSIONS = [
  'admissionregistration.k8s.io/v1',
  'admissionregistration.k8s.io/v1beta1',
] as const;
export type MutatingPolicyApiVersion = (typeof MUTATING_POLICY_API_VERSIONS)[number];

export type ManagedKind =
  | 'RuntimeClass'
  | 'ValidatingAdmissionPolicy'
  | 'ValidatingAdmissionPolicyBinding'
  | 'MutatingAdmissionPolicy'
  | 'MutatingAdmissionPolicyBinding'
  | 'NodeIsolation'
  /** Sandbox isolation's per-instance parameter in the shared policy layout (cluster-scoped). */
  | 'SandboxIsolation'
  /** The compliance Report (OpenReports); written by controllers/compliance, listed here for the uninstall. */
  | 'Report';

/** The kinds whose objects live in a namespace (the rest are cluster-scoped). */
export const NAMESPACED_KINDS: ReadonlySet<ManagedKind> = new Set<ManagedKind>(['NodeIsolation', 'Report']);

export const NODE_ISOLATION_PARAMS_TYPE: ManagedType = {
  apiVersion: NODE_ISOLATION_PARAMS_API_VERSION,
  kind: 'NodeIsolation',
};

export const SANDBOX_ISOLATION_PARAMS_TYPE: ManagedType = {
  apiVersion: SANDBOX_ISOLATION_PARAMS_API_VERSION,
  kind: SANDBOX_ISOLATION_PARAMS_KIND,
};

/** A kind at the API version it is read and written at. */
export interface ManagedType {
  apiVersion: string;
  kind: ManagedKind;
}

export interface ObjectRef extends ManagedType {
  name: string;
  /** Set exactly for the namespaced kinds (NAMESPACED_KINDS). */
  namespace?: string;
}

export interface ManagedMeta {
  name: string;
  namespace?: string;
  uid?: string;
  resourceVersion?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
  finalizers?: string[];
  ownerReferences?: unknown[];
  [field: string]: unknown;
}

/** Any managed object: its body (`handler`, `spec`, …) sits beside `metadata`. */
export interface ManagedObject extends ManagedType {
  metadata: ManagedMeta;
  [field: string]: unknown;
}

export function refOf(obj: ManagedObject): ObjectRef {
  const ref: ObjectRef = { apiVersion: obj.apiVersion, kind: obj.kind, name: obj.metadata.name };
  if (typeof obj.metadata.namespace === 'string') ref.namespace = obj.metadata.namespace;
  return ref;
}

/**
 * `Kind/name` (`Kind/namespace/name` for a namespaced one), for logs, events and identity within
 * one kind (API versions of one kind share storage).
 */
export function formatRef(ref: Pick<ObjectRef, 'kind' | 'name' | 'namespace'>): string {
  return ref.namespace === undefined ? `${ref.kind}/${ref.name}` : `${ref.kind}/${ref.namespace}/${ref.name}`;
}

/**
 * The types that hold the objects sandbox isolation owns, given the served MutatingAdmissionPolicy
 * version; `params`: the SandboxIsolation parameters of the shared policy layout too.
 */
export function sandboxManagedTypes(
  mutatingVersion: MutatingPolicyApiVersion | undefined,
  params = false,
): ManagedType[] {
  const types: ManagedType[] = [
    { apiVersion: VALIDATING_POLICY_API_VERSION, kind: 'ValidatingAdmissionPolicyBinding' },
    { apiVersion: VALIDATING_POLICY_API_VERSION, kind: 'ValidatingAdmissionPolicy' },
  ];
  if (mutatingVersion !== undefined) {
    types.push(
      { apiVersion: mutatingVersion, kind: 'MutatingAdmissionPolicyBinding' },
      { apiVersion: mutatingVersion, kind: 'MutatingAdmissionPolicy' },
    );
  }
  if (params) types.push(SANDBOX_ISOLATION_PARAMS_TYPE);
  types.push({ apiVersion: RUNTIME_CLASS_API_VERSION, kind: 'RuntimeClass' });
  return types;
}

/**
 * Write order: what an object refers to exists before it (RuntimeClass, then policies, then
 * their bindings). Deletion runs in reverse, so a binding never outlives its policy's purpose.
 */
const APPLY_RANK: Readonly<Record<ManagedKind, number>> = {
  NodeIsolation: 0,
  SandboxIsolation: 0,
  RuntimeClass: 0,
  ValidatingAdmissionPolicy: 1,
  MutatingAdmissionPolicy: 1,
  ValidatingAdmissionPolicyBinding: 2,
  MutatingAdmissionPolicyBinding: 2,
  // Refers to nothing the operator writes; only ever deleted (uninstall).
  Report: 0,
};

/** 0 RuntimeClass (and the NodeIsolation and SandboxIsolation parameters), 1 policies, 2 bindings. */
export function applyRank(type: ManagedType): number {
  return APPLY_RANK[type.kind];
}

export function applyOrder<T extends ManagedType>(objects: readonly T[]): T[] {
  return [...objects].sort((a, b) => APPLY_RANK[a.kind] - APPLY_RANK[b.kind]);
}

export function deleteOrder<T extends ManagedType>(objects: readonly T[]): T[] {
  return [...objects].sort((a, b) => APPLY_RANK[b.kind] - APPLY_RANK[a.kind]);
}
