/**
 * Issue 21, hole 1: "a compliant Sandbox backed by a weaker Pod". The upstream Agent Sandbox
 * controller (on the real node; written against v0.5.0, now the pinned release) finds a Sandbox's Pod by the `agents.x-k8s.io/pod-name`
 * annotation or by the Sandbox's name and ADOPTS an ownerless Pod labelled
 * `agents.x-k8s.io/adoptable` or carrying the Sandbox's `agents.x-k8s.io/sandbox-name-hash`,
 * without comparing it with the template. A tenant who judged only the Sandbox could make a
 * compliant Sandbox run on runc in three ways; each is tried here as the tenant would, against the
 * real controller, and the weak Pod must never run behind the compliant Sandbox:
 *
 * 1. with Pod rights: a runc Pod `agent-1` labelled adoptable, then a compliant Sandbox `agent-1`;
 * 2. with Sandbox rights only: `kubectl delete sandbox w --cascade=orphan` of a Sandbox left weak
 *    by a tightening (its Pod keeps running with its name-hash label), then `w` re-created compliant;
 * 3. re-pointing a compliant Sandbox's `agents.x-k8s.io/pod-name` annotation at a weak adoptable Pod
 *    (from v0.5.6 the controller keeps the Pod it owns by UID and clears the annotation).
 *
 * And the compliance Report judges what runs: a compliant Sandbox that adopted a runc Pod before
 * the minimum was raised is reported, naming its Pod.
 */

import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { type RealNodeCluster, waitFor } from '@kubeplus-isolation/e2e';
import {
  NODE_ISOLATION_ANNOTATION,
  POD_NAME_ANNOTATION as POD_NAME,
  SANDBOX_ISOLATION_ANNOTATION,
} from '@kubeplus-isolation/spec';
import { CoreV1Api, CustomObjectsApi, type V1Pod } from '@kubernetes/client-node';
import { createAgent, patchAgent } from './support/operator.js';
import { kubectl, kubectlWithInput, PLATFORM_NS, poolMandate, startSandboxNode } from './support/real-node.js';
import {
  isReady,
  podOfSandbox,
  readSandbox,
  SANDBOX_IMAGE,
  sandboxYaml,
  waitForSandboxReady,
} from './support/sandboxes.js';

const POOL = 'governed-pool';
const MANDATE = poolMandate(POOL);

/** A Pod the tenant writes itself: the pause image on `runtimeClassName`, with `labels`. */
const tenantPodYaml = (name: string, namespace: string, runtimeClassName: string, labels: Record<string, string>) => `
apiVersion: v1
kind: Pod
metadata:
  name: ${name}
  namespace: ${namespace}
  labels: ${JSON.stringify(labels)}
spec:
  runtimeClassName: ${runtimeClassName}
  terminationGracePeriodSeconds: 0
  containers:
  - {name: agent, image: ${SANDBOX_IMAGE}, imagePullPolicy: Never}
`;
const ADOPTABLE = { 'agents.x-k8s.io/adoptable': 'true' };

interface ReportLike {
  summary?: { pass?: number; fail?: number };
  results?: { message?: string; resources?: { kind: string; name: string }[]; properties?: Record<string, string> }[];
}

describe("a Sandbox's Pod meets the namespace's minimum, however the tenant tries to swap it", () => {
  let cluster: RealNodeCluster;
  let core: CoreV1Api;
  let custom: CustomObjectsApi;

  const apply = (yaml: string, ...extra: string[]) => kubectlWithInput(cluster, yaml, 'apply', ...extra, '-f', '-');
  const pod = (namespace: string, name: string): Promise<V1Pod | undefined> =>
    core.readNamespacedPod({ namespace, name }).catch(() => undefined);
  const ownedBySandbox = (p: V1Pod | undefined): boolean =>
    p?.metadata?.ownerReferences?.some((o) => o.kind === 'Sandbox') === true;
  /** The policy in force: a runc Sandbox is refused (or, at minimum runc, admitted), by a server-side dry run. */
  const policyInForce = (namespace: string, minRuntimeClass: string): Promise<true> =>
    waitFor(
      `the ${minRuntimeClass} sandbox policy in force in ${namespace}`,
      async () => {
        const res = await apply(sandboxYaml('probe', namespace, 'runc'), '--dry-run=server');
        return (minRuntimeClass === 'runc' ? res.code === 0 : res.code !== 0) || undefined;
      },
      { timeoutMs: 60_000 },
    );
  const isolate = async (tenant: string, minRuntimeClass: string): Promise<void> => {
    await createAgent(cluster.cp.kc, PLATFORM_NS, tenant, {
      [NODE_ISOLATION_ANNOTATION]: JSON.stringify(MANDATE),
      [SANDBOX_ISOLATION_ANNOTATION]: JSON.stringify({ minRuntimeClass, enforce: true }),
    });
    await waitFor(
      'the tenant namespace',
      () => core.readNamespacedServiceAccount({ name: 'default', namespace: tenant }),
      {
        timeoutMs: 60_000,
      },
    );
    await policyInForce(tenant, minRuntimeClass);
  };
  const tighten = async (tenant: string, minRuntimeClass: string): Promise<void> => {
    await patchAgent(cluster.cp.kc, PLATFORM_NS, tenant, {
      annotations: { [SANDBOX_ISOLATION_ANNOTATION]: JSON.stringify({ minRuntimeClass, enforce: true }) },
    });
    await policyInForce(tenant, minRuntimeClass);
  };
  const runningSandbox = (namespace: string, name: string) => waitForSandboxReady(custom, namespace, name, 90_000);
  /** The controller's log lines carrying the policy's refusal of Pod `podName`. */
  const refusals = async (podName: string): Promise<string[]> =>
    (await kubectl(cluster, 'logs', '-n', 'agent-sandbox-system', 'deploy/agent-sandbox-controller', '--tail=2000'))
      .split('\n')
      .filter((l) => l.includes(`Pod ${podName} (it is, or can become, a Sandbox's Pod)`));

  beforeAll(async () => {
    cluster = await startSandboxNode(POOL);
    core = cluster.cp.kc.makeApiClient(CoreV1Api);
    custom = cluster.cp.kc.makeApiClient(CustomObjectsApi);
  });

  afterAll(async () => {
    await cluster?.stop();
  });

  test('with Pod rights: a runc Pod labelled adoptable (or with a name-hash label) is refused; the compliant Sandbox of its name gets its Pod from the template', async () => {
    await isolate('team-p', 'kata');
    const own = 'kubeplus-sandbox-team-p';
    const planted = await apply(tenantPodYaml('agent-1', 'team-p', 'runc', ADOPTABLE));
    expect(await apply(sandboxYaml('agent-1', 'team-p', own))).toMatchObject({ code: 0 });
    // What runs behind the compliant Sandbox, once the controller has given it a Pod.
    const behind = await waitFor(
      'the controller to give Sandbox agent-1 a Pod',
      () => podOfSandbox(core, custom, 'team-p', 'agent-1'),
      { timeoutMs: 60_000 },
    );
    process.stderr.write(
      `[pod-governance] planted runc Pod: ${planted.code === 0 ? 'ADMITTED' : planted.stderr.trim()}\n` +
        `[pod-governance] Sandbox agent-1 runs Pod ${behind.metadata?.name} on ${behind.spec?.runtimeClassName}\n`,
    );
    expect(behind.spec?.runtimeClassName).toBe(own);
    expect(planted.code).not.toBe(0);
    expect(planted.stderr).toContain(
      `Pod agent-1 (it is, or can become, a Sandbox's Pod): runtimeClassName "runc" is not allowed here`,
    );
    expect(planted.stderr).toContain('requires sandbox runtime kata or stronger');
    // The other label the controller adopts by: refused too.
    const hashed = await apply(
      tenantPodYaml('agent-2', 'team-p', 'runc', { 'agents.x-k8s.io/sandbox-name-hash': 'deadbeef' }),
    );
    expect(hashed.code).not.toBe(0);
    // A plain Pod of the tenant is none of sandbox isolation's business.
    expect(await apply(tenantPodYaml('plain', 'team-p', 'runc', { app: 'web' }), '--dry-run=server')).toMatchObject({
      code: 0,
    });
  });

  test('with Sandbox rights only: orphaning a Sandbox left weak by a tightening and re-creating it compliant does not adopt the runc Pod; nor does re-pointing pod-name at a weak adoptable Pod', async () => {
    await isolate('team-o', 'runc');
    // Before the tightening: a runc Sandbox (allowed then), and a spare adoptable runc Pod.
    expect(await apply(sandboxYaml('w', 'team-o', 'runc'))).toMatchObject({ code: 0 });
    expect(await apply(tenantPodYaml('spare', 'team-o', 'runc', ADOPTABLE))).toMatchObject({ code: 0 });
    await runningSandbox('team-o', 'w');
    await waitFor(
      'the spare Pod Running',
      async () => (await pod('team-o', 'spare'))?.status?.phase === 'Running' || undefined,
      {
        timeoutMs: 60_000,
      },
    );
    await tighten('team-o', 'kata');
    const own = 'kubeplus-sandbox-team-o';

    // Path 2: orphan the weak Sandbox's Pod, re-create the Sandbox compliant.
    await kubectl(cluster, 'delete', 'sandbox', 'w', '-n', 'team-o', '--cascade=orphan', '--wait=true');
    await waitFor(
      'Pod w orphaned (no owner), still running',
      async () => {
        const p = await pod('team-o', 'w');
        return (p !== undefined && !ownedBySandbox(p) && p.status?.phase === 'Running') || undefined;
      },
      { timeoutMs: 30_000 },
    );
    expect(await apply(sandboxYaml('w', 'team-o', own))).toMatchObject({ code: 0 });
    // Path 3: a compliant Sandbox re-pointed at the spare runc Pod.
    expect(await apply(sandboxYaml('s', 'team-o', own))).toMatchObject({ code: 0 });
    await waitFor('the controller to give Sandbox s its own Pod', () => podOfSandbox(core, custom, 'team-o', 's'), {
      timeoutMs: 60_000,
    });
    await kubectl(cluster, 'annotate', 'sandbox', 's', '-n', 'team-o', 'agents.x-k8s.io/pod-name=spare', '--overwrite');

    // Either the controller adopted the weak Pods (the hole), or its adoption was refused by the
    // policies, or (the re-pointed Sandbox) it kept the Pod it already owns: from v0.5.6 the owner
    // UID is authoritative over the deprecated pod-name annotation, which the controller then
    // clears (sandbox_controller.go reconcilePod). Both pinned releases (v1.0.1, v0.5.6) do that;
    // v0.5.0 took the annotation and was refused by the policies.
    const outcome = (name: string, podName: string) =>
      waitFor(
        `the controller to adopt Pod ${podName} for Sandbox ${name}, be refused, or keep its own Pod`,
        async () => {
          if (ownedBySandbox(await pod('team-o', podName))) return 'adopted';
          if ((await refusals(podName)).length > 0) return 'refused';
          const sb = await readSandbox(custom, 'team-o', name);
          const own = await podOfSandbox(core, custom, 'team-o', name);
          return own !== undefined && own.metadata?.name !== podName && !sb?.metadata.annotations?.[POD_NAME]
            ? 'kept-own'
            : undefined;
        },
        { timeoutMs: 60_000 },
      );
    const [orphan, repointed] = [await outcome('w', 'w'), await outcome('s', 'spare')];
    process.stderr.write(
      `[pod-governance] orphaned runc Pod w: ${orphan}; spare runc Pod behind re-pointed Sandbox s: ${repointed}\n`,
    );
    expect({ orphan, repointed }).toEqual({ orphan: 'refused', repointed: 'kept-own' });
    // And neither compliant Sandbox runs its weak Pod: not owned, the Sandboxes not Ready on them.
    await new Promise((resolve) => setTimeout(resolve, 5_000));
    expect(ownedBySandbox(await pod('team-o', 'w'))).toBe(false);
    expect(ownedBySandbox(await pod('team-o', 'spare'))).toBe(false);
    expect(isReady(await readSandbox(custom, 'team-o', 'w'))).toBe(false);
    expect(isReady(await readSandbox(custom, 'team-o', 's'))).toBe(false);
    const refused = [...(await refusals('w')).slice(-1), ...(await refusals('spare')).slice(-1)];
    process.stderr.write(`[pod-governance] the controller, refused:\n${refused.join('\n')}\n`);
  });

  test('the compliance Report judges what runs: a compliant Sandbox that adopted a runc Pod before the tightening is reported with its Pod', async () => {
    await isolate('team-r', 'runc');
    // At minimum runc both are allowed: the controller adopts the tenant's runc Pod for a Sandbox
    // that asks for the platform's kata class.
    expect(await apply(tenantPodYaml('p', 'team-r', 'runc', ADOPTABLE))).toMatchObject({ code: 0 });
    expect(await apply(sandboxYaml('p', 'team-r', 'kata'))).toMatchObject({ code: 0 });
    await runningSandbox('team-r', 'p');
    expect((await pod('team-r', 'p'))?.spec?.runtimeClassName).toBe('runc');
    await tighten('team-r', 'kata');
    // The Sandbox asks for kata; the Report must still fail it for the Pod it runs.
    const report = await waitFor(
      'the Report of team-r to fail Sandbox p for its runc Pod',
      async () => {
        const r = (await custom
          .getNamespacedCustomObject({
            group: 'openreports.io',
            version: 'v1alpha1',
            plural: 'reports',
            namespace: 'team-r',
            name: 'kubeplus-isolation',
          })
          .catch(() => undefined)) as ReportLike | undefined;
        return r?.results?.some((x) => x.resources?.some((o) => o.kind === 'Sandbox' && o.name === 'p'))
          ? r
          : undefined;
      },
      { timeoutMs: 90_000 },
    );
    const result = report.results?.find((x) => x.resources?.some((o) => o.kind === 'Sandbox' && o.name === 'p'));
    process.stderr.write(`[pod-governance] Report: ${result?.message}\n`);
    expect(result?.message).toContain('Sandbox p asks for RuntimeClass "kata", but its Pod p runs RuntimeClass "runc"');
    expect(result?.properties).toMatchObject({ pod: 'p', podRuntimeClassName: 'runc', podHandler: 'runc' });
    expect(result?.resources).toEqual(expect.arrayContaining([expect.objectContaining({ kind: 'Pod', name: 'p' })]));
  });
});
