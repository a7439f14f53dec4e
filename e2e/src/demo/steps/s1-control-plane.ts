import { REAL_NODE } from '../environment.js';
import type { DemoStep } from '../scenario.js';

export const controlPlane: DemoStep = {
  id: 'S1',
  title: (demo) =>
    demo.realNode
      ? `Start a control plane (etcd, kube-apiserver, kube-controller-manager, kube-scheduler) and join the real node ${REAL_NODE} (kubelet, containerd with runc and gVisor's runsc, CNI, kube-proxy; the images of \`make images\` imported)`
      : 'Start a control plane: etcd, kube-apiserver, kube-controller-manager, kube-scheduler',
  source: 'setup',
  async run(demo) {
    const cp = await demo.env.startControlPlane((m) => demo.report.note(m));
    const version = await demo.sh(['version']);
    demo.check(
      'API server ready',
      'kubectl reaches the API server',
      version.code === 0 ? 'reachable' : version.stderr,
      version.code === 0,
    );
    demo.report.note(`kubeconfig ${cp.kubeconfigPath}; logs in ${cp.state.logDir}`);
  },
};
