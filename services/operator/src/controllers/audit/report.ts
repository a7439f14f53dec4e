/**
 * The audit's pure decisions around `findUnisolatedPods`: which namespaces are audited and
 * against what mandate, how findings add up over pages of Pods, and what the Event says.
 *
 * A namespace is audited when the webhook's namespaceSelector matches it
 * (`kubeplus.io/node-isolation-enabled: "true"`) and its `kubeplus.io/node-isolation-resolved`
 * annotation is valid: that is exactly when the webhook patches its Pods. With the label but no
 * valid annotation the webhook fails open by design, and there is no mandate to audit against:
 * the namespace is `invalid` (counted and logged, not audited). Its owner is the instance named
 * by its `kubeplus.io/owner` annotation; a namespace isolated by hand has none.
 */

import type { MissingField, UnisolatedPod } from '@kubeplus-isolation/spec';
import {
  NODE_ISOLATION_ENABLED_LABEL,
  NODE_ISOLATION_ENABLED_VALUE,
  NODE_ISOLATION_RESOLVED_ANNOTATION,
  type NodeIsolationSpec,
  OWNER_ANNOTATION,
  parseNodeIsolation,
} from '@kubeplus-isolation/spec';
import type { InstanceIdentity } from '../../desired/instance.js';
import { type MetaLike, ownerOf } from '../../desired/owner.js';

export type AuditedNamespace =
  | { state: 'isolated'; spec: NodeIsolationSpec; owner: InstanceIdentity | undefined }
  /** Labelled for the webhook, but with no valid mandate: the webhook admits its Pods unpatched. */
  | { state: 'invalid'; errors: string[] }
  | { state: 'not-isolated' };

/** What the audit does with a namespace, from its labels and annotations alone. */
export function auditedNamespace(meta: MetaLike): AuditedNamespace {
  if (meta.labels?.[NODE_ISOLATION_ENABLED_LABEL] !== NODE_ISOLATION_ENABLED_VALUE) return { state: 'not-isolated' };
  const text = meta.annotations?.[NODE_ISOLATION_RESOLVED_ANNOTATION];
  if (text === undefined) return { state: 'invalid', errors: [`no ${NODE_ISOLATION_RESOLVED_ANNOTATION} annotation`] };
  const parsed = parseNodeIsolation(text);
  if (!parsed.ok) return { state: 'invalid', errors: parsed.errors };
  return { state: 'isolated', spec: parsed.value, owner: ownerOf(meta) };
}

/**
 * The part of a namespace's metadata the audit depends on (label, mandate, owner): a namespace
 * event is worth an audit only when this changes.
 */
export function auditFingerprint(meta: MetaLike): string {
  return JSON.stringify([
    meta.labels?.[NODE_ISOLATION_ENABLED_LABEL] ?? null,
    meta.annotations?.[NODE_ISOLATION_RESOLVED_ANNOTATION] ?? null,
    meta.annotations?.[OWNER_ANNOTATION] ?? null,
  ]);
}

/** Which part of the placement a Pod lacks: the metric's `missing` label (every value fixed here). */
export type MissingKind = 'node_selector' | 'tolerations' | 'both';
export const MISSING_KINDS: readonly MissingKind[] = ['node_selector', 'tolerations', 'both'];

export function missingKind(missing: readonly MissingField[]): MissingKind {
  const selector = missing.includes('nodeSelector');
  const tolerations = missing.includes('tolerations');
  if (selector && tolerations) return 'both';
  return selector ? 'node_selector' : 'tolerations';
}

export type MissingCounts = Record<MissingKind, number>;

export function zeroCounts(): MissingCounts {
  return { node_selector: 0, tolerations: 0, both: 0 };
}

export function totalOf(counts: MissingCounts): number {
  return counts.node_selector + counts.tolerations + counts.both;
}

/** One namespace's findings, accumulated page by page: every Pod counted, the first `keep` named. */
export interface Findings {
  counts: MissingCounts;
  /** The first unisolated Pods found, at most `keep` of them. */
  pods: UnisolatedPod[];
  /** Pods examined (finished ones excluded). */
  checked: number;
}

export function emptyFindings(): Findings {
  return { counts: zeroCounts(), pods: [], checked: 0 };
}

/** `findings` plus one page: `checked` Pods examined, `found` of them unisolated. */
export function addPage(findings: Findings, checked: number, found: readonly UnisolatedPod[], keep: number): Findings {
  const counts = { ...findings.counts };
  for (const pod of found) counts[missingKind(pod.missing)]++;
  const room = Math.max(0, keep - findings.pods.length);
  return { counts, pods: [...findings.pods, ...found.slice(0, room)], checked: findings.checked + checked };
}

/** `web-1 (nodeSelector, tolerations)`. */
export function describePod(pod: UnisolatedPod): string {
  return `${pod.name} (${pod.missing.join(', ')})`;
}

export const PODS_NOT_ISOLATED_REASON = 'PodsNotIsolated';
export const PODS_ISOLATED_REASON = 'PodsIsolated';

/**
 * The Warning Event's message: the count, then as many of the first `maxPods` named Pods as fit
 * in `maxLength` characters (the Event API's limit is 1024), then how many more there are.
 */
export function notIsolatedMessage(namespace: string, findings: Findings, maxPods: number, maxLength = 1024): string {
  const total = totalOf(findings.counts);
  const head = `${total} ${total === 1 ? 'Pod' : 'Pods'} in namespace ${namespace} ${total === 1 ? 'lacks' : 'lack'} the node placement it mandates`;
  const tail =
    '. Admitted without it (the node-isolation webhook fails open, e.g. while it was unavailable); ' +
    'the operator never changes Pods: recreate them to place them.';
  const named: string[] = [];
  for (const pod of findings.pods.slice(0, Math.max(0, maxPods))) {
    const more = total - named.length - 1;
    const candidate = [...named, describePod(pod)];
    const text = `${head}: ${candidate.join(', ')}${more > 0 ? ` and ${more} more` : ''}${tail}`;
    if (text.length > maxLength) break;
    named.push(describePod(pod));
  }
  if (named.length === 0) return `${head}${tail}`.slice(0, maxLength);
  const more = total - named.length;
  return `${head}: ${named.join(', ')}${more > 0 ? ` and ${more} more` : ''}${tail}`;
}

export function isolatedAgainMessage(namespace: string, previous: number): string {
  return `No Pod in namespace ${namespace} lacks the mandated node placement any more (${previous} did at the previous audit).`;
}
