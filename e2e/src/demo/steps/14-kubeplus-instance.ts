/**
 * Step 14 (issue 35): KubePlus as it really runs, with the KubePlus STAND-IN (e2e/src/kubeplus-standin/,
 * not KubePlus) in its own namespace `default`. An instance created there: KubePlus creates
 * namespace `<instance>` inside its webhook's handling of the CREATE and starts `helm install` at
 * once; the operator isolates that namespace (labels, annotates and settles it) and never touches
 * `default`. The chart's Pods and Sandbox are step 15's.
 */
import { ISOLATION_SETTLED_LABEL, ISOLATION_SETTLED_VALUE } from '@kubeplus-isolation/spec';
import {
  KUBEPLUS_MANAGED_BY_LABEL as MANAGED_BY,
  RELEASE_NAME_ANNOTATION,
  STANDIN_GROUP,
  STANDIN_VERSION,
  STANDIN_WEBHOOK_CONFIGURATION,
} from '../../kubeplus-standin/index.js';
import {
  KUBEPLUS_INSTANCE,
  KUBEPLUS_INSTANCE_MANIFEST,
  KUBEPLUS_KIND,
  KUBEPLUS_NAMESPACE,
  KUBEPLUS_RELEASE,
  KUBEPLUS_TENANT_NAMESPACE,
  NODE_ISOLATION,
} from '../manifests.js';
import {
  CREATED_FOR_ANNOTATION,
  canonical,
  type DemoStep,
  ENABLED_LABEL,
  json,
  RESOLVED_ANNOTATION,
} from '../scenario.js';

export const kubeplusInstance: DemoStep = {
  id: '14',
  title: `KubePlus (stand-in) in "${KUBEPLUS_NAMESPACE}": instance ${KUBEPLUS_INSTANCE} there, namespace ${KUBEPLUS_TENANT_NAMESPACE} created by KubePlus and isolated by the operator`,
  source: 'issue 35',
  async run(demo) {
    demo.report.note(
      `KubePlus runs in "${KUBEPLUS_NAMESPACE}" (its README and CI). Its webhook here is registered by URL on 127.0.0.1 (the stand-in runs in the demo's process; DEMO.md says why), and a URL names no namespace, so the operator is told KubePlus's namespace: operator.platformNamespace=${KUBEPLUS_NAMESPACE}. Registered through a Service, the operator finds it by itself (e2e/test/kubeplus-flow.test.ts).`,
    );
    const upgrade = await demo.env.setPlatformNamespace(KUBEPLUS_NAMESPACE);
    demo.report.command(upgrade.display, [upgrade.stdout, upgrade.stderr].filter((x) => x.trim() !== '').join('\n'), 8);
    demo.check('operator reconfigured', 'exit 0', `exit ${upgrade.code}`, upgrade.code === 0);
    await demo.eventually(
      "the operator's platform namespace",
      `"${KUBEPLUS_NAMESPACE}" (source flag)`,
      async (observe) => {
        const lines = (await demo.env.operatorLog())
          .split('\n')
          .filter((l) => l.includes('"platform namespace"'))
          .map((l) => JSON.parse(l.slice(l.indexOf('{'))) as { platformNamespace?: string; source?: string });
        observe(lines);
        // Real node: every operator Pod's log; the rolled Pods' lines name the new namespace.
        return lines.find((l) => l.platformNamespace === KUBEPLUS_NAMESPACE);
      },
      (l) => `"${l.platformNamespace}" (source ${l.source})`,
    );

    const kubeplus = await demo.env.startKubePlus(KUBEPLUS_NAMESPACE, [KUBEPLUS_KIND]);
    demo.report.note(
      `KubePlus stand-in up: its webhook ${STANDIN_WEBHOOK_CONFIGURATION} (failurePolicy Fail) acts in namespaces labeled ${MANAGED_BY}=kubeplus, and "${KUBEPLUS_NAMESPACE}" is; Kind ${KUBEPLUS_KIND.kind} (${STANDIN_GROUP}/${STANDIN_VERSION}) registered`,
    );
    await demo.sh(['get', 'crd', '-l', 'registered-by=kubeplus']);
    const res = await demo.apply('kubeplus-instance.yaml', KUBEPLUS_INSTANCE_MANIFEST);
    demo.check('instance accepted (through KubePlus’s webhook)', 'kubectl exit 0', `exit ${res.code}`, res.code === 0);
    const created = kubeplus.events.find((e) => e.type === 'namespace' && e.namespace === KUBEPLUS_TENANT_NAMESPACE);
    demo.check(
      `KubePlus created namespace ${KUBEPLUS_TENANT_NAMESPACE} inside the instance's CREATE admission`,
      'created (before the instance was stored), then helm install started',
      created?.type === 'namespace' ? created.action : 'no namespace work',
      created?.type === 'namespace' && created.action === 'created',
    );
    await demo.sh(['get', KUBEPLUS_KIND.plural, '-n', KUBEPLUS_NAMESPACE]);

    const settled = await demo.eventually(
      `namespace ${KUBEPLUS_TENANT_NAMESPACE} isolated and settled by the operator`,
      `${ENABLED_LABEL}=true, ${ISOLATION_SETTLED_LABEL}=${ISOLATION_SETTLED_VALUE}`,
      async (observe) => {
        const labels = (await demo.readNamespace(KUBEPLUS_TENANT_NAMESPACE))?.metadata?.labels ?? {};
        observe(labels);
        return labels[ENABLED_LABEL] === 'true' && labels[ISOLATION_SETTLED_LABEL] === ISOLATION_SETTLED_VALUE
          ? labels
          : undefined;
      },
      (labels) =>
        `${ENABLED_LABEL}=${labels[ENABLED_LABEL]}, ${ISOLATION_SETTLED_LABEL}=${labels[ISOLATION_SETTLED_LABEL]}`,
    );
    if (settled) {
      const get = await demo.sh([
        'get',
        'namespace',
        KUBEPLUS_TENANT_NAMESPACE,
        '-o',
        'jsonpath={.metadata.labels}{"\\n"}{.metadata.annotations}',
      ]);
      const [labelsLine = '{}', annotationsLine = '{}'] = get.stdout.split('\n');
      const labels = JSON.parse(labelsLine || '{}') as Record<string, string>;
      const annotations = JSON.parse(annotationsLine || '{}') as Record<string, string>;
      demo.check(
        'made by KubePlus, not by the operator',
        `${MANAGED_BY}=kubeplus, ${RELEASE_NAME_ANNOTATION}="${KUBEPLUS_RELEASE}" (quotes included), no ${CREATED_FOR_ANNOTATION}`,
        `${MANAGED_BY}=${labels[MANAGED_BY]}, ${RELEASE_NAME_ANNOTATION}=${annotations[RELEASE_NAME_ANNOTATION]}, ${CREATED_FOR_ANNOTATION}: ${annotations[CREATED_FOR_ANNOTATION] ?? 'absent'}`,
        labels[MANAGED_BY] === 'kubeplus' &&
          annotations[RELEASE_NAME_ANNOTATION] === `"${KUBEPLUS_RELEASE}"` &&
          annotations[CREATED_FOR_ANNOTATION] === undefined,
      );
      let resolved: unknown;
      try {
        resolved = JSON.parse(annotations[RESOLVED_ANNOTATION] ?? '');
      } catch {
        resolved = annotations[RESOLVED_ANNOTATION];
      }
      demo.check(
        `annotation ${RESOLVED_ANNOTATION} (the instance's mandate)`,
        canonical(NODE_ISOLATION),
        canonical(resolved),
        canonical(resolved) === canonical(NODE_ISOLATION),
      );
    }
    await demo.sh([
      'get',
      'namespace',
      KUBEPLUS_NAMESPACE,
      '-o',
      'jsonpath={.metadata.labels}{"\\n"}{.metadata.annotations}{"\\n"}',
    ]);
    const keys = await demo.isolationKeys(KUBEPLUS_NAMESPACE);
    demo.check(
      `"${KUBEPLUS_NAMESPACE}" (KubePlus's namespace, where the instance lives) carries no isolation key`,
      'no kubeplus.io/ label or annotation',
      keys.length === 0 ? 'none' : json(keys),
      keys.length === 0,
    );
  },
};
