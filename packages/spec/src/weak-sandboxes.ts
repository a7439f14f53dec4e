/**
 * Sandboxes weaker than their namespace's current sandbox-isolation minimum. Pure.
 *
 * The validating policies judge a Sandbox's runtime class when it is created, and on UPDATE only
 * when the class changes (services/operator `desired/sandbox-policy.ts` `validationVariables`, variable `unchanged`): raising
 * the minimum is not retroactive. A Sandbox admitted before the tightening keeps running on its
 * weaker class; this finds it, so the compliance report can name it.
 *
 * A namespace's minimum is the strongest of every `kubeplus.io/sandbox-isolation` bound to it
 * (every bound policy applies: services/operator `desired/sandbox-peers.ts`). An invalid one counts with its last good
 * minimum: the operator keeps its policies and its RuntimeClass while it is invalid, and the
 * class's handler is that minimum's (`lastGoodMinimums`); one never valid binds nothing.
 *
 * A Sandbox falls short when its class is unset (every policy refuses that), or names a
 * RuntimeClass that does not exist or whose handler does not meet the minimum (an unknown handler
 * meets only `runc`). Whether the class is another tenant's generated one is not judged here:
 * only strength is.
 *
 * What runs is judged too, not only what the Sandbox asks for: the upstream controller adopts an
 * existing Pod as it is, so a Sandbox whose own class meets the minimum can be backed by a Pod on
 * a weaker one (adopted before the minimum was raised, or before the Pod policies existed). A
 * Sandbox's Pod is found as the controller decides it (v0.5.6+, v1.0.1 `checkOwnership`): a Pod
 * whose CONTROLLER owner reference carries the Sandbox's UID, whatever apiVersion, kind or name
 * that reference names — not by the `agents.x-k8s.io/pod-name` annotation or the Sandbox's name,
 * which only tell the controller where to look. (An unowned Pod there is not yet the Sandbox's:
 * the controller takes it only by an UPDATE adding itself as owner, which the policies judge.)
 * When such a Pod runs a class that falls short by the same rule, the Sandbox falls short, and
 * the finding names the Pod; of several (the controller then refuses to choose, but they all
 * run), the first that falls short.
 *
 * And what it started on: `RuntimeClass.handler` is immutable, so a class whose handler changed
 * was deleted and created again (the operator re-creates `kubeplus-sandbox-<instance>` when a
 * minimum is raised; a platform team may re-create its own class). A Sandbox's Pod created at or
 * before its class's current creationTimestamp may run the OLD handler under a name that now
 * meets the minimum (`handler-since.ts`): it falls short too, with reason
 * `started-before-class-handler`, naming the class and that time. What runs is judged: a Sandbox
 * whose Pod is not found runs nothing that could be old (the Pod its controller makes next gets
 * the current handler), so only a found Pod's own creation time counts.
 */
import { rfc3339Seconds, startedBeforeHandler } from './handler-since.js';
import { runtimeClassName } from './names.js';
import { parseSandboxIsolation } from './parse.js';
import {
  compareLevels,
  DEFAULT_HANDLER_LEVELS,
  type HandlerLevels,
  handlerMeetsMinimum,
  levelOfHandler,
} from './runtime.js';
import { DEFAULT_PLATFORM_NAMESPACE, type InstanceIdentity, instanceIdentity, tenantOf } from './tenant.js';
import type { RuntimeLevel } from './types.js';

/** An instance as the instance caches hold it, reduced to what sandbox isolation reads. */
export interface SandboxInstanceMeta extends InstanceIdentity {
  /** The raw `kubeplus.io/sandbox-isolation` annotation. */
  annotation: string;
}

/** A RuntimeClass as the sandbox decisions need it. */
export interface RuntimeClassInfo {
  name: string;
  handler: string;
  /**
   * It carries kubeplus-isolation's ownership markers: a class the operator generated for some
   * instance, never one of the platform's. Of these, an instance's Sandboxes may use only its own.
   */
  generated: boolean;
  /** The instance a generated class's `kubeplus.io/owner` annotation names, if well-formed. */
  owner?: InstanceIdentity;
  /**
   * When the class got its current handler: its creationTimestamp (RFC 3339, whole seconds), the
   * handler being immutable (`handler-since.ts`). Undefined when unknown.
   */
  createdAt?: string;
}

/** Path of the runtime class in Agent Sandbox's Sandbox and SandboxTemplate, at every served version. */
export const RUNTIME_CLASS_PATH: readonly string[] = ['spec', 'podTemplate', 'spec', 'runtimeClassName'];

/** The annotation by which the upstream controller names a Sandbox's Pod (else the Sandbox's name). */
export const POD_NAME_ANNOTATION = 'agents.x-k8s.io/pod-name';

/** A RuntimeClass as judged here: its name and handler, and when it got that handler (if known). */
export interface RuntimeClassHandler {
  name: string;
  handler: string;
  /** Its creationTimestamp (`RuntimeClassInfo.createdAt`). */
  createdAt?: string | undefined;
}

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
  return (instance) => {
    const handler = handlerOf.get(instanceIdentity(instance));
    return handler === undefined ? undefined : minimumOfOwnHandler(handler, levelHandlers, handlerLevels);
  };
}

/**
 * The minimum an instance's own generated class stands for, from its handler: the first level
 * `levelHandlers` maps to that handler, else the handler's level by `handlerLevels`.
 */
export function minimumOfOwnHandler(
  handler: string,
  levelHandlers: Readonly<Record<RuntimeLevel, string>>,
  handlerLevels: HandlerLevels = DEFAULT_HANDLER_LEVELS,
): RuntimeLevel | undefined {
  for (const [level, mapped] of Object.entries(levelHandlers) as Array<[RuntimeLevel, string]>) {
    if (mapped === handler) return level;
  }
  return levelOfHandler(handler, handlerLevels);
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
  metadata?:
    | {
        name?: string;
        uid?: string;
        annotations?: Record<string, string> | undefined;
        /** RFC 3339 string (or a `Date`, as typed clients hold it). */
        creationTimestamp?: unknown;
      }
    | undefined;
  spec?: unknown;
}

/** The parts of a Sandbox's Pod this reads; any other shape is tolerated. */
export interface SandboxPodLike {
  metadata?:
    | {
        name?: string | undefined;
        ownerReferences?:
          | readonly ({ uid?: string | undefined; controller?: boolean | undefined } | null | undefined)[]
          | undefined;
        creationTimestamp?: unknown;
      }
    | undefined;
  spec?: { runtimeClassName?: string | undefined } | undefined;
}

/**
 * The UID of a Pod's controller: its first owner reference with `controller: true`, as the
 * upstream controller reads it (`metav1.GetControllerOf`); undefined when it has none.
 */
export function controllerUidOf(pod: SandboxPodLike): string | undefined {
  const refs = pod?.metadata?.ownerReferences;
  if (!Array.isArray(refs)) return undefined;
  const controller = refs.find((r) => r?.controller === true);
  const uid = controller?.uid;
  return typeof uid === 'string' && uid !== '' ? uid : undefined;
}

/** A namespace's Pods as a Sandbox's Pod is looked up (`indexSandboxPods`). */
export interface SandboxPods {
  /** By their controller's UID, in input order. */
  byControllerUid: ReadonlyMap<string, readonly SandboxPodLike[]>;
  /** By name: only for a Sandbox without a uid (not one read from the API server). */
  byName: ReadonlyMap<string, SandboxPodLike>;
}

/** Indexes `pods` by controller UID (and name); unnamed Pods are skipped. */
export function indexSandboxPods(pods: Iterable<SandboxPodLike>): SandboxPods {
  const byControllerUid = new Map<string, SandboxPodLike[]>();
  const byName = new Map<string, SandboxPodLike>();
  for (const pod of pods) {
    const name = pod?.metadata?.name;
    if (typeof name !== 'string' || name === '') continue;
    byName.set(name, pod);
    const uid = controllerUidOf(pod);
    if (uid === undefined) continue;
    const owned = byControllerUid.get(uid);
    if (owned === undefined) byControllerUid.set(uid, [pod]);
    else owned.push(pod);
  }
  return { byControllerUid, byName };
}

function isSandboxPods(pods: SandboxPods | Iterable<SandboxPodLike>): pods is SandboxPods {
  return (pods as SandboxPods).byControllerUid instanceof Map;
}

/** A runtime class as judged: the name, and the RuntimeClass's handler and level when known. */
export interface JudgedClass {
  /** `''` when unset. */
  runtimeClassName: string;
  /** The RuntimeClass's handler; undefined when the class is unset or does not exist. */
  handler?: string;
  /** The handler's level; undefined when unknown (or no handler). */
  level?: RuntimeLevel;
}

export interface WeakSandbox extends JudgedClass {
  name: string;
  uid?: string;
  /**
   * Set when the Sandbox's own class meets the minimum but the Pod it runs does not: that Pod's
   * name and class. (When the Sandbox's own class falls short, that is the finding, and this is unset.)
   */
  pod?: JudgedClass & { name: string };
  /**
   * Set when nothing is weaker by name, but the Sandbox's Pod (named in `pod`) was created at or
   * before its class got its current handler (reason `started-before-class-handler`): it may run
   * the class's previous handler.
   */
  startedBeforeHandler?: {
    /** The class whose handler changed. */
    runtimeClassName: string;
    /** When it got its current handler (its creationTimestamp). */
    since: string;
    /** When the Sandbox or Pod was created. */
    createdAt: string;
  };
}

/** The reason of a finding whose Sandbox or Pod may run its class's previous handler. */
export const STARTED_BEFORE_CLASS_HANDLER = 'started-before-class-handler';

/** `spec.podTemplate.spec.runtimeClassName`, `''` when unset or not a string. */
export function runtimeClassOf(sandbox: SandboxLike): string {
  let at: unknown = sandbox;
  for (const key of RUNTIME_CLASS_PATH) {
    if (typeof at !== 'object' || at === null || Array.isArray(at)) return '';
    at = (at as Record<string, unknown>)[key];
  }
  return typeof at === 'string' ? at : '';
}

/**
 * The Pod name the controller looks up for `sandbox`: its `agents.x-k8s.io/pod-name` annotation,
 * else its own name. Where it looks, not what decides: the Pod is the Sandbox's only when its
 * controller owner reference carries the Sandbox's uid (`findWeakSandboxes`).
 */
export function sandboxPodName(sandbox: SandboxLike): string | undefined {
  const annotated = sandbox.metadata?.annotations?.[POD_NAME_ANNOTATION];
  if (typeof annotated === 'string' && annotated !== '') return annotated;
  const name = sandbox.metadata?.name;
  return typeof name === 'string' && name !== '' ? name : undefined;
}

/** `runtimeClassName` judged against `minimum`: undefined when it meets it. */
function shortfall(
  runtimeClassName: string,
  minimum: RuntimeLevel,
  byName: ReadonlyMap<string, RuntimeClassHandler>,
  levels: HandlerLevels,
): JudgedClass | undefined {
  const rc = runtimeClassName === '' ? undefined : byName.get(runtimeClassName);
  const weak =
    runtimeClassName === '' ||
    (rc === undefined ? minimum !== 'runc' : !handlerMeetsMinimum(rc.handler, minimum, levels));
  if (!weak) return undefined;
  const level = rc === undefined ? undefined : levelOfHandler(rc.handler, levels);
  return {
    runtimeClassName,
    ...(rc === undefined ? {} : { handler: rc.handler }),
    ...(level === undefined ? {} : { level }),
  };
}

/** The Pods that are `sandbox`'s: controlled by its uid; without a uid, the Pod of its `sandboxPodName`. */
function podsOf(sandbox: SandboxLike, uid: string | undefined, pods: SandboxPods): readonly SandboxPodLike[] {
  if (uid !== undefined) return pods.byControllerUid.get(uid) ?? [];
  const name = sandboxPodName(sandbox);
  const pod = name === undefined ? undefined : pods.byName.get(name);
  return pod === undefined ? [] : [pod];
}

/** The handler change a Pod (created at `created`, on class `runtimeClassName`) may predate; undefined when none. */
function handlerChange(
  created: unknown,
  runtimeClassName: string,
  byName: ReadonlyMap<string, RuntimeClassHandler>,
): WeakSandbox['startedBeforeHandler'] {
  const since = byName.get(runtimeClassName)?.createdAt;
  const createdAt = rfc3339Seconds(created);
  if (since === undefined || createdAt === undefined || !startedBeforeHandler(createdAt, since)) return undefined;
  return { runtimeClassName, since, createdAt };
}

/**
 * The Sandboxes among `sandboxes` that fall short of `minimum`, in input order; unnamed entries
 * skipped. `pods`: the namespace's Pods (or their `indexSandboxPods`, to judge several pages of
 * Sandboxes against one list); a Pod is a Sandbox's when its controller owner reference carries
 * the Sandbox's uid, whatever kind it names (for a Sandbox without a uid: the Pod of its
 * `sandboxPodName`).
 * A class's `createdAt` (when it got its current handler) is read from `classes`.
 */
export function findWeakSandboxes(
  minimum: RuntimeLevel,
  sandboxes: readonly SandboxLike[],
  classes: readonly RuntimeClassHandler[] | ReadonlyMap<string, RuntimeClassHandler>,
  levels: HandlerLevels = DEFAULT_HANDLER_LEVELS,
  pods: SandboxPods | Iterable<SandboxPodLike> = [],
): WeakSandbox[] {
  const byName =
    classes instanceof Map ? classes : new Map((classes as readonly RuntimeClassHandler[]).map((rc) => [rc.name, rc]));
  const podIndex = isSandboxPods(pods) ? pods : indexSandboxPods(pods);
  const out: WeakSandbox[] = [];
  for (const sandbox of sandboxes) {
    const name = sandbox?.metadata?.name;
    if (typeof name !== 'string' || name === '') continue;
    const uid = sandbox.metadata?.uid;
    const id = typeof uid === 'string' && uid !== '' ? { name, uid } : { name };
    const own = shortfall(runtimeClassOf(sandbox), minimum, byName, levels);
    if (own !== undefined) {
      out.push({ ...id, ...own });
      continue;
    }
    const asked = byName.get(runtimeClassOf(sandbox));
    const askedLevel = asked === undefined ? undefined : levelOfHandler(asked.handler, levels);
    const askedClass: JudgedClass = {
      runtimeClassName: runtimeClassOf(sandbox),
      ...(asked === undefined ? {} : { handler: asked.handler }),
      ...(askedLevel === undefined ? {} : { level: askedLevel }),
    };
    // The first of its Pods that falls short: on a weak class, or created before its class got
    // its current handler (it may run the previous one).
    let finding: Pick<WeakSandbox, 'pod' | 'startedBeforeHandler'> | undefined;
    for (const pod of podsOf(sandbox, id.uid, podIndex)) {
      const podName = pod.metadata?.name;
      if (typeof podName !== 'string' || podName === '') continue;
      const podClass = typeof pod.spec?.runtimeClassName === 'string' ? pod.spec.runtimeClassName : '';
      const weakPod = shortfall(podClass, minimum, byName, levels);
      if (weakPod !== undefined) {
        finding = { pod: { name: podName, ...weakPod } };
        break;
      }
      const podBefore =
        minimum === 'runc' ? undefined : handlerChange(pod.metadata?.creationTimestamp, podClass, byName);
      if (podBefore !== undefined) {
        const rc = byName.get(podClass);
        const level = rc === undefined ? undefined : levelOfHandler(rc.handler, levels);
        finding = {
          pod: {
            name: podName,
            runtimeClassName: podClass,
            ...(rc === undefined ? {} : { handler: rc.handler }),
            ...(level === undefined ? {} : { level }),
          },
          startedBeforeHandler: podBefore,
        };
        break;
      }
    }
    if (finding !== undefined) out.push({ ...id, ...askedClass, ...finding });
  }
  return out;
}
