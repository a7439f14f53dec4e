/**
 * Step 16 (issue 35): deleting the instance, KubePlus's way: at the DELETE admission KubePlus runs
 * `helm delete` and then deletes the namespace in the background; the operator then removes the
 * instance's RuntimeClass and policies. Nothing is left, and `default` was never touched.
 */
import {
  KUBEPLUS_INSTANCE,
  KUBEPLUS_KIND,
  KUBEPLUS_NAMESPACE,
  KUBEPLUS_TENANT_NAMESPACE,
  runtimeClassOf,
} from '../manifests.js';
import { type DemoStep, json } from '../scenario.js';

export const kubeplusDelete: DemoStep = {
  id: '16',
  title: `Delete ${KUBEPLUS_INSTANCE}: KubePlus's helm delete and namespace delete, then the operator's RuntimeClass and policies gone`,
  source: 'issue 35',
  async run(demo) {
    const rc = runtimeClassOf(KUBEPLUS_INSTANCE);
    const policiesBefore = await demo.policiesOf(KUBEPLUS_INSTANCE);
    demo.report.note(`owned before deletion: runtimeclasses/${rc}, ${policiesBefore.join(', ')}`);
    await demo.sh(['delete', KUBEPLUS_KIND.kind.toLowerCase(), KUBEPLUS_INSTANCE, '-n', KUBEPLUS_NAMESPACE]);
    const kubeplus = demo.env.kubeplus;
    await kubeplus?.idle();
    const helmDelete = kubeplus?.events.find(
      (e) => e.type === 'helm' && e.verb === 'delete' && e.namespace === KUBEPLUS_TENANT_NAMESPACE,
    );
    demo.check(
      "KubePlus's helm delete (in the background after the DELETE admission)",
      'delete: ok',
      helmDelete?.type === 'helm' ? `delete: ${helmDelete.ok ? 'ok' : helmDelete.output.trim()}` : 'no helm delete',
      helmDelete?.type === 'helm' && helmDelete.ok,
    );
    const nsDelete = kubeplus?.events.find(
      (e) => e.type === 'namespace' && e.namespace === KUBEPLUS_TENANT_NAMESPACE && e.action !== 'created',
    );
    demo.check(
      `KubePlus's delete of namespace ${KUBEPLUS_TENANT_NAMESPACE}`,
      'deleted',
      nsDelete?.type === 'namespace' ? `${nsDelete.action}${nsDelete.error ? `: ${nsDelete.error}` : ''}` : 'not asked',
      nsDelete?.type === 'namespace' && nsDelete.action === 'deleted',
    );
    const started = performance.now();
    await demo.eventually(
      `namespace ${KUBEPLUS_TENANT_NAMESPACE} finalized and removed`,
      'gone (404)',
      async (observe) => {
        const ns = await demo.readNamespace(KUBEPLUS_TENANT_NAMESPACE);
        observe(ns ? { phase: ns.status?.phase } : 'gone');
        return ns === undefined && `gone after ${((performance.now() - started) / 1000).toFixed(1)} s`;
      },
      (v) => v,
      120_000,
    );
    await demo.eventually(
      `RuntimeClass ${rc} and the instance's policies removed by the operator`,
      'none left',
      async (observe) => {
        const handler = await demo.runtimeClassHandler(rc);
        const policies = await demo.policiesOf(KUBEPLUS_INSTANCE);
        observe({ runtimeClass: handler ?? 'gone', policies });
        return handler === undefined && policies.length === 0 && 'none left';
      },
      (v) => v,
    );
    await demo.sh(['get', 'runtimeclass']);
    const get = await demo.sh(['get', KUBEPLUS_KIND.plural, '-n', KUBEPLUS_NAMESPACE]);
    demo.check(
      'no instance left',
      'No resources found',
      (get.stdout + get.stderr).trim(),
      get.code === 0 && get.stdout.trim() === '',
    );
    const keys = await demo.isolationKeys(KUBEPLUS_NAMESPACE);
    demo.check(
      `"${KUBEPLUS_NAMESPACE}" still carries no isolation key`,
      'no kubeplus.io/ label or annotation',
      keys.length === 0 ? 'none' : json(keys),
      keys.length === 0,
    );
  },
};
