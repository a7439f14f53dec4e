/**
 * A faithful TypeScript port of the design document's Go `BuildNodeIsolationPatch`, used only
 * to show its flaws next to our builder. Go's `len()` of a nil map/slice is 0, as here.
 */
import type { NodeIsolationSpec } from '@kubeplus-isolation/spec';
import type { Operation } from 'fast-json-patch';

function len(v: unknown): number {
  if (Array.isArray(v)) return v.length;
  if (typeof v === 'object' && v !== null) return Object.keys(v).length;
  return 0;
}

export function seedGoPatch(pod: { spec: Record<string, unknown> }, iso: NodeIsolationSpec): Operation[] {
  const patches: Operation[] = [];
  if (len(iso.nodeSelector) > 0) {
    const merged = { ...((pod.spec.nodeSelector as Record<string, string> | null) ?? {}), ...iso.nodeSelector };
    patches.push({ op: len(pod.spec.nodeSelector) > 0 ? 'replace' : 'add', path: '/spec/nodeSelector', value: merged });
  }
  if (len(iso.tolerations) > 0) {
    if (len(pod.spec.tolerations) === 0) {
      patches.push({ op: 'add', path: '/spec/tolerations', value: iso.tolerations });
    } else {
      for (const t of iso.tolerations) patches.push({ op: 'add', path: '/spec/tolerations/-', value: t });
    }
  }
  return patches;
}
