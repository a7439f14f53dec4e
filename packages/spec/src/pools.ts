/**
 * The node pool a node-isolation mandate reserves, and who reaches it. Pure.
 *
 * A mandate (`NodeIsolationSpec`, resolved onto the tenant's Namespace) stands for a pool: the
 * nodes that carry every mandated nodeSelector pair, kept for the tenant by the taints its
 * mandated tolerations tolerate. These functions answer the questions exclusivity asks
 * (issue 38), and the exclusive-pool policy asks the same ones in CEL:
 *
 * - does a Pod *target* a pool (its nodeSelector, or one required node-affinity term, asks for
 *   every mandated pair)?
 * - does one of its tolerations *reach* a pool's taints (Kubernetes' own `ToleratesTaint`
 *   semantics, k8s.io/api/core/v1 toleration.go, against the taints the mandate names)?
 * - does a node belong to the pool (its labels carry every mandated pair)?
 */
import type { NodeIsolationSpec, Toleration } from './types.js';

export type TaintEffect = 'NoSchedule' | 'PreferNoSchedule' | 'NoExecute';

/** A node taint (core/v1 Taint, as far as scheduling reads it). */
export interface Taint {
  key: string;
  value?: string;
  effect: TaintEffect;
}

/**
 * The taints a mandated toleration stands for. `value` absent: any value of `key` (the mandate
 * tolerates the key with `Exists`); `effect` absent: every effect.
 */
export interface TaintPattern {
  key: string;
  value?: string;
  effect?: TaintEffect;
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function str(v: unknown): string {
  return typeof v === 'string' ? v : '';
}

const EFFECTS: readonly string[] = ['NoSchedule', 'PreferNoSchedule', 'NoExecute'];

/**
 * The taint patterns a mandate's tolerations name. A toleration with an empty key tolerates every
 * taint and names none (a mandate cannot reserve "every taint"), so it yields no pattern.
 */
export function mandatedTaintPatterns(tolerations: readonly Toleration[]): TaintPattern[] {
  const out: TaintPattern[] = [];
  const seen = new Set<string>();
  for (const t of tolerations) {
    const key = str(t.key);
    if (key === '') continue;
    const p: TaintPattern = { key };
    if (t.operator !== 'Exists') p.value = str(t.value);
    const effect = str(t.effect);
    if (EFFECTS.includes(effect)) p.effect = effect as TaintEffect;
    const id = JSON.stringify([p.key, p.value ?? null, p.effect ?? null]);
    if (seen.has(id)) continue;
    seen.add(id);
    out.push(p);
  }
  return out;
}

/** Kubernetes' `Toleration.ToleratesTaint`: does `t` tolerate `taint`? Odd shapes tolerate nothing. */
export function toleratesTaint(t: unknown, taint: Taint): boolean {
  return isObject(t) && toleratesPattern(t, { key: taint.key, value: taint.value ?? '', effect: taint.effect });
}

/**
 * Does `t` tolerate at least one taint `pattern` stands for? With a concrete value and effect this
 * is exactly `ToleratesTaint`; an open value or effect in the pattern is met by any.
 */
export function toleratesPattern(t: unknown, pattern: TaintPattern): boolean {
  if (!isObject(t)) return false;
  const effect = str(t.effect);
  if (effect !== '' && pattern.effect !== undefined && effect !== pattern.effect) return false;
  const key = str(t.key);
  if (key !== '' && key !== pattern.key) return false;
  const operator = str(t.operator);
  if (operator === 'Exists') return true;
  if (operator !== '' && operator !== 'Equal') return false;
  return pattern.value === undefined || str(t.value) === pattern.value;
}

/** The tolerations among `tolerations` (a Pod's, any shape) that reach at least one of `patterns`. */
export function tolerationsReaching(tolerations: unknown, patterns: readonly TaintPattern[]): Toleration[] {
  if (!Array.isArray(tolerations) || patterns.length === 0) return [];
  return (tolerations as unknown[]).filter((t): t is Toleration => patterns.some((p) => toleratesPattern(t, p)));
}

/** Do `labels` carry every pair of `selector` (and is there at least one pair)? */
export function carriesAll(labels: unknown, selector: Readonly<Record<string, string>>): boolean {
  const pairs = Object.entries(selector);
  if (pairs.length === 0 || !isObject(labels)) return false;
  return pairs.every(([k, v]) => Object.hasOwn(labels, k) && labels[k] === v);
}

/** Does one node-affinity term (core/v1 NodeSelectorTerm) admit only nodes carrying every pair? */
function termTargets(term: unknown, selector: Readonly<Record<string, string>>): boolean {
  if (!isObject(term) || !Array.isArray(term.matchExpressions)) return false;
  const exprs = term.matchExpressions as unknown[];
  return Object.entries(selector).every(([k, v]) =>
    exprs.some(
      (e) =>
        isObject(e) &&
        e.key === k &&
        e.operator === 'In' &&
        Array.isArray(e.values) &&
        (e.values as unknown[]).includes(v),
    ),
  );
}

/**
 * Does a PodSpec ask for the pool `selector` names: its nodeSelector carries every pair, or one of
 * its required node-affinity terms asks `In` for every pair's value? An empty selector names no pool.
 */
export function targetsPool(podSpec: unknown, selector: Readonly<Record<string, string>>): boolean {
  if (Object.keys(selector).length === 0 || !isObject(podSpec)) return false;
  if (carriesAll(podSpec.nodeSelector, selector)) return true;
  const affinity = isObject(podSpec.affinity) ? podSpec.affinity : {};
  const nodeAffinity = isObject(affinity.nodeAffinity) ? affinity.nodeAffinity : {};
  const required = nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution;
  if (!isObject(required) || !Array.isArray(required.nodeSelectorTerms)) return false;
  return (required.nodeSelectorTerms as unknown[]).some((term) => termTargets(term, selector));
}

/** Does a node with these labels belong to the pool `spec` reserves? */
export function nodeInPool(nodeLabels: unknown, spec: NodeIsolationSpec): boolean {
  return carriesAll(nodeLabels, spec.nodeSelector);
}

/**
 * Where a PodSpec reaches into the pool `spec` reserves: it targets the pool's labels, and which of
 * its tolerations reach the pool's taints. Empty when it reaches neither.
 */
export interface PoolReach {
  targets: boolean;
  tolerations: Toleration[];
}

export function poolReach(podSpec: unknown, spec: NodeIsolationSpec): PoolReach {
  const fields = isObject(podSpec) ? podSpec : {};
  return {
    targets: targetsPool(fields, spec.nodeSelector),
    tolerations: tolerationsReaching(fields.tolerations, mandatedTaintPatterns(spec.tolerations)),
  };
}

/** Does `reach` reach the pool at all? */
export function reachesPool(reach: PoolReach): boolean {
  return reach.targets || reach.tolerations.length > 0;
}
