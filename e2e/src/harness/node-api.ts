import {
  ApiException,
  CoreV1Api,
  type KubeConfig,
  PatchStrategy,
  setHeaderOptions,
  type V1Node,
  type V1Taint,
} from '@kubernetes/client-node';

export const mergePatch = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);
export const strategicMergePatch = setHeaderOptions('Content-Type', PatchStrategy.StrategicMergePatch);

export function isApiStatus(error: unknown, code: number): boolean {
  return error instanceof ApiException && error.code === code;
}

/** Read-modify-write of a Node, retried on optimistic-concurrency conflicts (the node controller edits taints too). */
async function updateNode(kc: KubeConfig, name: string, change: (node: V1Node) => void): Promise<V1Node> {
  const core = kc.makeApiClient(CoreV1Api);
  for (let attempt = 1; ; attempt++) {
    const node = await core.readNode({ name });
    change(node);
    try {
      return await core.replaceNode({ name, body: node });
    } catch (error) {
      if (!isApiStatus(error, 409) || attempt >= 10) throw error;
    }
  }
}

const sameTaint = (a: V1Taint, b: V1Taint): boolean => a.key === b.key && a.effect === b.effect;

/** Adds (or replaces the value of) a taint, like `kubectl taint nodes NAME key=value:Effect`. */
export function taintNode(kc: KubeConfig, name: string, taint: V1Taint): Promise<V1Node> {
  return updateNode(kc, name, (node) => {
    node.spec ??= {};
    node.spec.taints = [...(node.spec.taints ?? []).filter((t) => !sameTaint(t, taint)), taint];
  });
}

/** Removes every taint with `key` (and `effect`, if given), like `kubectl taint nodes NAME key-`. */
export function untaintNode(kc: KubeConfig, name: string, key: string, effect?: string): Promise<V1Node> {
  return updateNode(kc, name, (node) => {
    node.spec ??= {};
    node.spec.taints = (node.spec.taints ?? []).filter(
      (t) => t.key !== key || (effect !== undefined && t.effect !== effect),
    );
  });
}

/** Sets labels (a null value removes the label), like `kubectl label nodes NAME k=v k2-`. */
export function labelNode(kc: KubeConfig, name: string, labels: Record<string, string | null>): Promise<V1Node> {
  return kc.makeApiClient(CoreV1Api).patchNode({ name, body: { metadata: { labels } } }, mergePatch);
}
