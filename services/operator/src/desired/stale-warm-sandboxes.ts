/**
 * Warm-pool Sandboxes left behind by a handler change (issue 36, "handed out after a tightening"),
 * decided purely; the instance reconciler deletes them (controllers/instances/sandbox-sync.ts).
 *
 * A SandboxWarmPool keeps Sandboxes started ahead of demand; a SandboxClaim adopts one. One
 * created at or before its class got its current handler (`RuntimeClass.handler` is immutable:
 * a minimum raised re-creates `kubeplus-sandbox-<instance>`, a platform team may re-create its
 * class) may run the old handler, and the policies refuse to hand it out (`sandbox-admission.ts`,
 * `handedOut`). Upstream's claim controller does not move on from a refused adoption (v1.0.1
 * extensions/controllers/sandboxclaim_controller.go): it records the Sandbox's name on the claim
 * (annotation `agents.x-k8s.io/sandbox-name`, `AssignedSandboxNameAnnotation`) BEFORE patching
 * the Sandbox's ownerReferences (`adoptSandboxFromCandidates` → `completeAdoption`); the
 * refused patch (403) is returned as the reconcile's error; the next reconcile's
 * `getOrCreateSandbox` finds that name, sees the Sandbox still controlled by the warm pool, and
 * calls `completeAdoption` on it again — refused again, forever. It lets go of the name only
 * when the Sandbox is gone (404: "removing stale reference") or another claim controls it. So
 * the stale Sandbox is deleted: the claim then adopts another warm one or creates its own from
 * the template, and the pool replaces it, both under the current handler.
 *
 * Only a Sandbox the warm pool still controls is touched (a claimed one is the tenant's, running:
 * the compliance Report names it instead), only when its class is allowed and its time known
 * (`class-since.ts`): a class the policies refuse by name is not this decision's.
 */
import { rfc3339Seconds, runtimeClassOf, startedBeforeHandler } from '@kubeplus-isolation/spec';

/** The controller owner of a warm-pool Sandbox: a SandboxWarmPool of Agent Sandbox's extensions group, any version. */
export const WARM_POOL_OWNER = { group: 'extensions.agents.x-k8s.io', kind: 'SandboxWarmPool' } as const;
/** The label the pool controller puts on its Sandboxes (and the claim controller removes on adoption). */
export const WARM_POOL_SANDBOX_LABEL = 'agents.x-k8s.io/warm-pool-sandbox';

/** The parts of a Sandbox this reads; any other shape is tolerated. */
export interface WarmSandboxLike {
  metadata?:
    | {
        name?: unknown;
        uid?: unknown;
        resourceVersion?: unknown;
        creationTimestamp?: unknown;
        deletionTimestamp?: unknown;
        ownerReferences?: unknown;
      }
    | undefined;
  spec?: unknown;
}

export interface StaleWarmSandbox {
  name: string;
  uid: string;
  resourceVersion?: string;
  runtimeClassName: string;
  /** When the Sandbox was created. */
  createdAt: string;
  /** When its class got its current handler. */
  since: string;
}

function controlledByWarmPool(ownerReferences: unknown): boolean {
  if (!Array.isArray(ownerReferences)) return false;
  return ownerReferences.some((r: unknown) => {
    if (typeof r !== 'object' || r === null) return false;
    const ref = r as { apiVersion?: unknown; kind?: unknown; controller?: unknown };
    return (
      ref.controller === true &&
      ref.kind === WARM_POOL_OWNER.kind &&
      typeof ref.apiVersion === 'string' &&
      ref.apiVersion.startsWith(`${WARM_POOL_OWNER.group}/`)
    );
  });
}

/**
 * The Sandboxes among `sandboxes` (one namespace's) that a warm pool controls, not being deleted,
 * whose class is in `since` with a time (allowed, its time known) and that were created at or before that
 * time; in input order. `since`: `SandboxPolicy.allowedRuntimeClassesSince`.
 */
export function staleWarmSandboxes(
  sandboxes: readonly WarmSandboxLike[],
  since: Readonly<Record<string, string>>,
): StaleWarmSandbox[] {
  const out: StaleWarmSandbox[] = [];
  for (const sandbox of sandboxes) {
    const meta = sandbox?.metadata;
    if (meta === undefined) continue;
    const { name, uid, resourceVersion } = meta;
    if (typeof name !== 'string' || name === '' || typeof uid !== 'string' || uid === '') continue;
    if (meta.deletionTimestamp !== undefined && meta.deletionTimestamp !== null) continue;
    if (!controlledByWarmPool(meta.ownerReferences)) continue;
    const runtimeClassName = runtimeClassOf(sandbox as Parameters<typeof runtimeClassOf>[0]);
    const classSince = Object.hasOwn(since, runtimeClassName) ? since[runtimeClassName] : undefined;
    const createdAt = rfc3339Seconds(meta.creationTimestamp);
    // '' (a time not known yet, `class-since.ts`) is no time: `startedBeforeHandler` is false.
    if (classSince === undefined || createdAt === undefined || !startedBeforeHandler(createdAt, classSince)) continue;
    out.push({
      name,
      uid,
      ...(typeof resourceVersion === 'string' && resourceVersion !== '' ? { resourceVersion } : {}),
      runtimeClassName,
      createdAt,
      since: classSince,
    });
  }
  return out;
}

/** The Event message for the Sandboxes deleted in `namespace`. */
export function staleWarmSandboxesMessage(namespace: string, deleted: readonly StaleWarmSandbox[]): string {
  const each = deleted.map(
    (s) =>
      `${s.name} (created ${s.createdAt}, RuntimeClass ${JSON.stringify(s.runtimeClassName)} got its current handler ${s.since})`,
  );
  return (
    `deleted ${deleted.length} warm-pool Sandbox${deleted.length === 1 ? '' : 'es'} in ${namespace} created before ` +
    `their class got its current handler, so they may run the old one and are never handed out: ${each.join(', ')}; ` +
    'their pools re-create them under the current handler'
  );
}
