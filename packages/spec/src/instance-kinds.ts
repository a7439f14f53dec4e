/**
 * The operator's `--instance-kinds` setting (which custom resource kinds, besides every CRD
 * labelled `registered-by: kubeplus`, are instance Kinds), parsed once for the operator and the
 * command-line tool's `validate`.
 */
import { isDns1123Label, isDns1123Subdomain } from './k8s-validation.js';
import type { ParseResult } from './types.js';

export interface GroupVersionKind {
  group: string;
  version: string;
  kind: string;
}

/** What `--instance-kinds` names, besides the labelled CRDs. */
export interface InstanceKindSelection {
  /** Whole API groups: every namespaced kind in them. */
  groups: readonly string[];
  /** Single kinds, watched at the given version when it is served. */
  kinds: readonly GroupVersionKind[];
}

export const NO_CONFIGURED_KINDS: InstanceKindSelection = { groups: [], kinds: [] };

const KIND = /^[A-Za-z][A-Za-z0-9]*$/;

/**
 * Parses `--instance-kinds`: comma-separated entries, each `group/version/Kind` (one kind) or
 * `group` (every kind of the group), e.g. `cloudark.io/v1/Agent,platformapi.kubeplus`.
 * Empty entries are ignored; duplicates are kept once.
 */
export function parseInstanceKinds(text: string): ParseResult<InstanceKindSelection> {
  const groups = new Set<string>();
  const kinds = new Map<string, GroupVersionKind>();
  const errors: string[] = [];
  for (const entry of text
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s !== '')) {
    const parts = entry.split('/');
    const [group = '', version = '', kind = ''] = parts;
    if (parts.length !== 1 && parts.length !== 3) {
      errors.push(`"${entry}": expected group/version/Kind (e.g. cloudark.io/v1/Agent) or a whole group`);
    } else if (!isDns1123Subdomain(group)) {
      errors.push(`"${entry}": "${group}" is not an API group (a lowercase DNS subdomain such as cloudark.io)`);
    } else if (parts.length === 1) {
      groups.add(group);
    } else if (!isDns1123Label(version)) {
      errors.push(`"${entry}": "${version}" is not an API version (a lowercase DNS label such as v1)`);
    } else if (!KIND.test(kind)) {
      errors.push(`"${entry}": "${kind}" is not a Kind (letters and digits, e.g. Agent)`);
    } else {
      kinds.set(`${group}/${version}/${kind}`, { group, version, kind });
    }
  }
  if (errors.length > 0) return { ok: false, errors };
  return { ok: true, value: { groups: [...groups].sort(), kinds: [...kinds.values()] } };
}

/** `--instance-kinds` text of a selection (for logs), `''` when nothing is configured. */
export function formatInstanceKinds(selection: InstanceKindSelection): string {
  return [...selection.kinds.map((k) => `${k.group}/${k.version}/${k.kind}`), ...selection.groups].join(',');
}
