/**
 * Which admission-policy kinds the operator watches, from API discovery at start-up:
 * ValidatingAdmissionPolicy(+Binding) when `admissionregistration.k8s.io/v1` serves them (GA
 * since Kubernetes 1.30), and MutatingAdmissionPolicy(+Binding) at v1 (GA in 1.36) or else
 * v1beta1, or not at all — the same preference as KubeClusterPort.servedMutatingPolicyVersion,
 * so the informers watch exactly what the reconciler writes. A cluster that starts serving
 * another version later is picked up at the next restart.
 */

import { httpStatusOf } from '@kubeplus-isolation/service';
import {
  SANDBOX_ISOLATION_PARAMS_API_VERSION,
  SANDBOX_ISOLATION_PARAMS_RESOURCE as SANDBOX_ISOLATION_PARAMS_RESOURCE_NAME,
} from '@kubeplus-isolation/spec';
import {
  AdmissionregistrationV1Api,
  AdmissionregistrationV1beta1Api,
  CustomObjectsApi,
  type KubeConfig,
} from '@kubernetes/client-node';
import {
  type ManagedKind,
  MUTATING_POLICY_API_VERSIONS,
  type MutatingPolicyApiVersion,
  NODE_ISOLATION_PARAMS_API_VERSION,
  VALIDATING_POLICY_API_VERSION,
} from '../desired/objects.js';

/** An owned admission-policy kind and its plural, as its informer watches it. */
export interface PolicyResource {
  apiVersion: string;
  kind: ManagedKind;
  resource: string;
}

/** Resource names served per API version; `undefined` for a version not served at all. */
export type ServedResources = Readonly<Record<string, ReadonlySet<string> | undefined>>;

export interface PolicyApis {
  validating: boolean;
  mutatingVersion: MutatingPolicyApiVersion | undefined;
}

function serves(served: ServedResources, apiVersion: string, ...resources: string[]): boolean {
  const names = served[apiVersion];
  return names !== undefined && resources.every((r) => names.has(r));
}

/** The policy APIs to watch, given what discovery found. */
export function policyApisFrom(served: ServedResources): PolicyApis {
  return {
    validating: serves(
      served,
      VALIDATING_POLICY_API_VERSION,
      'validatingadmissionpolicies',
      'validatingadmissionpolicybindings',
    ),
    mutatingVersion: MUTATING_POLICY_API_VERSIONS.find((v) =>
      serves(served, v, 'mutatingadmissionpolicies', 'mutatingadmissionpolicybindings'),
    ),
  };
}

/** The informers to run for the served policy APIs. */
/** The admission-policy engine's NodeIsolation parameters (namespaced; listed across namespaces). */
export const NODE_ISOLATION_PARAMS_RESOURCE: PolicyResource = {
  apiVersion: NODE_ISOLATION_PARAMS_API_VERSION,
  kind: 'NodeIsolation',
  resource: 'nodeisolations',
};

/** The shared sandbox policy layout's per-instance parameter (cluster-scoped; CRD from the chart). */
export const SANDBOX_ISOLATION_PARAMS_RESOURCE: PolicyResource = {
  apiVersion: SANDBOX_ISOLATION_PARAMS_API_VERSION,
  kind: 'SandboxIsolation',
  resource: SANDBOX_ISOLATION_PARAMS_RESOURCE_NAME,
};

export function policyResources(apis: PolicyApis): PolicyResource[] {
  const out: PolicyResource[] = [];
  if (apis.validating) {
    const apiVersion = VALIDATING_POLICY_API_VERSION;
    out.push(
      { apiVersion, kind: 'ValidatingAdmissionPolicy', resource: 'validatingadmissionpolicies' },
      { apiVersion, kind: 'ValidatingAdmissionPolicyBinding', resource: 'validatingadmissionpolicybindings' },
    );
  }
  if (apis.mutatingVersion !== undefined) {
    const apiVersion = apis.mutatingVersion;
    out.push(
      { apiVersion, kind: 'MutatingAdmissionPolicy', resource: 'mutatingadmissionpolicies' },
      { apiVersion, kind: 'MutatingAdmissionPolicyBinding', resource: 'mutatingadmissionpolicybindings' },
    );
  }
  return out;
}

async function resourcesOf(
  list: () => Promise<{ resources: Array<{ name: string }> }>,
  group = 'admissionregistration.k8s.io',
): Promise<Set<string> | undefined> {
  try {
    const { resources } = await list();
    return new Set(resources.map((r) => r.name));
  } catch (err) {
    // 404: the group version is not served (beta APIs are off by default).
    if (httpStatusOf(err) === 404) return undefined;
    throw new Error(`API discovery of ${group} failed`, { cause: err });
  }
}

/** What `--sandbox-policy-layout shared` needs served and is missing; undefined when nothing is. */
export function sharedLayoutProblem(params: ReadonlySet<string> | undefined): string | undefined {
  if (params?.has(SANDBOX_ISOLATION_PARAMS_RESOURCE_NAME)) return undefined;
  return (
    `--sandbox-policy-layout shared needs the SandboxIsolation CRD (${SANDBOX_ISOLATION_PARAMS_RESOURCE_NAME}.isolation.kubeplus.io), ` +
    'which this cluster does not serve: install it (the chart does with operator.sandboxPolicyLayout=shared; ' +
    'deploy/kubeplus-isolation/charts/operator/files/sandbox-isolation-crd.yaml) or use --sandbox-policy-layout per-instance'
  );
}

/** Fails start-up, with what to do, when the shared layout is asked for and its CRD is not served. */
export async function checkSharedLayout(kc: KubeConfig): Promise<void> {
  const [group, version] = SANDBOX_ISOLATION_PARAMS_API_VERSION.split('/') as [string, string];
  const served = await resourcesOf(() => kc.makeApiClient(CustomObjectsApi).getAPIResources({ group, version }), group);
  const problem = sharedLayoutProblem(served);
  if (problem !== undefined) throw new Error(problem);
}

/** Asks the API server which admission-policy APIs it serves. */
export async function discoverPolicyApis(kc: KubeConfig): Promise<PolicyApis> {
  const [v1, v1beta1] = await Promise.all([
    resourcesOf(() => kc.makeApiClient(AdmissionregistrationV1Api).getAPIResources()),
    resourcesOf(() => kc.makeApiClient(AdmissionregistrationV1beta1Api).getAPIResources()),
  ]);
  return policyApisFrom({ 'admissionregistration.k8s.io/v1': v1, 'admissionregistration.k8s.io/v1beta1': v1beta1 });
}
