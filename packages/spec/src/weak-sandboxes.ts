/**
 * Sandboxes whose runtime class falls short of a minimum. Pure: the compliance report
 * (services/operator, `controllers/compliance`) and the command-line tool's `explain` judge with it.
 *
 * A Sandbox falls short when its class is unset (every policy refuses that), or names a
 * RuntimeClass that does not exist or whose handler does not meet the minimum (an unknown handler
 * meets only `runc`). Whether the class is another tenant's generated one is not judged here:
 * only strength is.
 *
 * What runs is judged too, not only what the Sandbox asks for: the upstream controller adopts an
 * existing Pod as it is, so a Sandbox whose own class meets the minimum can be backed by a Pod on
 * a weaker one (adopted before the minimum was raised, or before the Pod policies existed). When
 * the Sandbox's Pod — the one its `agents.x-k8s.io/pod-name` annotation names (else the one of its
 * name) and that it owns — runs a class that falls short by the same rule, the Sandbox falls
 * short, and the finding names the Pod.
 */
import { DEFAULT_HANDLER_LEVELS, type HandlerLevels, handlerMeetsMinimum, levelOfHandler } from './runtime.js';
import type { RuntimeLevel } from './types.js';

/** Path of the runtime class in Agent Sandbox's Sandbox and SandboxTemplate, at every served version. */
export const RUNTIME_CLASS_PATH: readonly string[] = ['spec', 'podTemplate', 'spec', 'runtimeClassName'];

/** The annotation by which the upstream controller names a Sandbox's Pod (else the Sandbox's name). */
export const POD_NAME_ANNOTATION = 'agents.x-k8s.io/pod-name';

/** A RuntimeClass as judged here: its name and handler. */
export interface RuntimeClassHandler {
  name: string;
  handler: string;
}

/** The parts of a Sandbox this reads; any other shape is tolerated. */
export interface SandboxLike {
  metadata?: { name?: string; uid?: string; annotations?: Record<string, string> | undefined } | undefined;
  spec?: unknown;
}

/** The parts of a Sandbox's Pod this reads; any other shape is tolerated. */
export interface SandboxPodLike {
  metadata?:
    | { name?: string | undefined; ownerReferences?: readonly { uid?: string | undefined }[] | undefined }
    | undefined;
  spec?: { runtimeClassName?: string | undefined } | undefined;
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

/** The Pod name the controller uses for `sandbox`: its `agents.x-k8s.io/pod-name` annotation, else its own name. */
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

/**
 * The Sandboxes among `sandboxes` that fall short of `minimum`, in input order; unnamed entries
 * skipped. `pods`: the namespace's Pods that can be Sandboxes' Pods, by name (`sandboxPodName`); a
 * Pod counts as the Sandbox's only when it is owned by it (same uid) or the Sandbox has no uid.
 */
export function findWeakSandboxes(
  minimum: RuntimeLevel,
  sandboxes: readonly SandboxLike[],
  classes: readonly RuntimeClassHandler[],
  levels: HandlerLevels = DEFAULT_HANDLER_LEVELS,
  pods: ReadonlyMap<string, SandboxPodLike> = new Map(),
): WeakSandbox[] {
  const byName = new Map(classes.map((rc) => [rc.name, rc]));
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
    const podName = sandboxPodName(sandbox);
    const pod = podName === undefined ? undefined : pods.get(podName);
    if (pod === undefined || podName === undefined) continue;
    if (id.uid !== undefined && !(pod.metadata?.ownerReferences ?? []).some((o) => o?.uid === id.uid)) continue;
    const podClass = typeof pod.spec?.runtimeClassName === 'string' ? pod.spec.runtimeClassName : '';
    const weakPod = shortfall(podClass, minimum, byName, levels);
    if (weakPod === undefined) continue;
    const asked = byName.get(runtimeClassOf(sandbox));
    const askedLevel = asked === undefined ? undefined : levelOfHandler(asked.handler, levels);
    out.push({
      ...id,
      runtimeClassName: runtimeClassOf(sandbox),
      ...(asked === undefined ? {} : { handler: asked.handler }),
      ...(askedLevel === undefined ? {} : { level: askedLevel }),
      pod: { name: podName, ...weakPod },
    });
  }
  return out;
}
