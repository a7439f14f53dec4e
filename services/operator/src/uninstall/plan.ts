/**
 * What `--uninstall` does, decided from one inventory of the cluster (pure; `run.ts` reads the
 * inventory and makes the writes). Run by the chart's pre-delete hook after the operator's own
 * Deployment is scaled to zero, so nothing puts back what this takes away:
 *
 * - `all` (the default): every object the operator generated (labelled
 *   `app.kubernetes.io/managed-by: kubeplus-isolation`: RuntimeClasses, admission policies and
 *   bindings, NodeIsolation parameters, compliance Reports) is deleted, after every Namespace it
 *   isolated or created lost the isolation and ownership keys (the Namespace stays: its workloads
 *   are the tenant's; `desired/node-isolation.ts` uninstallPatch); then
 * - in both modes, the finalizer releases up to 0.2.0 added (`isolation.kubeplus.io/cleanup`;
 *   this operator never adds it and removes it where it finds it) leaves every instance still
 *   carrying it, so instances delete normally once the operator is gone. `finalizers` keeps the
 *   generated objects on purpose.
 *
 * Objects go before finalizers: an instance already being deleted disappears the moment its
 * finalizer goes, and must not take with it the only record that something of it is left.
 */
import { FINALIZER } from '@kubeplus-isolation/spec';
import type { InstanceKey } from '../desired/instance.js';
import { type NamespaceMergePatch, type NamespaceMeta, uninstallPatch } from '../desired/node-isolation.js';
import { type ManagedObject, type ObjectRef, refOf } from '../desired/objects.js';
import { isManaged } from '../desired/owner.js';

export const UNINSTALL_MODES = ['all', 'finalizers'] as const;
export type UninstallMode = (typeof UNINSTALL_MODES)[number];

export interface InstanceFinalizers {
  key: InstanceKey;
  finalizers: readonly string[];
  resourceVersion: string;
}

export interface UninstallInventory {
  /** Instances of every watched Kind (any finalizers). */
  instances: readonly InstanceFinalizers[];
  /** Objects of the generated kinds, as listed (the plan keeps only the managed ones). */
  objects: readonly ManagedObject[];
  namespaces: readonly NamespaceMeta[];
}

export type UninstallAction =
  | { type: 'deleteObject'; ref: ObjectRef; uid: string | undefined }
  | { type: 'patchNamespace'; name: string; patch: NamespaceMergePatch; resourceVersion: string | undefined }
  | { type: 'removeFinalizer'; key: InstanceKey; finalizers: string[]; resourceVersion: string };

export function planUninstall(inventory: UninstallInventory, mode: UninstallMode): UninstallAction[] {
  const actions: UninstallAction[] = [];
  if (mode === 'all') {
    // Namespaces first: while a namespace still carries the isolation label, the engine's policy
    // and refusal mode's (parameterNotFoundAction Deny) select it, and its NodeIsolation parameter
    // must still be there (or its Pods are admitted unpatched, resp. refused).
    for (const ns of inventory.namespaces) {
      const patch = uninstallPatch(ns);
      if (patch !== undefined) {
        actions.push({ type: 'patchNamespace', name: ns.name, patch, resourceVersion: ns.resourceVersion });
      }
    }
    for (const obj of inventory.objects) {
      if (isManaged(obj.metadata)) actions.push({ type: 'deleteObject', ref: refOf(obj), uid: obj.metadata.uid });
    }
  }
  for (const instance of inventory.instances) {
    if (!instance.finalizers.includes(FINALIZER)) continue;
    actions.push({
      type: 'removeFinalizer',
      key: instance.key,
      finalizers: instance.finalizers.filter((f) => f !== FINALIZER),
      resourceVersion: instance.resourceVersion,
    });
  }
  return actions;
}

/** One line per action, for the log and the Job's output. */
export function describeAction(action: UninstallAction): string {
  switch (action.type) {
    case 'deleteObject':
      return `delete ${action.ref.kind} ${action.ref.namespace === undefined ? '' : `${action.ref.namespace}/`}${action.ref.name}`;
    case 'patchNamespace':
      return `remove kubeplus-isolation's keys from Namespace ${action.name}`;
    case 'removeFinalizer':
      return `remove finalizer ${FINALIZER} from ${action.key.kind} ${action.key.namespace}/${action.key.name}`;
  }
}
