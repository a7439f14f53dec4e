import { installAgentSandbox } from '../../harness/agent-sandbox.js';
import { installOpenReportsCrds, installSandboxCrds } from '../../harness/crds.js';
import { REAL_NODE } from '../environment.js';
import { AGENT_CRD, PLATFORM_NAMESPACE, RUNC_RUNTIME_CLASS } from '../manifests.js';
import { type DemoStep, json } from '../scenario.js';

export const agentSandbox: DemoStep = {
  id: 'S3',
  title: (demo) =>
    demo.realNode
      ? 'Install Agent Sandbox (the upstream controller and its CRDs), the Agent Kind (registered-by: kubeplus), a plain "runc" RuntimeClass'
      : 'Install the Agent Sandbox CRDs, the Agent Kind (registered-by: kubeplus), a plain "runc" RuntimeClass',
  source: 'setup',
  async run(demo) {
    if (demo.realNode) {
      // On node-a: node-b and node-c are fake and run nothing.
      const { crds, version, converting } = await installAgentSandbox(demo.kc, {
        nodeSelector: { 'kubernetes.io/hostname': REAL_NODE },
      });
      demo.report.note(
        `the upstream Agent Sandbox controller (${version}, --extensions) runs as a Pod on ${REAL_NODE}; its CRDs are installed unmodified${converting.length > 0 ? ', the conversion webhook served by it' : ' (this release serves v1beta1 only, with no conversion webhook)'}: ${crds.join(', ')}`,
      );
    } else {
      const crds = await installSandboxCrds(demo.kc);
      demo.report.note(
        `Agent Sandbox CRDs installed unmodified except their conversion webhook (no Agent Sandbox controller runs here): ${crds.join(', ')}`,
      );
    }
    // The compliance reports' API, as a platform running Policy Reporter or Kyverno has it.
    const reportCrds = await installOpenReportsCrds(demo.kc);
    demo.report.note(`OpenReports CRDs (github.com/openreports/reports-api, pinned module): ${reportCrds.join(', ')}`);
    const agent = await demo.apply('agent-crd.yaml', AGENT_CRD);
    const established = await demo.sh([
      'wait',
      '--for=condition=Established',
      'crd/agents.cloudark.io',
      '--timeout=60s',
    ]);
    const rc = await demo.apply('runc-runtimeclass.yaml', RUNC_RUNTIME_CLASS);
    const ns = await demo.sh(['create', 'namespace', PLATFORM_NAMESPACE]);
    demo.check(
      'Agent Kind served, "runc" RuntimeClass and platform namespace created',
      'kubectl exit 0 each',
      json([agent.code, established.code, rc.code, ns.code]),
      [agent.code, established.code, rc.code, ns.code].every((c) => c === 0),
    );
  },
};
