/**
 * Step 9g (real node only): team-g, at minimum runsc, on the same pool; its Sandbox on the
 * generated class runs inside gVisor, proven by the kernel its container reads. The instance is
 * deleted at the end, so step 13 finds the cluster as the documents expect. Beside the kata
 * tenant's honest outcome (step 9): a tenant at runsc, whose Sandbox runs inside gVisor.
 */

import { release } from 'node:os';
import type { V1Pod } from '@kubernetes/client-node';
import { projectImage } from '../../harness/images.js';
import { waitFor } from '../../harness/wait.js';
import { REAL_NODE } from '../environment.js';
import {
  kernelLine,
  kernelProbeSandbox,
  NODE_ISOLATION,
  PLATFORM_NAMESPACE,
  runtimeClassOf,
  sandbox,
  TEAM_G_AGENT,
  TEAM_G_INSTANCE,
  TEAM_G_NAMESPACE,
} from '../manifests.js';
import { canonical, type DemoStep, ENABLED_LABEL, json } from '../scenario.js';

export const gvisorTenant: DemoStep = {
  id: '9g',
  title: `A tenant at minRuntimeClass runsc: its Sandbox runs inside gVisor on ${REAL_NODE}`,
  source: 'issue 22',
  when: (demo) => demo.realNode,
  async run(demo) {
    const rc = runtimeClassOf(TEAM_G_INSTANCE);
    await demo.apply('agent-team-g.yaml', TEAM_G_AGENT);
    await demo.eventually(
      `RuntimeClass ${rc} (handler runsc) and namespace ${TEAM_G_NAMESPACE}`,
      'handler runsc, the namespace isolated',
      async () => {
        const handler = await demo.runtimeClassHandler(rc);
        const ns = await demo.readNamespace(TEAM_G_NAMESPACE);
        const sa = await demo.core
          .readNamespacedServiceAccount({ name: 'default', namespace: TEAM_G_NAMESPACE })
          .catch(() => undefined);
        return handler === 'runsc' && ns?.metadata?.labels?.[ENABLED_LABEL] === 'true' && sa !== undefined
          ? `handler ${handler}, ${ENABLED_LABEL}=true`
          : undefined;
      },
      (v) => v,
    );
    await demo.sh(['get', 'runtimeclass', rc, 'gvisor']);
    const manifest = kernelProbeSandbox('gvisor-interpreter', TEAM_G_NAMESPACE, projectImage('webhook'), rc);
    // The policy reaches the API server a moment after the operator writes it (DEMO.md).
    await waitFor(
      'the runsc policy in force in team-g',
      async () => {
        const res = await demo.env.kubectl(
          ['apply', '--dry-run=server', '-f', '-'],
          sandbox('probe', TEAM_G_NAMESPACE, 'runc'),
        );
        return res.code !== 0 || undefined;
      },
      { timeoutMs: 60_000, intervalMs: 250 },
    ).catch(() => undefined);
    const res = await demo.apply('sandbox-gvisor.yaml', manifest);
    demo.check(
      'accepted',
      `Sandbox gvisor-interpreter with runtimeClassName ${rc}`,
      `exit ${res.code}`,
      res.code === 0,
    );
    const pod = await demo.eventually(
      'the Agent Sandbox controller creates its Pod, placed by node isolation, and it runs',
      `Running on ${REAL_NODE} with runtimeClassName ${rc} and the pool's nodeSelector`,
      async () => {
        const p = await demo.core
          .readNamespacedPod({ namespace: TEAM_G_NAMESPACE, name: 'gvisor-interpreter' })
          .catch(() => undefined);
        return p?.status?.phase === 'Running' &&
          p.spec?.runtimeClassName === rc &&
          canonical(p.spec?.nodeSelector) === canonical(NODE_ISOLATION.nodeSelector) &&
          p.spec?.nodeName === REAL_NODE
          ? p
          : undefined;
      },
      (p: V1Pod) =>
        `${p.metadata?.name}: Running on ${p.spec?.nodeName}, runtimeClassName ${p.spec?.runtimeClassName}, nodeSelector ${json(p.spec?.nodeSelector)}`,
      120_000,
    );
    await demo.sh(['get', 'sandbox,pods', '-n', TEAM_G_NAMESPACE, '-o', 'wide']);
    if (pod) {
      const host = release();
      const log = await demo.eventually(
        "the kernel the Sandbox's container reads (its log: uname -r and /proc/version, from inside)",
        `gVisor's kernel (4.19.0-gvisor-like), not the host's ${host}`,
        async () => {
          const res = await demo.env.kubectl(['logs', '-n', TEAM_G_NAMESPACE, 'gvisor-interpreter']);
          const line = kernelLine(res.stdout);
          return line !== '' && /gvisor/i.test(line) && !line.includes(host) ? line : undefined;
        },
        (line) => line,
        30_000,
      );
      if (log) demo.report.note(`PROOF: Sandbox ${TEAM_G_NAMESPACE}/gvisor-interpreter runs inside gVisor: ${log}`);
    }
    await demo.sh(['delete', 'agent', TEAM_G_INSTANCE, '-n', PLATFORM_NAMESPACE]);
    await demo.eventually(
      `namespace ${TEAM_G_NAMESPACE} removed with its Sandbox (the instance deleted)`,
      'gone (404)',
      async () => (await demo.readNamespace(TEAM_G_NAMESPACE)) === undefined || undefined,
      () => 'gone',
      120_000,
    );
  },
};
