/**
 * Mandates that overlap (issue 38): a namespace whose OWN node-isolation mandate reaches another
 * namespace's exclusive pool: its mandated nodeSelector carries every pair of the other pool's
 * selector, or one of its mandated tolerations tolerates a taint the other mandate names (e.g.
 * both pools tainted `dedicated`, one mandate tolerating `dedicated` with `Exists`). Pure.
 *
 * The exclusive-pools policy never judges what a namespace's own mandate prescribes (the platform
 * decided it; the tenant cannot take it out of its Pods, and refusing it would refuse every Pod of
 * the tenant), so such an overlap is not refused: the operator reports it instead (a Warning
 * Event `ExclusivePoolsOverlap` on the owning instance and a gauge), because the overlapping
 * tenant's Pods can be scheduled onto the other pool when its nodes also carry their labels.
 *
 * Cost: lookups per mandated selector pair (the parameter's selector index) and per mandated
 * toleration (taint patterns by key and value), not a comparison of every pair of mandates.
 */
import { mandatedTaintPatterns, type TaintPattern, toleratesPattern } from '@kubeplus-isolation/spec';
import type { ExclusivePoolsSpec, Mandate } from './exclusive-pools.js';

interface OwnedPattern {
  pattern: TaintPattern;
  owners: ReadonlySet<string>;
}

interface KeyPatterns {
  all: OwnedPattern[];
  open: OwnedPattern[];
  byValue: Map<string, OwnedPattern[]>;
}

function patternIndex(mandates: readonly Mandate[]): { byKey: Map<string, KeyPatterns>; all: OwnedPattern[] } {
  const distinct = new Map<string, { pattern: TaintPattern; owners: Set<string> }>();
  for (const { namespace, spec } of mandates) {
    for (const pattern of mandatedTaintPatterns(spec.tolerations)) {
      const id = JSON.stringify([pattern.key, pattern.value ?? null, pattern.effect ?? null]);
      const entry = distinct.get(id) ?? { pattern, owners: new Set<string>() };
      entry.owners.add(namespace);
      distinct.set(id, entry);
    }
  }
  const byKey = new Map<string, KeyPatterns>();
  const all: OwnedPattern[] = [];
  for (const owned of distinct.values()) {
    all.push(owned);
    const key: KeyPatterns = byKey.get(owned.pattern.key) ?? { all: [], open: [], byValue: new Map() };
    byKey.set(owned.pattern.key, key);
    key.all.push(owned);
    if (owned.pattern.value === undefined) key.open.push(owned);
    else key.byValue.set(owned.pattern.value, [...(key.byValue.get(owned.pattern.value) ?? []), owned]);
  }
  return { byKey, all };
}

/**
 * Each namespace whose own mandate reaches a pool it does not own → the namespaces owning the
 * pools it reaches (sorted). Namespaces given the same pool (the same selector, the same taint)
 * share it and do not overlap. `spec` is `exclusivePoolsSpec(mandates)`.
 */
export function poolOverlaps(mandates: readonly Mandate[], spec: ExclusivePoolsSpec): Map<string, string[]> {
  const patterns = patternIndex(mandates);
  const out = new Map<string, string[]>();
  for (const { namespace, spec: own } of mandates) {
    const reached = new Set<string>();
    const selector = own.nodeSelector;
    for (const [k, v] of Object.entries(selector)) {
      for (const entry of spec.selectors[`${k}=${v}`] ?? []) {
        if (entry.owners.includes(namespace)) continue;
        if (Object.entries(entry.selector).every(([sk, sv]) => Object.hasOwn(selector, sk) && selector[sk] === sv)) {
          for (const o of entry.owners) reached.add(o);
        }
      }
    }
    for (const t of own.tolerations) {
      const key = typeof t.key === 'string' ? t.key : '';
      const candidates =
        key === ''
          ? patterns.all
          : t.operator === 'Exists'
            ? (patterns.byKey.get(key)?.all ?? [])
            : [
                ...(patterns.byKey.get(key)?.open ?? []),
                ...(patterns.byKey.get(key)?.byValue.get(typeof t.value === 'string' ? t.value : '') ?? []),
              ];
      for (const { pattern, owners } of candidates) {
        if (!owners.has(namespace) && toleratesPattern(t, pattern)) for (const o of owners) reached.add(o);
      }
    }
    reached.delete(namespace);
    if (reached.size > 0) out.set(namespace, [...reached].sort());
  }
  return out;
}

/** The Warning Event's message for `namespace`, naming at most `max` of the namespaces it reaches. */
export function overlapMessage(namespace: string, reached: readonly string[], max = 5): string {
  const named = reached.slice(0, max).join(', ');
  const more = reached.length > max ? ` and ${reached.length - max} more` : '';
  return (
    `the node-isolation mandate of namespace ${namespace} reaches the exclusive node pool(s) of namespace(s) ${named}${more} ` +
    '(its mandated nodeSelector selects their labels or its mandated tolerations tolerate their taints): ' +
    'its Pods are not refused for what the mandate prescribes, but the scheduler may place them on those pools; ' +
    'give each pool a label and a taint value of its own'
  );
}
