/**
 * Sandbox isolation as cluster objects. Given one instance's `kubeplus.io/sandbox-isolation`
 * spec and the cluster's facts, computes the complete set of objects that must exist for it:
 *
 * - one RuntimeClass `kubeplus-sandbox-<instance>` carrying only `handler`, unless the spec names
 *   a platform class to use instead (`runtimeClassName`, `sandbox-platform-class.ts`);
 * - enforce: a ValidatingAdmissionPolicy + binding that deny (validationActions [Deny]);
 * - advisory: the same validation bound with [Warn, Audit], plus a MutatingAdmissionPolicy +
 *   binding that fills an unset runtime class, when the cluster serves that API.
 *
 * Pure and deterministic: the same input always gives deep-equal output.
 */

import {
  compareLevels,
  DEFAULT_HANDLER_LEVELS,
  DEFAULT_LEVEL_HANDLERS,
  type HandlerLevels,
  handlerMeetsMinimum,
  policyName,
  type RuntimeClassInfo,
  type RuntimeLevel,
  rfc3339Seconds,
  runtimeClassName,
  type SandboxIsolationSpec,
} from '@kubeplus-isolation/spec';
import type {
  V1MutatingAdmissionPolicy,
  V1MutatingAdmissionPolicyBinding,
  V1RuntimeClass,
  V1ValidatingAdmissionPolicy,
  V1ValidatingAdmissionPolicyBinding,
  V1Validation,
  V1Variable,
} from '@kubernetes/client-node';
import { celString, celStringList, celStringMap } from './cel.js';
import { allowedClassesSince } from './class-since.js';
import type { Instance, InstanceIdentity } from './instance.js';
import {
  type ManagedObject,
  type MutatingPolicyApiVersion,
  RUNTIME_CLASS_API_VERSION,
  VALIDATING_POLICY_API_VERSION,
} from './objects.js';
import { carriesOwnershipMarkers, type MetaLike, ownerAnnotations, ownerLabels, ownerOf } from './owner.js';
import {
  baseValidations,
  baseValidationVariables,
  DEFAULT_MATCH_CONDITIONS,
  defaultingMutation,
  HANDOUT_FALLBACK_MESSAGE,
  handoutMessage,
  handoutVariables,
  matchConstraints,
  ROLE_VALIDATION_ACTIONS,
  SANDBOX_POD_CONDITION,
  tenantMatch,
} from './sandbox-admission.js';
import { effectiveMinimum, type SandboxPeer, stricterPeers, tenantOf } from './sandbox-peers.js';
import { judgePlatformClass, type PlatformClassVerdict } from './sandbox-platform-class.js';
import {
  sandboxParams,
  sharedMutatingBinding,
  sharedSandboxPolicies,
  sharedValidatingBinding,
} from './sandbox-shared-policy.js';

export type { RuntimeClassInfo } from '@kubeplus-isolation/spec';
export {
  DEFAULT_MATCH_CONDITIONS,
  defaultingMutation,
  ROLE_VALIDATION_ACTIONS,
  SANDBOX_POD_CONDITION,
  SANDBOX_POD_EXPRESSION,
} from './sandbox-admission.js';

/** A RuntimeClass object (informer cache or API list item) as the decision needs it. */
export function runtimeClassInfo(rc: {
  metadata?: MetaLike & { name?: string | undefined; creationTimestamp?: unknown };
  handler?: unknown;
}): RuntimeClassInfo | undefined {
  const name = rc.metadata?.name;
  if (name === undefined || typeof rc.handler !== 'string') return undefined;
  const meta = rc.metadata ?? {};
  const generated = carriesOwnershipMarkers(meta);
  const owner = generated ? ownerOf(meta) : undefined;
  // When the name got this handler: the handler is immutable (`handler-since.ts`).
  const createdAt = rfc3339Seconds(rc.metadata?.creationTimestamp);
  return {
    name,
    handler: rc.handler,
    generated,
    ...(owner === undefined ? {} : { owner }),
    ...(createdAt === undefined ? {} : { createdAt }),
  };
}

export interface SandboxPolicyInput {
  instance: Pick<Instance, 'group' | 'kind' | 'namespace' | 'name' | 'uid'>;
  tenantNamespace: string;
  spec: SandboxIsolationSpec;
  /**
   * The RuntimeClasses that can matter to `tenantNamespace` (`classesForTenant`: the platform's and
   * those generated for that namespace's instances), from the informer cache's index. Any superset,
   * up to every class of the cluster, decides the same.
   */
  runtimeClasses: readonly RuntimeClassInfo[];
  handlerLevels?: HandlerLevels;
  levelHandlers?: Readonly<Record<RuntimeLevel, string>>;
  /** The MutatingAdmissionPolicy API version the cluster serves, if any. */
  mutatingPolicyApiVersion: MutatingPolicyApiVersion | undefined;
  /**
   * The name `kubeplus-sandbox-<instance>` is held by a RuntimeClass this instance does not own.
   * The operator then must not create or trust it: it is left out of the desired objects and is
   * judged like any other class — not allowed when another instance's markers are on it, allowed
   * when it is a platform class whose handler meets the minimum.
   */
  runtimeClassConflict?: boolean;
  /** The platform namespace (default `kubeplus`), to tell which tenant namespace a class's owner isolates. */
  platformNamespace?: string;
  /**
   * The other instances whose sandbox isolation is bound to the same tenant namespace
   * (`sandbox-peers.ts` `sandboxPeers`). Their generated classes are acceptable here when strong
   * enough; the strictest of them decides the recommended class.
   */
  peers?: readonly SandboxPeer[];
  /**
   * `per-instance` (the default): a policy and a binding of its own per instance, as the design
   * document describes. `shared`: the instance's binding and SandboxIsolation parameter, bound to
   * the cluster's one shared policy (`sandbox-shared-policy.ts`).
   */
  layout?: SandboxPolicyLayout;
}

/** How the admission policies are laid out (operator --sandbox-policy-layout). */
export const SANDBOX_POLICY_LAYOUTS = ['per-instance', 'shared'] as const;
export type SandboxPolicyLayout = (typeof SANDBOX_POLICY_LAYOUTS)[number];

export type SandboxCondition =
  /** Advisory mode, but no MutatingAdmissionPolicy API: unset runtime classes are only warned about. */
  | 'mutatingAdmissionPolicyUnavailable'
  /** Advisory mode, but no class to default to (own name held by another instance, none other meets the minimum). */
  | 'noDefaultRuntimeClass';

export interface SandboxPolicy {
  /** Every object of this instance that must exist, in apply order (RuntimeClass and parameter, policies, bindings). */
  objects: ManagedObject[];
  /** Shared layout: the cluster's shared policies, which must exist before the bindings (owned by no instance). */
  shared: ManagedObject[];
  runtimeClassName: string;
  handler: string;
  /** Names a Sandbox may use, sorted; for minimum runc every name is allowed and this is informational. */
  allowedRuntimeClasses: string[];
  /**
   * When each allowed class got its current handler (`class-since.ts`), '' while not known; empty at
   * minimum runc. What the policies hand out was created after it; the operator deletes warm-pool
   * Sandboxes created at or before it (`stale-warm-sandboxes.ts`).
   */
  allowedRuntimeClassesSince: Record<string, string>;
  /** The class users are told to use and advisory mode defaults to. */
  recommendedRuntimeClass: string | undefined;
  /**
   * The spec names a platform class (`runtimeClassName`): the verdict on it. Recommended (and
   * defaulted to) only when it has no `problem`; no class is generated either way.
   */
  platformRuntimeClass?: PlatformClassVerdict;
  conditions: SandboxCondition[];
  /** The minimum every Sandbox in the namespace must meet: the strongest of this instance's and its peers'. */
  effectiveMinimum: RuntimeLevel;
  /** Peers whose policy is stricter than this instance's (in minimum or mode): they govern the namespace too. */
  stricterPeers: SandboxPeer[];
}

/**
 * Names a Sandbox in the tenant namespace may use: every platform RuntimeClass (one without
 * kubeplus-isolation's markers) whose handler meets the minimum, every class generated for another
 * instance of the same tenant namespace (`sameTenant`) whose handler meets it, plus the instance's
 * own class (whose handler is chosen to meet it) unless something else holds that name. Sorted and
 * de-duplicated.
 *
 * A class generated for an instance of another namespace is never allowed, whatever its handler:
 * it belongs to another tenant, is deleted with that tenant, and is re-created with a weaker
 * handler when that tenant lowers its minimum — a Sandbox admitted with it would then run weaker
 * than this tenant's minimum. (It also keeps each list independent of how many tenants exist, so
 * a new tenant never rewrites the policies of the others.) A peer's class in the same namespace is
 * the same tenant's: all the namespace's policies apply to every Sandbox there anyway.
 */
export function allowedRuntimeClasses(
  classes: readonly RuntimeClassInfo[],
  min: RuntimeLevel,
  own: string,
  ownConflict: boolean,
  levels: HandlerLevels = DEFAULT_HANDLER_LEVELS,
  sameTenant: (owner: InstanceIdentity) => boolean = () => false,
): string[] {
  const names = new Set<string>();
  for (const rc of classes) {
    if (rc.name === own && !ownConflict) continue; // added below: its current handler may be about to change
    if (rc.generated && (rc.owner === undefined || !sameTenant(rc.owner))) continue; // another tenant's
    if (handlerMeetsMinimum(rc.handler, min, levels)) names.add(rc.name);
  }
  if (!ownConflict) names.add(own);
  return [...names].sort();
}

/**
 * The classes among `classes` that can matter to a sandbox policy of tenant namespace `tenant`:
 * every platform class, and the classes generated for instances whose policies bind that
 * namespace (the same tenant's). `allowedRuntimeClasses` never allows any other, and
 * `recommendedClass` picks only among allowed ones, so `desiredSandboxPolicy` decides the same
 * from this subset as from every class. The operator's RuntimeClass index answers it without
 * walking the cache (controllers/instances/runtime-class-index.ts).
 */
export function classesForTenant(
  classes: readonly RuntimeClassInfo[],
  tenant: string,
  platformNamespace?: string,
): RuntimeClassInfo[] {
  return classes.filter(
    (rc) => !rc.generated || (rc.owner !== undefined && tenantOf(rc.owner, platformNamespace) === tenant),
  );
}

/**
 * The class to recommend (and, in advisory mode, to default to), among the allowed ones: the
 * instance's own when its handler meets the namespace's effective minimum (the strongest of this
 * instance's and its peers'), else an allowed class that meets it — one whose handler is exactly
 * that minimum's preferred, a peer's generated class before a platform one; failing that, the
 * former rule for this instance's own minimum (own class, else exact handler, else the first).
 */
function recommendedClass(
  allowed: readonly string[],
  classes: readonly RuntimeClassInfo[],
  own: { name: string; handler: string; conflict: boolean },
  levelHandlers: Readonly<Record<RuntimeLevel, string>>,
  levels: HandlerLevels,
  min: RuntimeLevel,
  effectiveMin: RuntimeLevel,
): string | undefined {
  // The own class is generated to meet this instance's minimum, whatever the handler table says.
  const meets = (name: string, level: RuntimeLevel): boolean => {
    if (name === own.name && !own.conflict)
      return compareLevels(min, level) >= 0 || handlerMeetsMinimum(own.handler, level, levels);
    const handler = classes.find((rc) => rc.name === name)?.handler;
    return handler !== undefined && handlerMeetsMinimum(handler, level, levels);
  };
  const handlerOf = (name: string): string | undefined =>
    name === own.name && !own.conflict ? own.handler : classes.find((rc) => rc.name === name)?.handler;
  const generatedFirst = (name: string): number => (classes.find((rc) => rc.name === name)?.generated ? 0 : 1);
  const pick = (level: RuntimeLevel, ownFirst: boolean): string | undefined => {
    if (ownFirst && !own.conflict && meets(own.name, level)) return own.name;
    const ranked = allowed
      .filter((name) => meets(name, level))
      .sort((a, b) => generatedFirst(a) - generatedFirst(b) || a.localeCompare(b));
    return ranked.find((name) => handlerOf(name) === levelHandlers[level]) ?? ranked[0];
  };
  return pick(effectiveMin, true) ?? (own.conflict ? pick(min, false) : own.name);
}

function metadataFor(
  input: SandboxPolicyInput,
  name: string,
): { name: string; labels: Record<string, string>; annotations: Record<string, string> } {
  return { name, labels: ownerLabels(input.instance), annotations: ownerAnnotations(input.instance) };
}

function asManaged<T extends object>(obj: T): ManagedObject {
  return obj as unknown as ManagedObject;
}

/**
 * CEL variables of the per-instance validating policies: the shared ones, plus the allowed classes
 * and when each got its current handler (`since`, `class-since.ts`), as constants.
 */
export function validationVariables(
  min: RuntimeLevel,
  allowed: readonly string[],
  since: Readonly<Record<string, string>> = {},
): V1Variable[] {
  const vars = baseValidationVariables();
  if (min !== 'runc') {
    vars.push(
      { name: 'allowedRuntimeClasses', expression: celStringList(allowed) },
      { name: 'allowedRuntimeClassesSince', expression: celStringMap(since) },
      ...handoutVariables('variables.allowedRuntimeClassesSince'),
    );
  }
  return vars;
}

/**
 * The validations shared by the enforcing and the advisory policy: the ones every layout starts
 * with (`baseValidations`: a Sandbox's class cannot change, a Binding may not carry an adoption
 * label), then the runtime class's: set, and (above minimum runc) allowed.
 */
export function validations(
  min: RuntimeLevel,
  tenantNamespace: string,
  recommended: string | undefined,
): V1Validation[] {
  const requirement = `namespace ${JSON.stringify(tenantNamespace)} requires sandbox runtime ${min} or stronger (kubeplus.io/sandbox-isolation)`;
  const hint =
    recommended === undefined
      ? `no RuntimeClass in the cluster meets it; ask the platform team for one whose handler is ${min}`
      : `use runtimeClassName ${JSON.stringify(recommended)}`;
  const out: V1Validation[] = [
    ...baseValidations(),
    {
      expression: "variables.binding || variables.unchanged || variables.runtimeClassName != ''",
      message: `spec.podTemplate.spec.runtimeClassName is unset; ${requirement}; ${hint}`,
      messageExpression: `variables.subject + ' ' + variables.runtimeClassField + ${celString(` is unset; ${requirement}; ${hint}`)}`,
      reason: 'Forbidden',
    },
  ];
  if (min !== 'runc') {
    out.push({
      expression:
        "variables.binding || variables.unchanged || variables.runtimeClassName == '' || variables.runtimeClassName in variables.allowedRuntimeClasses",
      message: `spec.podTemplate.spec.runtimeClassName names a RuntimeClass that is not allowed here: its handler is weaker than ${min} or unknown, or it is another instance's class; ${requirement}; ${hint}`,
      messageExpression: `variables.subject + ${celString(' runtimeClassName "')} + variables.runtimeClassName + ${celString(`" is not allowed here: its handler is weaker than ${min} or unknown, or it is another instance's class; ${requirement}; ${hint}`)}`,
      reason: 'Forbidden',
    });
    out.push({
      // Handed out (adopted, claimed): created after its class got its current handler. Only
      // allowed classes are judged here; an unset or weaker one is refused by the checks above.
      expression:
        "!variables.handedOut || variables.runtimeClassName == '' || " +
        '!(variables.runtimeClassName in variables.allowedRuntimeClasses) || variables.startedAfterHandler',
      message: HANDOUT_FALLBACK_MESSAGE,
      messageExpression: handoutMessage(celString(requirement)),
      reason: 'Forbidden',
    });
  }
  return out;
}

function validatingPolicy(
  input: SandboxPolicyInput,
  role: 'enforce' | 'advisory',
  allowed: readonly string[],
  since: Readonly<Record<string, string>>,
  recommended: string | undefined,
): ManagedObject {
  const name = policyName(input.instance, role);
  const policy: V1ValidatingAdmissionPolicy = {
    apiVersion: VALIDATING_POLICY_API_VERSION,
    kind: 'ValidatingAdmissionPolicy',
    metadata: metadataFor(input, name),
    spec: {
      // Fail: an evaluation error denies under enforce and, bound [Warn, Audit], only warns in advisory mode.
      failurePolicy: 'Fail',
      matchConstraints: matchConstraints(['CREATE', 'UPDATE'], true),
      matchConditions: [{ ...SANDBOX_POD_CONDITION }],
      variables: validationVariables(input.spec.minRuntimeClass, allowed, since),
      validations: validations(input.spec.minRuntimeClass, input.tenantNamespace, recommended),
      auditAnnotations: [],
    },
  };
  return asManaged(policy);
}

function validatingBinding(input: SandboxPolicyInput, role: 'enforce' | 'advisory'): ManagedObject {
  const name = policyName(input.instance, role);
  const binding: V1ValidatingAdmissionPolicyBinding = {
    apiVersion: VALIDATING_POLICY_API_VERSION,
    kind: 'ValidatingAdmissionPolicyBinding',
    metadata: metadataFor(input, name),
    spec: {
      policyName: name,
      validationActions: [...ROLE_VALIDATION_ACTIONS[role]],
      matchResources: tenantMatch(input.tenantNamespace),
    },
  };
  return asManaged(binding);
}

function mutatingPolicy(input: SandboxPolicyInput, apiVersion: MutatingPolicyApiVersion, runtimeClass: string) {
  const name = policyName(input.instance, 'default');
  const policy: V1MutatingAdmissionPolicy = {
    apiVersion,
    kind: 'MutatingAdmissionPolicy',
    metadata: metadataFor(input, name),
    spec: {
      // Ignore: advisory mode must never block a Sandbox; if defaulting cannot run, the
      // advisory validating policy still warns about the unset class.
      failurePolicy: 'Ignore',
      matchConstraints: matchConstraints(['CREATE']),
      // matchConditions are evaluated in order with && semantics; the first guards the second.
      matchConditions: DEFAULT_MATCH_CONDITIONS.map((c) => ({ ...c })),
      variables: [],
      mutations: [{ patchType: 'JSONPatch', jsonPatch: { expression: defaultingMutation(runtimeClass) } }],
      // Another mutation clearing the field later in the chain gets it filled again.
      reinvocationPolicy: 'IfNeeded',
    },
  };
  return asManaged(policy);
}

function mutatingBinding(input: SandboxPolicyInput, apiVersion: MutatingPolicyApiVersion): ManagedObject {
  const name = policyName(input.instance, 'default');
  const binding: V1MutatingAdmissionPolicyBinding = {
    apiVersion,
    kind: 'MutatingAdmissionPolicyBinding',
    metadata: metadataFor(input, name),
    spec: { policyName: name, matchResources: tenantMatch(input.tenantNamespace) },
  };
  return asManaged(binding);
}

/** The complete desired object set of one instance's sandbox isolation. */
export function desiredSandboxPolicy(input: SandboxPolicyInput): SandboxPolicy {
  const levels = input.handlerLevels ?? DEFAULT_HANDLER_LEVELS;
  const levelHandlers = input.levelHandlers ?? DEFAULT_LEVEL_HANDLERS;
  const min = input.spec.minRuntimeClass;
  const conflict = input.runtimeClassConflict === true;
  const peers = input.peers ?? [];
  const rcName = runtimeClassName(input.instance.name);
  const handler = levelHandlers[min];
  const sameTenant = (owner: InstanceIdentity): boolean =>
    tenantOf(owner, input.platformNamespace) === input.tenantNamespace;
  // A platform class named instead: no class of its own; one generated before is pruned, never allowed meanwhile.
  const platformName = input.spec.runtimeClassName;
  const classes =
    platformName === undefined
      ? input.runtimeClasses
      : input.runtimeClasses.filter((rc) => !(rc.generated && rc.name === rcName));
  const ownAbsent = conflict || platformName !== undefined;
  const allowed = allowedRuntimeClasses(classes, min, rcName, ownAbsent, levels, sameTenant);
  const effectiveMin = effectiveMinimum(input.spec, peers);
  const platform =
    platformName === undefined
      ? undefined
      : judgePlatformClass(platformName, input.runtimeClasses, allowed, effectiveMin, levels);
  const recommended =
    platform === undefined
      ? recommendedClass(
          allowed,
          input.runtimeClasses,
          { name: rcName, handler, conflict },
          levelHandlers,
          levels,
          min,
          effectiveMin,
        )
      : platform.problem === undefined
        ? platform.name
        : undefined;
  // When each allowed class got its current handler: a hand-out must come after it (none at runc).
  const since =
    min === 'runc'
      ? {}
      : allowedClassesSince(allowed, input.runtimeClasses, {
          name: rcName,
          handler,
          conflict,
          instance: input.instance,
        });
  const objects: ManagedObject[] = [];
  const conditions: SandboxCondition[] = [];

  if (!ownAbsent) {
    const rc: V1RuntimeClass = {
      apiVersion: RUNTIME_CLASS_API_VERSION,
      kind: 'RuntimeClass',
      metadata: metadataFor(input, rcName),
      handler,
    };
    objects.push(asManaged(rc));
  }
  const shared: ManagedObject[] = [];
  const version = input.mutatingPolicyApiVersion;
  const role = input.spec.enforce ? 'enforce' : 'advisory';
  const defaulting = !input.spec.enforce && version !== undefined && recommended !== undefined;
  if (!input.spec.enforce) {
    if (version === undefined) conditions.push('mutatingAdmissionPolicyUnavailable');
    // An unusable platform class has its own Warning (sandbox-plan.ts), which says there is no default.
    else if (recommended === undefined && platform?.problem === undefined) conditions.push('noDefaultRuntimeClass');
  }
  if (input.layout === 'shared') {
    shared.push(...sharedSandboxPolicies(version));
    objects.push(
      sandboxParams(input.instance, {
        tenantNamespace: input.tenantNamespace,
        minRuntimeClass: min,
        enforce: input.spec.enforce,
        allowedRuntimeClasses: min === 'runc' ? [] : allowed,
        recommendedRuntimeClass: recommended ?? '',
        defaultRuntimeClass: defaulting ? (recommended ?? '') : '',
        allowedRuntimeClassesSince: since,
      }),
      sharedValidatingBinding(input.instance, role, input.tenantNamespace),
    );
    if (defaulting && version !== undefined) {
      objects.push(sharedMutatingBinding(input.instance, version, input.tenantNamespace));
    }
  } else {
    objects.push(validatingPolicy(input, role, allowed, since, recommended), validatingBinding(input, role));
    if (defaulting && version !== undefined && recommended !== undefined) {
      objects.push(mutatingPolicy(input, version, recommended), mutatingBinding(input, version));
    }
  }
  return {
    objects,
    shared,
    runtimeClassName: rcName,
    handler,
    allowedRuntimeClasses: allowed,
    allowedRuntimeClassesSince: since,
    recommendedRuntimeClass: recommended,
    ...(platform === undefined ? {} : { platformRuntimeClass: platform }),
    conditions,
    effectiveMinimum: effectiveMin,
    stricterPeers: stricterPeers(input.spec, peers),
  };
}
