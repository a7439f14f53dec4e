/**
 * The audit's Node cache, and what a Node's change brings forward (issue 38: where Pods really
 * run). The audit judges each running Pod against the labels of the node it runs on, and looks for
 * foreign Pods on the nodes of each pool; both read this cache, never the API per Pod.
 *
 * Memory: a Node object is mostly status (images, conditions, addresses); the cache keeps only
 * its name, labels and taints (`trimNode`), so a node costs a few hundred bytes.
 *
 * Level-triggered: a Node added, deleted, or whose labels or taints changed (a re-pooling: the
 * platform relabels it for another tenant and adds that tenant's taint) enqueues every isolated
 * namespace whose pool held the node before the change or holds it after. Their audits then find
 * the Pods left on it (off-pool) and the Pods now foreign on it, in seconds rather than at the next
 * period. Every other Node update (status heartbeats, several a minute per node) is ignored.
 */
import { type NodeIsolationSpec, nodeInPool } from '@kubeplus-isolation/spec';
import type { KubernetesObject } from '@kubernetes/client-node';
import type { EventHandlers, Lister } from '../../runtime/informer.js';
import { emitKeys, type KeySource } from '../../runtime/key-sources.js';
import { auditedNamespace } from './report.js';

export const NODES_RESOURCE = 'nodes';

/** Keeps a Node's name, labels and taints only (in place): the cache's transform. */
export function trimNode(obj: KubernetesObject): void {
  const record = obj as unknown as Record<string, unknown>;
  const meta = obj.metadata ?? {};
  const taints = (record.spec as { taints?: unknown } | undefined)?.taints;
  for (const key of Object.keys(record)) {
    if (key !== 'apiVersion' && key !== 'kind' && key !== 'metadata') delete record[key];
  }
  if (taints !== undefined) record.spec = { taints };
  obj.metadata = {
    name: meta.name,
    ...(meta.labels === undefined ? {} : { labels: meta.labels }),
    ...(meta.resourceVersion === undefined ? {} : { resourceVersion: meta.resourceVersion }),
    ...(meta.uid === undefined ? {} : { uid: meta.uid }),
  };
}

/** What of a Node the audit reads: a change of it is worth an audit. */
export function nodeFingerprint(node: KubernetesObject): string {
  const taints = (node as { spec?: { taints?: unknown } }).spec?.taints ?? null;
  const labels = node.metadata?.labels ?? {};
  const sorted = Object.fromEntries(Object.entries(labels).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)));
  return JSON.stringify([sorted, taints]);
}

/**
 * Parsed mandates by cached Namespace object: the informer replaces the object on every change, so
 * an object is parsed once, not at every audit of every other namespace (which would make a period
 * cost namespaces² parses).
 */
const parsed = new WeakMap<KubernetesObject, NodeIsolationSpec | null>();

/** Every isolated namespace with a valid mandate, and its mandate (from the namespace cache). */
export function isolatedMandates(namespaces: Lister<KubernetesObject>): Map<string, NodeIsolationSpec> {
  const out = new Map<string, NodeIsolationSpec>();
  for (const ns of namespaces.list()) {
    const name = ns.metadata?.name;
    if (!name) continue;
    let spec = parsed.get(ns);
    if (spec === undefined) {
      const audited = auditedNamespace(ns.metadata ?? {});
      spec = audited.state === 'isolated' ? audited.spec : null;
      parsed.set(ns, spec);
    }
    if (spec !== null) out.set(name, spec);
  }
  return out;
}

/** The namespaces whose pool holds a node with any of `labelSets`. Pure. */
export function poolOwnersOf(
  mandates: ReadonlyMap<string, NodeIsolationSpec>,
  labelSets: ReadonlyArray<Record<string, string> | undefined>,
): string[] {
  const out: string[] = [];
  for (const [namespace, spec] of mandates) {
    if (labelSets.some((labels) => labels !== undefined && nodeInPool(labels, spec))) out.push(namespace);
  }
  return out;
}

interface NodeEvents {
  addEventHandler(handlers: EventHandlers<KubernetesObject>): () => void;
}

/** Node adds, deletes and label/taint changes, as the isolated namespaces whose pool it left or joined. */
export function nodePoolChanges(nodes: NodeEvents, namespaces: Lister<KubernetesObject>): KeySource {
  return {
    subscribe(enqueue) {
      const seen = new Map<string, { fingerprint: string; labels: Record<string, string> | undefined }>();
      const on = (node: KubernetesObject, deleted: boolean): void => {
        const name = node.metadata?.name;
        if (!name) return;
        const before = seen.get(name);
        const labels = node.metadata?.labels;
        if (deleted) seen.delete(name);
        else {
          const fingerprint = nodeFingerprint(node);
          if (before?.fingerprint === fingerprint) return;
          seen.set(name, { fingerprint, labels: labels === undefined ? undefined : { ...labels } });
        }
        emitKeys(enqueue, poolOwnersOf(isolatedMandates(namespaces), [before?.labels, labels]));
      };
      return nodes.addEventHandler({
        add: (n) => on(n, false),
        update: (n) => on(n, false),
        delete: (n) => on(n, true),
      });
    },
  };
}
