/**
 * Sandboxes weaker than their namespace's current sandbox-isolation minimum. Pure.
 *
 * The validating policies judge a Sandbox's runtime class when it is created, and on UPDATE only
 * when the class changes (`sandbox-policy.ts` `validationVariables`, variable `unchanged`): raising
 * the minimum is not retroactive. A Sandbox admitted before the tightening keeps running on its
 * weaker class; this finds it, so the compliance report can name it.
 *
 * A namespace's minimum is the strongest of every valid `kubeplus.io/sandbox-isolation` bound to
 * it (every bound policy applies: `sandbox-peers.ts`). A Sandbox falls short when its class is
 * unset (every policy refuses that), or names a RuntimeClass that does not exist or whose handler
 * does not meet the minimum (an unknown handler meets only `runc`). Whether the class is another
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
} from '@kubeplus-isolation/spec';
import { RUNTIME_CLASS_PATH } from '../../desired/agent-sandbox.js';
import { DEFAULT_PLATFORM_NAMESPACE } from '../../desired/instance.js';
import { type SandboxInstanceMeta, tenantOf } from '../../desired/sandbox-peers.js';
import type { RuntimeClassInfo } from '../../desired/sandbox-policy.js';

/** The sandbox isolation in force in one tenant namespace. */
export interface NamespaceSandboxPolicy {
  /** The strongest minimum of the instances bound to it. */
  minimum: RuntimeLevel;
  /** Whether any of them enforces (else every one is advisory). */
  enforce: boolean;
}

/**
 * The sandbox isolation in force in `namespace`, from every cached instance asking for it;
 * undefined when no valid one is bound there.
 */
export function namespaceSandboxPolicy(
  instances: Iterable<SandboxInstanceMeta>,
  namespace: string,
  platformNamespace: string = DEFAULT_PLATFORM_NAMESPACE,
): NamespaceSandboxPolicy | undefined {
  let policy: NamespaceSandboxPolicy | undefined;
  for (const instance of instances) {
    if (tenantOf(instance, platformNamespace) !== namespace) continue;
    const parsed = parseSandboxIsolation(instance.annotation);
    if (!parsed.ok) continue;
    const { minRuntimeClass, enforce } = parsed.value;
    policy =
      policy === undefined
        ? { minimum: minRuntimeClass, enforce }
        : {
            minimum: compareLevels(minRuntimeClass, policy.minimum) > 0 ? minRuntimeClass : policy.minimum,
            enforce: policy.enforce || enforce,
          };
  }
  return policy;
}

/** The tenant namespaces with sandbox isolation bound, sorted. */
export function sandboxTenantNamespaces(
  instances: Iterable<SandboxInstanceMeta>,
  platformNamespace: string = DEFAULT_PLATFORM_NAMESPACE,
): string[] {
  const out = new Set<string>();
  for (const instance of instances) {
    const tenant = tenantOf(instance, platformNamespace);
    if (tenant !== undefined && parseSandboxIsolation(instance.annotation).ok) out.add(tenant);
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
