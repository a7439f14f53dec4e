import { sandbox, UNRELATED_NAMESPACE } from '../manifests.js';
import type { DemoStep } from '../scenario.js';

export const sandboxUnconstrained: DemoStep = {
  id: '7',
  title: 'No sandbox-isolation instance, no constraint: a Sandbox without runtimeClassName is accepted',
  source: 'seed 2, acceptance 1',
  async run(demo) {
    const res = await demo.apply('sandbox-unrelated.yaml', sandbox('scratch', UNRELATED_NAMESPACE));
    demo.check(
      'accepted in the unrelated namespace',
      'kubectl exit 0, no warning',
      `exit ${res.code}${res.stderr ? `; ${res.stderr.trim()}` : ''}`,
      res.code === 0 && !/warning/i.test(res.stderr),
    );
  },
};
