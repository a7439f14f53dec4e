/**
 * Step 15 (issue 35): the first install of KubePlus's chart into the instance's namespace, which
 * raced the operator, is governed anyway: every Pod (Deployment, Job, bare Pod) carries the pool's
 * placement (the webhook's hold keeps Pods and Sandboxes waiting in a namespace KubePlus created
 * until the operator has settled it), and the Sandbox, written without a runtime class, is held to
 * the minimum (advisory: defaulted to the instance's class). On the real node they run on node-a,
 * the Sandbox inside gVisor.
 */
import type { V1Pod } from '@kubernetes/client-node';
import { REAL_NODE } from '../environment.js';
import {
  KUBEPLUS_INSTANCE,
  KUBEPLUS_RELEASE,
  KUBEPLUS_SANDBOX_ISOLATION,
  KUBEPLUS_TENANT_NAMESPACE,
  NODE_ISOLATION,
  runtimeClassOf,
} from '../manifests.js';
import { canonical, type DemoStep, json } from '../scenario.js';

/** The chart's Pods by what made them: the Deployment's 3, the Job's, the bare Pod (and, real node, the Sandbox's). */
const FIRST_INSTALL = 5;
const SANDBOX = 'agent';

const onPool = (pod: V1Pod): boolean =>
  canonical(pod.spec?.nodeSelector) === canonical(NODE_ISOLATION.nodeSelector) &&
  (pod.spec?.tolerations ?? []).some((t) => canonical(t) === canonical(NODE_ISOLATION.tolerations[0]));

const madeBy = (pod: V1Pod): string => pod.metadata?.ownerReferences?.[0]?.kind ?? 'none (bare Pod)';

export const kubeplusGoverned: DemoStep = {
  id: '15',
  title: (demo) =>
    `${KUBEPLUS_TENANT_NAMESPACE}'s first install: every Pod on the pool${demo.realNode ? ` and running on ${REAL_NODE}` : ''}, its Sandbox held to the minimum`,
  source: 'issue 35',
  async run(demo) {
    const kubeplus = demo.env.kubeplus;
    await kubeplus?.idle();
    const install = kubeplus?.events.find((e) => e.type === 'helm' && e.namespace === KUBEPLUS_TENANT_NAMESPACE);
    demo.check(
      `KubePlus's helm install ${KUBEPLUS_RELEASE} (started inside the CREATE, not waiting for the operator)`,
      'install: ok',
      install?.type === 'helm' ? `${install.verb}: ${install.ok ? 'ok' : install.output.trim()}` : 'no helm run',
      install?.type === 'helm' && install.verb === 'install' && install.ok,
    );
    const pods = await demo.eventually(
      `the chart's ${FIRST_INSTALL} Pods bound`,
      `${FIRST_INSTALL} Pods (Deployment ×3, Job, bare Pod), each bound`,
      async (observe) => {
        const items = (await demo.core.listNamespacedPod({ namespace: KUBEPLUS_TENANT_NAMESPACE })).items.filter(
          (p) => p.metadata?.name !== SANDBOX,
        );
        observe(items.map((p) => ({ name: p.metadata?.name, node: p.spec?.nodeName, phase: p.status?.phase })));
        return items.length >= FIRST_INSTALL && items.every((p) => p.spec?.nodeName !== undefined) && items;
      },
      (items) => `${items.length} bound: ${items.map((p) => `${p.metadata?.name} (${madeBy(p)})`).join(', ')}`,
      120_000,
    );
    await demo.sh([
      'get',
      'pods',
      '-n',
      KUBEPLUS_TENANT_NAMESPACE,
      '-o',
      'custom-columns=NAME:.metadata.name,MADE-BY:.metadata.ownerReferences[0].kind,NODE-SELECTOR:.spec.nodeSelector,NODE:.spec.nodeName',
    ]);
    if (pods) {
      const off = pods.filter((p) => !onPool(p));
      demo.check(
        'every Pod of the first install carries the pool’s nodeSelector and toleration',
        `${json(NODE_ISOLATION.nodeSelector)} + the dedicated=${NODE_ISOLATION.nodeSelector.pool} toleration on all ${pods.length}`,
        off.length === 0 ? `all ${pods.length}` : `missing on ${off.map((p) => p.metadata?.name).join(', ')}`,
        off.length === 0,
      );
      const elsewhere = pods.filter((p) => p.spec?.nodeName !== REAL_NODE);
      demo.check(
        `every Pod bound to the pool node ${REAL_NODE}`,
        REAL_NODE,
        elsewhere.length === 0
          ? `all on ${REAL_NODE}`
          : json(elsewhere.map((p) => `${p.metadata?.name}@${p.spec?.nodeName}`)),
        elsewhere.length === 0,
      );
    }
    if (demo.realNode) {
      await demo.eventually(
        `every Pod of the first install Running on ${REAL_NODE}`,
        `${FIRST_INSTALL} × Running`,
        async (observe) => {
          const items = (await demo.core.listNamespacedPod({ namespace: KUBEPLUS_TENANT_NAMESPACE })).items.filter(
            (p) => p.metadata?.name !== SANDBOX,
          );
          observe(items.map((p) => ({ name: p.metadata?.name, phase: p.status?.phase })));
          return items.length >= FIRST_INSTALL && items.every((p) => p.status?.phase === 'Running') && items;
        },
        (items) => `${items.length} × Running`,
        120_000,
      );
    }

    const rc = runtimeClassOf(KUBEPLUS_INSTANCE);
    demo.report.note(
      `The chart writes its Sandbox without runtimeClassName; the instance asks ${KUBEPLUS_SANDBOX_ISOLATION}, whose class is ${rc} (handler ${await demo.runtimeClassHandler(rc)}).`,
    );
    await demo.sh([
      'get',
      'sandbox',
      '-n',
      KUBEPLUS_TENANT_NAMESPACE,
      '-o',
      'custom-columns=NAME:.metadata.name,RUNTIMECLASS:.spec.podTemplate.spec.runtimeClassName',
    ]);
    const sandboxes = await demo.sandboxes(KUBEPLUS_TENANT_NAMESPACE);
    const classes = sandboxes.map((s) => s.spec.podTemplate.spec.runtimeClassName ?? '(none)');
    demo.check(
      'the chart’s Sandbox held to the minimum: defaulted to the instance’s class at admission',
      `${SANDBOX}: ${rc}`,
      sandboxes.map((s, i) => `${s.metadata.name}: ${classes[i]}`).join(', ') || 'no Sandbox',
      sandboxes.length === 1 && classes[0] === rc,
    );
    if (demo.realNode) {
      await demo.eventually(
        `the Agent Sandbox controller runs it: Pod ${SANDBOX} Running on ${REAL_NODE} with ${rc} (gVisor) and the pool's placement`,
        `Running on ${REAL_NODE}, runtimeClassName ${rc}, on the pool`,
        async (observe) => {
          const p = await demo.core
            .readNamespacedPod({ namespace: KUBEPLUS_TENANT_NAMESPACE, name: SANDBOX })
            .catch(() => undefined);
          observe(p ? { phase: p.status?.phase, node: p.spec?.nodeName, rc: p.spec?.runtimeClassName } : 'no Pod yet');
          return p?.status?.phase === 'Running' &&
            p.spec?.runtimeClassName === rc &&
            p.spec?.nodeName === REAL_NODE &&
            onPool(p)
            ? p
            : undefined;
        },
        (p) =>
          `${p.metadata?.name}: ${p.status?.phase} on ${p.spec?.nodeName}, runtimeClassName ${p.spec?.runtimeClassName}`,
        120_000,
      );
      await demo.sh(['get', 'pods', '-n', KUBEPLUS_TENANT_NAMESPACE, '-o', 'wide']);
    }
  },
};
