/**
 * Deterministic names of everything the operator creates. A name is a pure function of the
 * instance, so a restarted operator (or a second replica) finds the same objects, and a
 * reconcile never creates a second copy.
 *
 * Rule: `<prefix><instance><suffix>` when that is a valid DNS-1123 subdomain of at most
 * `max` characters; otherwise the instance part is cut and `-<10 hex of sha256(instance)>`
 * appended, so two long names sharing a prefix never collide and the same instance always
 * maps to the same name.
 */
import { createHash } from 'node:crypto';
import {
  DNS1123_SUBDOMAIN_MAX,
  isDns1123Label,
  isDns1123Subdomain,
  isLabelValue,
  LABEL_VALUE_MAX,
} from './k8s-validation.js';

export const RUNTIME_CLASS_PREFIX = 'kubeplus-sandbox-';
const HASH_LEN = 10;

export function shortHash(s: string): string {
  return createHash('sha256').update(s).digest('hex').slice(0, HASH_LEN);
}

function trimToAlnumEnd(s: string): string {
  return s.replace(/[^a-z0-9]+$/, '');
}

/** `prefix + base + suffix`, bounded and valid as described above. */
export function boundedName(prefix: string, base: string, suffix = '', max = DNS1123_SUBDOMAIN_MAX): string {
  const plain = `${prefix}${base}${suffix}`;
  if (plain.length <= max && isDns1123Subdomain(plain)) return plain;
  const hash = shortHash(base);
  const room = max - prefix.length - suffix.length - HASH_LEN - 1;
  if (room < 0) throw new RangeError(`boundedName: "${prefix}" and "${suffix}" leave no room within ${max} characters`);
  // The fallback keeps only [a-z0-9-]: dots could form empty subdomain labels ("a..b", "a.-b").
  const cleaned = trimToAlnumEnd(
    base
      .toLowerCase()
      .replace(/[^a-z0-9]+/g, '-')
      .replace(/^-+/, '')
      .slice(0, room),
  );
  return cleaned === '' ? `${prefix}${hash}${suffix}` : `${prefix}${cleaned}-${hash}${suffix}`;
}

/** The RuntimeClass generated for an instance: `kubeplus-sandbox-<instance>`. */
export function runtimeClassName(instance: string): string {
  return boundedName(RUNTIME_CLASS_PREFIX, instance);
}

/**
 * Roles of the admission policies of one instance; each policy's binding has the policy's name.
 * - enforce: ValidatingAdmissionPolicy that denies weak or unset runtime classes (enforce: true)
 * - advisory: ValidatingAdmissionPolicy that only warns/audits (enforce: false)
 * - default: MutatingAdmissionPolicy that fills an unset runtime class (enforce: false)
 */
export type PolicyRole = 'enforce' | 'advisory' | 'default';

export function policyName(instance: string, role: PolicyRole): string {
  return boundedName(RUNTIME_CLASS_PREFIX, instance, `-${role}`);
}

/**
 * A label value standing for `s`: `s` itself when it is a valid label value, else a cut,
 * cleaned prefix plus a hash (label values hold at most 63 characters).
 */
export function labelValue(s: string): string {
  if (isLabelValue(s)) return s;
  const room = LABEL_VALUE_MAX - HASH_LEN - 1;
  const cleaned = s
    .replace(/[^A-Za-z0-9_.-]/g, '-')
    .slice(0, room)
    .replace(/^[^A-Za-z0-9]+|[^A-Za-z0-9]+$/g, '');
  return cleaned === '' ? shortHash(s) : `${cleaned}-${shortHash(s)}`;
}

/**
 * Namespace KubePlus gives an instance created in the platform namespace: the instance's
 * own name, which must then be a valid DNS-1123 label. Returns undefined when it is not,
 * so the caller can report it instead of inventing a name the user would not expect.
 */
export function tenantNamespaceForName(instance: string): string | undefined {
  return isDns1123Label(instance) ? instance : undefined;
}
