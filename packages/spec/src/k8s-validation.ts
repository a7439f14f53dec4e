/**
 * Kubernetes' own name and label rules (k8s.io/apimachinery/pkg/util/validation),
 * as plain predicates. Used as ajv formats and by name derivation.
 */

const DNS1123_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const DNS1123_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
const QUALIFIED_NAME_PART = /^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$/;

export const DNS1123_LABEL_MAX = 63;
export const DNS1123_SUBDOMAIN_MAX = 253;
export const QUALIFIED_NAME_MAX = 63;
export const LABEL_VALUE_MAX = 63;

/** RFC 1123 label: Namespace names, among others. */
export function isDns1123Label(s: string): boolean {
  return s.length <= DNS1123_LABEL_MAX && DNS1123_LABEL.test(s);
}

/** RFC 1123 subdomain: most object names (RuntimeClass, admission policies). */
export function isDns1123Subdomain(s: string): boolean {
  return s.length <= DNS1123_SUBDOMAIN_MAX && DNS1123_SUBDOMAIN.test(s);
}

/** Label keys, annotation keys, nodeSelector keys, toleration keys: `[prefix/]name`. */
export function isQualifiedName(s: string): boolean {
  const parts = s.split('/');
  let name: string;
  if (parts.length === 1) {
    name = parts[0] as string;
  } else if (parts.length === 2) {
    const prefix = parts[0] as string;
    if (prefix.length === 0 || !isDns1123Subdomain(prefix)) return false;
    name = parts[1] as string;
  } else {
    return false;
  }
  return name.length > 0 && name.length <= QUALIFIED_NAME_MAX && QUALIFIED_NAME_PART.test(name);
}

/** Label values (and nodeSelector values): empty, or up to 63 characters of the name alphabet. */
export function isLabelValue(s: string): boolean {
  return s === '' || (s.length <= LABEL_VALUE_MAX && QUALIFIED_NAME_PART.test(s));
}

export const QUALIFIED_NAME_RULE =
  "a qualified name: an optional DNS subdomain prefix and '/', then a name of at most 63 characters of letters, digits, '-', '_' or '.', starting and ending with a letter or digit";
export const DNS1123_SUBDOMAIN_RULE =
  "a DNS-1123 subdomain (an object name such as a RuntimeClass's): at most 253 characters of lower-case letters, digits, '-' and '.', starting and ending with a letter or digit";
export const LABEL_VALUE_RULE =
  "a label value: empty, or at most 63 characters of letters, digits, '-', '_' or '.', starting and ending with a letter or digit";
