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
  return hashedName(prefix, base, shortHash(base), suffix, max);
}

/**
 * `prefix + <base, cut and cleaned> + '-' + hash + suffix` within `max` characters: the fallback
 * form of the bounded names, where `hash` keeps apart what the cut part no longer does.
 */
function hashedName(prefix: string, base: string, hash: string, suffix: string, max: number): string {
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

/** An instance's identity as the names need it (the operator's `InstanceIdentity`). */
export interface PolicyOwner {
  group: string;
  kind: string;
  namespace: string;
  name: string;
}

/**
 * Name of one of an instance's admission policies (and of its binding):
 * `kubeplus-sandbox-<namespace>.<name>-<hash>-<role>`, `<hash>` the first 10 hex digits of
 * sha256(`<group>/<Kind>/<namespace>/<name>`) — the identity `kubeplus.io/owner` records.
 *
 * Unique per instance identity, not per instance name: two instances named alike in two namespaces
 * (or of two Kinds in one namespace) get names of their own, so neither can hold the other's
 * policies, nor squat a name another tenant will need. `<namespace>.<name>` keeps the name
 * readable and unambiguous (a namespace is a DNS label: it has no dot); the hash tells Kinds and
 * groups apart. Past 253 characters (or when not a valid DNS-1123 subdomain) the readable part
 * is cut and cleaned as in `boundedName`, the identity's hash kept: still unique and stable.
 *
 * The RuntimeClass keeps the design document's `kubeplus-sandbox-<instance>` (`runtimeClassName`):
 * only policies and bindings carry the identity.
 */
export function policyName(owner: PolicyOwner, role: PolicyRole): string {
  return identityName(owner, `-${role}`);
}

/**
 * Name of an instance's SandboxIsolation parameter (shared policy layout):
 * `kubeplus-sandbox-<namespace>.<name>-<hash>-params`, unique per instance identity as
 * `policyName` is (the parameter is cluster-scoped, like the RuntimeClass and the bindings).
 */
export function sandboxParamsName(owner: PolicyOwner): string {
  return identityName(owner, '-params');
}

function identityName(owner: PolicyOwner, suffix: string): string {
  const readable = `${owner.namespace}.${owner.name}`;
  const hash = shortHash(`${owner.group}/${owner.kind}/${owner.namespace}/${owner.name}`);
  const plain = `${RUNTIME_CLASS_PREFIX}${readable}-${hash}${suffix}`;
  if (plain.length <= DNS1123_SUBDOMAIN_MAX && isDns1123Subdomain(plain)) return plain;
  return hashedName(RUNTIME_CLASS_PREFIX, readable, hash, suffix, DNS1123_SUBDOMAIN_MAX);
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
