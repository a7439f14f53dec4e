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
import { normalizeToleration, tolerationKey } from './tolerations.js';
import type { NodeIsolationSpec, Toleration } from './types.js';

/** The PodSpec field a Pod lacks (the two fields node isolation owns). */
export type MissingField = 'nodeSelector' | 'tolerations';

/** The parts of a Pod this reads; anything else (or any odd shape) is tolerated. */
export interface PodLike {
  metadata?: { name?: string; uid?: string } | undefined;
  spec?: { nodeSelector?: unknown; tolerations?: unknown } | undefined;
  status?: { phase?: string } | undefined;
}

export interface UnisolatedPod {
  name: string;
  /** The Pod's uid, when the input carried one (the report names the object by it). */
  uid?: string;
  /** In field order: `nodeSelector` before `tolerations`; never empty. */
  missing: MissingField[];
  /** The mandated nodeSelector pairs the Pod lacks or has with another value. */
  missingNodeSelector: Record<string, string>;
  /** The mandated tolerations the Pod lacks (canonical form), in mandate order. */
  missingTolerations: Toleration[];
}

/** Phases of a Pod whose containers will never run again. */
export const TERMINAL_POD_PHASES: readonly string[] = ['Succeeded', 'Failed'];

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** The mandated pairs `current` lacks (absent, or another value); own properties only. */
export function missingSelectorPairs(
  current: unknown,
  mandated: Readonly<Record<string, string>>,
): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(mandated)) {
    if (!(isObject(current) && Object.hasOwn(current, k) && current[k] === v)) out[k] = v;
  }
  return out;
}

/** The mandated tolerations `current` lacks, compared semantically (`tolerationKey`), canonical form. */
export function missingTolerationsOf(current: unknown, mandated: readonly Toleration[]): Toleration[] {
  if (mandated.length === 0) return [];
  const have = new Set<string>();
  if (Array.isArray(current)) {
    for (const t of current as unknown[]) if (isObject(t)) have.add(tolerationKey(t as Toleration));
  }
  return mandated.filter((t) => !have.has(tolerationKey(t))).map(normalizeToleration);
}

/** What `podSpec` lacks under `spec`, field by field and item by item. */
export function missingDetails(
  spec: NodeIsolationSpec,
  podSpec: PodLike['spec'],
): Pick<UnisolatedPod, 'missing' | 'missingNodeSelector' | 'missingTolerations'> {
  const fields = isObject(podSpec) ? podSpec : {};
  const missingNodeSelector = missingSelectorPairs(fields.nodeSelector, spec.nodeSelector);
  const missingTolerations = missingTolerationsOf(fields.tolerations, spec.tolerations);
  const missing: MissingField[] = [];
  if (Object.keys(missingNodeSelector).length > 0) missing.push('nodeSelector');
  if (missingTolerations.length > 0) missing.push('tolerations');
  return { missing, missingNodeSelector, missingTolerations };
}

/** The fields `podSpec` lacks under `spec`; empty when the Pod complies. */
export function missingPlacement(spec: NodeIsolationSpec, podSpec: PodLike['spec']): MissingField[] {
  return missingDetails(spec, podSpec).missing;
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
    const details = missingDetails(spec, pod.spec);
    if (details.missing.length === 0) continue;
    const uid = pod.metadata?.uid;
    out.push(typeof uid === 'string' && uid !== '' ? { name, uid, ...details } : { name, ...details });
  }
  return out;
}
