/**
 * Every annotation and label key kubeplus-isolation reads or writes.
 * One place, so the operator, the webhook, the chart tests and the e2e suite
 * can never disagree on a spelling.
 */

/** On an instance custom resource: the node placement a tenant's Pods must get (JSON). */
export const NODE_ISOLATION_ANNOTATION = 'kubeplus.io/node-isolation';

/** On a tenant Namespace: makes the webhook's namespaceSelector match. Value is always "true". */
export const NODE_ISOLATION_ENABLED_LABEL = 'kubeplus.io/node-isolation-enabled';
export const NODE_ISOLATION_ENABLED_VALUE = 'true';

/** On a tenant Namespace: the validated, canonical NodeIsolationSpec the webhook applies. */
export const NODE_ISOLATION_RESOLVED_ANNOTATION = 'kubeplus.io/node-isolation-resolved';

/** On an instance custom resource: the minimum sandbox runtime for Agent Sandbox objects (JSON). */
export const SANDBOX_ISOLATION_ANNOTATION = 'kubeplus.io/sandbox-isolation';

/** Standard recommended label marking every object the operator owns. */
export const MANAGED_BY_LABEL = 'app.kubernetes.io/managed-by';
export const MANAGED_BY_VALUE = 'kubeplus-isolation';

/**
 * Owner labels on operator-owned objects (cluster-scoped ones cannot carry an ownerReference
 * to a namespaced instance). Values are label-safe forms of the instance's identity
 * (see `labelValue` in names.ts); the exact identity is in OWNER_ANNOTATION.
 */
export const OWNER_NAME_LABEL = 'kubeplus.io/owner-name';
export const OWNER_NAMESPACE_LABEL = 'kubeplus.io/owner-namespace';
export const OWNER_UID_LABEL = 'kubeplus.io/owner-uid';
/** `group/Kind/namespace/name` of the owning instance, exact and unbounded. */
export const OWNER_ANNOTATION = 'kubeplus.io/owner';

/** On a Namespace the operator created for an instance: which instance it belongs to. */
export const NAMESPACE_CREATED_FOR_ANNOTATION = 'kubeplus.io/created-for';

/**
 * On a tenant Namespace: written by the operator once what the instance asks for is in effect
 * there (node isolation keys written, sandbox policy binding enforced by the API server), for
 * every instance it governs, annotated or not. Until then the webhook's hold entry
 * (HOLD_WEBHOOK_NAME) holds Pod and Sandbox CREATEs in a namespace KubePlus just created.
 * Value is always "true".
 */
export const ISOLATION_SETTLED_LABEL = 'kubeplus.io/isolation-settled';
export const ISOLATION_SETTLED_VALUE = 'true';

/** KubePlus's label on the namespaces it manages (its own, and each tenant namespace it creates). */
export const KUBEPLUS_MANAGED_LABEL = 'managedby';
export const KUBEPLUS_MANAGED_VALUE = 'kubeplus';
/** Helm's release annotation; KubePlus's helmer writes it on each tenant namespace it installs into. */
export const HELM_RELEASE_NAME_ANNOTATION = 'meta.helm.sh/release-name';

/** Name of the hold's webhooks[] entry (chart files/hold-entry.json). */
export const HOLD_WEBHOOK_NAME = 'settle-hold.kubeplus.io';

/**
 * The finalizer releases up to 0.2.0 put on instances carrying either annotation. The operator
 * no longer adds it (it never writes an instance: every write passes KubePlus's fail-closed
 * webhook); it only removes it where an earlier release left it, and so does the uninstall hook.
 */
export const FINALIZER = 'isolation.kubeplus.io/cleanup';

/** KubePlus's own marker on the CustomResourceDefinitions it registers. */
export const KUBEPLUS_CRD_LABEL = 'registered-by';
export const KUBEPLUS_CRD_LABEL_VALUE = 'kubeplus';

/** Name of the webhooks[] entry in the MutatingWebhookConfiguration (from the design document). */
export const NODE_ISOLATION_WEBHOOK_NAME = 'node-isolation.kubeplus.io';

/**
 * The admission-policy engine's parameter (CRD installed by the chart with that engine): one
 * object of this name in each isolated namespace, which the policy binding's paramRef names.
 */
export const NODE_ISOLATION_PARAMS_API_VERSION = 'isolation.kubeplus.io/v1alpha1';
export const NODE_ISOLATION_PARAMS_KIND = 'NodeIsolation';
export const NODE_ISOLATION_PARAMS_NAME = 'node-isolation';

/**
 * Sandbox isolation's shared policy layout (operator --sandbox-policy-layout shared): ONE
 * ValidatingAdmissionPolicy (and, where served, ONE MutatingAdmissionPolicy) for the whole cluster,
 * parameterised per instance by a cluster-scoped SandboxIsolation object the operator writes; each
 * instance keeps its own binding, scoped to its tenant namespace, naming its parameter.
 */
export const SANDBOX_ISOLATION_PARAMS_API_VERSION = 'isolation.kubeplus.io/v1alpha1';
export const SANDBOX_ISOLATION_PARAMS_KIND = 'SandboxIsolation';
export const SANDBOX_ISOLATION_PARAMS_RESOURCE = 'sandboxisolations';
/** The shared ValidatingAdmissionPolicy every instance's binding names. */
export const SHARED_SANDBOX_POLICY_NAME = 'kubeplus-isolation-sandbox';
/** The shared MutatingAdmissionPolicy (advisory defaulting) every advisory instance's binding names. */
export const SHARED_SANDBOX_DEFAULT_POLICY_NAME = 'kubeplus-isolation-sandbox-default';
/** `app.kubernetes.io/component` of the shared policies: the operator's, owned by no instance. */
export const SHARED_SANDBOX_POLICY_COMPONENT = 'sandbox-isolation-shared-policy';

/** The name of the operator's compliance Report (openreports.io) in each audited namespace; the chart's report guard protects it. */
export const COMPLIANCE_REPORT_NAME = 'kubeplus-isolation';
