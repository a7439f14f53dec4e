import { AppsV1Api, type V1Pod } from '@kubernetes/client-node';
import { AGENT_DEPLOYMENT, NODE_ISOLATION, TEAM_A_NAMESPACE } from '../manifests.js';
import { canonical, type DemoStep, json } from '../scenario.js';

export const deploymentPlaced: DemoStep = {
  id: '5',
  title: (demo) =>
    demo.realNode
      ? 'A Deployment without nodeSelector/tolerations: its Pods get the mandate and run only on node-a'
      : 'A Deployment without nodeSelector/tolerations: its Pods get the mandate and land only on node-a',
  source: 'seed 1 step 4, seed 2 step 3',
  async run(demo) {
    await demo.apply('agent-runtime-deployment.yaml', AGENT_DEPLOYMENT);
    const pods = await demo.eventually(
      'the controllers create 3 Pods and the scheduler binds them',
      '3 Pods, each with spec.nodeName',
      async (observe) => {
        const list = await demo.core.listNamespacedPod({
          namespace: TEAM_A_NAMESPACE,
          labelSelector: 'app=agent-runtime',
        });
        observe(
          list.items.map((p) => ({
            name: p.metadata?.name,
            node: p.spec?.nodeName,
            conditions: p.status?.conditions,
          })),
        );
        return list.items.length === 3 && list.items.every((p) => p.spec?.nodeName) ? list.items : undefined;
      },
      (items: V1Pod[]) => items.map((p) => `${p.metadata?.name} → ${p.spec?.nodeName}`).join(', '),
      90_000,
    );
    const template = (
      await demo.kc
        .makeApiClient(AppsV1Api)
        .readNamespacedDeployment({ name: 'agent-runtime', namespace: TEAM_A_NAMESPACE })
    ).spec?.template.spec;
    demo.check(
      'the Deployment itself declares neither field',
      'nodeSelector and tolerations unset in the Pod template',
      json({ nodeSelector: template?.nodeSelector, tolerations: template?.tolerations }),
      template?.nodeSelector === undefined && template?.tolerations === undefined,
    );
    await demo.sh(['get', 'pods', '-n', TEAM_A_NAMESPACE, '-o', 'jsonpath={.items[*].spec.nodeSelector}']);
    await demo.sh([
      'get',
      'pods',
      '-n',
      TEAM_A_NAMESPACE,
      '-o',
      'jsonpath={range .items[*]}{.metadata.name}{"\\t"}{.spec.tolerations[?(@.key=="dedicated")]}{"\\n"}{end}',
    ]);
    await demo.sh(['get', 'pods', '-n', TEAM_A_NAMESPACE, '-o', 'wide']);
    if (pods) {
      const seen = pods.map((p) => ({
        pod: p.metadata?.name,
        nodeSelector: p.spec?.nodeSelector,
        dedicated: (p.spec?.tolerations ?? []).filter((t) => t.key === 'dedicated'),
        node: p.spec?.nodeName,
      }));
      demo.check(
        'every Pod carries the mandated nodeSelector',
        json(NODE_ISOLATION.nodeSelector),
        json([...new Set(seen.map((s) => json(s.nodeSelector)))]),
        seen.every((s) => canonical(s.nodeSelector) === canonical(NODE_ISOLATION.nodeSelector)),
      );
      demo.check(
        'every Pod carries the mandated toleration, once',
        json(NODE_ISOLATION.tolerations),
        json([...new Set(seen.map((s) => json(s.dedicated)))]),
        seen.every((s) => canonical(s.dedicated) === canonical(NODE_ISOLATION.tolerations)),
      );
      demo.check(
        'every Pod is bound to node-a',
        'node-a ×3',
        seen.map((s) => s.node).join(', '),
        seen.every((s) => s.node === 'node-a'),
      );
      if (demo.realNode) {
        await demo.eventually(
          'every Pod Running on the real node (containerd, runc)',
          'Running ×3',
          async () => {
            const list = await demo.core.listNamespacedPod({
              namespace: TEAM_A_NAMESPACE,
              labelSelector: 'app=agent-runtime',
            });
            return list.items.length === 3 && list.items.every((p) => p.status?.phase === 'Running')
              ? list.items
              : undefined;
          },
          (items: V1Pod[]) => items.map((p) => `${p.metadata?.name} ${p.status?.phase}`).join(', '),
          90_000,
        );
      }
    }
  },
};
