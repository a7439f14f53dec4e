import { existsSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import {
  type Cluster,
  type ControlPlane,
  connectE2eCluster,
  createTestNamespace,
  deleteNamespace,
  NODE_PLACEMENT_ADMISSION_PLUGINS,
  startControlPlane,
  testPod,
} from '@kubeplus-isolation/e2e';
import { CoreV1Api } from '@kubernetes/client-node';

/**
 * startControlPlane({ extraAdmissionPlugins }) — what the benchmark comparing the webhook with
 * PodNodeSelector + PodTolerationRestriction relies on — on a second control plane running beside
 * the run's shared one (two control planes coexist: own temp dir, own ports).
 */
describe('e2e harness: a second control plane with PodNodeSelector and PodTolerationRestriction', () => {
  let own: ControlPlane | undefined;
  let shared: Cluster;
  const annotations = {
    'scheduler.alpha.kubernetes.io/node-selector': 'pool=team-a-pool',
    'scheduler.alpha.kubernetes.io/defaultTolerations': JSON.stringify([
      { key: 'dedicated', operator: 'Equal', value: 'team-a-pool', effect: 'NoSchedule' },
    ]),
  };

  beforeAll(async () => {
    shared = await connectE2eCluster();
    own = await startControlPlane({ extraAdmissionPlugins: NODE_PLACEMENT_ADMISSION_PLUGINS });
  });

  afterAll(async () => {
    await own?.stop();
  });

  test('runs beside the shared control plane on its own ports and temp dir', () => {
    const cp = own as ControlPlane;
    expect(cp.dir).not.toBe(shared.dir);
    expect(cp.server).not.toBe(shared.server);
    expect(cp.state.extraAdmissionPlugins).toEqual(['PodNodeSelector', 'PodTolerationRestriction']);
  });

  test('the plugins apply a namespace’s node selector and default tolerations to its Pods', async () => {
    const cp = own as ControlPlane;
    const ns = await createTestNamespace(cp.kc, 'e2e-plugins', { annotations });
    const pod = await cp.kc.makeApiClient(CoreV1Api).createNamespacedPod({ namespace: ns, body: testPod('placed') });
    expect(pod.spec?.nodeSelector).toEqual({ pool: 'team-a-pool' });
    expect(pod.spec?.tolerations).toContainEqual({
      key: 'dedicated',
      operator: 'Equal',
      value: 'team-a-pool',
      effect: 'NoSchedule',
    });
  });

  test('without the plugins (the shared control plane) the same annotations change nothing', async () => {
    const ns = await createTestNamespace(shared.kc, 'e2e-no-plugins', { annotations });
    try {
      const pod = await shared.kc
        .makeApiClient(CoreV1Api)
        .createNamespacedPod({ namespace: ns, body: testPod('unplaced') });
      expect(pod.spec?.nodeSelector).toBeUndefined();
      expect(pod.spec?.tolerations?.map((t) => t.key)).not.toContain('dedicated');
    } finally {
      await deleteNamespace(shared.kc, ns);
    }
  });

  test('stop() ends every component and removes the temp dir', async () => {
    const cp = own as ControlPlane;
    const processes = [...cp.processes];
    expect(processes.map((p) => p.name).sort()).toEqual([
      'etcd',
      'kube-apiserver',
      'kube-controller-manager',
      'kube-scheduler',
    ]);
    await cp.stop();
    own = undefined;
    for (const p of processes)
      expect({ name: p.name, exited: p.exited() !== undefined }).toEqual({ name: p.name, exited: true });
    expect(existsSync(cp.dir)).toBe(false);
  });
});
