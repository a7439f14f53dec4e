import { policyOf, runtimeClassOf, sandbox, TEAM_B_INSTANCE, TEAM_B_NAMESPACE } from '../manifests.js';
import { type DemoStep, json, OWNER_NAME_LABEL } from '../scenario.js';

export const tightenTeamB: DemoStep = {
  id: '11',
  title: `Tighten ${TEAM_B_INSTANCE} (runsc → kata, enforce): existing Sandboxes are left alone, new ones are held to it`,
  source: 'seed 2, how to handle 5',
  async run(demo) {
    // The Sandboxes step 10 admitted, as they were before the tightening.
    const existing = demo.carried.teamBSandboxes;
    const annotate = await demo.sh([
      'annotate',
      'agent',
      TEAM_B_INSTANCE,
      '-n',
      TEAM_B_NAMESPACE,
      '--overwrite',
      'kubeplus.io/sandbox-isolation={"minRuntimeClass": "kata", "enforce": true}',
    ]);
    demo.check('annotation updated', 'kubectl exit 0', `exit ${annotate.code}`, annotate.code === 0);
    const rc = runtimeClassOf(TEAM_B_INSTANCE);
    await demo.eventually(
      `RuntimeClass ${rc} now has handler kata`,
      'kata',
      async () => (await demo.runtimeClassHandler(rc)) === 'kata' && 'kata',
      (h) => h,
    );
    demo.env.writeManifest('sandbox-team-b-runc-2.yaml', sandbox('legacy-tool-2', TEAM_B_NAMESPACE, 'runc'));
    const enforcePair = ['validatingadmissionpolicies', 'validatingadmissionpolicybindings'].map(
      (plural) => `${plural}/${policyOf(TEAM_B_NAMESPACE, TEAM_B_INSTANCE, 'enforce')}`,
    );
    await demo.eventually(
      'the advisory policies are replaced by the enforce pair',
      enforcePair.join(', '),
      async (observe) => {
        const now = await demo.policiesOf(TEAM_B_INSTANCE);
        observe(now);
        return json(now) === json(enforcePair) && now;
      },
      (now) => now.join(', '),
    );
    await demo.sh(['get', await demo.policyKinds(), '-l', `${OWNER_NAME_LABEL}=${TEAM_B_INSTANCE}`]);
    await demo.untilInForce(
      'team-b’s enforce policy (and the advisory ones unloaded)',
      'sandbox-team-b-runc-2.yaml',
      (res) => res.code !== 0 && /denied/i.test(res.stderr) && !/warning/i.test(res.stderr),
    );
    const now = await demo.sandboxes(TEAM_B_NAMESPACE);
    const before = existing.map((s) => [
      s.metadata.name,
      s.metadata.uid,
      s.metadata.resourceVersion,
      s.spec.podTemplate.spec.runtimeClassName,
    ]);
    const after = now.map((s) => [
      s.metadata.name,
      s.metadata.uid,
      s.metadata.resourceVersion,
      s.spec.podTemplate.spec.runtimeClassName,
    ]);
    demo.check(
      'existing Sandboxes untouched (same uid, resourceVersion, runtimeClassName)',
      json(before),
      json(after),
      json(before) === json(after) && before.length === 2,
    );
    const label = await demo.sh(['label', 'sandbox', 'legacy-tool', '-n', TEAM_B_NAMESPACE, 'reviewed=true']);
    demo.check(
      'an existing runc Sandbox can still be updated (its class is not judged again)',
      'kubectl exit 0',
      `exit ${label.code}${label.stderr ? `; ${label.stderr.trim()}` : ''}`,
      label.code === 0,
    );
    const denied = await demo.apply('sandbox-team-b-runc-2.yaml', sandbox('legacy-tool-2', TEAM_B_NAMESPACE, 'runc'));
    demo.check(
      'a NEW runc Sandbox is now denied',
      'kubectl fails: "... denied request ..."',
      denied.stderr.trim() || `exit ${denied.code}`,
      denied.code !== 0 && /denied/i.test(denied.stderr),
    );
    // Not retroactive, but visible: the namespace's compliance Report (OpenReports) fails the
    // Sandboxes admitted before the tightening (the operator's audit, every 5 s in the demo).
    // legacy-tool (runc); notebook names the instance's own class, which now has handler kata.
    // Weaker than kata now: the runc one, and (where advisory mode could not default it) the unset one.
    const weak = existing
      .filter((s) => [undefined, 'runc'].includes(s.spec.podTemplate.spec.runtimeClassName))
      .map((s) => s.metadata.name)
      .sort();
    await demo.eventually(
      `the compliance Report of ${TEAM_B_NAMESPACE} fails the Sandboxes weaker than kata (${weak.join(', ')})`,
      `sandbox-isolation fail: ${weak.join(', ')}`,
      async (observe) => {
        const res = await demo.env.kubectl([
          'get',
          'reports.openreports.io',
          'kubeplus-isolation',
          '-n',
          TEAM_B_NAMESPACE,
          '-o',
          'json',
        ]);
        if (res.code !== 0) return false;
        const report = JSON.parse(res.stdout) as {
          results?: Array<{ policy: string; result: string; resources?: Array<{ name: string }> }>;
        };
        const failing = (report.results ?? [])
          .filter((x) => x.policy === 'sandbox-isolation' && x.result === 'fail')
          .flatMap((x) => x.resources?.map((o) => o.name) ?? [])
          .sort();
        observe(failing);
        return json(failing) === json(weak) && failing;
      },
      (failing) => `sandbox-isolation fail: ${failing.join(', ')}`,
    );
    await demo.sh(['get', 'reports', '-n', TEAM_B_NAMESPACE]);
  },
};
