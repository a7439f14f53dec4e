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
 * Which Sandboxes fall short of that minimum is judged by `findWeakSandboxes` in packages/spec
 * (weak-sandboxes.ts), which the command-line tool's `explain` shares.
 */
import {
  compareLevels,
  DEFAULT_HANDLER_LEVELS,
  type HandlerLevels,
  levelOfHandler,
  parseSandboxIsolation,
  type RuntimeLevel,
  runtimeClassName,
} from '@kubeplus-isolation/spec';
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
