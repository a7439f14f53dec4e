/**
 * The Kubernetes minors the version matrix runs (e2e/README.md "Kubernetes versions"), and what each
 * serves of the APIs this project writes, as upstream documents it. Suites branch on what the API
 * server really serves (servedPolicyApis); e2e/test/kubernetes-versions.test.ts checks that it is
 * what this table says, so a surprise in a new pin shows as a failure, not as a silent branch.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { AdmissionregistrationV1Api, AdmissionregistrationV1beta1Api, type KubeConfig } from '@kubernetes/client-node';
import { repoRoot } from './repo.js';

/** The oldest minor the chart accepts (Chart.yaml kubeVersion): ValidatingAdmissionPolicy v1 is GA. */
export const FLOOR_MINOR = '1.30';

/** `v1.30.14` (or `1.30`) → `1.30`. */
export function minorOf(version: string): string {
  const m = /^v?(\d+)\.(\d+)/.exec(version);
  if (!m) throw new Error(`not a Kubernetes version: ${version}`);
  return `${m[1]}.${m[2]}`;
}

/** Negative, zero or positive as minor `a` is older than, the same as or newer than `b`. */
export function compareMinors(a: string, b: string): number {
  const [am = 0, an = 0] = minorOf(a).split('.').map(Number);
  const [bm = 0, bn = 0] = minorOf(b).split('.').map(Number);
  return am - bm || an - bn;
}

/** The real node's minor (and the default control plane's): e2e/components/k8s/go.mod. */
export function nodeMinor(): string {
  const gomod = readFileSync(join(repoRoot(), 'e2e', 'components', 'k8s', 'go.mod'), 'utf8');
  const m = /^\s*k8s\.io\/kubernetes (v\d+\.\d+\.\d+)/m.exec(gomod);
  if (!m?.[1]) throw new Error('e2e/components/k8s/go.mod requires no k8s.io/kubernetes version');
  return minorOf(m[1]);
}

/** The minor KUBEPLUS_ISOLATION_K8S asks for; undefined: the default (the node's). */
export function requestedMinor(env: NodeJS.ProcessEnv = process.env): string | undefined {
  const v = env.KUBEPLUS_ISOLATION_K8S;
  return v === undefined || v === '' ? undefined : minorOf(v);
}

/** What a minor serves, with its default API configuration, of the admission-policy APIs. */
export interface PolicyApiSupport {
  /** ValidatingAdmissionPolicy(+Binding) admissionregistration.k8s.io/v1 (GA in 1.30). */
  validatingV1: boolean;
  /** MutatingAdmissionPolicy(+Binding) admissionregistration.k8s.io/v1 (GA, on by default, in 1.36). */
  mutatingV1: boolean;
  /**
   * MutatingAdmissionPolicy v1beta1 exists but is off by default (1.34, 1.35): served only with
   * MUTATING_POLICY_BETA_ARGS on the API server.
   */
  mutatingV1beta1OptIn: boolean;
}

export function policyApiSupport(minor: string): PolicyApiSupport {
  return {
    validatingV1: compareMinors(minor, '1.30') >= 0,
    mutatingV1: compareMinors(minor, '1.36') >= 0,
    mutatingV1beta1OptIn: compareMinors(minor, '1.34') >= 0 && compareMinors(minor, '1.36') < 0,
  };
}

/** kube-apiserver flags that serve MutatingAdmissionPolicy v1beta1 on 1.34 and 1.35 (beta APIs are off by default). */
export const MUTATING_POLICY_BETA_ARGS = [
  '--runtime-config=admissionregistration.k8s.io/v1beta1=true',
  '--feature-gates=MutatingAdmissionPolicy=true',
] as const;

/** What the API server serves right now: the policy API versions, as the operator's discovery sees them. */
export async function servedPolicyApis(kc: KubeConfig): Promise<{
  validatingV1: boolean;
  mutating: 'admissionregistration.k8s.io/v1' | 'admissionregistration.k8s.io/v1beta1' | undefined;
}> {
  const names = async (list: () => Promise<{ resources: Array<{ name: string }> }>): Promise<Set<string>> => {
    try {
      return new Set((await list()).resources.map((r) => r.name));
    } catch {
      return new Set();
    }
  };
  const [v1, v1beta1] = await Promise.all([
    names(() => kc.makeApiClient(AdmissionregistrationV1Api).getAPIResources()),
    names(() => kc.makeApiClient(AdmissionregistrationV1beta1Api).getAPIResources()),
  ]);
  const mutating = (s: Set<string>): boolean =>
    s.has('mutatingadmissionpolicies') && s.has('mutatingadmissionpolicybindings');
  return {
    validatingV1: v1.has('validatingadmissionpolicies') && v1.has('validatingadmissionpolicybindings'),
    mutating: mutating(v1)
      ? 'admissionregistration.k8s.io/v1'
      : mutating(v1beta1)
        ? 'admissionregistration.k8s.io/v1beta1'
        : undefined,
  };
}
