/**
 * The admission-policy pieces every sandbox policy shares, whatever its layout (per instance or
 * shared, `sandbox-policy.ts`, `sandbox-shared-policy.ts`): which requests the policies match,
 * which Pods they judge, the CEL variables that read a request's runtime class, and advisory
 * mode's defaulting. Pure data and CEL text.
 */
import type { V1MatchResources, V1Variable } from '@kubernetes/client-node';
import {
  ADOPTION_LABELS,
  POD_RUNTIME_CLASS_PATH,
  RUNTIME_CLASS_PATH,
  RUNTIME_CLASS_POINTER,
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
 * `pods`: the validating policies also match core Pods (CREATE and UPDATE; never a subresource,
 * so the kubelet's status writes are not judged). Which Pods they judge is the `sandbox-pods`
 * matchCondition's choice (`SANDBOX_POD_CONDITION`).
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
  const podRules = pods
    ? [{ apiGroups: [''], apiVersions: ['v1'], resources: ['pods'], operations: [...operations], scope: 'Namespaced' }]
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

/** CEL: the request is for a core Pod. */
export const IS_POD = "request.resource.group == '' && request.resource.resource == 'pods'";

/** CEL: `obj` (a Pod) carries one of the labels that let the controller adopt it. */
function carriesAdoptionLabel(obj: string): string {
  return `(has(${obj}.metadata.labels) && ${celStringList(ADOPTION_LABELS)}.exists(k, k in ${obj}.metadata.labels))`;
}

/**
 * CEL: the Pod is, or can become, a Sandbox's Pod (`agent-sandbox.ts`, `SANDBOX_OWNER`): owned by
 * a Sandbox (any version of its group), or carrying a label that lets the controller adopt it.
 */
export const SANDBOX_POD_EXPRESSION =
  `(has(object.metadata.ownerReferences) && object.metadata.ownerReferences.exists(r, r.kind == ${celString(SANDBOX_OWNER.kind)} && r.apiVersion.startsWith(${celString(`${SANDBOX_OWNER.group}/`)}))) || ` +
  carriesAdoptionLabel('object');

/**
 * The validating policies' one matchCondition: every Sandbox and SandboxTemplate request, and of
 * the Pods only those that are or can become a Sandbox's Pod — a Sandbox judged compliant could
 * otherwise be backed by a weaker Pod the tenant made (the controller adopts it as it is).
 */
export const SANDBOX_POD_CONDITION = {
  name: 'sandbox-objects-and-sandbox-pods',
  expression: `!(${IS_POD}) || ${SANDBOX_POD_EXPRESSION}`,
} as const;

export function tenantMatch(tenantNamespace: string): V1MatchResources {
  return {
    namespaceSelector: { matchLabels: { [TENANT_NAMESPACE_LABEL]: tenantNamespace }, matchExpressions: [] },
    objectSelector: {},
    resourceRules: [],
    excludeResourceRules: [],
  };
}

/** CEL: the runtime class of `root` (`object` or `oldObject`), a Pod's or a Sandbox's template's; `''` when unset. */
export function runtimeClassOf(root: string): string {
  return `${IS_POD} ? (${celOptionalString(root, POD_RUNTIME_CLASS_PATH)}) : (${celOptionalString(root, RUNTIME_CLASS_PATH)})`;
}

/** The CEL variables of every validating policy: the runtime class judged, who is judged, and whether it is unchanged. */
export function baseValidationVariables(): V1Variable[] {
  const labelsOf = (obj: string): string => `(has(${obj}.metadata.labels) ? ${obj}.metadata.labels : {})`;
  return [
    { name: 'runtimeClassName', expression: runtimeClassOf('object') },
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
      // it gives a Pod a label that lets the controller adopt it. Dropping an owner (orphaning)
      // is not judged.
      name: 'unchanged',
      expression:
        `request.operation == 'UPDATE' && (${runtimeClassOf('oldObject')}) == variables.runtimeClassName && ` +
        `(has(object.metadata.ownerReferences) ? object.metadata.ownerReferences : []).all(r, ` +
        `(has(oldObject.metadata.ownerReferences) ? oldObject.metadata.ownerReferences : []).exists(o, o.uid == r.uid)) && ` +
        `(!(${IS_POD}) || ${celStringList(ADOPTION_LABELS)}.all(k, !(k in ${labelsOf('object')}) || ` +
        `(k in ${labelsOf('oldObject')} && ${labelsOf('oldObject')}[k] == ${labelsOf('object')}[k])))`,
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
