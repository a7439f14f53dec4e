/**
 * The upstream Agent Sandbox controller (sigs.k8s.io/agent-sandbox, the release pinned in
 * e2e/components/agent-sandbox: v1.0.1 by default, v0.5.x with KUBEPLUS_ISOLATION_AGENT_SANDBOX=0.5;
 * built from its Go module, its manifests and CRDs read from the module) on the real node, next to
 * the chart's webhook and operator:
 *
 * - seed 2 step 5 for real: a Sandbox referencing kubeplus-sandbox-<instance> (handler runc here)
 *   is admitted, the controller creates its Pod, the webhook merges the tenant's nodeSelector and
 *   tolerations, the scheduler binds it to the pool node, it runs, the Sandbox reports Ready;
 * - a Kata class cannot run on this machine: the Pod is bound to the pool with that runtime
 *   class, the kubelet reports why it cannot start it, the Sandbox is not Ready (no handler is
 *   ever mapped to runc to make it look started);
 * - a Sandbox written at v1alpha1 is converted by the controller and judged like v1beta1 (v0.5.x),
 *   or refused by the API server because the release serves v1beta1 only (v1.0.x);
 * - the controller's own writes (status, annotations, a claim's adoption) pass the policies;
 * - a SandboxClaim from a compliant SandboxTemplate yields a running Sandbox;
 * - deleting the instance leaves its Sandboxes and their Pods running.
 */

import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import {
  convertingCrds,
  installAgentSandbox,
  loadCrds,
  type RealNodeCluster,
  sandboxCrdsDir,
  servedSandboxVersions,
  waitFor,
} from '@kubeplus-isolation/e2e';
import {
  NODE_ISOLATION_ANNOTATION,
  NODE_ISOLATION_ENABLED_LABEL,
  SANDBOX_ISOLATION_ANNOTATION,
} from '@kubeplus-isolation/spec';
import { CoreV1Api, CustomObjectsApi, type V1Pod } from '@kubernetes/client-node';
import { createAgent, deleteAgent, ensureAgentCrd } from './support/operator.js';
import {
  installChart,
  kubectl,
  kubectlWithInput,
  PLATFORM_NS,
  poolMandate,
  RELEASE_NS,
  startProjectNode,
} from './support/real-node.js';
import {
  isReady,
  podOfSandbox,
  readSandbox,
  SANDBOX_IMAGE,
  type SandboxStatus,
  sandboxYaml,
} from './support/sandboxes.js';

const POOL = 'sandbox-pool';
const MANDATE = poolMandate(POOL);
const IMAGE = SANDBOX_IMAGE;

describe('Agent Sandbox for real, with both isolation layers', () => {
  let cluster: RealNodeCluster;
  let core: CoreV1Api;
  let custom: CustomObjectsApi;

  const sandbox = (namespace: string, name: string): Promise<SandboxStatus | undefined> =>
    readSandbox(custom, namespace, name);
  const ready = isReady;
  const podOf = (namespace: string, sandboxName: string): Promise<V1Pod | undefined> =>
    podOfSandbox(core, custom, namespace, sandboxName);
  const isolate = async (instance: string, minRuntimeClass: string): Promise<void> => {
    await createAgent(cluster.cp.kc, PLATFORM_NS, instance, {
      [NODE_ISOLATION_ANNOTATION]: JSON.stringify(MANDATE),
      [SANDBOX_ISOLATION_ANNOTATION]: JSON.stringify({ minRuntimeClass, enforce: true }),
    });
    await waitFor(
      `namespace ${instance} isolated and its sandbox policy in force`,
      async () => {
        const ns = await core.readNamespace({ name: instance }).catch(() => undefined);
        if (ns?.metadata?.labels?.[NODE_ISOLATION_ENABLED_LABEL] !== 'true') return undefined;
        // In force: a runc Sandbox is refused (checked with a server-side dry run).
        const res = await kubectlWithInput(
          cluster,
          sandboxYaml('probe', instance, 'runc'),
          'apply',
          '--dry-run=server',
          '-f',
          '-',
        );
        return (minRuntimeClass === 'runc' ? true : res.code !== 0) || undefined;
      },
      { timeoutMs: 60_000 },
    );
  };

  beforeAll(async () => {
    cluster = await startProjectNode();
    core = cluster.cp.kc.makeApiClient(CoreV1Api);
    custom = cluster.cp.kc.makeApiClient(CustomObjectsApi);
    const { crds } = await installAgentSandbox(cluster.cp.kc);
    process.stderr.write(`[agent-sandbox] controller running; CRDs with its conversion webhook: ${crds.join(', ')}\n`);
    await kubectl(cluster, 'create', 'namespace', RELEASE_NS);
    await kubectl(cluster, 'create', 'namespace', PLATFORM_NS);
    await ensureAgentCrd(cluster.cp.kc);
    // The platform's plain runtime, as most clusters have one.
    await kubectlWithInput(
      cluster,
      'apiVersion: node.k8s.io/v1\nkind: RuntimeClass\nmetadata: {name: runc}\nhandler: runc\n',
      'apply',
      '-f',
      '-',
    );
    await installChart(cluster, 'kpi');
    // The tenant pool: the real node, labeled and tainted after the system Pods are placed.
    await kubectl(cluster, 'label', 'node', cluster.nodeName, `pool=${POOL}`);
    await kubectl(cluster, 'taint', 'node', cluster.nodeName, `dedicated=${POOL}:NoSchedule`);
  });

  afterAll(async () => {
    await cluster?.stop();
  });

  test('seed 2 step 5 for real: a Sandbox with the instance class becomes a Pod placed by node isolation, Running, and the Sandbox Ready', async () => {
    await isolate('team-r', 'runc');
    const res = await kubectlWithInput(
      cluster,
      sandboxYaml('coder', 'team-r', 'kubeplus-sandbox-team-r'),
      'apply',
      '-f',
      '-',
    );
    expect(res).toMatchObject({ code: 0 });
    const sb = await waitFor(
      'the Sandbox to report Ready',
      async () => {
        const s = await sandbox('team-r', 'coder');
        return ready(s) ? s : undefined;
      },
      { timeoutMs: 90_000 },
    );
    const pod = await podOf('team-r', 'coder');
    expect(pod?.status?.phase).toBe('Running');
    expect(pod?.spec?.runtimeClassName).toBe('kubeplus-sandbox-team-r');
    expect(pod?.spec?.nodeSelector).toEqual(MANDATE.nodeSelector);
    expect(pod?.spec?.tolerations).toEqual(expect.arrayContaining(MANDATE.tolerations));
    expect(pod?.spec?.nodeName).toBe(cluster.nodeName);
    expect(sb.status?.nodeName).toBe(cluster.nodeName);
    process.stderr.write(
      `[agent-sandbox] ${await kubectl(cluster, 'get', 'sandbox,pods', '-n', 'team-r', '-o', 'wide')}\n`,
    );
  });

  test('a Kata class cannot run here: the Pod is bound to the pool with it, the kubelet says why, the Sandbox is not Ready', async () => {
    await isolate('team-k', 'kata');
    expect(
      await kubectlWithInput(cluster, sandboxYaml('secure', 'team-k', 'kubeplus-sandbox-team-k'), 'apply', '-f', '-'),
    ).toMatchObject({
      code: 0,
    });
    const pod = await waitFor(
      'the controller to create the Pod and the scheduler to bind it',
      async () => {
        const p = await podOf('team-k', 'secure');
        return p?.spec?.nodeName ? p : undefined;
      },
      { timeoutMs: 60_000 },
    );
    expect(pod.spec?.runtimeClassName).toBe('kubeplus-sandbox-team-k');
    expect(pod.spec?.nodeSelector).toEqual(MANDATE.nodeSelector);
    const event = await waitFor(
      'the kubelet to report the missing kata handler',
      async () => {
        const events = await core.listNamespacedEvent({
          namespace: 'team-k',
          fieldSelector: `involvedObject.name=${pod.metadata?.name}`,
        });
        return events.items.find((e) => e.reason === 'FailedCreatePodSandBox' && /kata/.test(e.message ?? ''));
      },
      { timeoutMs: 60_000 },
    );
    process.stderr.write(`[agent-sandbox] kata on this node: ${event.reason}: ${event.message}\n`);
    expect(ready(await sandbox('team-k', 'secure'))).toBe(false);
    expect((await core.readNamespacedPod({ namespace: 'team-k', name: pod.metadata?.name ?? '' })).status?.phase).toBe(
      'Pending',
    );
  });

  // The pinned release decides which of the two holds (e2e/README.md "Agent Sandbox versions"):
  // v0.5.x serves v1alpha1 through the controller's conversion webhook, v1.0.x serves v1beta1 only.
  const servesAlpha = servedSandboxVersions(loadCrds(sandboxCrdsDir())).includes('v1alpha1');

  (servesAlpha ? test : test.skip)(
    'a Sandbox written at v1alpha1 is converted by the controller and judged the same (a release serving v1alpha1: v0.5.x)',
    async () => {
      const denied = await kubectlWithInput(
        cluster,
        sandboxYaml('old-weak', 'team-k', 'runc', 'v1alpha1'),
        'apply',
        '-f',
        '-',
      );
      expect(denied.code).not.toBe(0);
      expect(denied.stderr).toContain('requires sandbox runtime kata or stronger');
      const admitted = await kubectlWithInput(
        cluster,
        sandboxYaml('old-own', 'team-r', 'kubeplus-sandbox-team-r', 'v1alpha1'),
        'apply',
        '-f',
        '-',
      );
      expect(admitted.code).toBe(0);
      // Stored at v1beta1 (the storage version), readable at v1alpha1: both through the controller's /convert.
      const stored = await waitFor(
        'the converted Sandbox to run',
        async () => {
          const s = await sandbox('team-r', 'old-own');
          return ready(s) ? s : undefined;
        },
        { timeoutMs: 90_000 },
      );
      expect(stored.metadata.annotations?.['api.agents.x-k8s.io/v1alpha1-sandbox-state']).toBeDefined();
      const asAlpha = JSON.parse(
        await kubectl(cluster, 'get', 'sandboxes.v1alpha1.agents.x-k8s.io', 'old-own', '-n', 'team-r', '-o', 'json'),
      ) as {
        apiVersion: string;
      };
      expect(asAlpha.apiVersion).toBe('agents.x-k8s.io/v1alpha1');
    },
  );

  (servesAlpha ? test.skip : test)(
    'v1alpha1 is not served, so no Sandbox reaches the cluster through it (a release serving v1beta1 only: v1.0.x)',
    async () => {
      const refused = await kubectlWithInput(
        cluster,
        sandboxYaml('old-weak', 'team-k', 'runc', 'v1alpha1'),
        'apply',
        '-f',
        '-',
      );
      expect(refused.code).not.toBe(0);
      expect(refused.stderr).toMatch(/no matches for kind "Sandbox" in version "agents\.x-k8s\.io\/v1alpha1"/);
      expect(await sandbox('team-k', 'old-weak')).toBeUndefined();
      // Neither CRD of the release converts: the controller serves no webhook the API server could miss.
      expect(convertingCrds(loadCrds(sandboxCrdsDir(), { keepConversion: true }))).toEqual([]);
    },
  );

  /** `tolerate`: the template itself tolerates the pool's taint (a namespace without node isolation). */
  const poolYaml = (namespace: string, runtimeClassName: string, tolerate = false): string => `
apiVersion: extensions.agents.x-k8s.io/v1beta1
kind: SandboxTemplate
metadata: {name: tpl, namespace: ${namespace}}
spec:
  podTemplate:
    spec:
      runtimeClassName: ${runtimeClassName}${tolerate ? `\n      tolerations: [{key: dedicated, operator: Equal, value: ${POOL}, effect: NoSchedule}]` : ''}
      containers:
      - {name: agent, image: ${IMAGE}, imagePullPolicy: Never}
---
apiVersion: extensions.agents.x-k8s.io/v1beta1
kind: SandboxWarmPool
metadata: {name: pool, namespace: ${namespace}}
spec:
  replicas: 1
  sandboxTemplateRef: {name: tpl}
`;
  const claimYaml = (namespace: string, name: string): string => `
apiVersion: extensions.agents.x-k8s.io/v1beta1
kind: SandboxClaim
metadata: {name: ${name}, namespace: ${namespace}}
spec:
  warmPoolRef: {name: pool}
`;
  type Owned = SandboxStatus & { metadata: { ownerReferences?: { kind: string; name: string }[] } };
  const sandboxesOf = async (namespace: string): Promise<Owned[]> =>
    (
      (await custom.listNamespacedCustomObject({
        group: 'agents.x-k8s.io',
        version: 'v1beta1',
        plural: 'sandboxes',
        namespace,
      })) as { items: Owned[] }
    ).items;
  const ownedBy = (kind: string, name: string) => (s: Owned) =>
    s.metadata.ownerReferences?.some((o) => o.kind === kind && o.name === name) === true;

  test("a SandboxClaim from a compliant template's warm pool runs: the controller's writes, adoption included, pass the policies", async () => {
    // The controller's writes in the enforced namespace passed the policies: the Sandbox's Pod is the
    // one the controller made and owns (by UID, as it decides).
    const secure = await sandbox('team-k', 'secure');
    expect((await podOf('team-k', 'secure'))?.metadata?.ownerReferences).toEqual([
      expect.objectContaining({ kind: 'Sandbox', name: 'secure', uid: secure?.metadata.uid, controller: true }),
    ]);
    expect(
      await kubectlWithInput(cluster, poolYaml('team-r', 'kubeplus-sandbox-team-r'), 'apply', '-f', '-'),
    ).toMatchObject({
      code: 0,
    });
    await waitFor(
      'the warm pool to hold a Ready Sandbox',
      async () => (await sandboxesOf('team-r')).find((s) => ownedBy('SandboxWarmPool', 'pool')(s) && ready(s)),
      {
        timeoutMs: 90_000,
      },
    );
    expect(await kubectlWithInput(cluster, claimYaml('team-r', 'claim-1'), 'apply', '-f', '-')).toMatchObject({
      code: 0,
    });
    // Adoption: the controller UPDATEs the warm Sandbox to belong to the claim.
    const claimed = await waitFor(
      'the claim to adopt a Ready Sandbox',
      async () => (await sandboxesOf('team-r')).find((s) => ownedBy('SandboxClaim', 'claim-1')(s) && ready(s)),
      {
        timeoutMs: 90_000,
      },
    );
    const pod = await podOf('team-r', claimed.metadata.name);
    expect(pod?.spec?.runtimeClassName).toBe('kubeplus-sandbox-team-r');
    expect(pod?.spec?.nodeSelector).toEqual(MANDATE.nodeSelector);
    expect(pod?.status?.phase).toBe('Running');
    process.stderr.write(
      `[agent-sandbox] ${await kubectl(cluster, 'get', 'sandboxclaims,sandboxwarmpools,sandboxes,pods', '-n', 'team-r')}\n`,
    );
  });

  test('a weak template and warm pool from before the instance: no new weak Sandbox, and no weak warm Sandbox adopted by a claim', async () => {
    // Before any isolation: a runc template and its warm pool, whose Sandbox runs.
    await kubectl(cluster, 'create', 'namespace', 'team-w');
    expect(await kubectlWithInput(cluster, poolYaml('team-w', 'runc', true), 'apply', '-f', '-')).toMatchObject({
      code: 0,
    });
    const warm = await waitFor(
      'the weak warm Sandbox to be Ready',
      async () => (await sandboxesOf('team-w')).find((s) => ownedBy('SandboxWarmPool', 'pool')(s) && ready(s)),
      {
        timeoutMs: 90_000,
      },
    );
    // Now the namespace's instance asks for kata, enforced.
    await createAgent(cluster.cp.kc, 'team-w', 'agent-w', {
      [SANDBOX_ISOLATION_ANNOTATION]: JSON.stringify({ minRuntimeClass: 'kata', enforce: true }),
    });
    await waitFor(
      'the enforce policy in force in team-w',
      async () =>
        (
          await kubectlWithInput(
            cluster,
            sandboxYaml('probe', 'team-w', 'runc'),
            'apply',
            '--dry-run=server',
            '-f',
            '-',
          )
        ).code !== 0 || undefined,
      { timeoutMs: 60_000 },
    );
    // The existing weak Sandbox is left alone (the seed's non-retroactive rule) ...
    expect((await sandbox('team-w', warm.metadata.name))?.metadata.uid).toBe(warm.metadata.uid);
    // ... but a claim may not take it: adopting is judged like a new Sandbox.
    expect(await kubectlWithInput(cluster, claimYaml('team-w', 'claim-w'), 'apply', '-f', '-')).toMatchObject({
      code: 0,
    });
    await new Promise((resolve) => setTimeout(resolve, 10_000));
    const all = await sandboxesOf('team-w');
    expect(all.filter(ownedBy('SandboxClaim', 'claim-w'))).toEqual([]);
    // And the warm pool cannot replace it with another weak one: the controller's CREATE is refused.
    await kubectl(cluster, 'delete', 'sandbox', warm.metadata.name, '-n', 'team-w', '--wait=true');
    await new Promise((resolve) => setTimeout(resolve, 5_000));
    expect(await sandboxesOf('team-w')).toEqual([]);
    const log = await kubectl(
      cluster,
      'logs',
      '-n',
      'agent-sandbox-system',
      'deploy/agent-sandbox-controller',
      '--tail=400',
    );
    const refused = (controller: string): string[] =>
      log
        .split('\n')
        .filter(
          (l) => l.includes(`"controller":"${controller}"`) && l.includes('requires sandbox runtime kata or stronger'),
        );
    // The claim tried to adopt the weak warm Sandbox (an UPDATE adding itself as owner): refused.
    expect(refused('sandboxclaim').length).toBeGreaterThan(0);
    // The warm pool tried to create a new weak one: refused.
    expect(refused('sandboxwarmpool').length).toBeGreaterThan(0);
    const summary = [...refused('sandboxclaim').slice(-1), ...refused('sandboxwarmpool').slice(-1)]
      .map((l) => JSON.parse(l) as { msg: string; error?: string })
      .map((l) => `${l.msg}: ${l.error}`);
    process.stderr.write(`[agent-sandbox] the controller, refused in team-w:\n${summary.join('\n')}\n`);
  });

  test('deleting the instance leaves its Sandboxes and their Pods running', async () => {
    // An instance inside an existing tenant namespace (deleting it never deletes the namespace).
    await kubectl(cluster, 'create', 'namespace', 'team-e');
    await createAgent(cluster.cp.kc, 'team-e', 'agent-e', {
      [NODE_ISOLATION_ANNOTATION]: JSON.stringify(MANDATE),
      [SANDBOX_ISOLATION_ANNOTATION]: JSON.stringify({ minRuntimeClass: 'runc', enforce: true }),
    });
    await waitFor(
      'the RuntimeClass kubeplus-sandbox-agent-e',
      async () =>
        (await kubectl(cluster, 'get', 'runtimeclass', 'kubeplus-sandbox-agent-e').catch(() => '')) || undefined,
      { timeoutMs: 60_000 },
    );
    expect(
      await kubectlWithInput(cluster, sandboxYaml('keeps', 'team-e', 'kubeplus-sandbox-agent-e'), 'apply', '-f', '-'),
    ).toMatchObject({
      code: 0,
    });
    const before = await waitFor(
      'the Sandbox to be Ready',
      async () => {
        const sb = await sandbox('team-e', 'keeps');
        return ready(sb) ? sb : undefined;
      },
      { timeoutMs: 90_000 },
    );
    const podBefore = await podOf('team-e', 'keeps');
    await deleteAgent(cluster.cp.kc, 'team-e', 'agent-e');
    await waitFor(
      "the instance's RuntimeClass to go",
      async () =>
        (await kubectl(cluster, 'get', 'runtimeclass', 'kubeplus-sandbox-agent-e').then(
          () => false,
          () => true,
        )) || undefined,
      { timeoutMs: 60_000 },
    );
    const after = await sandbox('team-e', 'keeps');
    expect(after?.metadata.uid).toBe(before.metadata.uid);
    expect(ready(after)).toBe(true);
    const podAfter = await podOf('team-e', 'keeps');
    expect(podAfter?.metadata?.uid).toBe(podBefore?.metadata?.uid);
    expect(podAfter?.status?.phase).toBe('Running');
  });
});
