/**
 * The KubePlus STAND-IN's decisions (pure): what its mutating webhook answers and what it then
 * does, written from the contract below and from nothing else. This is not KubePlus and copies
 * none of its code; it behaves as KubePlus's observable behaviour is described, and no more.
 * Its I/O shell (HTTPS server, API calls, helm) is standin.ts.
 *
 * The contract (KubePlus 4.2.0 as it runs, read from its source by this project, restated here
 * because tests never read outside the repository):
 *
 * - Instances of a registered Kind live in KubePlus's own namespace (its README and CI: `default`).
 *   A registered Kind's CRD: group `platformapi.kubeplus`, version `v1alpha1`, Namespaced, label
 *   `registered-by: kubeplus`, status schema `{helmrelease, error}`, NO status subresource (a
 *   status write is an UPDATE of the whole object). Instances get label `created-by: kubeplus`.
 * - KubePlus's webhook (`platform-as-code.crd-binding`) acts only in namespaces labeled
 *   `managedby=kubeplus` (its setup labels its own namespace so). failurePolicy unset (so `Fail`),
 *   timeoutSeconds 30, sideEffects None, namespaceSelector `managedby In [kubeplus]`. Rules: CREATE
 *   of CRDs and Namespaces; CREATE, UPDATE, DELETE of every resource in groups
 *   `platformapi.kubeplus` and `workflows.kubeplus`, version `v1alpha1`.
 * - On every instance CREATE and UPDATE it patches annotation `accountidentity: <requesting user>`.
 *   It denies an instance CREATE when namespace `<name>` is Terminating or carries a release-name
 *   annotation from another Kind, and denies UPDATEs while that namespace is Terminating. It
 *   requires `len(kind + "-" + name) <= 30`.
 * - Inside the instance CREATE admission, before answering: the target namespace is the instance's
 *   name for an instance in KubePlus's namespace (else the instance's own namespace). If it does not
 *   exist it is created, and `helm install <kind lowercased>-<instance>` is started at once in the
 *   background into it; if it exists, `helm upgrade` instead. The namespace is annotated
 *   `meta.helm.sh/release-name` with the release name IN LITERAL DOUBLE QUOTES and labeled
 *   `managedby=kubeplus`; NetworkPolicies `restrict-cross-ns-traffic` and `allow-external-traffic`
 *   are created in it. A failed install (other than a name re-use) deletes the namespace. After the
 *   install, `status.helmrelease = "<namespace>:<release>\n<NOTES>"` is written by one GET then a
 *   full Update, not retried on a conflict.
 * - At the DELETE admission it requires `status` (else "cannot be deleted. It is not ready yet",
 *   unless the instance has a `delete` label); then, in the background, `helm delete`, and if that
 *   printed no error, a delete of the namespace named in `status.helmrelease`.
 * - KubePlus reads neither `kubeplus.io/node-isolation` nor `kubeplus.io/sandbox-isolation`, and
 *   Pods are not in its webhook's rules.
 *
 * Where the contract is silent the stand-in does the least: the CRD and Namespace CREATEs and the
 * `workflows.kubeplus` group are answered allowed, unchanged; the NetworkPolicies' contents are
 * its own (the contract names them only); an `upgrade` that fails deletes nothing; `status.error`
 * is never written; no ResourceQuota.
 */

export const STANDIN_GROUP = 'platformapi.kubeplus';
export const STANDIN_WORKFLOWS_GROUP = 'workflows.kubeplus';
export const STANDIN_VERSION = 'v1alpha1';
export const ACCOUNT_IDENTITY_ANNOTATION = 'accountidentity';
export const RELEASE_NAME_ANNOTATION = 'meta.helm.sh/release-name';
export const KUBEPLUS_MANAGED_BY_LABEL = 'managedby';
export const KUBEPLUS_MANAGED_BY_VALUE = 'kubeplus';
export const REGISTERED_BY_LABEL = 'registered-by';
export const CREATED_BY_LABEL = 'created-by';
export const DELETE_LABEL = 'delete';
export const NETWORK_POLICY_NAMES = ['restrict-cross-ns-traffic', 'allow-external-traffic'] as const;
/** The longest `kind + "-" + name` KubePlus's webhook accepts. */
export const MAX_RELEASE_NAME_LENGTH = 30;
/**
 * KubePlus's webhook is `platform-as-code.crd-binding`, but admissionregistration.k8s.io/v1 wants a
 * webhook name with at least three dot-separated segments. The closest valid name keeps KubePlus's
 * two and appends `kubeplus` (the suffix of both of its API groups), so anything matching on the
 * prefix `platform-as-code.crd-binding` finds it.
 */
export const STANDIN_WEBHOOK_NAME = 'platform-as-code.crd-binding.kubeplus';
/** The MutatingWebhookConfiguration's own name (any DNS subdomain is valid): KubePlus's webhook's. */
export const STANDIN_WEBHOOK_CONFIGURATION = 'platform-as-code.crd-binding';
export const NOT_READY_MESSAGE = 'cannot be deleted. It is not ready yet';

/** One JSON Patch operation (RFC 6902), as an admission response carries them. */
export interface PatchOperation {
  op: 'add' | 'replace' | 'remove';
  path: string;
  value?: unknown;
}

/** What the stand-in reads of an AdmissionReview request. */
export interface ReviewRequest {
  uid: string;
  operation: 'CREATE' | 'UPDATE' | 'DELETE' | 'CONNECT';
  group: string;
  kind: string;
  namespace?: string;
  name?: string;
  username: string;
  object?: InstanceLike;
  oldObject?: InstanceLike;
}

export interface InstanceLike {
  kind?: string;
  metadata?: { name?: string; labels?: Record<string, string>; annotations?: Record<string, string> };
  status?: Record<string, unknown>;
}

/** The target namespace as the stand-in found it (read before deciding). */
export interface TargetNamespace {
  exists: boolean;
  terminating: boolean;
  /** `meta.helm.sh/release-name` as stored (with its literal double quotes, if KubePlus wrote it). */
  releaseAnnotation?: string;
}

/** The work the stand-in does once the admission allows the request. */
export type FollowUp =
  | { kind: 'none' }
  /** Synchronously (before answering): namespace, annotation, label, policies; then helm in the background. */
  | { kind: 'deploy'; namespace: string; release: string; helm: 'install' | 'upgrade'; createNamespace: boolean }
  /** In the background: helm delete, then (if no error) delete the namespace. */
  | { kind: 'undeploy'; namespace: string; release: string };

export type Decision =
  | { allowed: true; patch: PatchOperation[]; followUp: FollowUp }
  | { allowed: false; message: string; followUp: { kind: 'none' } };

export const releaseName = (kind: string, instance: string): string => `${kind.toLowerCase()}-${instance}`;

/** The annotation value KubePlus writes: the release name in literal double quotes. */
export const releaseAnnotationValue = (release: string): string => `"${release}"`;

/** The tenant namespace of an instance: its name in KubePlus's namespace, else its own namespace. */
export function targetNamespace(kubeplusNamespace: string, instanceNamespace: string, name: string): string {
  return instanceNamespace === kubeplusNamespace ? name : instanceNamespace;
}

/** `status.helmrelease` as written after an install: `<namespace>:<release>\n<NOTES>`. */
export const helmReleaseStatus = (namespace: string, release: string, notes: string): string =>
  `${namespace}:${release}\n${notes}`;

/** The namespace and release in `status.helmrelease`; undefined when it has no `<namespace>:<release>` line. */
export function parseHelmReleaseStatus(value: unknown): { namespace: string; release: string } | undefined {
  if (typeof value !== 'string') return undefined;
  const first = value.split('\n', 1)[0] ?? '';
  const colon = first.indexOf(':');
  if (colon <= 0 || colon === first.length - 1) return undefined;
  return { namespace: first.slice(0, colon), release: first.slice(colon + 1) };
}

/** The text after `NOTES:` in helm install/upgrade output (empty when the chart has none). */
export function notesOf(helmOutput: string): string {
  const at = helmOutput.indexOf('NOTES:\n');
  return at < 0 ? '' : helmOutput.slice(at + 'NOTES:\n'.length).trimEnd();
}

/** Whether a failed `helm install`'s output is the name re-use error (which keeps the namespace). */
export const isNameReuse = (helmOutput: string): boolean => helmOutput.includes('cannot re-use a name');

const escapePointer = (key: string): string => key.replaceAll('~', '~0').replaceAll('/', '~1');

/** JSON Patch setting `metadata.<field>[key] = value`, whether or not the map exists. */
function setMetadataEntry(
  object: InstanceLike | undefined,
  field: 'annotations' | 'labels',
  key: string,
  value: string,
): PatchOperation {
  return object?.metadata?.[field] === undefined || object.metadata[field] === null
    ? { op: 'add', path: `/metadata/${field}`, value: { [key]: value } }
    : { op: 'add', path: `/metadata/${field}/${escapePointer(key)}`, value };
}

const deny = (message: string): Decision => ({ allowed: false, message, followUp: { kind: 'none' } });
const allow = (patch: PatchOperation[] = [], followUp: FollowUp = { kind: 'none' }): Decision => ({
  allowed: true,
  patch,
  followUp,
});

/**
 * The stand-in's answer to one AdmissionReview. `target` is the instance's target namespace as read
 * just before (undefined for requests that are not about an instance of `platformapi.kubeplus`).
 */
export function decide(request: ReviewRequest, kubeplusNamespace: string, target?: TargetNamespace): Decision {
  if (request.group !== STANDIN_GROUP || request.namespace === undefined || request.namespace === '') return allow();
  const name = request.name || request.object?.metadata?.name || request.oldObject?.metadata?.name || '';
  const kind = request.kind;
  const release = releaseName(kind, name);
  const namespace = targetNamespace(kubeplusNamespace, request.namespace, name);
  switch (request.operation) {
    case 'CREATE': {
      if (`${kind}-${name}`.length > MAX_RELEASE_NAME_LENGTH) {
        return deny(
          `${kind} ${name}: "${kind}-${name}" is ${`${kind}-${name}`.length} characters; at most ${MAX_RELEASE_NAME_LENGTH} are allowed`,
        );
      }
      if (target?.terminating) return deny(`namespace ${namespace} is Terminating; ${kind} ${name} cannot be created`);
      const annotation = target?.releaseAnnotation;
      if (annotation !== undefined && annotation !== releaseAnnotationValue(release) && annotation !== release) {
        return deny(
          `namespace ${namespace} belongs to release ${annotation} of another Kind; ${kind} ${name} cannot be created`,
        );
      }
      return allow(
        [
          setMetadataEntry(request.object, 'annotations', ACCOUNT_IDENTITY_ANNOTATION, request.username),
          setMetadataEntry(request.object, 'labels', CREATED_BY_LABEL, 'kubeplus'),
        ],
        {
          kind: 'deploy',
          namespace,
          release,
          helm: target?.exists ? 'upgrade' : 'install',
          createNamespace: !target?.exists,
        },
      );
    }
    case 'UPDATE':
      if (target?.terminating) return deny(`namespace ${namespace} is Terminating; ${kind} ${name} cannot be updated`);
      return allow([setMetadataEntry(request.object, 'annotations', ACCOUNT_IDENTITY_ANNOTATION, request.username)]);
    case 'DELETE': {
      const old = request.oldObject;
      const hasStatus = old?.status !== undefined && old.status !== null && Object.keys(old.status).length > 0;
      if (!hasStatus) {
        if (old?.metadata?.labels?.[DELETE_LABEL] !== undefined) return allow();
        return deny(`${kind} ${name} ${NOT_READY_MESSAGE}`);
      }
      const recorded = parseHelmReleaseStatus(old?.status?.helmrelease);
      return allow([], recorded ? { kind: 'undeploy', ...recorded } : { kind: 'none' });
    }
    default:
      return allow();
  }
}
