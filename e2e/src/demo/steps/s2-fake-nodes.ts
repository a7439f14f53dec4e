import { NODES, REAL_NODE } from '../environment.js';
import type { DemoStep } from '../scenario.js';

export const fakeNodes: DemoStep = {
  id: 'S2',
  title: (demo) =>
    demo.realNode
      ? `Add nodes ${demo.env.fakeNodeNames.join(', ')} (fake kubelets: Ready, heartbeating; Pods are bound, never run) beside the real ${REAL_NODE}`
      : `Add nodes ${NODES.join(', ')} (fake kubelets: Ready, heartbeating; Pods are bound, never run)`,
  source: 'setup',
  async run(demo) {
    await demo.env.startNodes();
    const res = await demo.sh(['get', 'nodes']);
    const ready = NODES.filter((n) => new RegExp(`^${n}\\s+Ready\\s`, 'm').test(res.stdout));
    demo.check(
      'all three nodes Ready',
      NODES.join(', '),
      ready.join(', ') || res.stdout,
      ready.length === NODES.length,
    );
  },
};
