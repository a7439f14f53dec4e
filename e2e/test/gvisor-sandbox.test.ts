/**
 * Issue 22: runtime strength that is real. The real node's containerd has a gVisor handler
 * (`runsc`, systrap platform; e2e/src/harness/node/config.ts) and the harness installs the
 * platform's RuntimeClass `gvisor` for it. With the upstream Agent Sandbox controller on the node
 * and the chart's webhook and operator:
 *
 * - a tenant at `minRuntimeClass: runsc, enforce: true`: a Sandbox on the generated class
 *   `kubeplus-sandbox-<instance>` (handler runsc) becomes a Running Pod placed by node isolation,
 *   and the kernel its container reads (uname, /proc/version) is gVisor's, not the host's; its
 *   logs, `kubectl exec`, the restricted security context and HTTP to its Pod IP work; a runc
 *   Sandbox is refused;
 * - the compliance Report of that namespace counts the gVisor Sandbox (and its Pod) as passing;
 * - advisory mode: a Sandbox without a class is defaulted to the generated class and runs inside gVisor;
 * - tightening runsc → kata: the running gVisor Sandbox stays (same Pod, still gVisor); a new one,
 *   held to kata, is bound but stays unstarted with the kubelet's reason (no Kata on this node).
 */

import { release } from 'node:os';
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { type RealNodeCluster, RUNSC_RUNTIME_CLASS, waitFor } from '@kubeplus-isolation/e2e';
import { NODE_ISOLATION_ANNOTATION, SANDBOX_ISOLATION_ANNOTATION } from '@kubeplus-isolation/spec';
import { CoreV1Api, CustomObjectsApi, NodeV1Api, type V1Pod } from '@kubernetes/client-node';
import { KERNEL_PROBE_PORT, kernelLine, kernelProbeSandbox } from '../src/demo/manifests.js';
import { createAgent, patchAgent } from './support/operator.js';
import {
  kubectl,
  kubectlWithInput,
  PLATFORM_NS,
  poolMandate,
  probeImage,
  probePod,
  runProbe,
  startSandboxNode,
} from './support/real-node.js';
import {
  isReady,
  podOfSandbox,
  readSandbox,
  type SandboxStatus,
  sandboxYaml,
  waitForSandboxReady,
} from './support/sandboxes.js';

const POOL = 'gvisor-pool';
const MANDATE = poolMandate(POOL);
/** A Sandbox running KERNEL_PROBE in the webhook image (it carries node), restricted Pod Security. */
const agentSandboxYaml = (name: string, namespace: string, runtimeClassName?: string): string =>
  kernelProbeSandbox(name, namespace, probeImage(), runtimeClassName);

interface ReportLike {
  summary?: { pass?: number; fail?: number };
  results?: { resources?: { kind: string; name: string }[] }[];
}

/** gVisor's kernel, as its uname and /proc/version report it (never a host's). */
const GVISOR_KERNEL = /gvisor/i;

describe('Sandboxes that run inside gVisor on the real node', () => {
  let cluster: RealNodeCluster;
  let core: CoreV1Api;
  let custom: CustomObjectsApi;

  const apply = (yaml: string, ...extra: string[]) => kubectlWithInput(cluster, yaml, 'apply', ...extra, '-f', '-');
  /** The policy in force in `namespace`: a Sandbox on `probeClass` is refused (server-side dry run). */
  const refusing = (namespace: string, probeClass: string): Promise<true> =>
    waitFor(
      `a Sandbox on ${probeClass} refused in ${namespace}`,
      async () =>
        (await apply(sandboxYaml('probe', namespace, probeClass), '--dry-run=server')).code !== 0 || undefined,
      { timeoutMs: 60_000 },
    );
  /** Waits until the tenant's generated RuntimeClass names `handler`. */
  const generatedClassHandler = (tenant: string, handler: string): Promise<true> =>
    waitFor(
      `RuntimeClass kubeplus-sandbox-${tenant} with handler ${handler}`,
      async () => {
        const node = cluster.cp.kc.makeApiClient(NodeV1Api);
        const rc = await node.readRuntimeClass({ name: `kubeplus-sandbox-${tenant}` }).catch(() => undefined);
        return rc?.handler === handler || undefined;
      },
      { timeoutMs: 60_000 },
    );
  const isolate = async (tenant: string, minRuntimeClass: string, enforce: boolean): Promise<void> => {
    await createAgent(cluster.cp.kc, PLATFORM_NS, tenant, {
      [NODE_ISOLATION_ANNOTATION]: JSON.stringify(MANDATE),
      [SANDBOX_ISOLATION_ANNOTATION]: JSON.stringify({ minRuntimeClass, enforce }),
    });
    await waitFor(
      `the ServiceAccount of ${tenant}`,
      () => core.readNamespacedServiceAccount({ name: 'default', namespace: tenant }),
      { timeoutMs: 60_000 },
    );
    await generatedClassHandler(tenant, minRuntimeClass);
  };
  const readySandbox = (namespace: string, name: string): Promise<SandboxStatus> =>
    waitForSandboxReady(custom, namespace, name, 120_000);
  const podOf = async (namespace: string, name: string): Promise<V1Pod> => {
    const pod = await podOfSandbox(core, custom, namespace, name);
    if (pod === undefined) throw new Error(`Sandbox ${namespace}/${name} has no Pod`);
    return pod;
  };
  const logOf = (namespace: string, pod: string): Promise<string> =>
    waitFor(
      `the log of ${namespace}/${pod}`,
      async () => (await kubectl(cluster, 'logs', '-n', namespace, pod)) || undefined,
      {
        timeoutMs: 30_000,
      },
    );
  const execRelease = async (namespace: string, pod: string): Promise<string> =>
    (
      await kubectl(cluster, 'exec', '-n', namespace, pod, '--', 'node', '-e', "console.log(require('os').release())")
    ).trim();

  beforeAll(async () => {
    // The operator audits every 5 s (default 5 min), so the Report follows what runs within the test.
    cluster = await startSandboxNode(POOL, '--set', 'operator.extraArgs[0]=--audit-interval=5s');
    core = cluster.cp.kc.makeApiClient(CoreV1Api);
    custom = cluster.cp.kc.makeApiClient(CustomObjectsApi);
  });

  afterAll(async () => {
    await cluster?.stop();
  });

  test("the same probe on runc reads the host kernel, on the platform class gvisor reads gVisor's", async () => {
    const script = "console.log('kernel '+require('os').release())";
    const onRunc = await runProbe(cluster.cp.kc, 'default', probePod('on-runc', script, { runtimeClassName: 'runc' }));
    const onGvisor = await runProbe(
      cluster.cp.kc,
      'default',
      probePod('on-gvisor', script, { runtimeClassName: RUNSC_RUNTIME_CLASS }),
    );
    process.stderr.write(
      `[gvisor] runc Pod: ${onRunc.log.trim()}; gvisor Pod: ${onGvisor.log.trim()}; host: ${release()}\n`,
    );
    expect(onRunc).toMatchObject({ phase: 'Succeeded', log: `kernel ${release()}\n` });
    expect(onGvisor.phase).toBe('Succeeded');
    expect(onGvisor.log).toMatch(GVISOR_KERNEL);
    expect(onGvisor.log).not.toContain(release());
  });

  test('enforced runsc: a Sandbox on the generated class runs inside gVisor, placed by node isolation (logs, exec, restricted context, Pod networking); a runc Sandbox is refused', async () => {
    await isolate('team-g', 'runsc', true);
    await refusing('team-g', 'runc');
    const refused = await apply(agentSandboxYaml('weak', 'team-g', 'runc'));
    expect(refused.code).not.toBe(0);
    expect(refused.stderr).toContain('requires sandbox runtime runsc or stronger');

    expect(await apply(agentSandboxYaml('coder', 'team-g', 'kubeplus-sandbox-team-g'))).toMatchObject({ code: 0 });
    const sb = await readySandbox('team-g', 'coder');
    const pod = await podOf('team-g', 'coder');
    const name = pod.metadata?.name ?? '';
    expect(pod.status?.phase).toBe('Running');
    expect(pod.spec?.runtimeClassName).toBe('kubeplus-sandbox-team-g');
    expect(pod.spec?.nodeSelector).toEqual(MANDATE.nodeSelector);
    expect(pod.spec?.tolerations).toEqual(expect.arrayContaining(MANDATE.tolerations));
    expect(pod.spec?.nodeName).toBe(cluster.nodeName);
    expect(sb.status?.nodeName).toBe(cluster.nodeName);

    // The proof, read from inside: the kernel the workload sees is gVisor's, not the host's.
    const log = await logOf('team-g', name);
    const kernel = kernelLine(log);
    process.stderr.write(`[gvisor] Sandbox team-g/coder (Pod ${name}): ${kernel} (host: ${release()})\n`);
    expect(kernel).toMatch(GVISOR_KERNEL);
    expect(kernel).not.toContain(release());
    // The restricted security context holds inside gVisor: uid 65532, a read-only root mount, and
    // creating a file there refused (gVisor checks permission first: EACCES, where runc says EROFS).
    expect(log).toMatch(/^uid 65532 root ro write (EACCES|EROFS)$/m);
    // kubectl exec reaches the container inside the sandbox.
    expect(await execRelease('team-g', name)).toMatch(GVISOR_KERNEL);
    // Pod networking: HTTP from the host to the Pod IP, answered by gVisor's network stack.
    const answer = await waitFor(
      `HTTP from the host to ${pod.status?.podIP}:${KERNEL_PROBE_PORT}`,
      async () => {
        const res = await fetch(`http://${pod.status?.podIP}:${KERNEL_PROBE_PORT}/`, {
          signal: AbortSignal.timeout(3_000),
        }).catch(() => undefined);
        return res?.ok ? res.text() : undefined;
      },
      { timeoutMs: 30_000 },
    );
    expect(answer).toMatch(GVISOR_KERNEL);
  });

  test('the compliance Report, reading what runs, counts the gVisor Sandbox and its Pod as passing', async () => {
    const report = await waitFor(
      'the Report of team-g to count the Sandbox and its Pod',
      async (observe) => {
        const r = (await custom
          .getNamespacedCustomObject({
            group: 'openreports.io',
            version: 'v1alpha1',
            plural: 'reports',
            namespace: 'team-g',
            name: 'kubeplus-isolation',
          })
          .catch(() => undefined)) as ReportLike | undefined;
        observe(r?.summary);
        return r?.summary?.pass === 2 ? r : undefined;
      },
      { timeoutMs: 90_000 },
    );
    expect(report.summary).toMatchObject({ pass: 2, fail: 0 });
    expect(report.results ?? []).toEqual([]);
  });

  test('advisory runsc: a Sandbox without a class is defaulted to the generated class and runs inside gVisor', async () => {
    await isolate('team-a', 'runsc', false);
    // In force once the default is applied (a server-side dry run shows the stored class).
    await waitFor(
      'the advisory default in force in team-a',
      async () => {
        const res = await apply(agentSandboxYaml('probe', 'team-a'), '--dry-run=server', '-o', 'json');
        return res.code === 0 && res.stdout.includes('"runtimeClassName": "kubeplus-sandbox-team-a"')
          ? true
          : undefined;
      },
      { timeoutMs: 60_000 },
    );
    expect(await apply(agentSandboxYaml('helper', 'team-a'))).toMatchObject({ code: 0 });
    await readySandbox('team-a', 'helper');
    const pod = await podOf('team-a', 'helper');
    expect(pod.spec?.runtimeClassName).toBe('kubeplus-sandbox-team-a');
    const kernel = kernelLine(await logOf('team-a', pod.metadata?.name ?? ''));
    process.stderr.write(`[gvisor] advisory Sandbox team-a/helper, defaulted: ${kernel}\n`);
    expect(kernel).toMatch(GVISOR_KERNEL);
  });

  test("tightening runsc → kata: the running gVisor Sandbox stays; a new one, held to kata, stays unstarted with the kubelet's reason", async () => {
    const before = await podOf('team-g', 'coder');
    await patchAgent(cluster.cp.kc, PLATFORM_NS, 'team-g', {
      annotations: { [SANDBOX_ISOLATION_ANNOTATION]: JSON.stringify({ minRuntimeClass: 'kata', enforce: true }) },
    });
    // In force: the platform's gvisor class, allowed at runsc, is refused now.
    await refusing('team-g', RUNSC_RUNTIME_CLASS);
    await generatedClassHandler('team-g', 'kata');

    expect(await apply(agentSandboxYaml('coder-2', 'team-g', 'kubeplus-sandbox-team-g'))).toMatchObject({ code: 0 });
    const held = await waitFor(
      "the controller to create coder-2's Pod and the scheduler to bind it",
      async () => {
        const p = await podOfSandbox(core, custom, 'team-g', 'coder-2');
        return p?.spec?.nodeName ? p : undefined;
      },
      { timeoutMs: 60_000 },
    );
    const event = await waitFor(
      'the kubelet to say why it cannot start the kata Pod',
      async () =>
        (
          await core.listNamespacedEvent({
            namespace: 'team-g',
            fieldSelector: `involvedObject.name=${held.metadata?.name}`,
          })
        ).items.find((e) => e.reason === 'FailedCreatePodSandBox' && /kata/.test(e.message ?? '')),
      { timeoutMs: 60_000 },
    );
    process.stderr.write(`[gvisor] after the tightening, coder-2: ${event.reason}: ${event.message}\n`);
    expect(isReady(await readSandbox(custom, 'team-g', 'coder-2'))).toBe(false);
    expect((await core.readNamespacedPod({ namespace: 'team-g', name: held.metadata?.name ?? '' })).status?.phase).toBe(
      'Pending',
    );

    // The running gVisor Sandbox is untouched: Ready, the same Pod, never restarted, still gVisor.
    expect(isReady(await readSandbox(custom, 'team-g', 'coder'))).toBe(true);
    const after = await podOf('team-g', 'coder');
    expect(after.metadata?.uid).toBe(before.metadata?.uid);
    expect(after.status?.phase).toBe('Running');
    expect(after.status?.containerStatuses?.[0]?.restartCount).toBe(0);
    expect(await execRelease('team-g', after.metadata?.name ?? '')).toMatch(GVISOR_KERNEL);
  });
});
