import type { V1Pod } from '@kubernetes/client-node';
import { REAL_NODE } from '../environment.js';
import { NODE_ISOLATION, runtimeClassOf, sandbox, TEAM_A_INSTANCE, TEAM_A_NAMESPACE } from '../manifests.js';
import { canonical, type DemoStep, json } from '../scenario.js';

export const sandboxAccepted: DemoStep = {
  id: '9',
  title: `A Sandbox referencing ${runtimeClassOf(TEAM_A_INSTANCE)} is accepted`,
  source: 'seed 2 step 5',
  async run(demo) {
    const rc = runtimeClassOf(TEAM_A_INSTANCE);
    const res = await demo.apply('sandbox-kata.yaml', sandbox('code-interpreter', TEAM_A_NAMESPACE, rc));
    await demo.sh(['get', 'sandbox', '-n', TEAM_A_NAMESPACE]);
    const stored = await demo.sandboxes(TEAM_A_NAMESPACE);
    demo.check(
      'accepted and stored',
      `Sandbox code-interpreter with runtimeClassName ${rc}`,
      `exit ${res.code}; ${json(stored.map((s) => [s.metadata.name, s.spec.podTemplate.spec.runtimeClassName]))}`,
      res.code === 0 && stored.length === 1 && stored[0]?.spec.podTemplate.spec.runtimeClassName === rc,
    );
    if (!demo.realNode) {
      demo.report.note(
        'It does not "start" here: no Agent Sandbox controller runs (nothing turns the Sandbox into a Pod) and the fake nodes run no containers, let alone Kata VMs. Admission is what this demo proves.',
      );
      return;
    }
    // The upstream controller turns it into a Pod; node isolation places it on the pool.
    const pod = await demo.eventually(
      'the Agent Sandbox controller creates its Pod and the scheduler binds it',
      `a Pod with runtimeClassName ${rc}, the team's nodeSelector, bound to node-a`,
      async () => {
        const p = await demo.core
          .readNamespacedPod({ namespace: TEAM_A_NAMESPACE, name: 'code-interpreter' })
          .catch(() => undefined);
        return p?.spec?.nodeName ? p : undefined;
      },
      (p: V1Pod) =>
        `${p.metadata?.name}: runtimeClassName ${p.spec?.runtimeClassName}, nodeSelector ${json(p.spec?.nodeSelector)}, node ${p.spec?.nodeName}`,
      60_000,
    );
    await demo.sh(['get', 'pods', '-n', TEAM_A_NAMESPACE, 'code-interpreter', '-o', 'wide']);
    if (pod) {
      demo.check(
        'placed by node isolation, governed by sandbox isolation',
        `runtimeClassName ${rc}, nodeSelector ${json(NODE_ISOLATION.nodeSelector)}, node-a`,
        `runtimeClassName ${pod.spec?.runtimeClassName}, nodeSelector ${json(pod.spec?.nodeSelector)}, ${pod.spec?.nodeName}`,
        pod.spec?.runtimeClassName === rc &&
          canonical(pod.spec?.nodeSelector) === canonical(NODE_ISOLATION.nodeSelector) &&
          pod.spec?.nodeName === REAL_NODE,
      );
    }
    await demo.eventually(
      'the kubelet reports why it cannot start it: this node has no Kata runtime',
      'Event FailedCreatePodSandBox naming the kata handler',
      async () =>
        (
          await demo.core.listNamespacedEvent({
            namespace: TEAM_A_NAMESPACE,
            fieldSelector: 'involvedObject.name=code-interpreter,reason=FailedCreatePodSandBox',
          })
        ).items.find((e) => /kata/.test(e.message ?? '')),
      (e) => `${e.reason}: ${e.message}`,
      60_000,
    );
    await demo.sh([
      'get',
      'sandbox',
      '-n',
      TEAM_A_NAMESPACE,
      'code-interpreter',
      '-o',
      'jsonpath={.status.conditions}',
    ]);
    demo.report.note(
      'The Sandbox is admitted, turned into a Pod by the upstream controller and placed on the tenant pool; it cannot start on this machine, which has no Kata runtime (containerd has runc and gVisor, and no kata handler is ever mapped to another runtime to make it look started). Step 9g shows the level that does run here: gVisor.',
    );
  },
};
