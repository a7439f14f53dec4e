/**
 * Issue 36, bypass paths 2 and 3, on the real kube-apiserver (no node, no Agent Sandbox
 * controller: the harness installs its CRDs; this suite writes what a tenant, the kubelet, the
 * scheduler or the controller would write, and the real admission chain judges it):
 *
 * - path 2, class-change laundering: a Sandbox whose Pod started on class A, UPDATEd to an allowed
 *   class B, keeps its Pod on A (the controller never updates an existing Pod's spec), and a claim
 *   adopting it is judged on B. A Sandbox's runtime class cannot change; a SandboxTemplate's can
 *   (it runs nothing; each Sandbox stamped from it is judged at its own CREATE).
 * - path 3, ownership and subresources: the controller (v0.5.6+, v1.0.1 `checkOwnership`) takes a
 *   Pod whose CONTROLLER owner reference carries a Sandbox's UID, whatever kind it names; and the
 *   adoption labels (`agents.x-k8s.io/adoptable`, `agents.x-k8s.io/sandbox-name-hash`) can be
 *   added through `pods/status`, and through a Binding (Kubernetes 1.33+ copies a Binding's labels
 *   onto its Pod when PodTopologyLabelsAdmission is on: beta, on by default, from 1.35).
 * - no regression: the kubelet's status writes are not judged.
 *
 * Both policy layouts: per instance, and shared (one policy, a SandboxIsolation parameter per instance).
 */
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import {
  compareMinors,
  installCrds,
  installOpenReportsCrds,
  sandboxIsolationParamsCrd,
  waitFor,
} from '@kubeplus-isolation/e2e';
import { SANDBOX_ISOLATION_ANNOTATION, SHARED_SANDBOX_POLICY_NAME } from '@kubeplus-isolation/spec';
import {
  AdmissionregistrationV1Api,
  ApiException,
  CoreV1Api,
  CustomObjectsApi,
  type KubeConfig,
  type V1OwnerReference,
  type V1Pod,
} from '@kubernetes/client-node';
import { uniqueName } from './support/names.js';
import { createAgent, mergePatch, policyName, runtimeClassName, statusMessage } from './support/operator.js';
import {
  allowedWithout,
  createSandbox,
  denied,
  expectAllowed,
  expectDenied,
  patchSandbox,
  RuntimeClasses,
  type SandboxKind,
  type SandboxRef,
  waitForAdmission,
} from './support/operator-sandbox.js';
import { operatorSuite } from './support/operator-suite.js';
import { removeSharedLayout } from './support/shared-layout.js';
import { SHARED_MINOR } from './support/versions.js';

const ADOPTABLE = { 'agents.x-k8s.io/adoptable': 'true' };
const NAME_HASH_LABEL = 'agents.x-k8s.io/sandbox-name-hash';
/** No such scheduler: the cluster's scheduler leaves these Pods alone, so only this suite binds them. */
const NO_SCHEDULER = 'kpi-no-scheduler';
/** Kubernetes copies a Binding's labels onto its Pod from here (PodTopologyLabelsAdmission, beta and on by default). */
const BINDING_COPIES_LABELS = compareMinors(SHARED_MINOR, '1.35') >= 0;

/** The controller's tracking label value: FNV-1a 32 of the Sandbox's name, 8 hex digits (upstream `NameHash`). */
function nameHash(name: string): string {
  let h = 0x811c9dc5;
  for (const byte of Buffer.from(name, 'utf8')) {
    h ^= byte;
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return h.toString(16).padStart(8, '0');
}

type Outcome<T> = { allowed: true; value: T } | { allowed: false; code: number; message: string };

/** What admission made of a write: admitted (the response) or refused (status and message). */
async function attempt<T>(call: () => Promise<T>): Promise<Outcome<T>> {
  try {
    return { allowed: true, value: await call() };
  } catch (error) {
    if (error instanceof ApiException && (error.code === 403 || error.code === 422)) {
      return { allowed: false, code: error.code, message: statusMessage(error) };
    }
    throw error;
  }
}

function refusal<T>(outcome: Outcome<T>, what: string): string {
  if (outcome.allowed) throw new Error(`expected ${what} to be refused, but it was admitted`);
  expect(outcome.code).toBe(403);
  return outcome.message;
}

function admitted<T>(outcome: Outcome<T>, what: string): T {
  if (!outcome.allowed)
    throw new Error(`expected ${what} to be admitted, but: HTTP ${outcome.code} ${outcome.message}`);
  return outcome.value;
}

/** A Pod as a tenant would write it: `runtimeClassName`, labels and owners as given, never scheduled. */
function podBody(
  name: string,
  runtimeClass: string,
  opts: { labels?: Record<string, string>; owners?: V1OwnerReference[] } = {},
): V1Pod {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: {
      name,
      ...(opts.labels === undefined ? {} : { labels: opts.labels }),
      ...(opts.owners === undefined ? {} : { ownerReferences: opts.owners }),
    },
    spec: {
      runtimeClassName: runtimeClass,
      schedulerName: NO_SCHEDULER,
      terminationGracePeriodSeconds: 0,
      containers: [{ name: 'agent', image: 'registry.k8s.io/pause:3.10' }],
    },
  };
}

const AUDIT_PERIOD_S = 3;
const REPORT = { group: 'openreports.io', version: 'v1alpha1', plural: 'reports', name: 'kubeplus-isolation' };

interface ReportLike {
  results?: Array<{
    message?: string;
    resources?: Array<{ kind: string; name: string }>;
    properties?: Record<string, string>;
  }>;
}

const LAYOUTS = [
  { layout: 'per-instance', args: [] as string[] },
  { layout: 'shared', args: ['--sandbox-policy-layout=shared'] },
] as const;

describe.each(LAYOUTS)('bypass paths 2 and 3 closed, on the real API server ($layout layout)', ({ layout, args }) => {
  const suite = operatorSuite({
    name: `op-bypass-${layout === 'shared' ? 's' : 'p'}`,
    // A short audit period: the compliance Report (path 4) follows within seconds.
    args: [...args, `--audit-interval=${AUDIT_PERIOD_S}s`],
    beforeOperator: async ({ kc }) => {
      await installOpenReportsCrds(kc);
      if (layout === 'shared') await installCrds(kc, [sandboxIsolationParamsCrd()]);
    },
    ...(layout === 'shared' ? { afterTeardown: ({ kc }) => removeSharedLayout(kc) } : {}),
  });
  let kc: KubeConfig;
  let core: CoreV1Api;
  let ns = '';
  let advisoryNs = '';
  let own = '';
  let agentName = '';
  /** A platform class whose handler meets kata: allowed, like the own class. */
  let qemu = '';
  /** A platform class whose handler is runc: weaker than kata, refused. */
  let weak = '';
  let rcs: RuntimeClasses;

  const ref = (name: string, kind: SandboxKind = 'Sandbox', namespace = ns): SandboxRef => ({
    kind,
    version: 'v1beta1',
    namespace,
    name,
  });
  const readPod = (name: string): Promise<V1Pod> => core.readNamespacedPod({ namespace: ns, name });
  const createPod = (body: V1Pod) => attempt(() => core.createNamespacedPod({ namespace: ns, body }));
  const deletePod = (name: string) =>
    core.deleteNamespacedPod({ namespace: ns, name, gracePeriodSeconds: 0 }).catch(() => undefined);

  beforeAll(async () => {
    kc = suite.kc;
    core = kc.makeApiClient(CoreV1Api);
    rcs = new RuntimeClasses(kc);
    qemu = await rcs.create(uniqueName('kpi-bypass-qemu'), 'kata-qemu');
    weak = await rcs.create(uniqueName('kpi-bypass-runc'), 'runc');
    ns = await suite.tenantNamespace('kpi-bypass');
    advisoryNs = await suite.tenantNamespace('kpi-bypass-adv');
    agentName = uniqueName('bypass-agent');
    own = runtimeClassName(agentName);
    await createAgent(kc, ns, agentName, {
      [SANDBOX_ISOLATION_ANNOTATION]: JSON.stringify({ minRuntimeClass: 'kata', enforce: true }),
    });
    await createAgent(kc, advisoryNs, uniqueName('bypass-adv'), {
      [SANDBOX_ISOLATION_ANNOTATION]: JSON.stringify({ minRuntimeClass: 'kata', enforce: false }),
    });
    // In force, and following the RuntimeClasses: the weak class refused, the platform kata class admitted.
    await waitForAdmission(kc, ref('probe'), weak, 'to be denied', denied, 60_000);
    await waitForAdmission(kc, ref('probe'), qemu, 'to be admitted', allowedWithout, 60_000);
    await waitForAdmission(
      kc,
      ref('probe', 'Sandbox', advisoryNs),
      weak,
      'to be admitted with a warning',
      (a) => a.allowed && a.warnings.length > 0,
      60_000,
    );
  }, 120_000);

  afterAll(async () => {
    await rcs?.deleteAll();
  });

  test('the API server type-checks the policy against every kind it matches (a Binding included) without a warning', async () => {
    const name = layout === 'shared' ? SHARED_SANDBOX_POLICY_NAME : policyName(ns, agentName, 'enforce');
    const checked = await waitFor(
      `the API server's type check of ${name}`,
      async () => {
        const p = await kc.makeApiClient(AdmissionregistrationV1Api).readValidatingAdmissionPolicy({ name });
        return p.status?.observedGeneration === p.metadata?.generation ? p : undefined;
      },
      { timeoutMs: 30_000 },
    );
    expect(checked.spec?.matchConstraints?.resourceRules?.flatMap((r) => r.resources)).toEqual(
      expect.arrayContaining(['pods', 'pods/status', 'pods/binding', 'bindings']),
    );
    expect(checked.status?.typeChecking?.expressionWarnings ?? []).toEqual([]);
  });

  test("path 2: a Sandbox's runtime class cannot change on UPDATE, even to an allowed class; a SandboxTemplate's can, judged like a new one", async () => {
    expectAllowed(await createSandbox(kc, ref('launder'), own), 'a Sandbox on the own class');
    const message = expectDenied(
      await patchSandbox(kc, ref('launder'), { spec: { podTemplate: { spec: { runtimeClassName: qemu } } } }),
      `an UPDATE of the Sandbox's class to ${qemu} (allowed)`,
    );
    expect(message).toContain(
      `Sandbox launder runtimeClassName cannot change from "${own}" to "${qemu}": its Pod keeps the runtime class it started with`,
    );
    expect(message).toContain('delete and re-create the Sandbox to change its runtime class');
    // An UPDATE that keeps the class is not refused.
    expectAllowed(
      await patchSandbox(kc, ref('launder'), { metadata: { labels: { touched: 'yes' } } }),
      'an UPDATE keeping the class',
    );
    // A template runs nothing: its class may change to an allowed one, and never to a weak one.
    expectAllowed(await createSandbox(kc, ref('tpl', 'SandboxTemplate'), own), 'a SandboxTemplate on the own class');
    expectAllowed(
      await patchSandbox(kc, ref('tpl', 'SandboxTemplate'), {
        spec: { podTemplate: { spec: { runtimeClassName: qemu } } },
      }),
      `an UPDATE of the SandboxTemplate's class to ${qemu}`,
    );
    expect(
      expectDenied(
        await patchSandbox(kc, ref('tpl', 'SandboxTemplate'), {
          spec: { podTemplate: { spec: { runtimeClassName: weak } } },
        }),
        `an UPDATE of the SandboxTemplate's class to ${weak}`,
      ),
    ).toContain(`runtimeClassName "${weak}" is not allowed here`);
    // Advisory mode: admitted, with the same words as a warning.
    expectAllowed(await createSandbox(kc, ref('launder', 'Sandbox', advisoryNs), qemu), 'an advisory Sandbox');
    const warned = expectAllowed(
      await patchSandbox(kc, ref('launder', 'Sandbox', advisoryNs), {
        spec: { podTemplate: { spec: { runtimeClassName: runtimeClassName('x') } } },
      }),
      'an advisory UPDATE of the class',
    );
    expect(warned.warnings.join('\n')).toContain(`runtimeClassName cannot change from "${qemu}"`);
  });

  test('path 3: a Pod given an adoption label through pods/status is refused on a weak class; a compliant one may be', async () => {
    admitted(await createPod(podBody('quiet', weak)), 'a plain weak Pod (none of sandbox isolation’s business)');
    const labelled = await attempt(() =>
      core.patchNamespacedPodStatus(
        { namespace: ns, name: 'quiet', body: { metadata: { labels: { [NAME_HASH_LABEL]: nameHash('quiet') } } } },
        mergePatch,
      ),
    );
    process.stderr.write(
      `[bypass ${layout}] pods/status adding ${NAME_HASH_LABEL}: ${labelled.allowed ? 'ADMITTED' : labelled.message}\n`,
    );
    expect(refusal(labelled, 'a pods/status write adding the tracking label')).toContain(
      `Pod quiet (it is, or can become, a Sandbox's Pod): runtimeClassName "${weak}" is not allowed here`,
    );
    expect((await readPod('quiet')).metadata?.labels?.[NAME_HASH_LABEL]).toBeUndefined();
    // The adoptable label through pods/status: refused the same way.
    refusal(
      await attempt(() =>
        core.patchNamespacedPodStatus(
          { namespace: ns, name: 'quiet', body: { metadata: { labels: ADOPTABLE } } },
          mergePatch,
        ),
      ),
      'a pods/status write adding the adoptable label',
    );
    // A Pod on an allowed class may be labelled there.
    admitted(await createPod(podBody('fine', own)), 'a Pod on the own class');
    admitted(
      await attempt(() =>
        core.patchNamespacedPodStatus(
          { namespace: ns, name: 'fine', body: { metadata: { labels: ADOPTABLE } } },
          mergePatch,
        ),
      ),
      'a pods/status write labelling a compliant Pod',
    );
    await Promise.all(['quiet', 'fine'].map(deletePod));
  });

  test("no regression: the kubelet's status writes (conditions, phase) on governed Pods, weak or labelled, are admitted", async () => {
    admitted(await createPod(podBody('kubelet-weak', weak)), 'a plain weak Pod');
    admitted(
      await createPod(podBody('kubelet-labelled', own, { labels: { ...ADOPTABLE, app: 'a' } })),
      'an adoptable Pod on the own class',
    );
    for (const name of ['kubelet-weak', 'kubelet-labelled']) {
      const status = await attempt(() =>
        core.patchNamespacedPodStatus(
          {
            namespace: ns,
            name,
            body: {
              status: {
                phase: 'Pending',
                conditions: [{ type: 'kpi-probe', status: 'True' }],
              },
            },
          },
          mergePatch,
        ),
      );
      expect(admitted(status, `a kubelet-like status write on ${name}`).status?.conditions).toEqual(
        expect.arrayContaining([expect.objectContaining({ type: 'kpi-probe', status: 'True' })]),
      );
    }
    await Promise.all(['kubelet-weak', 'kubelet-labelled'].map(deletePod));
  });

  test(`path 3: a Binding carrying an adoption label is refused (its labels reach the Pod on ${SHARED_MINOR}: ${BINDING_COPIES_LABELS})`, async () => {
    admitted(await createPod(podBody('bind-weak', weak)), 'a plain weak Pod');
    const binding = (labels: Record<string, string>) => ({
      apiVersion: 'v1',
      kind: 'Binding',
      metadata: { name: 'bind-weak', labels },
      target: { apiVersion: 'v1', kind: 'Node', name: 'kpi-bypass-no-such-node' },
    });
    const viaSubresource = await attempt(() =>
      core.createNamespacedPodBinding({ namespace: ns, name: 'bind-weak', body: binding(ADOPTABLE) }),
    );
    process.stderr.write(
      `[bypass ${layout}] pods/binding with ${Object.keys(ADOPTABLE)[0]}: ${viaSubresource.allowed ? 'ADMITTED' : viaSubresource.message}\n`,
    );
    expect(refusal(viaSubresource, 'a pods/binding carrying the adoptable label')).toContain(
      'Binding of Pod bind-weak carries the label agents.x-k8s.io/adoptable or agents.x-k8s.io/sandbox-name-hash',
    );
    // Its older spelling, POST namespaces/<ns>/bindings: the same storage, the same refusal.
    refusal(
      await attempt(() =>
        core.createNamespacedBinding({ namespace: ns, body: binding({ [NAME_HASH_LABEL]: nameHash('x') }) }),
      ),
      'a legacy bindings CREATE carrying the tracking label',
    );
    expect((await readPod('bind-weak')).spec?.nodeName).toBeUndefined();
    // What a Binding's labels do here, shown with a label that is none of this policy's business:
    // admitted; copied onto the Pod where PodTopologyLabelsAdmission is on (1.35+), not on older
    // minors (1.30: a Binding's labels never reached its Pod, so there the hole did not exist).
    admitted(
      await attempt(() =>
        core.createNamespacedPodBinding({
          namespace: ns,
          name: 'bind-weak',
          body: binding({ 'example.com/probe': 'x' }),
        }),
      ),
      'a Binding with a harmless label',
    );
    const bound = await readPod('bind-weak');
    expect(bound.spec?.nodeName).toBe('kpi-bypass-no-such-node');
    expect(bound.metadata?.labels?.['example.com/probe']).toBe(BINDING_COPIES_LABELS ? 'x' : undefined);
    await deletePod('bind-weak');
  });

  test('path 3: a weak Pod owned by any kind or version of the Agent Sandbox groups is refused at CREATE', async () => {
    const owner = expectAllowed(await createSandbox(kc, ref('owner'), own), 'a compliant Sandbox').object;
    const controller = (apiVersion: string, kind: string): V1OwnerReference => ({
      apiVersion,
      kind,
      name: 'owner',
      uid: owner.metadata.uid,
      controller: true,
    });
    for (const [i, ref_] of [
      controller('extensions.agents.x-k8s.io/v1beta1', 'SandboxClaim'),
      controller('agents.x-k8s.io/v9', 'Sandbox'),
      controller('agents.x-k8s.io/v1beta1', 'SandboxLookalike'),
    ].entries()) {
      const outcome = await createPod(podBody(`owned-${i}`, weak, { owners: [ref_] }));
      process.stderr.write(
        `[bypass ${layout}] Pod owned by ${ref_.apiVersion} ${ref_.kind}: ${outcome.allowed ? 'ADMITTED' : outcome.message}\n`,
      );
      expect(refusal(outcome, `a weak Pod owned by ${ref_.apiVersion} ${ref_.kind}`)).toContain(
        `Pod owned-${i} (it is, or can become, a Sandbox's Pod): runtimeClassName "${weak}" is not allowed here`,
      );
    }
  });

  test("path 3: a weak Pod owned by a Sandbox's UID under an unrelated kind is refused when the controller adds its tracking label", async () => {
    const sandbox = expectAllowed(await createSandbox(kc, ref('agent-5'), own), 'a compliant Sandbox').object;
    // Named after the Sandbox (where the controller looks), its controller reference names a kind
    // of a group no API serves, with the Sandbox's UID: the controller takes it as the Sandbox's
    // (it compares UIDs only), and the garbage collector, unable to resolve that kind, never removes
    // it (a kind it can resolve, e.g. v1 ConfigMap, would be found absent and the Pod collected).
    const forged: V1OwnerReference = {
      apiVersion: 'example.com/v1',
      kind: 'ConfigMap',
      name: 'agent-5',
      uid: sandbox.metadata.uid,
      controller: true,
    };
    // Its CREATE is admitted: a Pod owned by another group is none of sandbox isolation's business ...
    admitted(await createPod(podBody('agent-5', weak, { owners: [forged] })), 'the forged-owner Pod');
    // ... until the controller, finding it by name and owner UID, patches its metadata
    // (updatePodMetadata: the tracking label), an UPDATE the policy judges.
    const patched = await attempt(() =>
      core.patchNamespacedPod(
        { namespace: ns, name: 'agent-5', body: { metadata: { labels: { [NAME_HASH_LABEL]: nameHash('agent-5') } } } },
        mergePatch,
      ),
    );
    process.stderr.write(
      `[bypass ${layout}] the controller's tracking label on the forged-owner Pod: ${patched.allowed ? 'ADMITTED' : patched.message}\n`,
    );
    expect(refusal(patched, "the controller's metadata patch")).toContain(
      `Pod agent-5 (it is, or can become, a Sandbox's Pod): runtimeClassName "${weak}" is not allowed here`,
    );
    expect((await readPod('agent-5')).metadata?.labels?.[NAME_HASH_LABEL]).toBeUndefined();
    await deletePod('agent-5');
  });

  test("path 4: the compliance Report finds a Sandbox's Pod by its controller's UID, whatever kind the reference names", async () => {
    const sandbox = expectAllowed(await createSandbox(kc, ref('agent-4'), own), 'a compliant Sandbox').object;
    const forged: V1OwnerReference = {
      apiVersion: 'example.com/v1',
      kind: 'ConfigMap',
      name: 'agent-4',
      uid: sandbox.metadata.uid,
      controller: true,
    };
    // Neither named after the Sandbox nor labelled: only its controller reference ties it to it.
    admitted(await createPod(podBody('impostor-4', weak, { owners: [forged] })), 'the forged-owner Pod');
    const custom = kc.makeApiClient(CustomObjectsApi);
    const result = await waitFor(
      `the Report of ${ns} to fail Sandbox agent-4 for Pod impostor-4`,
      async (observe) => {
        const report = (await custom.getNamespacedCustomObject({ ...REPORT, namespace: ns }).catch(() => undefined)) as
          | ReportLike
          | undefined;
        const found = report?.results?.find((r) =>
          r.resources?.some((o) => o.kind === 'Sandbox' && o.name === 'agent-4'),
        );
        observe(report?.results?.map((r) => r.message) ?? 'no Report');
        return found;
      },
      { timeoutMs: 60_000 },
    );
    process.stderr.write(`[bypass ${layout}] Report: ${result.message}\n`);
    expect(result.message).toContain(
      `Sandbox agent-4 asks for RuntimeClass "${own}", but its Pod impostor-4 runs RuntimeClass "${weak}"`,
    );
    expect(result.resources).toEqual(
      expect.arrayContaining([expect.objectContaining({ kind: 'Pod', name: 'impostor-4' })]),
    );
    await deletePod('impostor-4');
  });
});
