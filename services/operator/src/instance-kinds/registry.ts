/**
 * Which custom resource kinds are KubePlus instance Kinds, i.e. whose instances the operator
 * watches and reconciles: every CRD labelled `registered-by: kubeplus` (what KubePlus puts on
 * the CRDs it registers), plus the kinds and whole API groups named by `--instance-kinds`.
 *
 * Pure: the CRD informer feeds `InstanceKindRegistry.select` through `bindCrdInformer`, so kinds
 * registered (or removed) while the operator runs are picked up without a restart.
 */
import { type InstanceKindSelection, KUBEPLUS_CRD_LABEL, KUBEPLUS_CRD_LABEL_VALUE } from '@kubeplus-isolation/spec';
import type { V1CustomResourceDefinition } from '@kubernetes/client-node';
import type { KindRef } from '../desired/instance.js';
import { checkGvr, crdGvr, type GroupVersionResource, gvrString } from '../runtime/gvr.js';

export {
  formatInstanceKinds,
  type GroupVersionKind,
  type InstanceKindSelection,
  NO_CONFIGURED_KINDS,
  parseInstanceKinds,
} from '@kubeplus-isolation/spec';

/**
 * Label selector for the CRD informer: with nothing configured only labelled CRDs can be
 * instance Kinds, so the API server filters them; otherwise every CRD must be seen.
 */
export function crdLabelSelector(selection: InstanceKindSelection): string | undefined {
  return selection.groups.length === 0 && selection.kinds.length === 0
    ? `${KUBEPLUS_CRD_LABEL}=${KUBEPLUS_CRD_LABEL_VALUE}`
    : undefined;
}

export type SelectionReason = 'kind' | 'group' | 'label';

export interface SelectedKind {
  gvr: GroupVersionResource;
  kind: string;
  reason: SelectionReason;
}

function servedVersions(crd: V1CustomResourceDefinition): string[] {
  const versions = Array.isArray(crd.spec?.versions) ? crd.spec.versions : [];
  return versions.filter((v) => v?.served === true && typeof v.name === 'string').map((v) => v.name);
}

/**
 * The kind to watch for `crd`, or `undefined` when it is not an instance Kind. Instances are
 * namespaced, so a cluster-scoped CRD never is. A configured `group/version/Kind` is watched at
 * that version if the CRD serves it; otherwise (and for groups and labels) at the CRD's storage
 * version, or its first served one. Every served version reads the same objects.
 */
export function selectInstanceKind(
  crd: V1CustomResourceDefinition,
  selection: InstanceKindSelection,
): SelectedKind | undefined {
  const spec = crd.spec as Partial<V1CustomResourceDefinition['spec']> | undefined;
  const group = spec?.group;
  const kind = spec?.names?.kind;
  if (typeof group !== 'string' || typeof kind !== 'string' || kind === '' || spec?.scope !== 'Namespaced') {
    return undefined;
  }
  const configured = selection.kinds.filter((k) => k.group === group && k.kind === kind);
  let reason: SelectionReason | undefined;
  if (configured.length > 0) reason = 'kind';
  else if (selection.groups.includes(group)) reason = 'group';
  else if (crd.metadata?.labels?.[KUBEPLUS_CRD_LABEL] === KUBEPLUS_CRD_LABEL_VALUE) reason = 'label';
  if (reason === undefined) return undefined;

  const fallback = crdGvr(crd);
  if (fallback === undefined) return undefined;
  const served = servedVersions(crd);
  const wanted = configured.find((k) => served.includes(k.version));
  if (wanted === undefined) return { gvr: fallback, kind, reason };
  try {
    return { gvr: checkGvr({ ...fallback, version: wanted.version }), kind, reason };
  } catch {
    return { gvr: fallback, kind, reason };
  }
}

/**
 * The instance Kinds currently selected, by CRD name: answers which Kind a watched GVR holds
 * and which GVR holds a `group/Kind` (to turn an owner annotation into a work-queue key).
 */
export class InstanceKindRegistry {
  private readonly byCrd = new Map<string, SelectedKind>();

  constructor(private readonly selection: InstanceKindSelection) {}

  /** For `bindCrdInformer`: records the CRD's selection and returns the GVR to watch. */
  select(crd: V1CustomResourceDefinition): GroupVersionResource | undefined {
    const name = crd.metadata?.name;
    const selected = selectInstanceKind(crd, this.selection);
    if (name !== undefined) {
      if (selected === undefined) this.byCrd.delete(name);
      else this.byCrd.set(name, selected);
    }
    return selected?.gvr;
  }

  /** What the CRD named `crdName` is selected as, if it is. */
  get(crdName: string): SelectedKind | undefined {
    return this.byCrd.get(crdName);
  }

  /** The CRD was deleted. */
  forget(crdName: string): void {
    this.byCrd.delete(crdName);
  }

  /** The Kind of the instances a watched GVR holds. */
  kindOf(gvr: GroupVersionResource): string | undefined {
    const key = gvrString(gvr);
    for (const selected of this.byCrd.values()) if (gvrString(selected.gvr) === key) return selected.kind;
    return undefined;
  }

  /** The watched version and plural of `group`/`kind`, if that Kind is selected. */
  lookup(group: string, kind: string): KindRef | undefined {
    for (const { gvr, kind: k } of this.byCrd.values()) {
      if (gvr.group === group && k === kind) return { group, version: gvr.version, kind, plural: gvr.resource };
    }
    return undefined;
  }

  /** Every selected Kind, sorted by GVR. */
  list(): SelectedKind[] {
    return [...this.byCrd.values()].sort((a, b) => gvrString(a.gvr).localeCompare(gvrString(b.gvr)));
  }
}
