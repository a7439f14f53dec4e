/**
 * Sandboxes weaker than their namespace's current sandbox-isolation minimum. Pure.
 *
 * The validating policies judge a Sandbox's runtime class when it is created, and on UPDATE only
 * when the class changes (`sandbox-policy.ts` `validationVariables`, variable `unchanged`): raising
 * the minimum is not retroactive. A Sandbox admitted before the tightening keeps running on its
 * weaker class; this finds it, so the compliance report can name it.
 *
 * A namespace's minimum is the strongest of every `kubeplus.io/sandbox-isolation` bound to it
 * (every bound policy applies: `sandbox-peers.ts`). An invalid one counts with its last good
 * minimum: the operator keeps its policies and its RuntimeClass while it is invalid, and the
 * class's handler is that minimum's (`lastGoodMinimums`); one never valid binds nothing.
 *
 * A Sandbox falls short when its class is unset (every policy refuses that), or names a
 * RuntimeClass that does not exist or whose handler does not meet the minimum (an unknown handler
 * meets only `runc`). Whether the class is another
 * tenant's generated one is not judged here: only strength is.
 */
import {
  compareLevels,
  DEFAULT_HANDLER_LEVELS,
  type HandlerLevels,
  handlerMeetsMinimum,
  levelOfHandler,
  parseSandboxIsolation,
  type RuntimeLevel,
  runtimeClassName,
} from '@kubeplus-isolation/spec';
import { RUNTIME_CLASS_PATH } from '../../desired/agent-sandbox.js';
import { DEFAULT_PLATFORM_NAMESPACE, type InstanceIdentity, instanceIdentity } from '../../desired/instance.js';
import { type SandboxInstanceMeta, tenantOf } from '../../desired/sandbox-peers.js';
import type { RuntimeClassInfo } from '../../desired/sandbox-policy.js';

/** The sandbox isolation in force in one tenant namespace. */
export interface NamespaceSandboxPolicy {
  /** The strongest minimum of the instances bound to it. */
  minimum: RuntimeLevel;
  /** Whether any of them enforces (else every one is advisory). */
  enforce: boolean;
}

/** The last good minimum of an instance whose annotation is invalid; undefined when none is known. */
export type LastGoodMinimum = (instance: InstanceIdentity) => RuntimeLevel | undefined;

/**
 * Last good minimums, from the RuntimeClasses the operator generated: `kubeplus-sandbox-<instance>`
 * owned by the instance carries the handler of its minimum (`levelHandlers`), and is kept while
 * the annotation is invalid. A handler no level maps to is read by `handlerLevels`.
 */
export function lastGoodMinimums(
  classes: readonly RuntimeClassInfo[],
  levelHandlers: Readonly<Record<RuntimeLevel, string>>,
  handlerLevels: HandlerLevels = DEFAULT_HANDLER_LEVELS,
): LastGoodMinimum {
  const handlerOf = new Map<string, string>();
  for (const rc of classes) {
    if (rc.generated && rc.owner !== undefined && rc.name === runtimeClassName(rc.owner.name)) {
      handlerOf.set(instanceIdentity(rc.owner), rc.handler);
    }
  }
  const levelOf = new Map<string, RuntimeLevel>();
  for (const [level, handler] of Object.entries(levelHandlers) as Array<[RuntimeLevel, string]>) {
    if (!levelOf.has(handler)) levelOf.set(handler, level);
  }
  return (instance) => {
    const handler = handlerOf.get(instanceIdentity(instance));
    return handler === undefined ? undefined : (levelOf.get(handler) ?? levelOfHandler(handler, handlerLevels));
  };
}

/** What one instance binds: its annotation's policy, else (invalid) its last good minimum, mode unknown (advisory). */
function boundPolicy(instance: SandboxInstanceMeta, lastGood?: LastGoodMinimum): NamespaceSandboxPolicy | undefined {
  const parsed = parseSandboxIsolation(instance.annotation);
  if (parsed.ok) return { minimum: parsed.value.minRuntimeClass, enforce: parsed.value.enforce };
  const minimum = lastGood?.(instance);
  return minimum === undefined ? undefined : { minimum, enforce: false };
}

/**
 * The sandbox isolation in force in `namespace`, from every cached instance asking for it;
 * undefined when none is bound there.
 */
export function namespaceSandboxPolicy(
  instances: Iterable<SandboxInstanceMeta>,
  namespace: string,
  platformNamespace: string = DEFAULT_PLATFORM_NAMESPACE,
  lastGood?: LastGoodMinimum,
): NamespaceSandboxPolicy | undefined {
  let policy: NamespaceSandboxPolicy | undefined;
  for (const instance of instances) {
    if (tenantOf(instance, platformNamespace) !== namespace) continue;
    const bound = boundPolicy(instance, lastGood);
    if (bound === undefined) continue;
    policy =
      policy === undefined
        ? bound
        : {
            minimum: compareLevels(bound.minimum, policy.minimum) > 0 ? bound.minimum : policy.minimum,
            enforce: policy.enforce || bound.enforce,
          };
  }
  return policy;
}

/** The tenant namespaces with sandbox isolation bound, sorted. */
export function sandboxTenantNamespaces(
  instances: Iterable<SandboxInstanceMeta>,
  platformNamespace: string = DEFAULT_PLATFORM_NAMESPACE,
  lastGood?: LastGoodMinimum,
): string[] {
  const out = new Set<string>();
  for (const instance of instances) {
    const tenant = tenantOf(instance, platformNamespace);
    if (tenant !== undefined && boundPolicy(instance, lastGood) !== undefined) out.add(tenant);
  }
  return [...out].sort();
}

/** The parts of a Sandbox this reads; any other shape is tolerated. */
export interface SandboxLike {
  metadata?: { name?: string; uid?: string } | undefined;
  spec?: unknown;
}

export interface WeakSandbox {
  name: string;
  uid?: string;
  /** `''` when unset. */
  runtimeClassName: string;
  /** The RuntimeClass's handler; undefined when the class is unset or does not exist. */
  handler?: string;
  /** The handler's level; undefined when unknown (or no handler). */
  level?: RuntimeLevel;
}

/** `spec.podTemplate.spec.runtimeClassName`, `''` when unset or not a string. */
export function runtimeClassOf(sandbox: SandboxLike): string {
  let at: unknown = sandbox;
  for (const key of RUNTIME_CLASS_PATH) {
    if (typeof at !== 'object' || at === null || Array.isArray(at)) return '';
    at = (at as Record<string, unknown>)[key];
  }
  return typeof at === 'string' ? at : '';
}

/** The Sandboxes among `sandboxes` that fall short of `minimum`, in input order; unnamed entries skipped. */
export function findWeakSandboxes(
  minimum: RuntimeLevel,
  sandboxes: readonly SandboxLike[],
  classes: readonly RuntimeClassInfo[],
  levels: HandlerLevels = DEFAULT_HANDLER_LEVELS,
): WeakSandbox[] {
  const byName = new Map(classes.map((rc) => [rc.name, rc]));
  const out: WeakSandbox[] = [];
  for (const sandbox of sandboxes) {
    const name = sandbox?.metadata?.name;
    if (typeof name !== 'string' || name === '') continue;
    const runtimeClassName = runtimeClassOf(sandbox);
    const rc = runtimeClassName === '' ? undefined : byName.get(runtimeClassName);
    const weak =
      runtimeClassName === '' ||
      (rc === undefined ? minimum !== 'runc' : !handlerMeetsMinimum(rc.handler, minimum, levels));
    if (!weak) continue;
    const uid = sandbox.metadata?.uid;
    const level = rc === undefined ? undefined : levelOfHandler(rc.handler, levels);
    out.push({
      name,
      ...(typeof uid === 'string' && uid !== '' ? { uid } : {}),
      runtimeClassName,
      ...(rc === undefined ? {} : { handler: rc.handler }),
      ...(level === undefined ? {} : { level }),
    });
  }
  return out;
}
