/**
 * The instance caches, as the registry holds them: a CRD informer (labelled CRDs only when
 * --instance-kinds is empty) that keeps one metadata-only informer per selected instance Kind,
 * added and removed at run time (`bindCrdInformer`, no restart). Leadership never waits for the
 * Kinds (they come and go, one may stay forbidden); readiness and
 * `kubeplus_operator_informer_synced{resource="instances"}` name each one, a forbidden Kind
 * without failing them (kind-health.ts).
 */
import type { KubernetesObject } from '@kubernetes/client-node';
import type { InstanceCaches } from '../controllers/instances/key-sources.js';
import type { SetupContext } from '../controllers/setup.js';
import { bindCrdInformer, DynamicInformers } from '../runtime/dynamic-informers.js';
import { keepMetadataOnly, type ResourceInformer, type SyncedInformer } from '../runtime/informer.js';
import { ForbiddenKindReporter, instanceKindsReadiness, instanceKindsSyncState } from './kind-health.js';
import { crdLabelSelector, InstanceKindRegistry, type InstanceKindSelection } from './registry.js';

export const INSTANCES_RESOURCE = 'instances';

export interface InstanceKindCaches extends InstanceCaches {
  kinds: InstanceKindRegistry;
  /** The informer of each watched Kind. */
  kindInformers(): ResourceInformer<KubernetesObject>[];
  /** /readyz: `others` and every watched Kind; a forbidden Kind is named without failing it. */
  readiness(others: readonly SyncedInformer[]): { ok: boolean; message: string };
}

export function watchInstanceKinds(
  { caches, sources, logger, clock }: SetupContext,
  selection: InstanceKindSelection,
  platformNamespace: string,
): InstanceKindCaches {
  const kinds = new InstanceKindRegistry(selection);
  const selector = crdLabelSelector(selection);
  const crds = caches.informer({
    name: 'customresourcedefinitions',
    resource: 'apiextensions.k8s.io/v1/customresourcedefinitions',
    labelSelector: selector,
    source: () => sources.crds(selector),
  });
  // A Kind the operator may not read is reported once, retried, and left out of readiness.
  const forbiddenKinds = new ForbiddenKindReporter(logger);
  const instances = new DynamicInformers<KubernetesObject>((gvr) => sources.instances(gvr), {
    clock,
    logger,
    name: INSTANCES_RESOURCE,
    // Only an instance's metadata is ever read (annotations, finalizers, uid, resourceVersion):
    // its spec and status, however large, are not kept.
    transform: keepMetadataOnly,
    failureLogLevel: forbiddenKinds.failureLogLevel,
    listener: forbiddenKinds.listener,
  });
  const kindInformers = (): ResourceInformer<KubernetesObject>[] =>
    instances.kinds().flatMap((gvr) => instances.get(gvr) ?? []);
  caches.add(instances, { mustSync: false, synced: instanceKindsSyncState(kindInformers) });
  // Instance informers follow the CRDs on every replica, from the first CRD event on.
  caches.bind(() => bindCrdInformer(crds, instances, (crd) => kinds.select(crd), logger));
  caches.bind(() =>
    crds.addEventHandler({
      delete: (crd) => {
        const name = crd.metadata?.name;
        if (!name) return;
        const selected = kinds.get(name);
        if (selected) forbiddenKinds.forget(selected.gvr);
        kinds.forget(name);
      },
    }),
  );
  return {
    instances,
    kinds,
    platformNamespace,
    kindInformers,
    readiness: (others) => instanceKindsReadiness(others, kindInformers()),
  };
}
