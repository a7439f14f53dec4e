/**
 * The exclusive-pools parameter (issue 38): every isolated namespace's pool, indexed for the
 * chart's ValidatingAdmissionPolicy (deploy/kubeplus-isolation/files/exclusive-pools.yaml). Pure.
 *
 * A mandate reserves a pool: the nodes carrying all of its nodeSelector pairs, kept by the taints
 * its tolerations name (packages/spec pools.ts, `mandatedTaintPatterns`). The policy refuses a Pod
 * outside the owning namespace that targets the labels or tolerates a taint. It must cost map
 * lookups per Pod nodeSelector pair and per toleration, never a walk over every pool (1,000
 * mandates), so the parameter is laid out as the questions it answers:
 *
 * - `selectors["k=v"]`: the pools indexed under that pair, each with its whole selector and its
 *   owners. Each distinct selector is indexed under ONE of its pairs, the one the fewest selectors
 *   share (a Pod targeting the pool carries every pair, that one included), so a pair common to
 *   every mandate (`kubernetes.io/os=linux`) does not make one lookup walk every pool.
 * - `taints[key]`: what a toleration of that key reaches, by the toleration's effect (`All` when
 *   it has none, since it then tolerates every effect): `exists` for operator Exists (every pattern
 *   of the key), `values[v]` for Equal v (patterns of value v), `open` for patterns whose mandate
 *   tolerates any value of the key (an Equal toleration of any value reaches those too).
 * - `anyKey`: what an Exists toleration with an empty key reaches (every pattern), by effect.
 * - `nodes[name]`: the pool nodes (a Node whose labels carry a pool's whole selector: packages/spec
 *   `nodeInPool`) → the namespaces owning a pool it is in (the union: a namespace owning one of the
 *   node's pools puts its own mandate's selector on its Pods, which the node carries; an overlap
 *   with another pool is the platform's configuration, as for `mandated`). A Pod of another
 *   namespace naming the node in `spec.nodeName` skips the scheduler and its taint check: the
 *   policy judges it. Found through `selectors` (each pool is indexed under one of its pairs,
 *   which a node of the pool carries): a node costs one lookup per label, not a walk over the pools.
 * - `mandated[namespace]`: what that namespace's own mandate prescribes (its nodeSelector, and its
 *   tolerations as the policy normalizes a Pod's: `[key, Exists|Equal, value, effect|All]`). The
 *   policy never judges these against other pools: the webhook puts them into every Pod of the
 *   namespace and the tenant cannot take them out, so refusing them would refuse every Pod of a
 *   tenant for the platform's own configuration (two mandates that overlap). The operator reports
 *   such overlaps instead (exclusive-pools-overlaps.ts: a Warning Event and a gauge).
 *
 * A reach entry stands for a set of taint patterns and holds `owners`, the namespaces owning EVERY
 * one of them: a Pod's namespace not among them is foreign to at least one. An entry is present
 * exactly when it reaches something. Owners are namespaces whose mandate names the same selector
 * (or pattern): two namespaces given one pool share it.
 */
import {
  carriesAll,
  mandatedTaintPatterns,
  type NodeIsolationSpec,
  type TaintEffect,
  type TaintPattern,
  type Toleration,
} from '@kubeplus-isolation/spec';

export const EXCLUSIVE_POOLS_API_VERSION = 'isolation.kubeplus.io/v1alpha1';
export const EXCLUSIVE_POOLS_KIND = 'ExclusivePools';
export const EXCLUSIVE_POOLS_RESOURCE = 'exclusivepools';
/** The one object, cluster-scoped (the binding's paramRef names it). */
export const EXCLUSIVE_POOLS_NAME = 'exclusive-pools';
/**
 * The largest parameter written: etcd refuses a value over 1.5 MiB (--max-request-bytes); a
 * margin is kept for metadata and managedFields. Typical mandates (a pool label or two and a
 * toleration) take ≈365 bytes each (their index entries and their own mandate, `mandated`): 1,000 of
 * them ≈365 KB (desired/exclusive-pools.test.ts; docs/benchmarks.md §6b).
 */
export const EXCLUSIVE_POOLS_MAX_BYTES = 1_000_000;
/**
 * The most pool nodes the parameter holds (the CRD's `nodes` maxProperties): Kubernetes' supported
 * cluster size. A pool node takes ≈70 bytes (a cloud node name and one owner), so 5,000 of them
 * ≈350 KB: with 1,000 typical mandates still under EXCLUSIVE_POOLS_MAX_BYTES
 * (desired/exclusive-pools.test.ts).
 */
export const EXCLUSIVE_POOLS_MAX_NODES = 5000;

/** A toleration's effect as the parameter keys it: `All` for a toleration without an effect. */
export type EffectClass = 'All' | TaintEffect;
export const EFFECT_CLASSES: readonly EffectClass[] = ['All', 'NoSchedule', 'PreferNoSchedule', 'NoExecute'];

export interface Reach {
  /** The namespaces owning every pool this entry stands for (sorted). */
  owners: string[];
}
export type ReachByEffect = Partial<Record<EffectClass, Reach>>;

export interface SelectorEntry {
  selector: Record<string, string>;
  owners: string[];
}

export interface TaintKeyReach {
  exists: ReachByEffect;
  open: ReachByEffect;
  values: Record<string, ReachByEffect>;
}

/** A toleration as the policy's CEL normalizes it: `[key, 'Exists'|'Equal', value, effect|'All']`. */
export type NormalToleration = [string, 'Exists' | 'Equal', string, EffectClass];

/** What one namespace's own mandate prescribes (never judged against other pools). */
export interface OwnMandate {
  selector: Record<string, string>;
  tolerations: NormalToleration[];
}

export interface ExclusivePoolsSpec {
  /** How many isolated namespaces' mandates it holds. */
  namespaces: number;
  selectors: Record<string, SelectorEntry[]>;
  taints: Record<string, TaintKeyReach>;
  anyKey: ReachByEffect;
  mandated: Record<string, OwnMandate>;
  /** Pool node name → the namespaces owning a pool it is in (sorted). */
  nodes: Record<string, string[]>;
}

/** A Node as the planner reads it (from the operator's Node cache). */
export interface PoolNode {
  name: string;
  labels: Readonly<Record<string, string>> | undefined;
}

/** One isolated namespace and its resolved mandate. */
export interface Mandate {
  namespace: string;
  spec: NodeIsolationSpec;
}

const pairOf = (k: string, v: string): string => `${k}=${v}`;

/** Which toleration effects reach a pattern: one without an effect stands for every effect. */
function effectClassesReaching(pattern: TaintPattern): EffectClass[] {
  return pattern.effect === undefined ? [...EFFECT_CLASSES] : ['All', pattern.effect];
}

/** Accumulates, per reach entry, the owner sets of the patterns it stands for. */
class ReachBuilder {
  private readonly sets = new Map<EffectClass, Array<ReadonlySet<string>>>();

  add(classes: readonly EffectClass[], owners: ReadonlySet<string>): void {
    for (const c of classes) {
      const list = this.sets.get(c) ?? [];
      list.push(owners);
      this.sets.set(c, list);
    }
  }

  build(): ReachByEffect {
    const out: ReachByEffect = {};
    for (const c of EFFECT_CLASSES) {
      const sets = this.sets.get(c);
      if (sets === undefined) continue;
      const [first, ...rest] = sets;
      const owners = [...(first ?? [])].filter((ns) => rest.every((s) => s.has(ns))).sort();
      out[c] = { owners };
    }
    return out;
  }
}

function sortedRecord<T>(entries: Iterable<[string, T]>): Record<string, T> {
  return Object.fromEntries([...entries].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)));
}

function selectorIndex(mandates: readonly Mandate[]): Record<string, SelectorEntry[]> {
  // Distinct selectors (canonical: sorted pairs) → their owners.
  const pools = new Map<string, { selector: Record<string, string>; owners: Set<string> }>();
  for (const { namespace, spec } of mandates) {
    const selector = sortedRecord(Object.entries(spec.nodeSelector));
    if (Object.keys(selector).length === 0) continue;
    const id = JSON.stringify(selector);
    const pool = pools.get(id) ?? { selector, owners: new Set<string>() };
    pool.owners.add(namespace);
    pools.set(id, pool);
  }
  const shared = new Map<string, number>();
  for (const { selector } of pools.values()) {
    for (const [k, v] of Object.entries(selector)) shared.set(pairOf(k, v), (shared.get(pairOf(k, v)) ?? 0) + 1);
  }
  const index = new Map<string, SelectorEntry[]>();
  for (const [, { selector, owners }] of [...pools].sort(([a], [b]) => (a < b ? -1 : 1))) {
    // The pair the fewest selectors share; ties: the first in order.
    let best = '';
    let bestCount = Number.POSITIVE_INFINITY;
    for (const [k, v] of Object.entries(selector)) {
      const count = shared.get(pairOf(k, v)) ?? 0;
      if (count < bestCount) {
        best = pairOf(k, v);
        bestCount = count;
      }
    }
    const entries = index.get(best) ?? [];
    entries.push({ selector, owners: [...owners].sort() });
    index.set(best, entries);
  }
  return sortedRecord(index);
}

function taintIndex(mandates: readonly Mandate[]): Pick<ExclusivePoolsSpec, 'taints' | 'anyKey'> {
  // Distinct patterns → their owners.
  const patterns = new Map<string, { pattern: TaintPattern; owners: Set<string> }>();
  for (const { namespace, spec } of mandates) {
    for (const pattern of mandatedTaintPatterns(spec.tolerations)) {
      const id = JSON.stringify([pattern.key, pattern.value ?? null, pattern.effect ?? null]);
      const entry = patterns.get(id) ?? { pattern, owners: new Set<string>() };
      entry.owners.add(namespace);
      patterns.set(id, entry);
    }
  }
  const anyKey = new ReachBuilder();
  const byKey = new Map<string, { exists: ReachBuilder; open: ReachBuilder; values: Map<string, ReachBuilder> }>();
  for (const { pattern, owners } of patterns.values()) {
    const classes = effectClassesReaching(pattern);
    anyKey.add(classes, owners);
    const key = byKey.get(pattern.key) ?? { exists: new ReachBuilder(), open: new ReachBuilder(), values: new Map() };
    byKey.set(pattern.key, key);
    key.exists.add(classes, owners);
    if (pattern.value === undefined) {
      key.open.add(classes, owners);
    } else {
      const value = key.values.get(pattern.value) ?? new ReachBuilder();
      key.values.set(pattern.value, value);
      value.add(classes, owners);
    }
  }
  const taints = sortedRecord(
    [...byKey].map(([k, r]): [string, TaintKeyReach] => [
      k,
      {
        exists: r.exists.build(),
        open: r.open.build(),
        values: sortedRecord([...r.values].map(([v, b]): [string, ReachByEffect] => [v, b.build()])),
      },
    ]),
  );
  return { taints, anyKey: anyKey.build() };
}

/** A toleration (any shape) normalized as the policy's CEL does (`variables.tolerations`). */
export function normalToleration(t: Toleration): NormalToleration {
  const effect = typeof t.effect === 'string' && t.effect !== '' ? (t.effect as EffectClass) : 'All';
  return [
    typeof t.key === 'string' ? t.key : '',
    t.operator === 'Exists' ? 'Exists' : 'Equal',
    typeof t.value === 'string' ? t.value : '',
    effect,
  ];
}

function ownMandates(mandates: readonly Mandate[]): Record<string, OwnMandate> {
  return sortedRecord(
    mandates.map(({ namespace, spec }): [string, OwnMandate] => {
      const seen = new Set<string>();
      const tolerations: NormalToleration[] = [];
      for (const t of spec.tolerations) {
        const n = normalToleration(t);
        const id = JSON.stringify(n);
        if (seen.has(id)) continue;
        seen.add(id);
        tolerations.push(n);
      }
      return [namespace, { selector: sortedRecord(Object.entries(spec.nodeSelector)), tolerations }];
    }),
  );
}

/**
 * The pool nodes among `nodes` and their owners, through the selector index: every pool is
 * indexed under one of its pairs, so a node of the pool carries that pair.
 */
function nodeIndex(selectors: Record<string, SelectorEntry[]>, nodes: readonly PoolNode[]): Record<string, string[]> {
  const out: Array<[string, string[]]> = [];
  for (const { name, labels } of nodes) {
    if (labels === undefined) continue;
    const owners = new Set<string>();
    for (const [k, v] of Object.entries(labels)) {
      for (const entry of selectors[pairOf(k, v)] ?? []) {
        if (carriesAll(labels, entry.selector)) for (const ns of entry.owners) owners.add(ns);
      }
    }
    if (owners.size > 0) out.push([name, [...owners].sort()]);
  }
  return sortedRecord(out);
}

/**
 * The parameter for these mandates (any order; one per namespace) and these nodes (any order;
 * names unique). Deterministic.
 */
export function exclusivePoolsSpec(mandates: readonly Mandate[], nodes: readonly PoolNode[] = []): ExclusivePoolsSpec {
  const selectors = selectorIndex(mandates);
  return {
    namespaces: new Set(mandates.map((m) => m.namespace)).size,
    selectors,
    ...taintIndex(mandates),
    mandated: ownMandates(mandates),
    nodes: nodeIndex(selectors, nodes),
  };
}

/** The object to write (owner markers are not needed: one per cluster, removed with the chart's CRD). */
export function exclusivePoolsObject(spec: ExclusivePoolsSpec, labels: Record<string, string>) {
  return {
    apiVersion: EXCLUSIVE_POOLS_API_VERSION,
    kind: EXCLUSIVE_POOLS_KIND,
    metadata: { name: EXCLUSIVE_POOLS_NAME, labels },
    spec,
  };
}

/** The bytes the spec takes as JSON (what the size limit is checked against). */
export function specBytes(spec: ExclusivePoolsSpec): number {
  return Buffer.byteLength(JSON.stringify(spec), 'utf8');
}

/**
 * Whether `stored` (the cached object's spec, any shape) already says what `desired` says. Key
 * order does not matter; the API server keeps what was written, so a deep comparison suffices.
 */
export function specUpToDate(stored: unknown, desired: ExclusivePoolsSpec): boolean {
  return canonical(stored) === canonical(desired);
}

function canonical(v: unknown): string {
  return JSON.stringify(v, (_k, value: unknown) =>
    value !== null && typeof value === 'object' && !Array.isArray(value)
      ? sortedRecord(Object.entries(value as Record<string, unknown>))
      : value,
  );
}
