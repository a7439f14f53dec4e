import { runtimeClassOf, TEAM_B_INSTANCE, TEAM_B_NAMESPACE } from '../manifests.js';
import { type DemoStep, json } from '../scenario.js';

export const deleteTeamB: DemoStep = {
  id: '12',
  title: `Delete ${TEAM_B_INSTANCE}: its policies and RuntimeClass go, its Sandboxes and namespace stay`,
  source: 'seed 2, acceptance 6',
  async run(demo) {
    const rc = runtimeClassOf(TEAM_B_INSTANCE);
    const sandboxesBefore = (await demo.sandboxes(TEAM_B_NAMESPACE)).map((s) => s.metadata.uid).sort();
    await demo.sh(['delete', 'agent', TEAM_B_INSTANCE, '-n', TEAM_B_NAMESPACE]);
    await demo.eventually(
      'admission policies and bindings removed',
      'none labelled for the instance',
      async (observe) => {
        const left = await demo.policiesOf(TEAM_B_INSTANCE);
        observe(left);
        return left.length === 0 && 'none left';
      },
      (v) => v,
    );
    await demo.eventually(
      `RuntimeClass ${rc} removed`,
      'not found',
      async () => (await demo.runtimeClassHandler(rc)) === undefined && 'not found',
      (v) => v,
    );
    await demo.sh(['get', 'sandbox', '-n', TEAM_B_NAMESPACE]);
    const sandboxesAfter = (await demo.sandboxes(TEAM_B_NAMESPACE)).map((s) => s.metadata.uid).sort();
    demo.check(
      'the Sandboxes are still there (same uids)',
      json(sandboxesBefore),
      json(sandboxesAfter),
      sandboxesBefore.length === 2 && json(sandboxesBefore) === json(sandboxesAfter),
    );
    const ns = await demo.readNamespace(TEAM_B_NAMESPACE);
    demo.check(
      `namespace ${TEAM_B_NAMESPACE} (not created by KubePlus) stays`,
      'Active',
      ns?.status?.phase ?? 'not found',
      ns?.status?.phase === 'Active',
    );
  },
};
