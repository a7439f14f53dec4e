import { sandbox, TEAM_A_NAMESPACE } from '../manifests.js';
import { type DemoStep, json } from '../scenario.js';

export const sandboxDenied: DemoStep = {
  id: '8',
  title: `A Sandbox in ${TEAM_A_NAMESPACE} without runtimeClassName (or with runc) is denied`,
  source: 'seed 2 step 4',
  async run(demo) {
    demo.env.writeManifest('sandbox-no-runtimeclass.yaml', sandbox('code-interpreter', TEAM_A_NAMESPACE));
    await demo.untilInForce(
      'team-a’s enforce policy',
      'sandbox-no-runtimeclass.yaml',
      (res) => res.code !== 0 && /denied/i.test(res.stderr),
    );
    const unset = await demo.apply('sandbox-no-runtimeclass.yaml', sandbox('code-interpreter', TEAM_A_NAMESPACE));
    demo.check(
      'no runtimeClassName: denied at admission',
      'kubectl fails: "... denied request ..."',
      unset.stderr.trim() || `exit ${unset.code}`,
      unset.code !== 0 && /denied/i.test(unset.stderr),
    );
    const runc = await demo.apply('sandbox-runc.yaml', sandbox('code-interpreter', TEAM_A_NAMESPACE, 'runc'));
    demo.check(
      'runtimeClassName runc: denied',
      'kubectl fails: "... denied request ..."',
      runc.stderr.trim() || `exit ${runc.code}`,
      runc.code !== 0 && /denied/i.test(runc.stderr),
    );
    const stored = await demo.sandboxes(TEAM_A_NAMESPACE);
    demo.check(
      'nothing was stored',
      'no Sandbox in team-a',
      json(stored.map((s) => s.metadata.name)),
      stored.length === 0,
    );
  },
};
