/**
 * Sandbox isolation of one instance as a plan, decided purely like node isolation's
 * (`node-isolation.ts` `planNodeIsolation`): from the annotation, the cluster's RuntimeClasses,
 * the holder of the instance's RuntimeClass name and the other instances bound to the same
 * namespace, it says what must exist (`desiredSandboxPolicy`), which Warnings to record, which
 * conflicts to count and whether to come back later. The reconciler's sync only writes it.
 */
import {
  type HandlerLevels,
  type ParseResult,
  type RuntimeLevel,
  runtimeClassName,
  SANDBOX_ISOLATION_ANNOTATION,
  type SandboxIsolationSpec,
} from '@kubeplus-isolation/spec';
import { EventReason } from './event-reasons.js';
import { type Instance, instanceIdentity } from './instance.js';
import type { ManagedObject, MutatingPolicyApiVersion } from './objects.js';
import { isOwnedBy, type MetaLike, ownerOf } from './owner.js';
import { describeSpec, type SandboxInstanceMeta, sandboxPeers, stricterPolicyMessage } from './sandbox-peers.js';
import { type PlatformClassProblem, platformClassMessage } from './sandbox-platform-class.js';
import {
  desiredSandboxPolicy,
  type RuntimeClassInfo,
  type SandboxPolicy,
  type SandboxPolicyLayout,
} from './sandbox-policy.js';

/** A Warning Event the plan asks for. */
export interface PlannedWarning {
  reason: EventReason;
  message: string;
}

export interface SandboxPlanInput {
  instance: Instance;
  tenantNamespace: string;
  parsed: ParseResult<SandboxIsolationSpec>;
  runtimeClasses: readonly RuntimeClassInfo[];
  /** The RuntimeClass named `kubeplus-sandbox-<instance>` as it is now, if it exists. */
  currentRuntimeClass: { metadata: MetaLike } | undefined;
  /** Every sandbox-annotated instance (the peers are picked from them). */
  sandboxInstances: readonly SandboxInstanceMeta[];
  platformNamespace: string;
  handlerLevels: HandlerLevels;
  levelHandlers: Readonly<Record<RuntimeLevel, string>>;
  mutatingPolicyApiVersion: MutatingPolicyApiVersion | undefined;
  /** How the admission policies are laid out (default per-instance). */
  layout?: SandboxPolicyLayout;
}

export type SandboxPlan =
  /** The annotation does not validate: tell the user, change nothing. */
  | { action: 'invalid'; warnings: PlannedWarning[] }
  | {
      action: 'apply';
      spec: SandboxIsolationSpec;
      policy: SandboxPolicy;
      /** The RuntimeClass to write first and alone (the allowed list assumed it is ours); none when its name is held. */
      runtimeClass: ManagedObject | undefined;
      /** Policies and bindings, in apply order, written after the RuntimeClass. */
      rest: ManagedObject[];
      warnings: PlannedWarning[];
      /** The name `kubeplus-sandbox-<instance>` is held by another instance: count it and retry later. */
      runtimeClassConflict: boolean;
      /** Advisory mode on a cluster serving no MutatingAdmissionPolicy API (for the metric). */
      mutatingPolicyUnavailable: boolean;
      /** The platform class the annotation names cannot be used, and why (for the metric). */
      platformRuntimeClassUnusable?: PlatformClassProblem;
    };

export function planSandboxIsolation(input: SandboxPlanInput): SandboxPlan {
  const { instance, tenantNamespace, parsed } = input;
  if (!parsed.ok) {
    return {
      action: 'invalid',
      warnings: [
        {
          reason: EventReason.InvalidSandboxIsolation,
          message: `${SANDBOX_ISOLATION_ANNOTATION} is invalid, keeping the sandbox policy last applied: ${parsed.errors.join('; ')}`,
        },
      ],
    };
  }
  const spec = parsed.value;
  const current = input.currentRuntimeClass;
  // With a platform class named, the instance wants no class of that name: whoever holds it is no conflict.
  const runtimeClassConflict =
    spec.runtimeClassName === undefined && current !== undefined && !isOwnedBy(current.metadata, instance);
  const peers = sandboxPeers(input.sandboxInstances, instance, tenantNamespace, input.platformNamespace);
  const policy = desiredSandboxPolicy({
    instance,
    tenantNamespace,
    spec,
    runtimeClasses: input.runtimeClasses,
    handlerLevels: input.handlerLevels,
    levelHandlers: input.levelHandlers,
    mutatingPolicyApiVersion: input.mutatingPolicyApiVersion,
    layout: input.layout ?? 'per-instance',
    runtimeClassConflict,
    platformNamespace: input.platformNamespace,
    peers,
  });
  const warnings: PlannedWarning[] = [];
  if (runtimeClassConflict) {
    const holder = ownerOf(current.metadata);
    warnings.push({
      reason: EventReason.RuntimeClassConflict,
      message: `RuntimeClass ${runtimeClassName(instance.name)} belongs to ${holder === undefined ? 'someone else' : instanceIdentity(holder)}; not taking it over. Sandboxes in ${tenantNamespace} may use: ${policy.allowedRuntimeClasses.join(', ') || 'none'}`,
    });
  }
  for (const condition of policy.conditions) {
    warnings.push(
      condition === 'mutatingAdmissionPolicyUnavailable'
        ? {
            reason: EventReason.MutatingAdmissionPolicyUnavailable,
            message: `advisory mode: the cluster serves no MutatingAdmissionPolicy API, so an unset runtimeClassName is not defaulted to ${policy.recommendedRuntimeClass ?? 'a sandbox class'}; it is only warned about`,
          }
        : {
            reason: EventReason.NoDefaultRuntimeClass,
            message: `advisory mode: no RuntimeClass meeting ${spec.minRuntimeClass} is available to default to`,
          },
    );
  }
  const platform = policy.platformRuntimeClass;
  const unusable = platform?.problem;
  if (platform !== undefined && unusable !== undefined) {
    warnings.push({
      reason: EventReason.PlatformRuntimeClassUnusable,
      message: platformClassMessage({ ...platform, problem: unusable }, spec, policy.effectiveMinimum, tenantNamespace),
    });
  }
  const governedBy = stricterPolicyMessage(spec, tenantNamespace, policy.stricterPeers);
  if (governedBy !== undefined) warnings.push({ reason: EventReason.StricterSandboxPolicy, message: governedBy });

  const [first, ...others] = policy.objects;
  const runtimeClass = first?.kind === 'RuntimeClass' ? first : undefined;
  return {
    action: 'apply',
    spec,
    policy,
    runtimeClass,
    rest: runtimeClass === undefined ? policy.objects : others,
    warnings,
    runtimeClassConflict,
    mutatingPolicyUnavailable: policy.conditions.includes('mutatingAdmissionPolicyUnavailable'),
    ...(unusable === undefined ? {} : { platformRuntimeClassUnusable: unusable }),
  };
}

/** The Normal Event message after writes: what the policy is and what changed. */
export function sandboxAppliedMessage(spec: SandboxIsolationSpec, objects: number, changes: readonly string[]): string {
  const platform = spec.runtimeClassName === undefined ? '' : `, platform RuntimeClass ${spec.runtimeClassName}`;
  return `${describeSpec(spec)}${platform} (${objects} objects): ${changes.join(', ')}`;
}
