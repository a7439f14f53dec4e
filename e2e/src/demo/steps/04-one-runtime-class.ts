import { runtimeClassOf, TEAM_A_INSTANCE } from '../manifests.js';
import { type DemoStep, json, OWNER_NAME_LABEL } from '../scenario.js';

export const oneRuntimeClass: DemoStep = {
  id: '4',
  title: `Exactly one RuntimeClass for the instance: ${runtimeClassOf(TEAM_A_INSTANCE)}, handler kata`,
  source: 'seed 2 step 2',
  async run(demo) {
    const rcName = runtimeClassOf(TEAM_A_INSTANCE);
    await demo.eventually(
      `RuntimeClass ${rcName} exists`,
      'created by the operator',
      async () => (await demo.runtimeClassHandler(rcName)) !== undefined,
      () => 'exists',
    );
    const list = await demo.env.kubectl(['get', 'runtimeclass', '-o', 'name']);
    const matching = list.stdout.split('\n').filter((l) => l.includes(rcName));
    demo.report.command(`kubectl get runtimeclass -o name | grep ${rcName}`, matching.join('\n'));
    demo.check(
      'one RuntimeClass for the instance',
      `runtimeclass.node.k8s.io/${rcName}`,
      matching.join(', '),
      json(matching) === json([`runtimeclass.node.k8s.io/${rcName}`]),
    );
    const handler = await demo.sh(['get', 'runtimeclass', rcName, '-o', 'jsonpath={.handler}']);
    demo.check('its handler', 'kata', handler.stdout, handler.stdout === 'kata');
    const after = await demo.runtimeClassNames();
    const added = after.filter((n) => !demo.carried.runtimeClassesBefore.includes(n));
    demo.check(
      'RuntimeClasses added to the cluster by an instance with BOTH annotations',
      `exactly [${rcName}]`,
      `[${added.join(', ')}] (before: [${demo.carried.runtimeClassesBefore.join(', ')}])`,
      json(added) === json([rcName]),
    );
    await demo.sh([
      'get',
      'validatingadmissionpolicies,validatingadmissionpolicybindings',
      '-l',
      `${OWNER_NAME_LABEL}=${TEAM_A_INSTANCE}`,
    ]);
  },
};
