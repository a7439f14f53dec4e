/**
 * Variants of the node-isolation admission-policy engine (the chart's
 * deploy/kubeplus-isolation/files/node-isolation-engine.yaml), each one change to the shipped
 * MutatingAdmissionPolicy, to measure what each change buys (bench section `engine-trims`).
 * Pure: the shipped objects in, the variants' objects out. Every variant keeps the engine's
 * semantics (the webhook's merge: mandated nodeSelector keys win, a mandated toleration is
 * appended only when no toleration of the same identity is present); the bench checks that on
 * probe Pods before it measures.
 */
import type { KubernetesObject } from '@kubernetes/client-node';

export interface CelVariable {
  name: string;
  expression: string;
}

interface PolicySpec {
  paramKind?: unknown;
  variables?: CelVariable[];
  mutations: Array<{ patchType: string; jsonPatch?: { expression: string } }>;
  [k: string]: unknown;
}

export type EngineObject = KubernetesObject & { spec: PolicySpec & Record<string, unknown> };

export const VARIANTS = ['e', 'vars', 'ids', 'vars+ids', 'inline', 'limits'] as const;
export type Variant = (typeof VARIANTS)[number];

export const VARIANT_DESCRIPTIONS: Readonly<Record<Variant, string>> = {
  e: 'the shipped MutatingAdmissionPolicy, as section 3’s e',
  vars: 'fewer variables: the mandate read from `params.spec` where used (no `selector`/`tolerations` variables, no `has(params.spec)` guard: the CRD requires `spec`)',
  ids: 'cheaper toleration comparison: each toleration reduced once to an identity string (key, operator with empty = Equal, value, effect, tolerationSeconds), a mandated one missing when its string is not among the Pod’s: P + M string builds and P × M string compares instead of P × M five-field comparisons',
  'vars+ids': 'both changes',
  inline:
    'not a candidate: the mandate as CEL constants, no parameter (one policy per namespace would be needed), to show what the parameter costs',
  limits:
    'the engine as the chart installs it: e plus its 256-toleration cap ValidatingAdmissionPolicy bound to the same namespace (section 3’s e leaves the cap out)',
};

/** The identity string of toleration `t` (a CEL expression over the variable named `t`). */
export function tolerationIdentity(t: string): string {
  return (
    `(has(${t}.key) ? ${t}.key : '') + ' ' + ` +
    `(has(${t}.operator) && ${t}.operator == 'Exists' ? 'Exists' : 'Equal') + ' ' + ` +
    `(has(${t}.value) ? ${t}.value : '') + ' ' + ` +
    `(has(${t}.effect) ? ${t}.effect : '') + ' ' + ` +
    `(has(${t}.tolerationSeconds) ? string(${t}.tolerationSeconds) : '')`
  );
}

/** The shipped JSON patch's nodeSelector part, reading the mandated selector from `selector`. */
export function selectorPatch(selector: string): string {
  return (
    `(size(${selector}) == 0 ? [] : ` +
    `!has(object.spec.nodeSelector) ? [JSONPatch{op: "add", path: "/spec/nodeSelector", value: ${selector}}] : ` +
    `${selector}.filter(k, !(k in object.spec.nodeSelector) || object.spec.nodeSelector[k] != ${selector}[k])` +
    `.map(k, JSONPatch{op: "add", path: "/spec/nodeSelector/" + jsonpatch.escapeKey(k), value: ${selector}[k]}))`
  );
}

/** The shipped JSON patch's tolerations part, appending `missing`. */
export function tolerationsPatch(missing: string): string {
  return (
    `(size(${missing}) == 0 ? [] : ` +
    `!has(object.spec.tolerations) ? [JSONPatch{op: "add", path: "/spec/tolerations", value: ${missing}}] : ` +
    `${missing}.map(m, JSONPatch{op: "add", path: "/spec/tolerations/-", value: m}))`
  );
}

/** The patch with the mandated selector read from the parameter where used (no variable). */
const PATCH_FROM_PARAMS = `(!has(params.spec.nodeSelector) ? [] : ${selectorPatch('params.spec.nodeSelector')}) + ${tolerationsPatch('variables.missingTolerations')}`;

const MISSING_BY_IDS = (tolerations: string): CelVariable[] => [
  {
    name: 'podTolerations',
    expression: `has(object.spec.tolerations) ? object.spec.tolerations.map(p, ${tolerationIdentity('p')}) : []`,
  },
  {
    name: 'missingTolerations',
    expression: `${tolerations}.filter(m, !(${tolerationIdentity('m')} in variables.podTolerations))`,
  },
];

/** The shipped expression of `name` among `variables` (so a variant keeps what it does not change). */
function shipped(variables: readonly CelVariable[], name: string): string {
  const v = variables.find((x) => x.name === name);
  if (v === undefined) throw new Error(`the shipped engine has no variable ${name}`);
  return v.expression;
}

/** `variables.tolerations` and `variables.selector` of the shipped `missingTolerations`, read from `params` instead. */
function withoutMandateVariables(expression: string): string {
  return expression
    .replaceAll('variables.tolerations', 'params.spec.tolerations')
    .replaceAll('variables.selector', 'params.spec.nodeSelector');
}

/** The CEL literal of a JSON value (maps and lists of strings and numbers: a mandate). */
export function celLiteral(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(celLiteral).join(', ')}]`;
  if (value !== null && typeof value === 'object')
    return `{${Object.entries(value)
      .map(([k, v]) => `${JSON.stringify(k)}: ${celLiteral(v)}`)
      .join(', ')}}`;
  return JSON.stringify(value);
}

/**
 * The objects of variant `variant`, named after it (`kubeplus-bench-engine-<variant>`), their
 * bindings selecting namespaces labelled `label=true`. `shippedObjects`: the engine file's
 * objects; `mandate`: the parameter's spec (used only by `inline`, which has no parameter).
 */
export function engineVariant(
  shippedObjects: readonly KubernetesObject[],
  variant: Variant,
  label: string,
  mandate: { nodeSelector: Record<string, string>; tolerations: readonly object[] },
): EngineObject[] {
  const find = (kind: string): EngineObject => {
    const obj = shippedObjects.find((o) => o.kind === kind);
    if (obj === undefined) throw new Error(`the shipped engine has no ${kind}`);
    return structuredClone(obj) as EngineObject;
  };
  const name = `kubeplus-bench-engine-${variant.replace('+', '-')}`;
  const policy = find('MutatingAdmissionPolicy');
  const binding = find('MutatingAdmissionPolicyBinding');
  const selectLabel = { namespaceSelector: { matchLabels: { [label]: 'true' } } };
  policy.metadata = { name };
  binding.metadata = { name };
  binding.spec.policyName = name;
  binding.spec.matchResources = selectLabel;
  const variables = policy.spec.variables ?? [];
  const mutation = policy.spec.mutations[0];
  if (mutation?.jsonPatch === undefined) throw new Error('the shipped engine has no JSONPatch mutation');
  switch (variant) {
    case 'e':
    case 'limits':
      break;
    case 'vars':
      policy.spec.variables = [
        {
          name: 'missingTolerations',
          expression: `!has(params.spec.tolerations) ? [] : ${withoutMandateVariables(shipped(variables, 'missingTolerations'))}`,
        },
      ];
      mutation.jsonPatch.expression = PATCH_FROM_PARAMS;
      break;
    case 'ids':
      policy.spec.variables = [
        { name: 'selector', expression: shipped(variables, 'selector') },
        { name: 'tolerations', expression: shipped(variables, 'tolerations') },
        ...MISSING_BY_IDS('variables.tolerations'),
      ];
      break;
    case 'vars+ids':
      policy.spec.variables = MISSING_BY_IDS('params.spec.tolerations').map((v) =>
        v.name === 'missingTolerations'
          ? { ...v, expression: `!has(params.spec.tolerations) ? [] : ${v.expression}` }
          : v,
      );
      mutation.jsonPatch.expression = PATCH_FROM_PARAMS;
      break;
    case 'inline':
      delete policy.spec.paramKind;
      delete binding.spec.paramRef;
      policy.spec.variables = [
        { name: 'selector', expression: celLiteral(mandate.nodeSelector) },
        // dyn: a literal list of string maps would type tolerationSeconds as a string.
        { name: 'tolerations', expression: `dyn(${celLiteral(mandate.tolerations)})` },
        { name: 'missingTolerations', expression: shipped(variables, 'missingTolerations') },
      ];
      break;
  }
  if (variant !== 'limits') return [policy, binding];
  const limits = find('ValidatingAdmissionPolicy');
  const limitsBinding = find('ValidatingAdmissionPolicyBinding');
  limits.metadata = { name: `${name}-limits` };
  limitsBinding.metadata = { name: `${name}-limits` };
  limitsBinding.spec.policyName = `${name}-limits`;
  limitsBinding.spec.matchResources = selectLabel;
  return [policy, binding, limits, limitsBinding];
}

/**
 * ApplyConfiguration forms of the merge, tried on the API server (bound, on a dry-run Pod) to learn
 * whether the engine can use one: the Pod's `nodeSelector` is an atomic map and its `tolerations`
 * an atomic list, so a configuration must carry each whole (the Pod's entries plus the mandated
 * ones); `+` on maps is what a union would need.
 */
export const APPLY_CONFIGURATION_PROBES: ReadonlyArray<{ name: string; expression: string }> = [
  {
    name: 'tolerations',
    expression:
      'Object{spec: Object.spec{tolerations: (has(object.spec.tolerations) ? object.spec.tolerations : []) + params.spec.tolerations}}',
  },
  { name: 'selector', expression: 'Object{spec: Object.spec{nodeSelector: params.spec.nodeSelector}}' },
  {
    name: 'selector-union',
    expression:
      'Object{spec: Object.spec{nodeSelector: (has(object.spec.nodeSelector) ? object.spec.nodeSelector : {}) + params.spec.nodeSelector}}',
  },
];

/** A MutatingAdmissionPolicy applying `expression`, failurePolicy Fail so that its error is the answer. */
export function applyConfigurationPolicy(name: string, expression: string): EngineObject {
  return {
    apiVersion: 'admissionregistration.k8s.io/v1',
    kind: 'MutatingAdmissionPolicy',
    metadata: { name },
    spec: {
      paramKind: { apiVersion: 'isolation.kubeplus.io/v1alpha1', kind: 'NodeIsolation' },
      matchConstraints: {
        resourceRules: [{ apiGroups: [''], apiVersions: ['v1'], operations: ['CREATE'], resources: ['pods'] }],
      },
      failurePolicy: 'Fail',
      reinvocationPolicy: 'Never',
      mutations: [{ patchType: 'ApplyConfiguration', applyConfiguration: { expression } }],
    },
  } as unknown as EngineObject;
}
