/**
 * The admission-policy pieces every sandbox policy shares, whatever its layout (per instance or
 * shared, `sandbox-policy.ts`, `sandbox-shared-policy.ts`): which requests the policies match,
 * which Pods they judge, the CEL variables that read a request's runtime class, and advisory
 * mode's defaulting. Pure data and CEL text.
 */
import type { V1MatchResources, V1Validation, V1Variable } from '@kubernetes/client-node';
import {
  ADOPTION_LABELS,
  POD_RUNTIME_CLASS_PATH,
  RUNTIME_CLASS_PATH,
  RUNTIME_CLASS_POINTER,
  SANDBOX_API_GROUPS,
  SANDBOX_OWNER,
  SANDBOX_RESOURCES,
} from './agent-sandbox.js';
import { celOptionalString, celString, celStringList } from './cel.js';

export const ROLE_VALIDATION_ACTIONS = {
  enforce: ['Deny'],
  advisory: ['Warn', 'Audit'],
} as const;

export const TENANT_NAMESPACE_LABEL = 'kubernetes.io/metadata.name';

/**
 * The Agent Sandbox resources, one rule per known version in order of preference, matched with
 * `Equivalent`: a request at any other version of the same resource — one served today or added
 * tomorrow — is converted by the API server (the CRD's own conversion) to the first listed
 * version it can reach and judged there, so a new version can neither bypass the policy nor move
 * `runtimeClassName` out of its sight (DESIGN.md, "Admission policies").
 *
 * `pods`: the validating policies also match core Pods (CREATE and UPDATE), and the two Pod
 * subresources through which a Pod's labels can change (issue 36): `pods/status` UPDATE (its
 * strategy resets the spec and the owner references but keeps metadata.labels as sent) and
 * `pods/binding` CREATE (Kubernetes 1.33+ with PodTopologyLabelsAdmission, on by default from
 * 1.35, copies ALL of a Binding's labels onto its Pod), with its older spelling, the namespace's
 * `bindings` CREATE (the same storage; admitted as its own resource). Which of these requests are judged is the
 * matchCondition's choice (`SANDBOX_POD_CONDITION`): of the kubelet's constant status writes only
 * one that adds or changes an adoption label. The other Pod subresources cannot change labels
 * (`pods/ephemeralcontainers` and `pods/resize` reset the metadata to the stored Pod's), and a
 * Pod's `spec.runtimeClassName` cannot change at all: the API server's Pod update validation
 * (ValidatePodUpdate, pkg/apis/core/validation) refuses any spec change but a few fields, which
 * this does not re-implement.
 */
export function matchConstraints(operations: readonly string[], pods = false): V1MatchResources {
  const sandboxRules = SANDBOX_RESOURCES.flatMap((r) =>
    r.versions.map((version) => ({
      apiGroups: [r.group],
      apiVersions: [version],
      resources: [r.resource],
      operations: [...operations],
      scope: 'Namespaced',
    })),
  );
  const podRule = (resource: string, ops: readonly string[]) => ({
    apiGroups: [''],
    apiVersions: ['v1'],
    resources: [resource],
    operations: [...ops],
    scope: 'Namespaced',
  });
  const podRules = pods
    ? [
        podRule('pods', operations),
        ...(operations.includes('UPDATE') ? [podRule('pods/status', ['UPDATE'])] : []),
        ...(operations.includes('CREATE')
          ? [podRule('pods/binding', ['CREATE']), podRule('bindings', ['CREATE'])]
          : []),
      ]
    : [];
  return {
    resourceRules: [...sandboxRules, ...podRules],
    matchPolicy: 'Equivalent',
    // Empty values here are asserted: an added selector or exclusion is drift and is reverted.
    namespaceSelector: {},
    objectSelector: {},
    excludeResourceRules: [],
  };
}

/** CEL: the request is for a core Pod: the Pod itself or one of its subresources (`SUB_RESOURCE`). */
export const IS_POD = "request.resource.group == '' && request.resource.resource == 'pods'";

/**
 * CEL: the request's subresource, `''` for the object itself. Guarded: the API server hands the
 * request to CEL as unstructured data, from which an empty `subResource` is omitted.
 */
export const SUB_RESOURCE = "(has(request.subResource) ? request.subResource : '')";

/**
 * CEL: a Binding CREATE, through `pods/binding` or the legacy `bindings` resource; `object` is then
 * the Binding (its name is the Pod's), not the Pod.
 */
export const IS_BINDING =
  `request.resource.group == '' && (request.resource.resource == 'bindings' || ` +
  `(request.resource.resource == 'pods' && ${SUB_RESOURCE} == 'binding'))`;

const SANDBOX_RESOURCE = SANDBOX_RESOURCES.find((r) => r.kind === SANDBOX_OWNER.kind);

/** CEL: the request is for a Sandbox (any version; its status subresource is not matched). */
export const IS_SANDBOX = `request.resource.group == ${celString(SANDBOX_OWNER.group)} && request.resource.resource == ${celString(SANDBOX_RESOURCE?.resource ?? 'sandboxes')}`;

/** CEL: the labels of `obj` (`object` or `oldObject`), `{}` when it has none. */
function labelsOf(obj: string): string {
  return `(has(${obj}.metadata.labels) ? ${obj}.metadata.labels : {})`;
}

/** CEL: `obj` (a Pod, or a Binding) carries one of the labels that let the controller adopt a Pod. */
function carriesAdoptionLabel(obj: string): string {
  return `(has(${obj}.metadata.labels) && ${celStringList(ADOPTION_LABELS)}.exists(k, k in ${obj}.metadata.labels))`;
}

/**
 * CEL, for an UPDATE: `object` carries an adoption label that `oldObject` did not carry, or with
 * another value (re-labelled for another Sandbox). Removing one is not a change that matters: it
 * makes no Pod adoptable. Two map lookups per label: cheap enough for every kubelet status write.
 */
export const ADOPTION_LABEL_ADDED_OR_CHANGED =
  `${celStringList(ADOPTION_LABELS)}.exists(k, k in ${labelsOf('object')} && ` +
  `!(k in ${labelsOf('oldObject')} && ${labelsOf('oldObject')}[k] == ${labelsOf('object')}[k]))`;

/**
 * CEL: the Pod is, or can become, a Sandbox's Pod (`agent-sandbox.ts`, `SANDBOX_OWNER`,
 * `SANDBOX_API_GROUPS`): it has an owner reference into Agent Sandbox's API groups — whatever its
 * kind or version, since the controller decides by the owner's UID alone — or carries a label that
 * lets the controller adopt it. A Pod whose owner reference names another group with a Sandbox's
 * UID is judged when the controller, having found it, adds its tracking label (an UPDATE that adds
 * an adoption label).
 */
const OWNED_IN_SANDBOX_GROUPS = SANDBOX_API_GROUPS.map((g) => `r.apiVersion.startsWith(${celString(`${g}/`)})`).join(
  ' || ',
);
export const SANDBOX_POD_EXPRESSION =
  `(has(object.metadata.ownerReferences) && object.metadata.ownerReferences.exists(r, ${OWNED_IN_SANDBOX_GROUPS})) || ` +
  carriesAdoptionLabel('object');

/**
 * The validating policies' one matchCondition: every Sandbox and SandboxTemplate request; of the
 * Pod writes, those that are or can become a Sandbox's Pod — a Sandbox judged compliant could
 * otherwise be backed by a weaker Pod the tenant made (the controller adopts it as it is); of the
 * `pods/status` writes (the kubelet's, constantly), only one adding or changing an adoption label
 * — judged then like a Pod UPDATE —; of the Binding CREATEs (the scheduler's), only one carrying
 * an adoption label, which is refused (no scheduler sets one).
 */
export const SANDBOX_POD_CONDITION = {
  name: 'sandbox-objects-and-sandbox-pods',
  expression:
    `(${IS_BINDING}) ? ${carriesAdoptionLabel('object')} : ` +
    `(!(${IS_POD}) || (${SUB_RESOURCE} == '' ? (${SANDBOX_POD_EXPRESSION}) : ` +
    `(${SUB_RESOURCE} == 'status' && ${ADOPTION_LABEL_ADDED_OR_CHANGED})))`,
} as const;

export function tenantMatch(tenantNamespace: string): V1MatchResources {
  return {
    namespaceSelector: { matchLabels: { [TENANT_NAMESPACE_LABEL]: tenantNamespace }, matchExpressions: [] },
    objectSelector: {},
    resourceRules: [],
    excludeResourceRules: [],
  };
}

/**
 * CEL: `object` and `oldObject` without their static types (variables `untypedObject`,
 * `untypedOldObject`). The API server type-checks every expression against each kind the policy
 * matches, a Binding (the `bindings` resource) included, which has no `spec`: each `spec` access
 * would be a type-checking warning on the policy, although the `has()` guards make it safe at run
 * time. Reading `spec` through these keeps the policy's status free of warnings.
 */
export const UNTYPED_OBJECT = 'variables.untypedObject';
export const UNTYPED_OLD_OBJECT = 'variables.untypedOldObject';

/** CEL: the runtime class of `root` (`UNTYPED_OBJECT` or `UNTYPED_OLD_OBJECT`), a Pod's or a Sandbox's template's; `''` when unset. */
export function runtimeClassOf(root: string): string {
  return `${IS_POD} ? (${celOptionalString(root, POD_RUNTIME_CLASS_PATH)}) : (${celOptionalString(root, RUNTIME_CLASS_PATH)})`;
}

/** The CEL variables of every validating policy: the runtime class judged, who is judged, and whether it is unchanged. */
export function baseValidationVariables(): V1Variable[] {
  return [
    // Safe at run time before the rest: dyn() only drops the static type (see UNTYPED_OBJECT).
    { name: 'untypedObject', expression: 'dyn(object)' },
    { name: 'untypedOldObject', expression: 'dyn(oldObject)' },
    { name: 'runtimeClassName', expression: runtimeClassOf(UNTYPED_OBJECT) },
    {
      // Who is judged, as the messages name it: the Sandbox's kind as before; a Pod by name, with why.
      name: 'subject',
      expression: `${IS_POD} ? ${celString('Pod ')} + (has(object.metadata.name) ? object.metadata.name : '') + ${celString(" (it is, or can become, a Sandbox's Pod):")} : object.kind`,
    },
    {
      name: 'runtimeClassField',
      expression: `${IS_POD} ? 'spec.runtimeClassName' : ${celString(RUNTIME_CLASS_PATH.join('.'))}`,
    },
    {
      // On UPDATE an unchanged runtime class is never judged again: tightening the minimum
      // is not retroactive for Sandboxes that already exist (their controller keeps writing
      // status and annotations). Unless the UPDATE gives the object a new owner: adopting it
      // (a SandboxClaim taking a warm-pool Sandbox, a warm pool taking an orphan, a Sandbox
      // taking a Pod) hands it to someone new, so it is judged like a new object, and a Sandbox
      // or Pod left weaker than the minimum by a tightening is never handed out again. Nor when
      // it gives a Pod a label that lets the controller adopt it (through the Pod or its
      // `pods/status`). Dropping an owner (orphaning) is not judged.
      name: 'unchanged',
      expression:
        `request.operation == 'UPDATE' && (${runtimeClassOf(UNTYPED_OLD_OBJECT)}) == variables.runtimeClassName && ` +
        `(has(object.metadata.ownerReferences) ? object.metadata.ownerReferences : []).all(r, ` +
        `(has(oldObject.metadata.ownerReferences) ? oldObject.metadata.ownerReferences : []).exists(o, o.uid == r.uid)) && ` +
        `(!(${IS_POD}) || !(${ADOPTION_LABEL_ADDED_OR_CHANGED}))`,
    },
    {
      // A Binding names a Pod and a node; it has no runtime class of its own to judge (its Pod's
      // is judged on the Pod's own writes): only its labels are (`BINDING_VALIDATION`).
      name: 'binding',
      expression: IS_BINDING,
    },
    {
      // Issue 36, class-change laundering: a Sandbox's runtime class changed by an UPDATE. Its Pod
      // keeps the class it started with: the controller never updates an existing Pod's spec, and
      // a Pod's runtimeClassName is immutable anyway (ValidatePodUpdate). A SandboxTemplate's class
      // may change: a template runs nothing, and each Sandbox stamped from it is judged at its own
      // CREATE; the change itself is judged by the allowed classes like a new template.
      name: 'sandboxRuntimeClassChanged',
      expression: `request.operation == 'UPDATE' && ${IS_SANDBOX} && (${runtimeClassOf(UNTYPED_OLD_OBJECT)}) != variables.runtimeClassName`,
    },
  ];
}

/** CEL: `runtimeClassName` quoted for a message, `unset` when empty. */
function quotedClass(cel: string): string {
  return `(${cel} == '' ? 'unset' : '"' + ${cel} + '"')`;
}

/**
 * The validations every validating policy starts with, whatever its layout or minimum: a
 * Sandbox's runtime class cannot change, and a Binding may not carry an adoption label. Then come
 * the layout's runtime-class checks, which skip Bindings (`variables.binding`).
 */
export function baseValidations(): V1Validation[] {
  return [
    {
      expression: '!variables.sandboxRuntimeClassChanged',
      message:
        "a Sandbox's runtime class cannot change: its Pod keeps the runtime class it started with; delete and re-create the Sandbox to change it (kubeplus.io/sandbox-isolation)",
      messageExpression:
        `${celString('Sandbox ')} + (has(object.metadata.name) ? object.metadata.name : '') + ` +
        `${celString(' runtimeClassName cannot change from ')} + ${quotedClass(`(${runtimeClassOf(UNTYPED_OLD_OBJECT)})`)} + ` +
        `${celString(' to ')} + ${quotedClass('variables.runtimeClassName')} + ` +
        celString(
          ": its Pod keeps the runtime class it started with (the Agent Sandbox controller never changes an existing Pod's spec, and a Pod's runtimeClassName is immutable), so the Sandbox would name a class its Pod does not run; delete and re-create the Sandbox to change its runtime class (kubeplus.io/sandbox-isolation)",
        ),
      reason: 'Forbidden',
    },
    {
      expression: `!variables.binding || !${carriesAdoptionLabel('object')}`,
      message: `a Binding may not carry ${ADOPTION_LABELS.join(' or ')}: it would copy the label onto its Pod, letting the Agent Sandbox controller adopt it unjudged (kubeplus.io/sandbox-isolation)`,
      messageExpression:
        `${celString('Binding of Pod ')} + (has(object.metadata.name) ? object.metadata.name : '') + ` +
        celString(
          ` carries the label ${ADOPTION_LABELS.join(' or ')}: a Binding's labels are copied onto its Pod (Kubernetes 1.33+, PodTopologyLabelsAdmission), and these would let the Agent Sandbox controller adopt the Pod without its runtime class being judged; no scheduler sets them: label the Pod itself (kubeplus.io/sandbox-isolation)`,
        ),
      reason: 'Forbidden',
    },
  ];
}

/**
 * CEL: the UPDATE hands the object out — the same cases `unchanged` judges again whatever the
 * class: it gives the object an owner UID it did not have (a SandboxClaim adopting a warm-pool
 * Sandbox, a warm pool taking an orphan, a Sandbox taking a Pod), or (Pods) adds or changes a
 * label that lets the controller adopt it. Such an object must also have been created after its
 * class got its current handler (`handoutValidation`).
 */
export function handedOutExpression(): string {
  const ownersOf = (obj: string): string =>
    `(has(${obj}.metadata.ownerReferences) ? ${obj}.metadata.ownerReferences : [])`;
  const labelsOf = (obj: string): string => `(has(${obj}.metadata.labels) ? ${obj}.metadata.labels : {})`;
  return (
    `request.operation == 'UPDATE' && (` +
    `!${ownersOf('object')}.all(r, ${ownersOf('oldObject')}.exists(o, o.uid == r.uid)) || ` +
    `(${IS_POD} && !${celStringList(ADOPTION_LABELS)}.all(k, !(k in ${labelsOf('object')}) || ` +
    `(k in ${labelsOf('oldObject')} && ${labelsOf('oldObject')}[k] == ${labelsOf('object')}[k]))))`
  );
}

/**
 * CEL variables of the hand-out check, given `since`: a CEL expression of the map from each
 * allowed class to the time it got its current handler (the parameter's
 * `allowedRuntimeClassesSince`, or the per-instance policy's constant); `present`, a CEL
 * condition that it exists (a parameter written before the field existed lacks it: then no time
 * is known, and nothing is handed out).
 *
 * - `handedOut`: `handedOutExpression`;
 * - `classSince`: the time the object's class got its current handler, `''` when not known (a
 *   class the operator is about to re-create: nothing of it is handed out until it is known);
 * - `startedAfterHandler`: the object (as stored: `oldObject`, whose creationTimestamp no client
 *   can change) was created STRICTLY after that time. creationTimestamps have whole seconds: an
 *   object created in the same second as its class may have started under the previous handler,
 *   so equal counts as before — the safe side (such an object is re-created, never handed out).
 */
export function handoutVariables(since: string, present?: string): V1Variable[] {
  const guard = present === undefined ? '' : `${present} && `;
  return [
    { name: 'handedOut', expression: handedOutExpression() },
    {
      name: 'classSince',
      expression: `${guard}variables.runtimeClassName in ${since} ? string(${since}[variables.runtimeClassName]) : ''`,
    },
    {
      name: 'startedAfterHandler',
      expression:
        "request.operation == 'UPDATE' && variables.classSince != '' && has(oldObject.metadata.creationTimestamp) && " +
        'timestamp(oldObject.metadata.creationTimestamp) > timestamp(variables.classSince)',
    },
  ];
}

/**
 * CEL: the message of a refused hand-out, up to the requirement sentence `requirement` (a CEL
 * string expression) that every message of the policies ends with.
 */
export function handoutMessage(requirement: string): string {
  const who = `(${IS_POD} ? 'Pod ' : object.kind + ' ') + (has(object.metadata.name) ? object.metadata.name : '')`;
  return (
    `${who} + (variables.classSince == '' ? ` +
    `${celString(' is not handed out while RuntimeClass "')} + variables.runtimeClassName + ${celString('" is being re-created with a new handler (the time it got it is not known yet); try again shortly')} : ` +
    `${celString(' was created before RuntimeClass "')} + variables.runtimeClassName + ${celString('" got its current handler (')} + variables.classSince + ` +
    `${celString('), so it may run the old one; it is not handed out: delete it so that it is re-created')}) + '; ' + ${requirement}`
  );
}

/** What the API server says of a refused hand-out when its messageExpression cannot be evaluated. */
export const HANDOUT_FALLBACK_MESSAGE =
  'the Sandbox or Pod was created before its RuntimeClass got its current handler, so it may run the old one; it is not handed out (kubeplus.io/sandbox-isolation)';

/** matchCondition: the Pod template exists but names no runtime class. */
export const DEFAULT_MATCH_CONDITIONS = [
  {
    name: 'pod-template-present',
    expression: 'has(object.spec) && has(object.spec.podTemplate) && has(object.spec.podTemplate.spec)',
  },
  {
    name: 'runtime-class-unset',
    expression: `!has(object.spec.podTemplate.spec.runtimeClassName) || object.spec.podTemplate.spec.runtimeClassName == ''`,
  },
] as const;

/** The JSON Patch mutation setting the runtime class. */
export function defaultingMutation(runtimeClass: string): string {
  return `[JSONPatch{op: "add", path: ${celString(RUNTIME_CLASS_POINTER)}, value: ${celString(runtimeClass)}}]`;
}
