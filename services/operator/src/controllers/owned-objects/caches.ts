/**
 * The caches of what the operator owns, as the controllers ask the registry for them: Namespaces
 * labelled `kubeplus.io/owner-uid`, every RuntimeClass, and the served admission-policy (and
 * parameter) kinds labelled managed-by. The owned-objects controller watches their adds and
 * updates; the instances controller their deletes, and its reads come from them. Asked twice,
 * they are the same informers (runtime/cache.ts).
 */
import { MANAGED_BY_LABEL, MANAGED_BY_VALUE, OWNER_UID_LABEL } from '@kubeplus-isolation/spec';
import type { KubernetesObject } from '@kubernetes/client-node';
import { RUNTIME_CLASS_API_VERSION } from '../../desired/objects.js';
import type { PolicyResource } from '../../kube/discovery.js';
import type { ResourceInformer } from '../../runtime/informer.js';
import type { SetupContext } from '../setup.js';
import type { OwnedType } from './keys.js';

export const NAMESPACE_SELECTOR = OWNER_UID_LABEL;
export const MANAGED_SELECTOR = `${MANAGED_BY_LABEL}=${MANAGED_BY_VALUE}`;

export interface OwnedInformer {
  type: OwnedType;
  informer: ResourceInformer<KubernetesObject>;
}

/** Every RuntimeClass, the platform's and those generated for instances. */
export function runtimeClassInformer({ caches, sources }: SetupContext): ResourceInformer<KubernetesObject> {
  return caches.informer<KubernetesObject>({
    name: 'runtimeclasses',
    resource: `${RUNTIME_CLASS_API_VERSION}/runtimeclasses`,
    source: () => sources.runtimeClasses(),
  });
}

/**
 * The informer of every owned type: Namespaces, RuntimeClasses and `resources`, the admission-policy
 * kinds the cluster serves and the parameter kinds the flags have the operator write.
 */
export function ownedObjectInformers(ctx: SetupContext, resources: readonly PolicyResource[]): OwnedInformer[] {
  const { caches, sources } = ctx;
  const namespaces = caches.informer<KubernetesObject>({
    name: 'namespaces',
    resource: 'v1/namespaces',
    labelSelector: NAMESPACE_SELECTOR,
    source: () => sources.namespaces(NAMESPACE_SELECTOR),
  });
  return [
    { type: { apiVersion: 'v1', kind: 'Namespace' }, informer: namespaces },
    { type: { apiVersion: RUNTIME_CLASS_API_VERSION, kind: 'RuntimeClass' }, informer: runtimeClassInformer(ctx) },
    ...resources.map((p) => ({
      type: { apiVersion: p.apiVersion, kind: p.kind },
      informer: caches.informer<KubernetesObject>({
        name: p.resource,
        resource: `${p.apiVersion}/${p.resource}`,
        labelSelector: MANAGED_SELECTOR,
        source: () => sources.policies(p, MANAGED_SELECTOR),
      }),
    })),
  ];
}
