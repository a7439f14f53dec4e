import { PLATFORM_NAMESPACE, TEAM_A_AGENT, TEAM_A_INSTANCE, TEAM_A_NAMESPACE } from '../manifests.js';
import { CREATED_FOR_ANNOTATION, type DemoStep } from '../scenario.js';

export const createTeamA: DemoStep = {
  id: '2',
  title: `Create Agent "${TEAM_A_INSTANCE}" with kubeplus.io/node-isolation and kubeplus.io/sandbox-isolation`,
  source: 'seed 1 step 2, seed 2 step 2',
  async run(demo) {
    demo.carried.runtimeClassesBefore = await demo.runtimeClassNames();
    const res = await demo.apply('agent-team-a.yaml', TEAM_A_AGENT);
    demo.check('instance accepted', 'kubectl exit 0', `exit ${res.code}`, res.code === 0);
    demo.report.note(
      `The instance is in the platform namespace "${PLATFORM_NAMESPACE}", so KubePlus gives it a namespace of its own named after it: "${TEAM_A_NAMESPACE}" (see DEMO.md).`,
    );
    await demo.eventually(
      `the operator creates namespace ${TEAM_A_NAMESPACE} for the instance`,
      `namespace ${TEAM_A_NAMESPACE} with ${CREATED_FOR_ANNOTATION} naming the instance`,
      async (observe) => {
        const ns = await demo.readNamespace(TEAM_A_NAMESPACE);
        observe(ns?.metadata ?? 'not found');
        const createdFor = ns?.metadata?.annotations?.[CREATED_FOR_ANNOTATION];
        return createdFor?.endsWith(`/${PLATFORM_NAMESPACE}/${TEAM_A_INSTANCE}`) ? createdFor : undefined;
      },
      (createdFor) => `${CREATED_FOR_ANNOTATION}: ${createdFor}`,
    );
    await demo.sh(['get', 'agents', '-n', PLATFORM_NAMESPACE]);
  },
};
