/**
 * What of the Node cache replans the exclusive-pools parameter (issue 38: a Pod naming a pool node
 * in spec.nodeName): a Node added, deleted, or whose labels changed (pool membership is decided by
 * labels alone). Every other Node update (status heartbeats, several a minute per node, or a taint
 * change) is ignored, so a large cluster's heartbeats do not replan the parameter. Every change
 * maps to the controller's single key; the work queue folds a burst into one reconcile.
 */
import type { KubernetesObject } from '@kubernetes/client-node';
import type { EventSource, KeySource } from '../../runtime/key-sources.js';

/** A Node's labels, order-independent. */
export function labelsFingerprint(node: KubernetesObject): string {
  const labels = node.metadata?.labels ?? {};
  return JSON.stringify(Object.entries(labels).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)));
}

/** Enqueues `key` when a Node is added, deleted or relabelled. */
export function nodeLabelChanges(nodes: EventSource<KubernetesObject>, key: string): KeySource {
  return {
    subscribe(enqueue) {
      const seen = new Map<string, string>();
      const on = (node: KubernetesObject, deleted: boolean): void => {
        const name = node.metadata?.name;
        if (!name) return;
        if (deleted) {
          seen.delete(name);
          enqueue(key);
          return;
        }
        const fingerprint = labelsFingerprint(node);
        if (seen.get(name) === fingerprint) return;
        seen.set(name, fingerprint);
        enqueue(key);
      };
      return nodes.addEventHandler({
        add: (n) => on(n, false),
        update: (n) => on(n, false),
        delete: (n) => on(n, true),
      });
    },
  };
}
