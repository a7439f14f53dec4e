/**
 * When a RuntimeClass NAME got the handler it has now. `RuntimeClass.handler` is immutable: a
 * class of the same name with another handler is another object (deleted and created again, as
 * the operator does when a minimum changes, or a platform team does by hand), so the time the name
 * got its current handler is that object's `metadata.creationTimestamp`.
 *
 * An object (a Sandbox, a Pod) created at or before that time may have started under the previous
 * handler: the kubelet reads the class's handler when it starts the Pod, and a Pod never moves to
 * another handler. Kubernetes writes creationTimestamps with second granularity, so an object
 * created in the same second as the class cannot be told apart: it counts as before (the safe
 * side), and only one created strictly after is known to run the current handler. Pure.
 */

/** RFC 3339 in Kubernetes' own form (UTC, whole seconds, `Z`): `2026-12-07T05:50:00Z`. */
const RFC3339_SECONDS = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z$/;

/**
 * A creationTimestamp as Kubernetes writes it, from what a client holds: the API's string, or a
 * `Date` (@kubernetes/client-node deserializes typed objects' timestamps). Sub-seconds are cut
 * (the API server never writes any). Undefined when absent or not a time.
 */
export function rfc3339Seconds(value: unknown): string | undefined {
  let ms: number;
  if (value instanceof Date) ms = value.getTime();
  else if (typeof value === 'string' && value !== '') ms = Date.parse(value);
  else return undefined;
  if (!Number.isFinite(ms)) return undefined;
  const out = new Date(Math.floor(ms / 1000) * 1000).toISOString().replace(/\.\d{3}Z$/, 'Z');
  return RFC3339_SECONDS.test(out) ? out : undefined;
}

/**
 * Whether an object created at `created` may have started before its class got its current
 * handler at `since` (both creationTimestamps): created at or before it, at second granularity.
 * False when either time is unknown: nothing is claimed that cannot be read.
 */
export function startedBeforeHandler(created: unknown, since: unknown): boolean {
  const c = rfc3339Seconds(created);
  const s = rfc3339Seconds(since);
  return c !== undefined && s !== undefined && Date.parse(c) <= Date.parse(s);
}
