/**
 * The audit's placement findings (issue 38: where Pods really run), accumulated over pages of Pods
 * and pool nodes, and what the log, Events and metric say of them. Pure; the judging itself is
 * packages/spec's placement.ts.
 *
 * Who is told what:
 * - off-pool and tolerates-beyond-mandate concern the namespace's own Pods: its Report names each
 *   Pod, and a Warning Event `PodsMisplaced` on the owning instance names the first of them.
 * - a foreign Pod on a pool concerns two parties. The pool's owner learns that its pool is not
 *   dedicated (its Report: per pool node, how many foreign Pods run there) but not whose they
 *   are: another namespace's name and Pods are not a tenant's to read (a tenant may read its
 *   Report; namespaces are often named after customers). The foreign Pod's own namespace gets a
 *   Warning Event `ForeignPodOnPool` on the Pod, naming the node and the pool owner's namespace
 *   (the Pod chose that pool's label or tolerations itself, so it learns nothing it did not aim
 *   at); the platform reads every one in the operator's log and `kubectl get events -A`.
 * - tolerates-beyond-mandate names, in the Report, the Pod's tolerations but not the namespaces
 *   whose pools they reach (the same reason); the log names them.
 */
import type { ForeignPod, MisplacedPod, NodeIsolationSpec, OtherMandate } from '@kubeplus-isolation/spec';
import { formatSelector, formatToleration } from '../compliance/openreport.js';

export const PODS_MISPLACED_REASON = 'PodsMisplaced';
export const FOREIGN_POD_ON_POOL_REASON = 'ForeignPodOnPool';

/** The metric's `finding` label: every value fixed here. */
export type PlacementFinding = 'off_pool' | 'tolerates_beyond_mandate' | 'foreign_on_pool';
export const PLACEMENT_FINDINGS: readonly PlacementFinding[] = [
  'off_pool',
  'tolerates_beyond_mandate',
  'foreign_on_pool',
];
export type PlacementCounts = Record<PlacementFinding, number>;

export function zeroPlacementCounts(): PlacementCounts {
  return { off_pool: 0, tolerates_beyond_mandate: 0, foreign_on_pool: 0 };
}

/** The foreign Pods found on one node of the namespace's pool. */
export interface ForeignOnNode {
  node: string;
  /** Exact. */
  count: number;
  /** The first of them. */
  pods: ForeignPod[];
}

export interface PlacementFindings {
  counts: PlacementCounts;
  /** The first misplaced Pods of the namespace (at most `keep`). */
  pods: MisplacedPod[];
  /** Pool nodes with foreign Pods, in node order. */
  foreign: ForeignOnNode[];
}

export function emptyPlacement(): PlacementFindings {
  return { counts: zeroPlacementCounts(), pods: [], foreign: [] };
}

/** `findings` plus one page's misplaced Pods; the first `keep` are kept by name. */
export function addMisplaced(
  findings: PlacementFindings,
  found: readonly MisplacedPod[],
  keep: number,
): PlacementFindings {
  const counts = { ...findings.counts };
  for (const pod of found) {
    if (pod.offPool !== undefined) counts.off_pool++;
    if (pod.beyondMandate !== undefined) counts.tolerates_beyond_mandate++;
  }
  const room = Math.max(0, keep - findings.pods.length);
  return { ...findings, counts, pods: [...findings.pods, ...found.slice(0, room)] };
}

/** `findings` plus the foreign Pods of one pool node (none: unchanged); the first `keep` per node kept. */
export function addForeign(
  findings: PlacementFindings,
  node: string,
  found: readonly ForeignPod[],
  keep: number,
): PlacementFindings {
  if (found.length === 0) return findings;
  const counts = { ...findings.counts, foreign_on_pool: findings.counts.foreign_on_pool + found.length };
  const existing = findings.foreign.find((f) => f.node === node);
  const foreign = existing
    ? findings.foreign.map((f) =>
        f.node === node
          ? {
              node,
              count: f.count + found.length,
              pods: [...f.pods, ...found.slice(0, Math.max(0, keep - f.pods.length))],
            }
          : f,
      )
    : [...findings.foreign, { node, count: found.length, pods: found.slice(0, Math.max(0, keep)) }];
  return { ...findings, counts, foreign };
}

export function placementTotal(counts: PlacementCounts): number {
  return counts.off_pool + counts.tolerates_beyond_mandate + counts.foreign_on_pool;
}

/** The other isolated namespaces' mandates, as `tolerationsBeyondMandate` reads them. */
export function otherMandates(namespace: string, mandates: ReadonlyMap<string, NodeIsolationSpec>): OtherMandate[] {
  const out: OtherMandate[] = [];
  for (const [ns, spec] of mandates) if (ns !== namespace) out.push({ namespace: ns, spec });
  return out;
}

/** `web-1 (off-pool on n1: lacks pool=a; tolerates beyond its mandate: * Exists)`. */
export function describeMisplaced(pod: MisplacedPod): string {
  const parts: string[] = [];
  if (pod.offPool !== undefined)
    parts.push(`runs on node ${pod.offPool.node}, whose labels lack ${formatSelector(pod.offPool.missingNodeLabels)}`);
  if (pod.beyondMandate !== undefined)
    parts.push(`tolerates beyond its mandate: ${pod.beyondMandate.tolerations.map(formatToleration).join(', ')}`);
  return `${pod.name} (${parts.join('; ')})`;
}

/** The log's view of a misplaced Pod: with the namespaces whose pools it reaches (the platform's to read). */
export function logMisplaced(pod: MisplacedPod): Record<string, unknown> {
  return {
    pod: pod.name,
    ...(pod.offPool === undefined ? {} : { node: pod.offPool.node, missingNodeLabels: pod.offPool.missingNodeLabels }),
    ...(pod.beyondMandate === undefined
      ? {}
      : {
          tolerations: pod.beyondMandate.tolerations.map(formatToleration),
          reachesPoolsOf: pod.beyondMandate.namespaces,
        }),
  };
}

/** The Warning Event on the owning instance: the count, the first `maxPods` named, within `maxLength`. */
export function misplacedMessage(
  namespace: string,
  findings: PlacementFindings,
  maxPods: number,
  maxLength = 1024,
): string {
  const total = findings.counts.off_pool + findings.counts.tolerates_beyond_mandate;
  const head = `${total} placement ${total === 1 ? 'finding' : 'findings'} for Pods of namespace ${namespace}`;
  const tail =
    '. Kubernetes does not move or re-judge a running Pod (tolerations can be added by an UPDATE, a node relabelled ' +
    'under it); the operator never changes Pods: recreate them.';
  let text = `${head}${tail}`;
  const named: string[] = [];
  for (const pod of findings.pods.slice(0, Math.max(0, maxPods))) {
    const candidate = `${head}: ${[...named, describeMisplaced(pod)].join(', ')}${tail}`;
    if (candidate.length > maxLength) break;
    named.push(describeMisplaced(pod));
    text = candidate;
  }
  return text.slice(0, maxLength);
}

/** The Warning Event on a foreign Pod (in its own namespace). */
export function foreignPodMessage(pod: ForeignPod, node: string, owner: string): string {
  return (
    `Pod ${pod.namespace}/${pod.name} runs on node ${node}, which belongs to the dedicated node pool of namespace ${owner}. ` +
    `Namespace ${pod.namespace} has no mandate for that pool, so its Pods have no business there: ` +
    'remove the nodeSelector or affinity for the pool and the tolerations of its taints, then recreate the Pod.'
  );
}
