/**
 * The operator's own Pod, as the object of Events about the operator itself (not about an
 * instance): named by the chart's downward-API variables POD_NAME, POD_NAMESPACE and POD_UID.
 * Undefined when the name or namespace is unset (run outside a Pod): such Events are only logged.
 */
import type { InvolvedObject } from '../runtime/event-recorder.js';

export function operatorPod(env: Readonly<Record<string, string | undefined>>): InvolvedObject | undefined {
  const name = env.POD_NAME?.trim();
  const namespace = env.POD_NAMESPACE?.trim();
  if (!name || !namespace) return undefined;
  const uid = env.POD_UID?.trim();
  return { apiVersion: 'v1', kind: 'Pod', namespace, name, ...(uid ? { uid } : {}) };
}
