/** The EventRecorder's sink on a real cluster: core/v1 Events through @kubernetes/client-node. */
import { type CoreV1Api, PatchStrategy } from '@kubernetes/client-node';
import type { EventSink } from '../runtime/event-recorder.js';
import { requestOptions } from './request.js';

/** `EventSink` on CoreV1Api: create, and merge-patch for repeats. */
export function coreV1EventSink(api: CoreV1Api): EventSink {
  return {
    create: (namespace, event) => api.createNamespacedEvent({ namespace, body: event }),
    patch: (namespace, name, update) =>
      api.patchNamespacedEvent(
        { namespace, name, body: { count: update.count, lastTimestamp: update.lastTimestamp.toISOString() } },
        requestOptions({ contentType: PatchStrategy.MergePatch }),
      ),
  };
}
