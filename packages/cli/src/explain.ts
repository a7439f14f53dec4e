/**
 * `explain NAMESPACE`: the isolation of one namespace, from what is in the cluster (read-only).
 * `gatherFacts` reads; `explain` decides (pure), with packages/spec's judges — the same the
 * operator's audit (`findUnisolatedPods`) and compliance report (`namespaceSandboxPolicy`,
 * `findWeakSandboxes`) use; `formatExplanation` writes it for a person.
 */
import {
  DEFAULT_LEVEL_HANDLERS,
  decideTenantNamespace,
  findUnisolatedPods,
  findWeakSandboxes,
  type HandlerLevels,
  handlerMeetsMinimum,
  type InstanceIdentity,
  instanceIdentity,
  lastGoodMinimums,
  levelOfHandler,
  NODE_ISOLATION_ANNOTATION,
  NODE_ISOLATION_ENABLED_LABEL,
  NODE_ISOLATION_ENABLED_VALUE,
  NODE_ISOLATION_RESOLVED_ANNOTATION,
  type NodeIsolationSpec,
  namespaceSandboxPolicy,
  OWNER_ANNOTATION,
  type PodLike,
  type PolicyRole,
  parseInstanceIdentity,
  parseNodeIsolation,
  parseSandboxIsolation,
  policyName,
  type RuntimeClassInfo,
  type RuntimeLevel,
  runtimeClassName,
  SANDBOX_ISOLATION_ANNOTATION,
  type SandboxLike,
  type SandboxPodLike,
  type Toleration,
  tenantOf,
} from '@kubeplus-isolation/spec';

// ---- facts: what the cluster holds, as read ---------------------------------------------------

/** A cluster-scoped object's metadata as far as ownership goes. */
export interface OwnedMeta {
  name: string;
  /** Its `kubeplus.io/owner` annotation. */
  owner?: string;
}

export interface InstanceFacts {
  identity: InstanceIdentity;
  /** Undefined when the instance could not be read; then `readError` says why. */
  annotations?: Record<string, string>;
  /** RFC 3339, when read (the tenant-namespace guard compares it with the namespace's). */
  creationTimestamp?: string;
  readError?: string;
}

export interface ExplainFacts {
  namespace: string;
  platformNamespace: string;
  /** Undefined when the namespace does not exist. */
  namespaceMeta?: { labels: Record<string, string>; annotations: Record<string, string>; creationTimestamp?: string };
  instances: InstanceFacts[];
  /** `createdAt`: when the class got its handler (its creationTimestamp; the handler is immutable). */
  runtimeClasses: Array<OwnedMeta & { handler: string; createdAt?: string }>;
  /** Admission policies and their bindings carrying `kubeplus.io/owner` (by kind). */
  policies: Array<OwnedMeta & { kind: string }>;
  /** `policyName`: the policy the binding binds (the instance's own, or a shared one). */
  bindings: Array<OwnedMeta & { kind: string; policyName?: string }>;
  /**
   * The shared sandbox policies present (`Kind/name`, operator --sandbox-policy-layout shared):
   * owned by no instance, so not among `policies`.
   */
  sharedPolicies?: string[];
  /** MutatingWebhookConfigurations holding the node-isolation webhook. */
  webhooks: Array<{ configuration: string; failurePolicy: string }>;
  /** The admission-policy engine's NodeIsolation parameter in the namespace; undefined when the kind is not served. */
  nodeIsolationParams?: boolean;
  pods: Array<PodLike & SandboxPodLike>;
  /** Undefined when Agent Sandbox is not installed. */
  sandboxes?: SandboxLike[];
  handlerLevels: HandlerLevels;
}

/** The owners named by kubeplus-isolation's objects whose tenant namespace is `namespace`, sorted. */
export function ownersOf(
  namespace: string,
  platformNamespace: string,
  nsOwner: string | undefined,
  objects: readonly OwnedMeta[],
): InstanceIdentity[] {
  const out = new Map<string, InstanceIdentity>();
  for (const text of [nsOwner, ...objects.map((o) => o.owner)]) {
    const id = text === undefined ? undefined : parseInstanceIdentity(text);
    if (id !== undefined && tenantOf(id, platformNamespace) === namespace) out.set(instanceIdentity(id), id);
  }
  return [...out.entries()].sort(([a], [b]) => a.localeCompare(b)).map(([, id]) => id);
}

// ---- the explanation ----------------------------------------------------------------------------

export type Engine = 'webhook' | 'admission-policy' | 'both' | 'none';

export interface AnnotationState {
  present: boolean;
  valid: boolean;
  errors: string[];
}

export interface PolicyState {
  role: PolicyRole;
  kind: string;
  name: string;
  exists: boolean;
  bound: boolean;
  /** Shared layout: the cluster's shared policy the instance's binding binds (then `exists` is about it). */
  sharedPolicy?: string;
}

export interface InstanceExplanation {
  identity: string;
  readError?: string;
  /**
   * Set when the operator refuses to label or annotate the namespace this instance names
   * (`decideTenantNamespace`; the release's namespace is not known here, so that refusal is not shown).
   */
  tenantNamespaceRefused?: { reason: string; message: string };
  nodeIsolation: AnnotationState;
  sandboxIsolation: AnnotationState & { minRuntimeClass?: RuntimeLevel; enforce?: boolean };
  /**
   * The class the instance's Sandboxes are told to use: its generated `kubeplus-sandbox-<instance>`,
   * or the platform's class its annotation names (`runtimeClassName`; then `platform.problem` says
   * why the operator cannot use it, as the operator judges: it does not exist, kubeplus-isolation
   * generated it, or its handler is below the namespace's minimum; absent when it is used).
   */
  runtimeClass: {
    name: string;
    exists: boolean;
    owned: boolean;
    handler?: string;
    level?: RuntimeLevel;
    platform?: { problem?: 'missing' | 'not-platform' | 'below-minimum' };
  };
  /** The policies this instance's mode generates, each with whether it and its binding exist. */
  policies: PolicyState[];
}

export interface Explanation {
  namespace: string;
  exists: boolean;
  nodeIsolation: {
    /** The namespace carries the label the webhook's namespaceSelector matches. */
    enabled: boolean;
    /** The instance the namespace's `kubeplus.io/owner` names. */
    isolatedBy?: string;
    /** The resolved mandate in force (the namespace's resolved annotation). */
    mandate?: NodeIsolationSpec;
    mandateErrors?: string[];
    engine: Engine;
    webhooks: Array<{ configuration: string; failurePolicy: string }>;
    nodeIsolationParams: 'present' | 'absent' | 'not served';
  };
  sandboxIsolation: { minimum?: RuntimeLevel; mode?: 'enforce' | 'advisory' };
  instances: InstanceExplanation[];
  nonCompliant: {
    pods: Array<{
      name: string;
      reason: string;
      missingNodeSelector: Record<string, string>;
      missingTolerations: Toleration[];
    }>;
    /** Undefined when Agent Sandbox is not installed. */
    sandboxes?: Array<{ name: string; reason: string; runtimeClassName: string; pod?: string }>;
  };
}

function annotationState(
  text: string | undefined,
  parse: (text: unknown) => { ok: true } | { ok: false; errors: string[] },
): AnnotationState {
  if (text === undefined) return { present: false, valid: true, errors: [] };
  const r = parse(text);
  return { present: true, valid: r.ok, errors: r.ok ? [] : r.errors };
}

const POLICY_KIND: Record<PolicyRole, string> = {
  enforce: 'ValidatingAdmissionPolicy',
  advisory: 'ValidatingAdmissionPolicy',
  default: 'MutatingAdmissionPolicy',
};

function classText(c: { runtimeClassName: string; handler?: string; level?: RuntimeLevel }): string {
  if (c.runtimeClassName === '') return 'no runtime class';
  if (c.handler === undefined) return `runtime class ${c.runtimeClassName}, which does not exist`;
  return `runtime class ${c.runtimeClassName} (handler ${c.handler}, ${c.level === undefined ? 'strength unknown' : `level ${c.level}`})`;
}

/** The explanation of `facts`. Pure. */
export function explain(facts: ExplainFacts): Explanation {
  const meta = facts.namespaceMeta;
  const labels = meta?.labels ?? {};
  const annotations = meta?.annotations ?? {};
  const enabled = labels[NODE_ISOLATION_ENABLED_LABEL] === NODE_ISOLATION_ENABLED_VALUE;
  const resolvedText = annotations[NODE_ISOLATION_RESOLVED_ANNOTATION];
  const resolved = resolvedText === undefined ? undefined : parseNodeIsolation(resolvedText);
  const webhook = facts.webhooks.length > 0;
  const params = facts.nodeIsolationParams === true;
  const engine: Engine = webhook && params ? 'both' : webhook ? 'webhook' : params ? 'admission-policy' : 'none';

  const classes: RuntimeClassInfo[] = facts.runtimeClasses.map((rc) => {
    const owner = rc.owner === undefined ? undefined : parseInstanceIdentity(rc.owner);
    const since = rc.createdAt === undefined ? {} : { createdAt: rc.createdAt };
    return owner === undefined
      ? { name: rc.name, handler: rc.handler, generated: rc.owner !== undefined, ...since }
      : { name: rc.name, handler: rc.handler, generated: true, owner, ...since };
  });
  const policyNames = new Set(facts.policies.map((p) => `${p.kind}/${p.name}`));
  const bindingNames = new Set(facts.bindings.map((b) => `${b.kind}/${b.name}`));
  const sharedPolicies = new Set(facts.sharedPolicies ?? []);

  const sandboxInstances = facts.instances.map((i) => ({
    ...i.identity,
    annotation: i.annotations?.[SANDBOX_ISOLATION_ANNOTATION] ?? '',
  }));
  // As the operator: instances carrying the annotation bind; an invalid one with its last good minimum.
  const sandboxPolicy = namespaceSandboxPolicy(
    sandboxInstances.filter((i) => i.annotation !== ''),
    facts.namespace,
    facts.platformNamespace,
    lastGoodMinimums(classes, DEFAULT_LEVEL_HANDLERS, facts.handlerLevels),
  );

  const instances: InstanceExplanation[] = facts.instances.map((i) => {
    const id = instanceIdentity(i.identity);
    const sandboxText = i.annotations?.[SANDBOX_ISOLATION_ANNOTATION];
    const sandbox = sandboxText === undefined ? undefined : parseSandboxIsolation(sandboxText);
    const platformName = sandbox?.ok === true ? sandbox.value.runtimeClassName : undefined;
    const rcName = platformName ?? runtimeClassName(i.identity.name);
    const rc = facts.runtimeClasses.find((c) => c.name === rcName);
    const level = rc === undefined ? undefined : levelOfHandler(rc.handler, facts.handlerLevels);
    // The operator's rule (services/operator desired/sandbox-platform-class.ts): against the namespace's minimum.
    const minimum = sandboxPolicy?.minimum ?? (sandbox?.ok === true ? sandbox.value.minRuntimeClass : 'runc');
    const problem =
      rc === undefined
        ? 'missing'
        : rc.owner !== undefined
          ? 'not-platform'
          : handlerMeetsMinimum(rc.handler, minimum, facts.handlerLevels)
            ? undefined
            : 'below-minimum';
    const roles: PolicyRole[] =
      sandbox?.ok === true ? (sandbox.value.enforce ? ['enforce'] : ['advisory', 'default']) : [];
    // An invalid annotation keeps the last policies applied: show whichever exist.
    const shown: PolicyRole[] =
      sandbox?.ok === false
        ? (['enforce', 'advisory', 'default'] as PolicyRole[]).filter((r) =>
            policyNames.has(`${POLICY_KIND[r]}/${policyName(i.identity, r)}`),
          )
        : roles;
    // The operator's own decision about the namespace this instance names (issue 35).
    const decision = decideTenantNamespace({
      instance: {
        ...i.identity,
        ...(i.creationTimestamp === undefined ? {} : { creationTimestamp: i.creationTimestamp }),
      },
      platformNamespace: facts.platformNamespace,
      namespace: meta,
    });
    return {
      identity: id,
      ...(i.readError === undefined ? {} : { readError: i.readError }),
      ...(decision.decision === 'refuse' && decision.namespace === facts.namespace
        ? { tenantNamespaceRefused: { reason: decision.reason, message: decision.message } }
        : {}),
      nodeIsolation: annotationState(i.annotations?.[NODE_ISOLATION_ANNOTATION], parseNodeIsolation),
      sandboxIsolation: {
        ...annotationState(sandboxText, parseSandboxIsolation),
        ...(sandbox?.ok === true
          ? { minRuntimeClass: sandbox.value.minRuntimeClass, enforce: sandbox.value.enforce }
          : {}),
      },
      runtimeClass: {
        name: rcName,
        exists: rc !== undefined,
        owned: rc?.owner === id,
        ...(rc === undefined ? {} : { handler: rc.handler }),
        ...(level === undefined ? {} : { level }),
        ...(platformName === undefined ? {} : { platform: problem === undefined ? {} : { problem } }),
      },
      policies: shown.map((role) => {
        const name = policyName(i.identity, role);
        const kind = POLICY_KIND[role];
        // The shared layout: the instance's binding binds the cluster's one policy of that kind.
        const boundTo = facts.bindings.find((b) => b.kind === `${kind}Binding` && b.name === name)?.policyName;
        const shared = boundTo !== undefined && boundTo !== name ? boundTo : undefined;
        return {
          role,
          kind,
          name,
          exists: shared === undefined ? policyNames.has(`${kind}/${name}`) : sharedPolicies.has(`${kind}/${shared}`),
          bound: bindingNames.has(`${kind}Binding/${name}`),
          ...(shared === undefined ? {} : { sharedPolicy: shared }),
        };
      }),
    };
  });

  const mandate = resolved?.ok === true ? resolved.value : undefined;
  const pods =
    mandate === undefined || !enabled
      ? []
      : findUnisolatedPods(mandate, facts.pods).map((p) => ({
          name: p.name,
          reason: `admitted without the node placement it mandates (lacks ${p.missing.join(' and ')}): created while no admission engine patched it, e.g. during a webhook outage (failurePolicy Ignore); recreate it`,
          missingNodeSelector: p.missingNodeSelector,
          missingTolerations: p.missingTolerations,
        }));
  const sandboxes =
    facts.sandboxes === undefined
      ? undefined
      : sandboxPolicy === undefined
        ? []
        : // A Sandbox's Pod: the one whose controller owner reference carries its uid (any kind).
          findWeakSandboxes(sandboxPolicy.minimum, facts.sandboxes, classes, facts.handlerLevels, facts.pods).map(
            (w) => ({
              name: w.name,
              runtimeClassName: w.runtimeClassName,
              ...(w.pod === undefined ? {} : { pod: w.pod.name }),
              reason:
                w.startedBeforeHandler !== undefined
                  ? `its Pod ${w.pod?.name ?? ''} was created (${w.startedBeforeHandler.createdAt}) before RuntimeClass ${JSON.stringify(w.startedBeforeHandler.runtimeClassName)} got its current handler (${w.startedBeforeHandler.since}): it may run the previous one, short of the minimum ${sandboxPolicy.minimum}`
                  : w.pod === undefined
                    ? `asks for ${classText(w)}, short of the minimum ${sandboxPolicy.minimum}`
                    : `its Pod ${w.pod.name} runs ${classText(w.pod)}, short of the minimum ${sandboxPolicy.minimum}`,
            }),
          );

  const owner = annotations[OWNER_ANNOTATION];
  return {
    namespace: facts.namespace,
    exists: meta !== undefined,
    nodeIsolation: {
      enabled,
      ...(owner === undefined || resolvedText === undefined ? {} : { isolatedBy: owner }),
      ...(mandate === undefined ? {} : { mandate }),
      ...(resolved?.ok === false ? { mandateErrors: resolved.errors } : {}),
      engine,
      webhooks: facts.webhooks,
      nodeIsolationParams:
        facts.nodeIsolationParams === undefined ? 'not served' : facts.nodeIsolationParams ? 'present' : 'absent',
    },
    sandboxIsolation:
      sandboxPolicy === undefined
        ? {}
        : { minimum: sandboxPolicy.minimum, mode: sandboxPolicy.enforce ? 'enforce' : 'advisory' },
    instances,
    nonCompliant: { pods, ...(sandboxes === undefined ? {} : { sandboxes }) },
  };
}

// ---- for a person -------------------------------------------------------------------------------

function mandateText(m: NodeIsolationSpec): string {
  const sel = Object.entries(m.nodeSelector).map(([k, v]) => `${k}=${v}`);
  const tol = m.tolerations.map(
    (t) =>
      `${t.key ?? '*'}${t.operator === 'Exists' ? ' exists' : `=${t.value ?? ''}`}${t.effect ? `:${t.effect}` : ''}`,
  );
  return `nodeSelector {${sel.join(', ')}}, tolerations [${tol.join(', ')}]`;
}

function yes(b: boolean): string {
  return b ? 'yes' : 'NO';
}

export function formatExplanation(e: Explanation): string {
  const out: string[] = [`Namespace ${e.namespace}`];
  if (!e.exists) return `${out[0]}: not found\n`;
  const n = e.nodeIsolation;
  out.push('', 'Node isolation');
  if (n.isolatedBy === undefined && !n.enabled) out.push('  not isolated (no resolved mandate, no isolation label)');
  else {
    out.push(`  isolated by:  ${n.isolatedBy ?? '(no kubeplus.io/owner on the namespace)'}`);
    out.push(
      `  label ${NODE_ISOLATION_ENABLED_LABEL}: ${n.enabled ? 'set' : 'NOT set (the webhook skips this namespace)'}`,
    );
    if (n.mandate !== undefined) out.push(`  mandate:      ${mandateText(n.mandate)}`);
    if (n.mandateErrors !== undefined) out.push(`  resolved mandate is INVALID: ${n.mandateErrors.join('; ')}`);
  }
  out.push(
    `  engine:       ${n.engine}${n.webhooks.map((w) => ` (webhook in ${w.configuration}, failurePolicy ${w.failurePolicy})`).join('')}${n.nodeIsolationParams === 'present' ? ' (NodeIsolation parameter present)' : ''}`,
  );
  const s = e.sandboxIsolation;
  out.push('', 'Sandbox isolation');
  out.push(s.minimum === undefined ? '  none bound' : `  minimum:      ${s.minimum} (${s.mode})`);
  for (const i of e.instances) {
    out.push('', `Instance ${i.identity}`);
    if (i.readError !== undefined) out.push(`  could not be read: ${i.readError}`);
    if (i.tenantNamespaceRefused !== undefined)
      out.push(`  REFUSED (${i.tenantNamespaceRefused.reason}): ${i.tenantNamespaceRefused.message}`);
    for (const [key, a] of [
      [NODE_ISOLATION_ANNOTATION, i.nodeIsolation],
      [SANDBOX_ISOLATION_ANNOTATION, i.sandboxIsolation],
    ] as const) {
      if (!a.present) continue;
      out.push(
        a.valid
          ? `  ${key}: valid`
          : `  ${key}: INVALID (the operator keeps the state last applied): ${a.errors.join('; ')}`,
      );
    }
    const rc = i.runtimeClass;
    if (rc.platform !== undefined) {
      const problem = rc.platform.problem;
      const state = rc.exists
        ? `exists, handler ${rc.handler}${rc.level === undefined ? '' : ` (${rc.level})`}`
        : 'MISSING';
      const verdict =
        problem === undefined
          ? 'recommended (and defaulted to in advisory mode)'
          : `NOT usable (${problem === 'missing' ? 'it does not exist' : problem === 'not-platform' ? 'kubeplus-isolation generated it, it is no platform class' : `its handler is below the minimum ${e.sandboxIsolation.minimum ?? ''}`.trimEnd()}): nothing is recommended or defaulted to`;
      out.push(`  RuntimeClass ${rc.name} (the platform's, named by runtimeClassName): ${state}; ${verdict}`);
    } else if (i.sandboxIsolation.present || rc.exists) {
      out.push(
        `  RuntimeClass ${rc.name}: ${rc.exists ? `exists, handler ${rc.handler}${rc.level === undefined ? '' : ` (${rc.level})`}${rc.owned ? '' : ', NOT owned by this instance'}` : 'MISSING'}`,
      );
    }
    for (const p of i.policies) {
      out.push(
        p.sharedPolicy === undefined
          ? `  ${p.kind} ${p.name}: exists ${yes(p.exists)}, bound ${yes(p.bound)}${p.exists && p.bound ? ' (in force)' : ''}`
          : `  ${p.kind}Binding ${p.name} of the shared ${p.kind} ${p.sharedPolicy}: exists ${yes(p.exists)}, bound ${yes(p.bound)}${p.exists && p.bound ? ' (in force)' : ''}`,
      );
    }
  }
  out.push('', 'Not complying');
  const pods = e.nonCompliant.pods;
  const sandboxes = e.nonCompliant.sandboxes;
  if (pods.length === 0 && (sandboxes ?? []).length === 0) out.push('  nothing');
  for (const p of pods) out.push(`  Pod ${p.name}: ${p.reason}`);
  for (const sb of sandboxes ?? []) out.push(`  Sandbox ${sb.name}: ${sb.reason}`);
  if (sandboxes === undefined) out.push('  (Agent Sandbox is not installed: no Sandboxes to judge)');
  return `${out.join('\n')}\n`;
}
