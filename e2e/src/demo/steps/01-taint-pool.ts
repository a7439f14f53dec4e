import { NODES } from '../environment.js';
import { POOL } from '../manifests.js';
import { type DemoStep, json } from '../scenario.js';

export const taintPool: DemoStep = {
  id: '1',
  title: 'Taint and label node-a for the dedicated pool',
  source: 'seed 1, demo step 1',
  async run(demo) {
    await demo.sh(['taint', 'nodes', 'node-a', `dedicated=${POOL}:NoSchedule`]);
    await demo.sh(['label', 'nodes', 'node-a', `pool=${POOL}`]);
    await demo.sh([
      'get',
      'nodes',
      '-o',
      'custom-columns=NAME:.metadata.name,POOL:.metadata.labels.pool,TAINTS:.spec.taints[*].key',
    ]);
    const nodes = await Promise.all(NODES.map((name) => demo.core.readNode({ name })));
    const describe = nodes.map((n) => ({
      node: n.metadata?.name,
      pool: n.metadata?.labels?.pool,
      taints: (n.spec?.taints ?? []).map((t) => `${t.key}=${t.value ?? ''}:${t.effect}`),
    }));
    const [a, ...rest] = describe;
    demo.check(
      'node-a carries the taint and the label; node-b and node-c carry neither',
      `node-a pool=${POOL}, taint dedicated=${POOL}:NoSchedule; others plain`,
      json(describe),
      a?.pool === POOL &&
        json(a?.taints) === json([`dedicated=${POOL}:NoSchedule`]) &&
        rest.every((n) => n.pool === undefined && n.taints.length === 0),
    );
  },
};
