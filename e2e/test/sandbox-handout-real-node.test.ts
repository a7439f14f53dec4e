/**
 * Issue 36, paths 1–3, on the real node with the upstream Agent Sandbox controller (the pinned
 * release), the chart's webhook and operator, and gVisor: no Sandbox is handed out, laundered or
 * backed by a Pod on a runtime weaker than the minimum in force when that happens. What runs is
 * read from inside the Pod (the kernel its container sees: gVisor's, or the host's under runc),
 * as gvisor-sandbox.test.ts does.
 *
 * 1. Handed out after a tightening: a warm-pool Sandbox started while the tenant's minimum was
 *    runc (its class `kubeplus-sandbox-<instance>` then had handler runc) keeps that class NAME
 *    when the minimum is raised to runsc and the class is re-created with handler runsc. A
 *    SandboxClaim made after the tightening must get a Sandbox whose Pod runs inside gVisor.
 * 2. Class-change laundering: a running Sandbox whose class was allowed when it started cannot be
 *    switched to another allowed class after a tightening: its Pod keeps the runtime it started
 *    with, so the switch would only relabel it.
 * 3. Ownership the policy did not see: a runc Pod named after a suspended Sandbox, controller-owned
 *    by the Sandbox's UID under another kind and given the tracking label through `pods/status`,
 *    must never become the Sandbox's Pod when it resumes.
 */

import { release } from 'node:os';
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { type RealNodeCluster, RUNSC_RUNTIME_CLASS, waitFor } from '@kubeplus-isolation/e2e';
import { NODE_ISOLATION_ANNOTATION, SANDBOX_ISOLATION_ANNOTATION } from '@kubeplus-isolation/spec';
import { CoreV1Api, CustomObjectsApi, NodeV1Api, type V1Pod } from '@kubernetes/client-node';
import { KERNEL_PROBE, KERNEL_PROBE_PORT, kernelProbeSandbox } from '../src/demo/manifests.js';
import { createAgent, patchAgent } from './support/operator.js';
import {
  kubectl,
  kubectlWithInput,
  PLATFORM_NS,
  poolMandate,
  probeImage,
  startSandboxNode,
} from './support/real-node.js';
import { isReady, podOfSandbox, readSandbox, type SandboxStatus, waitForSandboxReady } from './support/sandboxes.js';

const POOL = 'handout-pool';
const MANDATE = poolMandate(POOL);
const GVISOR_KERNEL = /gvisor/i;
const SANDBOX = { group: 'agents.x-k8s.io', version: 'v1beta1', plural: 'sandboxes' } as const;

/** The controller's tracking label value for a Sandbox name: FNV-1a (32 bit) as 8 hex digits (NameHash). */
function nameHash(name: string): string {
  let h = 0x811c9dc5;
  for (const byte of Buffer.from(name, 'utf8')) {
    h ^= byte;
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return h.toString(16).padStart(8, '0');
}

/** The kernel probe's Pod spec (indented for a template's `podTemplate.spec`), on `runtimeClassName`. */
const probePodSpec = (runtimeClassName: string): string => `      runtimeClassName: ${runtimeClassName}
      securityContext: {runAsNonRoot: true, runAsUser: 65532, seccompProfile: {type: RuntimeDefault}}
      containers:
      - name: agent
        image: ${probeImage()}
        imagePullPolicy: Never
        command: [node, -e, ${JSON.stringify(KERNEL_PROBE)}]
        ports: [{containerPort: ${KERNEL_PROBE_PORT}}]
        securityContext:
          allowPrivilegeEscalation: false
          readOnlyRootFilesystem: true
          capabilities: {drop: [ALL]}
`;

describe('no weaker runtime handed out, laundered or adopted, on the real node (issue 36)', () => {
  let cluster: RealNodeCluster;
  let core: CoreV1Api;
  let custom: CustomObjectsApi;

  const apply = (yaml: string, ...extra: string[]) => kubectlWithInput(cluster, yaml, 'apply', ...extra, '-f', '-');
  const generatedClassHandler = (tenant: string, handler: string): Promise<true> =>
    waitFor(
      `RuntimeClass kubeplus-sandbox-${tenant} with handler ${handler}`,
      async () => {
        const rc = await cluster.cp.kc
          .makeApiClient(NodeV1Api)
          .readRuntimeClass({ name: `kubeplus-sandbox-${tenant}` })
          .catch(() => undefined);
        return rc?.handler === handler || undefined;
      },
      { timeoutMs: 60_000 },
    );
  /**
   * The tenant's sandbox policy in force (the API server loads a new policy and binding
   * asynchronously): a runc Sandbox is refused by it, checked with a server-side dry run. Without
   * this wait a write made at once (path 3's pods/status label) can land before the policy does.
   */
  const policyInForce = (tenant: string): Promise<true> =>
    waitFor(
      `the sandbox policy of ${tenant} in force`,
      async (observe) => {
        const res = await apply(kernelProbeSandbox('in-force', tenant, probeImage(), 'runc'), '--dry-run=server');
        observe(res.stderr);
        return (res.code !== 0 && res.stderr.includes('kubeplus.io/sandbox-isolation')) || undefined;
      },
      { timeoutMs: 60_000 },
    );
  const isolate = async (tenant: string, minRuntimeClass: string): Promise<void> => {
    await createAgent(cluster.cp.kc, PLATFORM_NS, tenant, {
      [NODE_ISOLATION_ANNOTATION]: JSON.stringify(MANDATE),
      [SANDBOX_ISOLATION_ANNOTATION]: JSON.stringify({ minRuntimeClass, enforce: true }),
    });
    await waitFor(
      `the ServiceAccount of ${tenant}`,
      () => core.readNamespacedServiceAccount({ name: 'default', namespace: tenant }),
      { timeoutMs: 60_000 },
    );
    await generatedClassHandler(tenant, minRuntimeClass);
    if (minRuntimeClass !== 'runc') await policyInForce(tenant);
  };
  const tighten = async (tenant: string, minRuntimeClass: string): Promise<void> => {
    await patchAgent(cluster.cp.kc, PLATFORM_NS, tenant, {
      annotations: { [SANDBOX_ISOLATION_ANNOTATION]: JSON.stringify({ minRuntimeClass, enforce: true }) },
    });
    await generatedClassHandler(tenant, minRuntimeClass);
    await policyInForce(tenant);
  };
  const readySandbox = (namespace: string, name: string, timeoutMs = 120_000): Promise<SandboxStatus> =>
    waitForSandboxReady(custom, namespace, name, timeoutMs);
  /** The kernel release the Sandbox's Pod's container sees (`kubectl exec`). */
  const kernelOf = async (namespace: string, pod: V1Pod | undefined): Promise<string> =>
    (
      await kubectl(
        cluster,
        'exec',
        '-n',
        namespace,
        pod?.metadata?.name ?? '',
        '--',
        'node',
        '-e',
        "console.log(require('os').release())",
      )
    ).trim();

  beforeAll(async () => {
    cluster = await startSandboxNode(POOL, '--set', 'operator.extraArgs[0]=--audit-interval=5s');
    core = cluster.cp.kc.makeApiClient(CoreV1Api);
    custom = cluster.cp.kc.makeApiClient(CustomObjectsApi);
  });

  afterAll(async () => {
    await cluster?.stop();
  });

  test('path 1: after a tightening, a claim never gets the warm Sandbox started under the old handler; the one it gets runs inside gVisor', async () => {
    const ns = 'team-w';
    await isolate(ns, 'runc');
    const own = `kubeplus-sandbox-${ns}`;
    expect(
      await apply(`apiVersion: extensions.agents.x-k8s.io/v1beta1
kind: SandboxTemplate
metadata: {name: tpl, namespace: ${ns}}
spec:
  podTemplate:
    spec:
${probePodSpec(own)}---
apiVersion: extensions.agents.x-k8s.io/v1beta1
kind: SandboxWarmPool
metadata: {name: pool, namespace: ${ns}}
spec:
  replicas: 1
  sandboxTemplateRef: {name: tpl}
`),
    ).toMatchObject({ code: 0 });
    type Owned = SandboxStatus & { metadata: { ownerReferences?: { kind: string; name: string }[] } };
    const warm = await waitFor(
      'the warm pool to hold a Ready Sandbox (started with handler runc)',
      async () => {
        const list = (await custom.listNamespacedCustomObject({ ...SANDBOX, namespace: ns })) as { items: Owned[] };
        return list.items.find(
          (s) => s.metadata.ownerReferences?.some((o) => o.kind === 'SandboxWarmPool') && isReady(s),
        );
      },
      { timeoutMs: 120_000 },
    );
    const warmPod = await podOfSandbox(core, custom, ns, warm.metadata.name);
    expect(await kernelOf(ns, warmPod)).toBe(release());

    await tighten(ns, 'runsc');
    expect(
      await apply(`apiVersion: extensions.agents.x-k8s.io/v1beta1
kind: SandboxClaim
metadata: {name: claim, namespace: ${ns}}
spec:
  warmPoolRef: {name: pool}
`),
    ).toMatchObject({ code: 0 });
    const claimed = await waitFor(
      'the claim to hold a Ready Sandbox',
      async (observe) => {
        const claim = (await custom
          .getNamespacedCustomObject({
            group: 'extensions.agents.x-k8s.io',
            version: 'v1beta1',
            plural: 'sandboxclaims',
            namespace: ns,
            name: 'claim',
          })
          .catch(() => undefined)) as { status?: { sandbox?: { name?: string } } } | undefined;
        observe(claim?.status);
        const name = claim?.status?.sandbox?.name;
        if (!name) return undefined;
        const sb = await readSandbox(custom, ns, name);
        return isReady(sb) ? sb : undefined;
      },
      { timeoutMs: 180_000 },
    );
    const pod = await podOfSandbox(core, custom, ns, claimed.metadata.name);
    const kernel = await kernelOf(ns, pod);
    process.stderr.write(
      `[handout] claim got Sandbox ${claimed.metadata.name} (warm one was ${warm.metadata.name}), Pod ${pod?.metadata?.name}: kernel ${kernel} (host ${release()})\n`,
    );
    expect(claimed.metadata.uid).not.toBe(warm.metadata.uid);
    expect(kernel).toMatch(GVISOR_KERNEL);
  });

  test("path 2: a running Sandbox's class cannot be switched after a tightening: its Pod keeps the runtime it started with", async () => {
    const ns = 'team-l';
    await isolate(ns, 'runc');
    expect(await apply(kernelProbeSandbox('l', ns, probeImage(), `kubeplus-sandbox-${ns}`))).toMatchObject({ code: 0 });
    await readySandbox(ns, 'l');
    const pod = await podOfSandbox(core, custom, ns, 'l');
    expect(await kernelOf(ns, pod)).toBe(release());
    await tighten(ns, 'runsc');
    // The platform's gVisor class is allowed at runsc; switching the running Sandbox to it is refused.
    const switched = await kubectl(
      cluster,
      'patch',
      'sandbox',
      'l',
      '-n',
      ns,
      '--type=merge',
      '-p',
      JSON.stringify({ spec: { podTemplate: { spec: { runtimeClassName: RUNSC_RUNTIME_CLASS } } } }),
    ).then(
      (out) => ({ code: 0, out }),
      (error: unknown) => ({ code: 1, out: String(error) }),
    );
    const now = await podOfSandbox(core, custom, ns, 'l');
    process.stderr.write(
      `[handout] switching running Sandbox l to ${RUNSC_RUNTIME_CLASS}: ${switched.code === 0 ? 'ADMITTED' : 'refused'}; its Pod ${now?.metadata?.name} still sees kernel ${await kernelOf(ns, now)}\n`,
    );
    expect(now?.metadata?.uid).toBe(pod?.metadata?.uid);
    expect(switched.code).not.toBe(0);
    expect(switched.out).toContain('its Pod keeps the runtime class it started with');
  });

  test('path 3: a runc Pod owned by a Sandbox UID under another kind, labelled through pods/status, never becomes its Pod', async () => {
    const ns = 'team-u';
    await isolate(ns, 'runsc');
    const suspended = `${kernelProbeSandbox('u', ns, probeImage(), RUNSC_RUNTIME_CLASS)}  operatingMode: Suspended\n`;
    expect(await apply(suspended)).toMatchObject({ code: 0 });
    const sandbox = await readSandbox(custom, ns, 'u');
    const uid = sandbox?.metadata.uid ?? '';
    expect(uid).not.toBe('');
    // Not judged at CREATE: no adoption label, and its controller reference names another kind.
    const forged = await core.createNamespacedPod({
      namespace: ns,
      body: {
        metadata: {
          name: 'u',
          // A kind no API serves: the garbage collector cannot resolve it, so it never removes the
          // Pod (a resolvable kind with no such object would have it collected as dangling).
          ownerReferences: [{ apiVersion: 'forged.example.com/v1', kind: 'Forged', name: 'u', uid, controller: true }],
        },
        spec: {
          runtimeClassName: 'runc',
          securityContext: { runAsNonRoot: true, runAsUser: 65532, seccompProfile: { type: 'RuntimeDefault' } },
          containers: [
            {
              name: 'agent',
              image: probeImage(),
              imagePullPolicy: 'Never',
              command: ['node', '-e', KERNEL_PROBE],
              securityContext: {
                allowPrivilegeEscalation: false,
                readOnlyRootFilesystem: true,
                capabilities: { drop: ['ALL'] },
              },
            },
          ],
        },
      },
    });
    expect(forged.metadata?.uid).toBeDefined();
    // The tracking label, through pods/status (a metadata change the status subresource accepts).
    const labelled = await kubectl(
      cluster,
      'patch',
      'pod',
      'u',
      '-n',
      ns,
      '--subresource=status',
      '--type=merge',
      '-p',
      JSON.stringify({ metadata: { labels: { 'agents.x-k8s.io/sandbox-name-hash': nameHash('u') } } }),
    ).then(
      (out) => ({ code: 0, out }),
      (error: unknown) => ({ code: 1, out: String(error) }),
    );
    await kubectl(
      cluster,
      'patch',
      'sandbox',
      'u',
      '-n',
      ns,
      '--type=merge',
      '-p',
      '{"spec":{"operatingMode":"Running"}}',
    );
    // Resumed, the controller takes Pod u as the Sandbox's (owned by its UID) and, when the label
    // is missing, patches it on: an adoption label added, which the policies judge.
    await new Promise((resolve) => setTimeout(resolve, 20_000));
    const sb = await readSandbox(custom, ns, 'u');
    const pod = await core.readNamespacedPod({ namespace: ns, name: 'u' }).catch(() => undefined);
    const kernel = pod?.status?.phase === 'Running' ? await kernelOf(ns, pod) : '(not running)';
    process.stderr.write(
      `[handout] pods/status label on the forged Pod: ${labelled.code === 0 ? 'ADMITTED' : 'refused'}; Sandbox u Ready ${isReady(sb)} ${JSON.stringify(sb?.status?.conditions ?? [])}; Pod u (${pod?.spec?.runtimeClassName}, labels ${JSON.stringify(pod?.metadata?.labels ?? {})}): ${kernel}\n`,
    );
    expect(pod?.metadata?.uid).toBe(forged.metadata?.uid); // still there: the test's premise
    expect(labelled.code).not.toBe(0);
    // Never the Sandbox's running Pod: no tracking label got on it, and the Sandbox is not Ready.
    expect(pod?.metadata?.labels?.['agents.x-k8s.io/sandbox-name-hash']).toBeUndefined();
    expect(isReady(sb)).toBe(false);
  });
});
