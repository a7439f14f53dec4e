/**
 * Sandbox isolation in the shared policy layout (`--sandbox-policy-layout shared`): the same
 * decisions as the per-instance layout (`sandbox-policy.ts`), written as
 *
 * - ONE ValidatingAdmissionPolicy `kubeplus-isolation-sandbox` and, where the cluster serves it,
 *   ONE MutatingAdmissionPolicy `kubeplus-isolation-sandbox-default`, owned by no instance and
 *   parameterised by a SandboxIsolation object (`sharedSandboxPolicies`);
 * - per instance: its RuntimeClass (unchanged), its cluster-scoped SandboxIsolation parameter
 *   (minimum, allowed classes, recommended and default class) and its binding(s), scoped to its
 *   tenant namespace and naming that parameter.
 *
 * Why: the API server compiles and keeps every policy (~1.4 MiB each measured at 3,000 tenants),
 * the controller-manager type-checks each, and every matching request is checked against each
 * policy's match rules. Bindings and parameters are small data: with N tenants the cluster holds
 * one or two compiled policies instead of N (docs/benchmarks.md §5).
 *
 * Fail closed: a binding whose parameter is missing (deleted, not written yet) denies under
 * enforce (`parameterNotFoundAction: Deny`) and warns in advisory mode. The parameter is
 * cluster-scoped, so a tenant with rights only in its namespace can neither read nor change it.
 *
 * Pure and deterministic.
 */
import {
  MANAGED_BY_LABEL,
  MANAGED_BY_VALUE,
  policyName,
  type RuntimeLevel,
  SANDBOX_ISOLATION_PARAMS_API_VERSION,
  SANDBOX_ISOLATION_PARAMS_KIND,
  SHARED_SANDBOX_DEFAULT_POLICY_NAME,
  SHARED_SANDBOX_POLICY_COMPONENT,
  SHARED_SANDBOX_POLICY_NAME,
  sandboxParamsName,
} from '@kubeplus-isolation/spec';
import type {
  V1MutatingAdmissionPolicy,
  V1MutatingAdmissionPolicyBinding,
  V1ValidatingAdmissionPolicy,
  V1ValidatingAdmissionPolicyBinding,
  V1Validation,
  V1Variable,
} from '@kubernetes/client-node';
import { RUNTIME_CLASS_POINTER } from './agent-sandbox.js';
import { celString } from './cel.js';
import { type ManagedObject, type MutatingPolicyApiVersion, VALIDATING_POLICY_API_VERSION } from './objects.js';
import { type OwnerFields, ownerAnnotations, ownerLabels } from './owner.js';
import {
  baseValidations,
  baseValidationVariables,
  DEFAULT_MATCH_CONDITIONS,
  HANDOUT_FALLBACK_MESSAGE,
  handoutMessage,
  handoutVariables,
  matchConstraints,
  ROLE_VALIDATION_ACTIONS,
  SANDBOX_POD_CONDITION,
  tenantMatch,
} from './sandbox-admission.js';

/** The body of a SandboxIsolation parameter: every value always set, so a stale one is drift. */
export interface SandboxIsolationParamsSpec {
  tenantNamespace: string;
  minRuntimeClass: RuntimeLevel;
  enforce: boolean;
  /** Names a Sandbox may use (sorted); empty for minimum runc, where any class is allowed. */
  allowedRuntimeClasses: string[];
  /** The class the denial messages recommend; '' when none meets the minimum. */
  recommendedRuntimeClass: string;
  /** The class advisory mode fills in for an unset one; '' when it fills in none. */
  defaultRuntimeClass: string;
  /**
   * For each allowed class, when it got its current handler (its creationTimestamp, RFC 3339:
   * `class-since.ts`), `''` while not known; empty for minimum runc. What the policy hands out
   * must have been created strictly after it.
   */
  allowedRuntimeClassesSince: Record<string, string>;
}

/** The labels the shared policies carry: the operator's, and no instance's. */
export function sharedPolicyLabels(): Record<string, string> {
  return { [MANAGED_BY_LABEL]: MANAGED_BY_VALUE, 'app.kubernetes.io/component': SHARED_SANDBOX_POLICY_COMPONENT };
}

/** Whether `name` is one of the shared policies' names. */
export function isSharedPolicyName(name: string): boolean {
  return name === SHARED_SANDBOX_POLICY_NAME || name === SHARED_SANDBOX_DEFAULT_POLICY_NAME;
}

/** Whether an object's labels mark it as one of the shared policies (the operator's, no instance's). */
export function isSharedPolicy(labels: Readonly<Record<string, string>> | undefined): boolean {
  return (
    labels?.[MANAGED_BY_LABEL] === MANAGED_BY_VALUE &&
    labels['app.kubernetes.io/component'] === SHARED_SANDBOX_POLICY_COMPONENT
  );
}

const PARAM_KIND = { apiVersion: SANDBOX_ISOLATION_PARAMS_API_VERSION, kind: SANDBOX_ISOLATION_PARAMS_KIND };

/** CEL: the requirement sentence of the messages, as the per-instance policies word it. */
const REQUIREMENT =
  `${celString('namespace "')} + params.spec.tenantNamespace + ${celString('" requires sandbox runtime ')} + ` +
  `params.spec.minRuntimeClass + ${celString(' or stronger (kubeplus.io/sandbox-isolation)')}`;

/** CEL: the hint of the messages: the recommended class, or that none exists. */
const HINT =
  `params.spec.recommendedRuntimeClass == '' ? ` +
  `${celString('no RuntimeClass in the cluster meets it; ask the platform team for one whose handler is ')} + params.spec.minRuntimeClass : ` +
  `${celString('use runtimeClassName "')} + params.spec.recommendedRuntimeClass + '"'`;

/** The shared validating policy's variables: the per-instance ones, plus the message parts read from the parameter. */
export function sharedValidationVariables(): V1Variable[] {
  return [
    ...baseValidationVariables(),
    { name: 'requirement', expression: REQUIREMENT },
    { name: 'hint', expression: HINT },
    ...handoutVariables('params.spec.allowedRuntimeClassesSince', 'has(params.spec.allowedRuntimeClassesSince)'),
  ];
}

/**
 * The same checks as the per-instance policies' (`validations`), with the same messages: the
 * minimum, the allowed classes and the words come from the parameter. `message` is only what the
 * API server says when a messageExpression cannot be evaluated.
 */
export function sharedValidations(): V1Validation[] {
  return [
    ...baseValidations(),
    {
      expression: "variables.binding || variables.unchanged || variables.runtimeClassName != ''",
      message: 'the runtime class is unset; this namespace requires a sandbox runtime (kubeplus.io/sandbox-isolation)',
      messageExpression: `variables.subject + ' ' + variables.runtimeClassField + ${celString(' is unset; ')} + variables.requirement + '; ' + variables.hint`,
      reason: 'Forbidden',
    },
    {
      expression:
        "variables.binding || variables.unchanged || variables.runtimeClassName == '' || params.spec.minRuntimeClass == 'runc' || " +
        'variables.runtimeClassName in params.spec.allowedRuntimeClasses',
      message:
        "the runtime class is not allowed in this namespace: its handler is weaker than the required sandbox runtime or unknown, or it is another instance's class (kubeplus.io/sandbox-isolation)",
      messageExpression:
        `variables.subject + ${celString(' runtimeClassName "')} + variables.runtimeClassName + ` +
        `${celString('" is not allowed here: its handler is weaker than ')} + params.spec.minRuntimeClass + ` +
        `${celString(" or unknown, or it is another instance's class; ")} + variables.requirement + '; ' + variables.hint`,
      reason: 'Forbidden',
    },
    {
      // Handed out (adopted, claimed): created after its class got its current handler. Only
      // allowed classes are judged here; an unset or weaker one is refused by the checks above.
      expression:
        "!variables.handedOut || variables.runtimeClassName == '' || params.spec.minRuntimeClass == 'runc' || " +
        '!(variables.runtimeClassName in params.spec.allowedRuntimeClasses) || variables.startedAfterHandler',
      message: HANDOUT_FALLBACK_MESSAGE,
      messageExpression: handoutMessage('variables.requirement'),
      reason: 'Forbidden',
    },
  ];
}

/**
 * The JSON Patch of the shared defaulting policy: the parameter's default class, when it names one
 * (typed as a string: the parameter's fields are dynamic to the CEL checker).
 */
export const SHARED_DEFAULTING_MUTATION =
  `params.spec.defaultRuntimeClass == '' ? [] : ` +
  `[JSONPatch{op: "add", path: ${celString(RUNTIME_CLASS_POINTER)}, value: string(params.spec.defaultRuntimeClass)}]`;

function sharedValidatingPolicy(): ManagedObject {
  const policy: V1ValidatingAdmissionPolicy = {
    apiVersion: VALIDATING_POLICY_API_VERSION,
    kind: 'ValidatingAdmissionPolicy',
    metadata: { name: SHARED_SANDBOX_POLICY_NAME, labels: sharedPolicyLabels() },
    spec: {
      paramKind: { ...PARAM_KIND },
      // Fail: an evaluation error denies under enforce and, bound [Warn, Audit], only warns in advisory mode.
      failurePolicy: 'Fail',
      matchConstraints: matchConstraints(['CREATE', 'UPDATE'], true),
      matchConditions: [{ ...SANDBOX_POD_CONDITION }],
      variables: sharedValidationVariables(),
      validations: sharedValidations(),
      auditAnnotations: [],
    },
  };
  return policy as unknown as ManagedObject;
}

function sharedMutatingPolicy(apiVersion: MutatingPolicyApiVersion): ManagedObject {
  const policy: V1MutatingAdmissionPolicy = {
    apiVersion,
    kind: 'MutatingAdmissionPolicy',
    metadata: { name: SHARED_SANDBOX_DEFAULT_POLICY_NAME, labels: sharedPolicyLabels() },
    spec: {
      paramKind: { ...PARAM_KIND },
      // Ignore: advisory mode must never block a Sandbox; if defaulting cannot run, the
      // advisory validating binding still warns about the unset class.
      failurePolicy: 'Ignore',
      matchConstraints: matchConstraints(['CREATE']),
      matchConditions: DEFAULT_MATCH_CONDITIONS.map((c) => ({ ...c })),
      variables: [],
      mutations: [{ patchType: 'JSONPatch', jsonPatch: { expression: SHARED_DEFAULTING_MUTATION } }],
      reinvocationPolicy: 'IfNeeded',
    },
  };
  return policy as unknown as ManagedObject;
}

/** The shared policies the cluster needs: the validating one, and the defaulting one where the API is served. */
export function sharedSandboxPolicies(mutatingVersion: MutatingPolicyApiVersion | undefined): ManagedObject[] {
  return mutatingVersion === undefined
    ? [sharedValidatingPolicy()]
    : [sharedValidatingPolicy(), sharedMutatingPolicy(mutatingVersion)];
}

function ownedMeta(instance: OwnerFields, name: string) {
  return { name, labels: ownerLabels(instance), annotations: ownerAnnotations(instance) };
}

/** One instance's SandboxIsolation parameter. */
export function sandboxParams(instance: OwnerFields, spec: SandboxIsolationParamsSpec): ManagedObject {
  return {
    ...PARAM_KIND,
    metadata: ownedMeta(instance, sandboxParamsName(instance)),
    spec: { ...spec },
  } as ManagedObject;
}

/** One instance's binding of the shared validating policy: its role's actions, its tenant namespace, its parameter. */
export function sharedValidatingBinding(
  instance: OwnerFields,
  role: 'enforce' | 'advisory',
  tenantNamespace: string,
): ManagedObject {
  const binding: V1ValidatingAdmissionPolicyBinding = {
    apiVersion: VALIDATING_POLICY_API_VERSION,
    kind: 'ValidatingAdmissionPolicyBinding',
    metadata: ownedMeta(instance, policyName(instance, role)),
    spec: {
      policyName: SHARED_SANDBOX_POLICY_NAME,
      // Deny: a governed namespace whose parameter is missing is refused (warned about in advisory mode).
      paramRef: { name: sandboxParamsName(instance), parameterNotFoundAction: 'Deny' },
      validationActions: [...ROLE_VALIDATION_ACTIONS[role]],
      matchResources: tenantMatch(tenantNamespace),
    },
  };
  return binding as unknown as ManagedObject;
}

/** One advisory instance's binding of the shared defaulting policy. */
export function sharedMutatingBinding(
  instance: OwnerFields,
  apiVersion: MutatingPolicyApiVersion,
  tenantNamespace: string,
): ManagedObject {
  const binding: V1MutatingAdmissionPolicyBinding = {
    apiVersion,
    kind: 'MutatingAdmissionPolicyBinding',
    metadata: ownedMeta(instance, policyName(instance, 'default')),
    spec: {
      policyName: SHARED_SANDBOX_DEFAULT_POLICY_NAME,
      // Allow: defaulting never blocks; without the parameter the validating binding still warns.
      paramRef: { name: sandboxParamsName(instance), parameterNotFoundAction: 'Allow' },
      matchResources: tenantMatch(tenantNamespace),
    },
  };
  return binding as unknown as ManagedObject;
}
