import type { V1Pod } from '@kubernetes/client-node';
import { waitFor } from '../../harness/wait.js';
import { RELEASE_NAMESPACE } from '../environment.js';
import { IMAGE, TEAM_A_NAMESPACE, UNRELATED_NAMESPACE } from '../manifests.js';
import { type DemoStep, json, WEBHOOK_ENTRY_NAME } from '../scenario.js';

export const unlabelledNamespace: DemoStep = {
  id: '6',
  title: 'A Pod in a namespace without the label never reaches the webhook',
  source: 'seed 1 step 5',
  async run(demo) {
    await demo.sh(['create', 'namespace', UNRELATED_NAMESPACE]);
    await waitFor(
      `ServiceAccount ${UNRELATED_NAMESPACE}/default`,
      () => demo.core.readNamespacedServiceAccount({ name: 'default', namespace: UNRELATED_NAMESPACE }),
      { timeoutMs: 30_000 },
    );
    const before = await demo.webhookCounts();
    await demo.sh(['run', 'hello', '-n', UNRELATED_NAMESPACE, `--image=${IMAGE}`, '--restart=Never']);
    const after = await demo.webhookCounts();
    demo.report.command(
      demo.realNode
        ? `curl -sk -H "Authorization: Bearer $(kubectl create token demo-metrics-reader -n ${RELEASE_NAMESPACE})" https://<each webhook Pod's IP>:8080/metrics | grep -E '^kubeplus_webhook_admissions_total'   # summed over result and Pods; the chart's metrics are secure: a token allowed to get /metrics`
        : `curl -s ${demo.env.webhook?.metricsUrl ?? ''} | grep -E '^kubeplus_webhook_admissions_total'   # summed over result`,
      `before: ${before.webhook}   after: ${after.webhook}`,
    );
    demo.report.command(
      `kubectl get --raw /metrics | grep 'apiserver_admission_webhook_admission_duration_seconds_count{name="${WEBHOOK_ENTRY_NAME}"'   # summed`,
      `before: ${before.apiServer}   after: ${after.apiServer}`,
    );
    demo.check(
      'the webhook counted no admission',
      `${before.webhook} → ${before.webhook}`,
      `${before.webhook} → ${after.webhook}`,
      after.webhook === before.webhook,
    );
    demo.check(
      'the API server made no call to it',
      `${before.apiServer} → ${before.apiServer}`,
      `${before.apiServer} → ${after.apiServer}`,
      after.apiServer === before.apiServer,
    );
    const log = await demo.env.webhookLog();
    const count = (ns: string): number => log.split('\n').filter((l) => l.includes(`"namespace":"${ns}"`)).length;
    demo.report.command(
      `${demo.env.webhookLogCommand()} | grep -c '"namespace":"${UNRELATED_NAMESPACE}"'; … | grep -c '"namespace":"${TEAM_A_NAMESPACE}"'   # the webhook logs every request it gets (log level debug)`,
      `${count(UNRELATED_NAMESPACE)}\n${count(TEAM_A_NAMESPACE)}`,
    );
    demo.check(
      'the webhook log names team-a’s admissions, never the unrelated namespace',
      `${UNRELATED_NAMESPACE}: 0 lines, ${TEAM_A_NAMESPACE}: > 0`,
      `${UNRELATED_NAMESPACE}: ${count(UNRELATED_NAMESPACE)}, ${TEAM_A_NAMESPACE}: ${count(TEAM_A_NAMESPACE)}`,
      count(UNRELATED_NAMESPACE) === 0 && count(TEAM_A_NAMESPACE) > 0,
    );
    const pod = await demo.eventually(
      'the unrelated Pod is scheduled like any other',
      'bound to node-b or node-c (node-a is tainted), no nodeSelector',
      async () => {
        const p = await demo.core.readNamespacedPod({ name: 'hello', namespace: UNRELATED_NAMESPACE });
        return p.spec?.nodeName ? p : undefined;
      },
      (p: V1Pod) => `bound to ${p.spec?.nodeName}, nodeSelector ${json(p.spec?.nodeSelector)}`,
    );
    if (pod) {
      demo.check(
        'its placement',
        'node-b or node-c, nodeSelector undefined',
        `${pod.spec?.nodeName}, nodeSelector ${json(pod.spec?.nodeSelector)}`,
        ['node-b', 'node-c'].includes(pod.spec?.nodeName ?? '') && pod.spec?.nodeSelector === undefined,
      );
    }
  },
};
