/**
 * What every controller's setup function is given (controller-runtime's Manager as
 * `SetupWithManager` sees it): the cache registry to ask for informers, the sources they list and
 * watch, the metrics, the Event recorder, the log and the clock. Each `controllers/<name>/setup.ts`
 * builds what its controller owns from it — informers, indexes, key sources, reconciler — and
 * returns the controller for the Manager; operator.ts only calls them, in order.
 */
import type { Logger } from '@kubeplus-isolation/service';
import type {
  KubernetesObject,
  V1CustomResourceDefinition,
  V1Namespace,
  V1RuntimeClass,
} from '@kubernetes/client-node';
import type { EventTarget, InstanceEvent } from '../cluster/port.js';
import type { SandboxInstanceMeta } from '../desired/sandbox-peers.js';
import type { RuntimeClassInfo } from '../desired/sandbox-policy.js';
import type { PolicyResource } from '../kube/discovery.js';
import type { Caches } from '../runtime/cache.js';
import type { Clock } from '../runtime/clock.js';
import type { EventRecorder } from '../runtime/event-recorder.js';
import type { GroupVersionResource } from '../runtime/gvr.js';
import type { InformerSource } from '../runtime/informer.js';
import type { OperatorMetrics } from '../runtime/runtime-metrics.js';

/** List+watch sources of every resource the operator caches (kube/informer-sources.ts: client-node's list calls and Watch under the shared loop; or fakes). */
export interface InformerSources {
  crds(labelSelector: string | undefined): InformerSource<V1CustomResourceDefinition>;
  namespaces(labelSelector: string): InformerSource<V1Namespace>;
  runtimeClasses(): InformerSource<V1RuntimeClass>;
  /** Every Node (the audit's Node cache: where Pods really run). */
  nodes(): InformerSource<KubernetesObject>;
  policies(type: PolicyResource, labelSelector: string): InformerSource<KubernetesObject>;
  instances(gvr: GroupVersionResource): InformerSource<KubernetesObject>;
}

/** What the ClusterPort is built with: the cached RuntimeClasses and instances, and the Event recorder. */
export interface ClusterPortOptions {
  /** The RuntimeClasses that can matter to tenant namespace `tenant` (the RuntimeClass cache's index). */
  runtimeClasses(tenant: string): readonly RuntimeClassInfo[];
  /** The sandbox-annotated instances bound to tenant namespace `tenant` (the instance caches' index). */
  sandboxInstances(tenant: string): readonly SandboxInstanceMeta[];
  recordEvent(target: EventTarget, event: InstanceEvent): Promise<void>;
}

export interface SetupContext {
  /** Informers are asked for here: the same resource and selector asked twice is one informer. */
  caches: Caches;
  sources: InformerSources;
  metrics: OperatorMetrics;
  recorder: EventRecorder;
  logger: Logger;
  clock: Clock;
  /** Jitter source (tests make it deterministic). */
  random?: (() => number) | undefined;
}

/** An Event through the context's recorder (best effort, as the recorder is). */
export function recordEvent(ctx: SetupContext): (target: EventTarget, event: InstanceEvent) => Promise<void> {
  return (target, event) => ctx.recorder.event(target, event.type, event.reason, event.message);
}
