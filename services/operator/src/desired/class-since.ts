/**
 * When each allowed class got its current handler, as the admission policies read it (issue 36,
 * "handed out after a tightening"). `RuntimeClass.handler` is immutable, so that time is the
 * class's creationTimestamp (packages/spec `handler-since.ts`); an object created at or before it
 * may run the previous handler, and the policies refuse to hand it out (a SandboxClaim adopting a
 * warm Sandbox, a Sandbox adopting a Pod: `sandbox-admission.ts`, `handedOut`).
 *
 * The instance's own class `kubeplus-sandbox-<instance>` counts only once it carries the handler
 * this policy is written for: while the operator has yet to (re-)create it — a minimum just
 * changed, or it does not exist yet — its time is not known (`''`), and the policies hand out
 * nothing of that class until the operator writes the time of the class it created. A hand-out is
 * refused for a moment then, never let through on the previous class's time.
 *
 * Every allowed class has an entry, `''` when its time is not known: the operator's comparison of
 * current and desired objects (`diff.ts`) reads an object's keys as a subset, so an entry left
 * out would leave a stale time in place; a value that changes to `''` is rewritten.
 *
 * Pure and deterministic.
 */
import { type InstanceIdentity, instanceIdentity, type RuntimeClassInfo } from '@kubeplus-isolation/spec';

export interface OwnClass {
  name: string;
  /** The handler the policy is written for (the instance's minimum's). */
  handler: string;
  /** The name is held by a class the instance does not own: judged like any other class. */
  conflict: boolean;
  instance: InstanceIdentity;
}

/**
 * For every name in `allowed`: when it got its current handler (RFC 3339, whole seconds), `''`
 * when not known; keys in `allowed`'s (sorted) order. Nothing of a class at `''` is handed out.
 */
export function allowedClassesSince(
  allowed: readonly string[],
  classes: readonly RuntimeClassInfo[],
  own: OwnClass,
): Record<string, string> {
  const byName = new Map(classes.map((rc) => [rc.name, rc]));
  const out: Record<string, string> = {};
  for (const name of allowed) {
    const rc = byName.get(name);
    let since = rc?.createdAt ?? '';
    if (rc !== undefined && name === own.name && !own.conflict) {
      const ours =
        rc.generated && rc.owner !== undefined && instanceIdentity(rc.owner) === instanceIdentity(own.instance);
      if (!ours || rc.handler !== own.handler) since = ''; // about to be (re-)created: its time is not known yet
    }
    out[name] = since;
  }
  return out;
}
