/**
 * The only facts about kubernetes-sigs/agent-sandbox the operator relies on: which resources
 * carry a Pod template, at which versions they are served, and where the runtime class sits.
 * (CRDs of sigs.k8s.io/agent-sandbox: `sandboxes.agents.x-k8s.io` and
 * `sandboxtemplates.extensions.agents.x-k8s.io`. v1.0.x, pinned in e2e/components/agent-sandbox,
 * serves v1beta1 only; v0.5.x, pinned in e2e/components/agent-sandbox-0.5, serves v1beta1 (storage)
 * and the deprecated v1alpha1. Both are supported: the policies list both versions.)
 */
import { RUNTIME_CLASS_PATH } from '@kubeplus-isolation/spec';

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

/** Path of the runtime class in both resources, at every served version (packages/spec: the compliance judge reads it too). */
export { POD_NAME_ANNOTATION, RUNTIME_CLASS_PATH } from '@kubeplus-isolation/spec';

/** The same path as a JSON Pointer (RFC 6901), for JSON Patch. */
export const RUNTIME_CLASS_POINTER = `/${RUNTIME_CLASS_PATH.join('/')}`;

/**
 * How the upstream controller (sandbox_controller.go, v0.5.0; see `SANDBOX_API_GROUPS` for v0.5.6+) ties a Pod to a Sandbox. It looks
 * the Pod up by the Sandbox's `agents.x-k8s.io/pod-name` annotation, else by the Sandbox's name,
 * and takes it as it is: a Pod owned by the Sandbox is used, an ownerless one is ADOPTED (an
 * UPDATE adding the Sandbox as controller) when it carries the adoptable label or the
 * Sandbox's name-hash label, any other is refused. It never compares the Pod's spec with the
 * template. So a Pod that is, or can become, a Sandbox's Pod is exactly one owned by a Sandbox
 * or carrying either label: the annotation alone cannot make the controller take any other.
 */
export const SANDBOX_OWNER = { group: 'agents.x-k8s.io', kind: 'Sandbox' } as const;
/**
 * From v0.5.6 (v1.0.1: sandbox_controller.go `checkOwnership`) the controller takes a Pod whose
 * CONTROLLER owner reference carries the Sandbox's UID, whatever apiVersion, kind or name that
 * reference names. The policies judge every Pod with an owner reference into Agent Sandbox's API
 * groups, whatever its kind or version; an owner reference of any other group carrying a
 * Sandbox's UID is caught when the controller labels the Pod it found (`updatePodMetadata` adds
 * the tracking label `NAME_HASH_LABEL`, an UPDATE the policies judge).
 */
export const SANDBOX_API_GROUPS: readonly string[] = ['agents.x-k8s.io', 'extensions.agents.x-k8s.io'];
export const ADOPTABLE_LABEL = 'agents.x-k8s.io/adoptable';
export const NAME_HASH_LABEL = 'agents.x-k8s.io/sandbox-name-hash';
/** The labels that let the controller adopt an ownerless Pod. */
export const ADOPTION_LABELS: readonly string[] = [ADOPTABLE_LABEL, NAME_HASH_LABEL];

/** Path of the runtime class in a Pod. */
export const POD_RUNTIME_CLASS_PATH: readonly string[] = ['spec', 'runtimeClassName'];
