/**
 * Log fields of the controller runtime. The JSON line format itself (ts, level, msg, component,
 * fields) is the services' shared one: @kubeplus-isolation/service `createLogger`.
 */
/**
 * Log fields for a work-queue key. Keys in the client-go MetaNamespaceKeyFunc format,
 * `namespace/name` (namespaced objects) or `name` (cluster-scoped), are split; any other key
 * (e.g. one naming a kind as well, with more than one `/`) is logged whole, never mis-split.
 */
export function keyFields(key: string): { key: string; namespace?: string; name?: string } {
  const parts = key.split('/');
  if (parts.length === 1) return { key, name: key };
  if (parts.length === 2 && parts[0] && parts[1]) return { key, namespace: parts[0], name: parts[1] };
  return { key };
}
