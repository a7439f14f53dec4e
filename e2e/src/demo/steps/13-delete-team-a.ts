import { PLATFORM_NAMESPACE, runtimeClassOf, TEAM_A_INSTANCE, TEAM_A_NAMESPACE } from '../manifests.js';
import { AGENT, type DemoStep, ENABLED_LABEL, json } from '../scenario.js';

export const deleteTeamA: DemoStep = {
  id: '13',
  title: `Delete ${TEAM_A_INSTANCE}: namespace ${TEAM_A_NAMESPACE} (and its label) is gone, with its RuntimeClass and policies`,
  source: 'seed 1 step 6, seed 2 acceptance 6',
  async run(demo) {
    const rc = runtimeClassOf(TEAM_A_INSTANCE);
    const policiesBefore = await demo.policiesOf(TEAM_A_INSTANCE);
    demo.report.note(`owned before deletion: runtimeclasses/${rc}, ${policiesBefore.join(', ')}`);
    await demo.sh(['delete', 'agent', TEAM_A_INSTANCE, '-n', PLATFORM_NAMESPACE]);
    const started = performance.now();
    await demo.eventually(
      `namespace ${TEAM_A_NAMESPACE} finalized and removed by the namespace controller`,
      'gone (404)',
      async (observe) => {
        const ns = await demo.readNamespace(TEAM_A_NAMESPACE);
        observe(
          ns
            ? { phase: ns.status?.phase, conditions: ns.status?.conditions?.filter((c) => c.status === 'True') }
            : 'gone',
        );
        return ns === undefined && `gone after ${((performance.now() - started) / 1000).toFixed(1)} s`;
      },
      (v) => v,
      120_000,
    );
    const get = await demo.sh(['get', 'namespace', TEAM_A_NAMESPACE]);
    demo.check(
      `kubectl get namespace ${TEAM_A_NAMESPACE}`,
      'not found',
      get.stderr.trim() || get.stdout.trim(),
      get.code !== 0 && /NotFound|not found/.test(get.stderr),
    );
    const labeled = await demo.sh(['get', 'namespaces', '-l', `${ENABLED_LABEL}=true`]);
    demo.check(
      'no namespace carries the isolation label any more',
      'No resources found',
      (labeled.stdout + labeled.stderr).trim(),
      labeled.code === 0 && labeled.stdout.trim() === '',
    );
    demo.check(
      `RuntimeClass ${rc} removed`,
      'not found',
      (await demo.runtimeClassHandler(rc)) === undefined ? 'not found' : 'still there',
      (await demo.runtimeClassHandler(rc)) === undefined,
    );
    const policies = await demo.policiesOf(TEAM_A_INSTANCE);
    demo.check('admission policies and bindings removed', 'none', json(policies), policies.length === 0);
    const agents = (await demo.custom.listClusterCustomObject(AGENT)) as { items: unknown[] };
    demo.check('no Agent instance left', '0', String(agents.items.length), agents.items.length === 0);
  },
};
