/**
 * Where a Pod really runs, judged against the mandates (issue 38). Pure.
 *
 * Admission judges a Pod's spec once; a running Pod can still end up where its mandate does not
 * keep it. Kubernetes lets an UPDATE add tolerations (e.g. `{operator: Exists}`), and a node's
 * labels and taints can change under running Pods (a re-pooling): `requiredDuringScheduling…
 * IgnoredDuringExecution` and a nodeSelector are not checked again once the Pod runs, and a
 * NoExecute taint evicts only Pods that do not tolerate it. Three findings, each named here:
 *
 * - `off-pool`: a Pod of an isolated namespace runs on a node whose labels lack the mandated
 *   nodeSelector pairs (the node left the pool, or the Pod never was in it);
 * - `tolerates-beyond-mandate`: a Pod of an isolated namespace tolerates a taint that keeps
 *   ANOTHER isolated namespace's pool, which its own mandate does not also tolerate (e.g.
 *   `{operator: Exists}`): nothing but a nodeSelector keeps it off that pool;
 * - `foreign-pods-on-pool`: a Pod of a namespace that is neither the pool's owner, nor an isolated
 *   namespace whose own pool holds the node (two tenants given the same pool), nor exempt (the
 *   platform's DaemonSets: system namespaces, the release's, a configured list), runs on a node
 *   of the pool.
 */
import { carriesAll, mandatedTaintPatterns, type TaintPattern, toleratesPattern } from './pools.js';
import type { NodeIsolationSpec, Toleration } from './types.js';
import { missingSelectorPairs, TERMINAL_POD_PHASES } from './unisolated.js';

/** The stable names of the findings (Report rules; log, Event and metric vocabulary). */
export const OFF_POOL_RULE = 'off-pool';
export const TOLERATES_BEYOND_MANDATE_RULE = 'tolerates-beyond-mandate';
export const FOREIGN_PODS_ON_POOL_RULE = 'foreign-pods-on-pool';

/** Namespaces whose Pods are never foreign on a pool: Kubernetes' own (the release's is added by the operator). */
export const SYSTEM_NAMESPACES: readonly string[] = ['kube-system', 'kube-public', 'kube-node-lease'];

/** The parts of a Node the judgement reads. */
export interface NodeLike {
  metadata?: { name?: string; labels?: Record<string, string> | undefined } | undefined;
  spec?: { taints?: unknown } | undefined;
}

/** The parts of a Pod the judgement reads. */
export interface PlacedPodLike {
  metadata?: { name?: string; namespace?: string; uid?: string } | undefined;
  spec?: { nodeName?: string; tolerations?: unknown } | undefined;
  status?: { phase?: string } | undefined;
}

/** Another isolated namespace's mandate (its pool). */
export interface OtherMandate {
  namespace: string;
  spec: NodeIsolationSpec;
}

export interface MisplacedPod {
  name: string;
  uid?: string;
  /** Set when the Pod runs on a node outside its pool: that node and the mandated pairs it lacks. */
  offPool?: { node: string; missingNodeLabels: Record<string, string> };
  /**
   * Set when tolerations of the Pod reach another isolated namespace's pool: those tolerations and
   * the namespaces whose pools they reach (for the platform's log only, never a tenant's Report).
   */
  beyondMandate?: { tolerations: Toleration[]; namespaces: string[] };
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function str(v: unknown): string {
  return typeof v === 'string' ? v : '';
}

/**
 * Does toleration `t` tolerate EVERY taint `pattern` stands for (not merely one, as
 * `toleratesPattern` asks)? A pattern with an open value or effect is covered only by a toleration
 * that is open there too.
 */
export function coversPattern(t: unknown, pattern: TaintPattern): boolean {
  if (!isObject(t)) return false;
  const key = str(t.key);
  if (key !== '' && key !== pattern.key) return false;
  const effect = str(t.effect);
  if (effect !== '' && effect !== pattern.effect) return false;
  const operator = str(t.operator);
  if (operator === 'Exists') return true;
  if (operator !== '' && operator !== 'Equal') return false;
  return pattern.value !== undefined && str(t.value) === pattern.value;
}

interface ForeignPattern {
  pattern: TaintPattern;
  namespace: string;
}

const OPEN: unique symbol = Symbol('open value');

function push<K, V>(map: Map<K, V[]>, key: K, value: V): void {
  const list = map.get(key);
  if (list === undefined) map.set(key, [value]);
  else list.push(value);
}

/**
 * The taint patterns of other isolated namespaces' pools that a mandate `own` does not itself
 * tolerate (a pool shared with `own` is not another's), indexed by key and value so that a Pod's
 * toleration is compared only with the patterns it can reach. Built once per audit of a namespace,
 * it keeps judging a Pod independent of how many tenants there are (an `Equal` toleration, by far
 * the most common, is one map lookup).
 */
export class ForeignPoolIndex {
  private readonly all: ForeignPattern[] = [];
  private readonly byKey = new Map<string, ForeignPattern[]>();
  /** key → value → patterns; patterns with an open value under `OPEN`. */
  private readonly byValue = new Map<string, Map<string | typeof OPEN, ForeignPattern[]>>();

  constructor(own: NodeIsolationSpec, others: readonly OtherMandate[]) {
    for (const other of others) {
      for (const pattern of mandatedTaintPatterns(other.spec.tolerations)) {
        if (own.tolerations.some((mine) => coversPattern(mine, pattern))) continue;
        const entry = { pattern, namespace: other.namespace };
        this.all.push(entry);
        push(this.byKey, pattern.key, entry);
        let values = this.byValue.get(pattern.key);
        if (values === undefined) {
          values = new Map();
          this.byValue.set(pattern.key, values);
        }
        push(values, pattern.value ?? OPEN, entry);
      }
    }
  }

  /** The namespaces whose pool taints toleration `t` (any shape) reaches; empty when none. */
  reachedBy(t: unknown): string[] {
    if (!isObject(t) || this.all.length === 0) return [];
    const key = str(t.key);
    let candidates: readonly ForeignPattern[];
    if (key === '') candidates = this.all;
    else if (str(t.operator) === 'Exists') candidates = this.byKey.get(key) ?? [];
    else {
      const values = this.byValue.get(key);
      candidates = [...(values?.get(str(t.value)) ?? []), ...(values?.get(OPEN) ?? [])];
    }
    const out: string[] = [];
    for (const c of candidates) if (toleratesPattern(t, c.pattern)) out.push(c.namespace);
    return out;
  }
}

/**
 * The tolerations of a Pod (any shape) that reach the pool taints of another mandate which the
 * Pod's own mandate does not itself tolerate, and whose pools they reach. A mandate equal to
 * `own` (two namespaces given one pool) reaches nothing beyond. `others` may be a prebuilt index.
 */
export function tolerationsBeyondMandate(
  tolerations: unknown,
  own: NodeIsolationSpec,
  others: readonly OtherMandate[] | ForeignPoolIndex,
): { tolerations: Toleration[]; namespaces: string[] } {
  if (!Array.isArray(tolerations)) return { tolerations: [], namespaces: [] };
  const index = others instanceof ForeignPoolIndex ? others : new ForeignPoolIndex(own, others);
  const reaching: Toleration[] = [];
  const namespaces = new Set<string>();
  for (const t of tolerations as unknown[]) {
    const reached = index.reachedBy(t);
    if (reached.length === 0) continue;
    reaching.push(t as Toleration);
    for (const ns of reached) namespaces.add(ns);
  }
  return { tolerations: reaching, namespaces: [...namespaces].sort() };
}

function finished(pod: PlacedPodLike): boolean {
  const phase = pod.status?.phase;
  return typeof phase === 'string' && TERMINAL_POD_PHASES.includes(phase);
}

/**
 * What is wrong with where one Pod of a namespace mandated `spec` runs: `node` is the node it is
 * bound to (undefined: not bound yet, or the node is gone: no `offPool`). Undefined when nothing
 * is (or the Pod has finished or has no name).
 */
export function judgePlacement(
  spec: NodeIsolationSpec,
  pod: PlacedPodLike,
  node: NodeLike | undefined,
  others: readonly OtherMandate[] | ForeignPoolIndex,
): MisplacedPod | undefined {
  const name = pod?.metadata?.name;
  if (typeof name !== 'string' || name === '' || finished(pod)) return undefined;
  const out: MisplacedPod = { name };
  const uid = pod.metadata?.uid;
  if (typeof uid === 'string' && uid !== '') out.uid = uid;
  const nodeName = node?.metadata?.name;
  if (node !== undefined && typeof nodeName === 'string' && nodeName !== '' && pod.spec?.nodeName === nodeName) {
    const missing = missingSelectorPairs(node.metadata?.labels, spec.nodeSelector);
    if (Object.keys(missing).length > 0) out.offPool = { node: nodeName, missingNodeLabels: missing };
  }
  const beyond = tolerationsBeyondMandate(pod.spec?.tolerations, spec, others);
  if (beyond.tolerations.length > 0) out.beyondMandate = beyond;
  return out.offPool === undefined && out.beyondMandate === undefined ? undefined : out;
}

/** A Pod on a pool node that has no business there. */
export interface ForeignPod {
  namespace: string;
  name: string;
  uid?: string;
}

/**
 * The Pods among `pods` (those bound to `node`) that are foreign to the pool `spec` of namespace
 * `owner` reserves. Empty when `node` is not in that pool. `mandates`: every isolated namespace's
 * mandate (a Pod of one whose own pool holds the node is a co-owner, not foreign); `exempt`: the
 * namespaces whose Pods are never foreign (SYSTEM_NAMESPACES, the release's, the configured ones).
 */
export function foreignPodsOnNode(
  owner: string,
  spec: NodeIsolationSpec,
  node: NodeLike,
  pods: readonly PlacedPodLike[],
  mandates: ReadonlyMap<string, NodeIsolationSpec>,
  exempt: ReadonlySet<string>,
): ForeignPod[] {
  const labels = node.metadata?.labels;
  if (!carriesAll(labels, spec.nodeSelector)) return [];
  const out: ForeignPod[] = [];
  for (const pod of pods) {
    const namespace = pod?.metadata?.namespace;
    const name = pod?.metadata?.name;
    if (typeof namespace !== 'string' || typeof name !== 'string' || name === '' || finished(pod)) continue;
    if (pod.spec?.nodeName !== node.metadata?.name) continue;
    if (namespace === owner || exempt.has(namespace)) continue;
    const theirs = mandates.get(namespace);
    if (theirs !== undefined && carriesAll(labels, theirs.nodeSelector)) continue;
    const uid = pod.metadata?.uid;
    out.push(typeof uid === 'string' && uid !== '' ? { namespace, name, uid } : { namespace, name });
  }
  return out;
}

/** The nodes among `nodes` that belong to the pool `spec` reserves (none for a mandate without a nodeSelector). */
export function poolNodes<N extends NodeLike>(spec: NodeIsolationSpec, nodes: Iterable<N>): N[] {
  const out: N[] = [];
  for (const node of nodes) if (carriesAll(node.metadata?.labels, spec.nodeSelector)) out.push(node);
  return out;
}
