import type { Toleration } from './types.js';

/**
 * The canonical form of a toleration: operator explicit (Kubernetes treats empty as Equal),
 * empty key/value/effect omitted, fields in a fixed order. Two tolerations are the same
 * toleration exactly when their canonical forms are deeply equal.
 */
export function normalizeToleration(t: Toleration): Toleration {
  const out: Toleration = {};
  if (t.key !== undefined && t.key !== '') out.key = t.key;
  out.operator = t.operator === 'Exists' ? 'Exists' : 'Equal';
  if (t.value !== undefined && t.value !== '') out.value = t.value;
  if (t.effect !== undefined && t.effect !== '') out.effect = t.effect;
  if (t.tolerationSeconds !== undefined && t.tolerationSeconds !== null) out.tolerationSeconds = t.tolerationSeconds;
  return out;
}

/** Identity string of a toleration, for set membership (input need not be normalized). */
export function tolerationKey(t: Toleration): string {
  const n = normalizeToleration(t);
  return JSON.stringify([n.key ?? '', n.operator, n.value ?? '', n.effect ?? '', n.tolerationSeconds ?? null]);
}

/** Canonical tolerations, first occurrence kept, semantic duplicates dropped, order preserved. */
export function dedupeTolerations(ts: readonly Toleration[]): Toleration[] {
  const seen = new Set<string>();
  const out: Toleration[] = [];
  for (const t of ts) {
    const k = tolerationKey(t);
    if (seen.has(k)) continue;
    seen.add(k);
    out.push(normalizeToleration(t));
  }
  return out;
}
