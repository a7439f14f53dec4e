/** Real-node mode: `helm install` of the chart; its webhook and operator run as Pods on node-a. */
import { REAL_NODE, RELEASE, RELEASE_NAMESPACE } from '../environment.js';
import type { DemoStep } from '../scenario.js';

export const installChart: DemoStep = {
  id: 'S4',
  title: `Install the Helm chart (helm install): webhook and operator Pods on ${REAL_NODE}`,
  source: 'setup',
  when: (demo) => demo.realNode,
  async run(demo) {
    const args = demo.env.chartInstallArgs();
    const res = await demo.env.helm(args);
    demo.report.command(res.display, [res.stdout, res.stderr].filter((x) => x.trim() !== '').join('\n'), 12);
    demo.check('helm install succeeded (--wait: every Pod Ready)', 'exit 0', `exit ${res.code}`, res.code === 0);
    const pods = await demo.sh(['get', 'pods', '-n', RELEASE_NAMESPACE, '-o', 'wide']);
    const running = pods.stdout.split('\n').filter((l) => /\s1\/1\s+Running\s/.test(l) && l.includes(REAL_NODE));
    demo.check(
      'two webhook and two operator Pods Running and Ready on the real node',
      `4 × 1/1 Running on ${REAL_NODE}`,
      `${running.length} × 1/1 Running on ${REAL_NODE}`,
      running.length === 4,
    );
    const mwc = await demo.sh(['get', 'mutatingwebhookconfigurations']);
    demo.check(
      'the chart’s webhook registered (its Service, its CA)',
      `${RELEASE}-webhook`,
      mwc.stdout.trim(),
      mwc.stdout.includes(`${RELEASE}-webhook`),
    );
  },
};
