/**
 * The only facts about kubernetes-sigs/agent-sandbox the operator relies on: which resources
 * carry a Pod template, at which versions they are served, and where the runtime class sits.
 * (CRDs of sigs.k8s.io/agent-sandbox v0.5.0, pinned in e2e/components/agent-sandbox: `sandboxes.agents.x-k8s.io` and
 * `sandboxtemplates.extensions.agents.x-k8s.io`, each serving v1beta1 (storage) and v1alpha1.)
 */

export interface SandboxResource {
  group: string;
  /**
   * The versions whose schema the policies' CEL is written for, most preferred first: each gets
   * its own rule, and with matchPolicy Equivalent a request at any other version (one added after
   * this release included) is converted to the first of them the API server can reach.
   */
  versions: readonly string[];
  /** Plural resource name; subresources (status, scale) are deliberately not matched. */
  resource: string;
  kind: string;
}

/**
 * Sandbox is what runs; SandboxTemplate is what SandboxClaims and SandboxWarmPools stamp
 * Sandboxes from, so a weak template is refused when it is written rather than at claim time.
 */
export const SANDBOX_RESOURCES: readonly SandboxResource[] = [
  { group: 'agents.x-k8s.io', versions: ['v1beta1', 'v1alpha1'], resource: 'sandboxes', kind: 'Sandbox' },
  {
    group: 'extensions.agents.x-k8s.io',
    versions: ['v1beta1', 'v1alpha1'],
    resource: 'sandboxtemplates',
    kind: 'SandboxTemplate',
  },
];

/** Path of the runtime class in both resources, at every served version. */
export const RUNTIME_CLASS_PATH: readonly string[] = ['spec', 'podTemplate', 'spec', 'runtimeClassName'];

/** The same path as a JSON Pointer (RFC 6901), for JSON Patch. */
export const RUNTIME_CLASS_POINTER = `/${RUNTIME_CLASS_PATH.join('/')}`;
