import { runtimeClassOf, sandbox, TEAM_B_INSTANCE, TEAM_B_NAMESPACE, teamBAgent } from '../manifests.js';
import { type DemoStep, ENABLED_LABEL, json, OWNER_NAME_LABEL } from '../scenario.js';

export const advisoryTeamB: DemoStep = {
  id: '10',
  title: `Agent "${TEAM_B_INSTANCE}" with only sandbox-isolation, enforce: false (advisory)`,
  source: 'seed 2 step 6',
  async run(demo) {
    const rc = runtimeClassOf(TEAM_B_INSTANCE);
    await demo.sh(['create', 'namespace', TEAM_B_NAMESPACE]);
    demo.report.note(
      `${TEAM_B_NAMESPACE} is an existing tenant namespace: the instance is created inside it, so the operator never deletes it (see DEMO.md).`,
    );
    const res = await demo.apply('agent-team-b.yaml', teamBAgent('{"minRuntimeClass": "runsc", "enforce": false}'));
    demo.check('instance accepted', 'kubectl exit 0', `exit ${res.code}`, res.code === 0);
    await demo.eventually(
      `RuntimeClass ${rc} with handler runsc`,
      'handler runsc',
      async () => (await demo.runtimeClassHandler(rc)) === 'runsc' && 'runsc',
      (h) => h,
    );
    await demo.sh(['get', await demo.policyKinds(), '-l', `${OWNER_NAME_LABEL}=${TEAM_B_INSTANCE}`]);
    const ns = await demo.readNamespace(TEAM_B_NAMESPACE);
    demo.check(
      'no node isolation asked, none applied',
      `namespace ${TEAM_B_NAMESPACE} without ${ENABLED_LABEL}`,
      json(ns?.metadata?.labels),
      ns?.metadata?.labels?.[ENABLED_LABEL] === undefined,
    );

    demo.env.writeManifest('sandbox-team-b-unset.yaml', sandbox('notebook', TEAM_B_NAMESPACE));
    demo.env.writeManifest('sandbox-team-b-runc.yaml', sandbox('legacy-tool', TEAM_B_NAMESPACE, 'runc'));
    // Defaulting needs a MutatingAdmissionPolicy API (Kubernetes 1.36; 1.34-1.35 when enabled).
    // Without one the operator falls back, as documented: it says so on the instance, installs
    // the warning policy only, and an unset class stays unset.
    const defaults = (await demo.mutatingPolicyVersion()) !== undefined;
    if (defaults) {
      await demo.untilInForce(
        'team-b’s defaulting policy',
        'sandbox-team-b-unset.yaml',
        (dry) => dry.code === 0 && dry.stdout.trim() === rc,
        ['-o', 'jsonpath={.spec.podTemplate.spec.runtimeClassName}'],
      );
    } else {
      demo.report.note(
        `This cluster (Kubernetes ${demo.env.controlPlane.state.kubernetesVersion}) serves no MutatingAdmissionPolicy API: advisory mode cannot default, and the operator says so on the instance.`,
      );
      await demo.eventually(
        'a Warning Event on the instance: MutatingAdmissionPolicyUnavailable',
        'Warning MutatingAdmissionPolicyUnavailable',
        async () => {
          const events = await demo.core.listNamespacedEvent({
            namespace: TEAM_B_NAMESPACE,
            fieldSelector: `involvedObject.name=${TEAM_B_INSTANCE}`,
          });
          const hit = events.items.find((e) => e.reason === 'MutatingAdmissionPolicyUnavailable');
          return hit !== undefined && `${hit.type} ${hit.reason}: ${hit.message}`;
        },
        (seen) => seen,
      );
      await demo.sh(['get', 'events', '-n', TEAM_B_NAMESPACE, '--field-selector', 'type=Warning']);
    }
    await demo.untilInForce(
      'team-b’s warning policy',
      'sandbox-team-b-runc.yaml',
      (dry) => dry.code === 0 && /warning/i.test(dry.stderr),
    );
    const unset = await demo.apply('sandbox-team-b-unset.yaml', sandbox('notebook', TEAM_B_NAMESPACE));
    const runc = await demo.apply('sandbox-team-b-runc.yaml', sandbox('legacy-tool', TEAM_B_NAMESPACE, 'runc'));
    await demo.sh([
      'get',
      'sandbox',
      '-n',
      TEAM_B_NAMESPACE,
      '-o',
      'custom-columns=NAME:.metadata.name,RUNTIMECLASS:.spec.podTemplate.spec.runtimeClassName',
    ]);
    demo.carried.teamBSandboxes = await demo.sandboxes(TEAM_B_NAMESPACE);
    const byName = Object.fromEntries(
      demo.carried.teamBSandboxes.map((s) => [s.metadata.name, s.spec.podTemplate.spec.runtimeClassName]),
    );
    demo.check(
      defaults
        ? 'unset runtimeClassName: admitted with the namespace default applied'
        : 'unset runtimeClassName: admitted, left unset (no MutatingAdmissionPolicy to default with), with a warning',
      defaults ? `notebook → ${rc}` : 'notebook → unset, "Warning: ..." on stderr',
      `exit ${unset.code}; notebook → ${byName.notebook ?? 'unset'}${defaults ? '' : `; ${unset.stderr.trim() || 'no warning'}`}`,
      unset.code === 0 &&
        (defaults ? byName.notebook === rc : byName.notebook === undefined && /warning/i.test(unset.stderr)),
    );
    demo.check(
      'explicit weaker runc: admitted, with a warning',
      'kubectl exit 0 and "Warning: ..." on stderr',
      `exit ${runc.code}; ${runc.stderr.trim() || 'no warning'}`,
      runc.code === 0 && byName['legacy-tool'] === 'runc' && /warning/i.test(runc.stderr),
    );
  },
};
