/**
 * Which Pods of an isolated namespace lack the node placement it mandates. Pure.
 *
 * The webhook's failurePolicy is Ignore: a Pod created while no webhook replica answers is
 * admitted unpatched. Such a Pod is found here by the webhook's own compliance rule
 * (services/webhook/src/admission/patch.ts, which patches exactly when this finds something
 * missing):
 *
 * - nodeSelector: every mandated pair is present with the mandated value (extra keys are fine);
 * - tolerations: every mandated toleration is present, compared semantically with spec's
 *   `tolerationKey` (`operator` unset = `Equal`, `value: ""` = no value); extra ones are fine.
 *
 * A Pod that has finished (phase Succeeded or Failed) holds no node any more: it is not counted.
 * Recreating a Pod is the remedy, and there is nothing left to recreate.
 */
import { type NodeIsolationSpec, type Toleration, tolerationKey } from '@kubeplus-isolation/spec';

/** The PodSpec field a Pod lacks (the two fields node isolation owns). */
export type MissingField = 'nodeSelector' | 'tolerations';

/** The parts of a Pod this reads; anything else (or any odd shape) is tolerated. */
export interface PodLike {
  metadata?: { name?: string } | undefined;
  spec?: { nodeSelector?: unknown; tolerations?: unknown } | undefined;
  status?: { phase?: string } | undefined;
}

export interface UnisolatedPod {
  name: string;
  /** In field order: `nodeSelector` before `tolerations`; never empty. */
  missing: MissingField[];
}

/** Phases of a Pod whose containers will never run again. */
export const TERMINAL_POD_PHASES: readonly string[] = ['Succeeded', 'Failed'];

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function hasNodeSelector(current: unknown, mandated: Readonly<Record<string, string>>): boolean {
  const keys = Object.keys(mandated);
  if (keys.length === 0) return true;
  return isObject(current) && keys.every((k) => Object.hasOwn(current, k) && current[k] === mandated[k]);
}

function hasTolerations(current: unknown, mandated: readonly Toleration[]): boolean {
  if (mandated.length === 0) return true;
  const have = new Set<string>();
  if (Array.isArray(current)) {
    for (const t of current as unknown[]) if (isObject(t)) have.add(tolerationKey(t as Toleration));
  }
  return mandated.every((t) => have.has(tolerationKey(t)));
}

/** The fields `podSpec` lacks under `spec`; empty when the Pod complies. */
export function missingPlacement(spec: NodeIsolationSpec, podSpec: PodLike['spec']): MissingField[] {
  const missing: MissingField[] = [];
  const fields = isObject(podSpec) ? podSpec : {};
  if (!hasNodeSelector(fields.nodeSelector, spec.nodeSelector)) missing.push('nodeSelector');
  if (!hasTolerations(fields.tolerations, spec.tolerations)) missing.push('tolerations');
  return missing;
}

/**
 * The Pods among `pods` that lack part of the mandated placement, in input order. Finished Pods
 * and entries without a name are skipped.
 */
export function findUnisolatedPods(spec: NodeIsolationSpec, pods: readonly PodLike[]): UnisolatedPod[] {
  const out: UnisolatedPod[] = [];
  for (const pod of pods) {
    const name = pod?.metadata?.name;
    if (typeof name !== 'string' || name === '') continue;
    const phase = pod.status?.phase;
    if (typeof phase === 'string' && TERMINAL_POD_PHASES.includes(phase)) continue;
    const missing = missingPlacement(spec, pod.spec);
    if (missing.length > 0) out.push({ name, missing });
  }
  return out;
}
