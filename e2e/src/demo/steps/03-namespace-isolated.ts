import { NODE_ISOLATION, TEAM_A_NAMESPACE } from '../manifests.js';
import { canonical, type DemoStep, ENABLED_LABEL, json, RESOLVED_ANNOTATION } from '../scenario.js';

export const namespaceIsolated: DemoStep = {
  id: '3',
  title: `Namespace ${TEAM_A_NAMESPACE} carries the label and the resolved annotation`,
  source: 'seed 1 step 3',
  async run(demo) {
    const res = await demo.sh([
      'get',
      'namespace',
      TEAM_A_NAMESPACE,
      '-o',
      'jsonpath={.metadata.labels}{"\\n"}{.metadata.annotations}',
    ]);
    const [labelsLine = '{}', annotationsLine = '{}'] = res.stdout.split('\n');
    const labels = JSON.parse(labelsLine || '{}') as Record<string, string>;
    const annotations = JSON.parse(annotationsLine || '{}') as Record<string, string>;
    demo.check(`label ${ENABLED_LABEL}`, '"true"', json(labels[ENABLED_LABEL]), labels[ENABLED_LABEL] === 'true');
    let resolved: unknown;
    try {
      resolved = JSON.parse(annotations[RESOLVED_ANNOTATION] ?? '');
    } catch {
      resolved = annotations[RESOLVED_ANNOTATION];
    }
    demo.check(
      `annotation ${RESOLVED_ANNOTATION}`,
      canonical(NODE_ISOLATION),
      canonical(resolved),
      canonical(resolved) === canonical(NODE_ISOLATION),
    );
  },
};
