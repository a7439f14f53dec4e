/**
 * The names the operator gives an instance's admission policies and bindings, spelled out here
 * independently of services/operator (a change there must fail the suites that compare them):
 * `kubeplus-sandbox-<namespace>.<name>-<hash>-<role>`, `<hash>` the first 10 hex digits of
 * sha256(`<group>/<Kind>/<namespace>/<name>`). Valid for the names the suites use (well under 253
 * characters); longer ones are cut, see packages/spec/src/names.ts.
 */
import { createHash } from 'node:crypto';

export type PolicyRole = 'enforce' | 'advisory' | 'default';

export function instancePolicyName(
  owner: { group: string; kind: string; namespace: string; name: string },
  role: PolicyRole,
): string {
  const hash = createHash('sha256')
    .update(`${owner.group}/${owner.kind}/${owner.namespace}/${owner.name}`)
    .digest('hex')
    .slice(0, 10);
  return `kubeplus-sandbox-${owner.namespace}.${owner.name}-${hash}-${role}`;
}

/** The name before issue 21 (the instance name alone), which an upgrade must leave no trace of. */
export function legacyInstancePolicyName(instance: string, role: PolicyRole): string {
  return `kubeplus-sandbox-${instance}-${role}`;
}
