/**
 * Least privilege: every Role/ClusterRole the chart renders, checked rule by rule. No wildcard
 * anywhere, one Secret by name (the webhook certificate the operator issues) and no other, the
 * webhook reads Namespaces and nothing else, the operator gets exactly the verbs its code uses,
 * and every binding points at the chart's own ServiceAccounts.
 */
import { describe, expect, jest, test } from '@jest/globals';
import { type K8sObject, NAMESPACE, one, RELEASE, render, renderError } from './helm.js';

jest.setTimeout(60_000);

interface Rule {
  apiGroups?: string[];
  resources?: string[];
  verbs: string[];
  resourceNames?: string[];
  nonResourceURLs?: string[];
}

const INSTANCE_GROUPS = [
  { group: 'platformapi.kubeplus', resources: ['wordpressservices', 'mysqlservices'] },
  { group: 'cloudark.io', resources: ['agents'] },
];

function roles(objects: K8sObject[]): K8sObject[] {
  return objects.filter((o) => o.kind === 'ClusterRole' || o.kind === 'Role');
}

function rulesOf(role: K8sObject): Rule[] {
  return (role.rules as Rule[] | undefined) ?? [];
}

/** "group/resource" → sorted verbs, merged over every rule of the role (resourceNames kept apart). */
function grants(role: K8sObject): Record<string, string[]> {
  const out: Record<string, Set<string>> = {};
  for (const rule of rulesOf(role)) {
    for (const group of rule.apiGroups ?? []) {
      for (const resource of rule.resources ?? []) {
        const key = `${group || 'core'}/${resource}${rule.resourceNames ? `[${rule.resourceNames.join(',')}]` : ''}`;
        out[key] ??= new Set();
        for (const verb of rule.verbs) out[key].add(verb);
      }
    }
  }
  return Object.fromEntries(Object.entries(out).map(([k, v]) => [k, [...v].sort()]));
}

const sorted = (...verbs: string[]): string[] => [...verbs].sort();

/**
 * The one wildcard: every resource of KubePlus's group, read-only (operator.kubeplus.enabled, the
 * default), because KubePlus registers its Kinds at run time.
 */
const KUBEPLUS_RULE: Rule = { apiGroups: ['platformapi.kubeplus'], resources: ['*'], verbs: ['get', 'list', 'watch'] };

/** The umbrella's RBAC for the operator-issued webhook certificate (webhook.tls.mode=operator). */
const WEBHOOK_CERTIFICATES = `${RELEASE}-kubeplus-isolation-webhook-certificates`;
const HELM_TLS = { webhook: { tls: { mode: 'helm' } } };

describe('RBAC', () => {
  test("no wildcard in any rule but KubePlus's group's read-only one, and no Secret but the webhook certificate by name, with every feature enabled", async () => {
    const objects = await render({
      operator: { instanceGroups: INSTANCE_GROUPS, instanceRoleAggregation: true },
      webhook: { autoscaling: { enabled: true }, serviceMonitor: { enabled: true } },
    });
    const all = roles(objects);
    expect(all.length).toBeGreaterThanOrEqual(4);
    expect(all.flatMap(rulesOf).filter((r) => r.resources?.includes('secrets'))).toHaveLength(1);
    for (const role of all) {
      for (const rule of rulesOf(role)) {
        if (rule.resources?.includes('*')) {
          expect({ role: role.metadata.name, rule }).toEqual({
            role: `${RELEASE}-operator-instances-static`,
            rule: KUBEPLUS_RULE,
          });
          continue;
        }
        const fields = [rule.apiGroups, rule.resources, rule.verbs, rule.resourceNames, rule.nonResourceURLs];
        for (const value of fields.flat()) {
          expect({ role: role.metadata.name, value }).not.toEqual({ role: role.metadata.name, value: '*' });
          expect(String(value)).not.toContain('*');
        }
        if ((rule.resources ?? []).includes('secrets')) {
          // Only the operator's Role on its webhook's certificate Secret, by name.
          expect({ role: `${role.kind}/${role.metadata.name}`, rule }).toEqual({
            role: `Role/${WEBHOOK_CERTIFICATES}`,
            rule: {
              apiGroups: [''],
              resources: ['secrets'],
              resourceNames: [`${RELEASE}-webhook-certs`],
              verbs: ['get', 'patch'],
            },
          });
        }
        // One non-resource rule: secure metrics' reader role, get on /metrics (metrics-auth.test.ts).
        if (rule.nonResourceURLs !== undefined) {
          expect({ role: `${role.kind}/${role.metadata.name}`, rule }).toEqual({
            role: `ClusterRole/${RELEASE}-kubeplus-isolation-metrics-reader`,
            rule: { nonResourceURLs: ['/metrics'], verbs: ['get'] },
          });
        }
        expect(rule.verbs).not.toEqual(expect.arrayContaining(['escalate']));
        expect(rule.verbs).not.toEqual(expect.arrayContaining(['bind']));
        expect(rule.verbs).not.toEqual(expect.arrayContaining(['impersonate']));
      }
    }
  });

  test('the webhook reads Namespaces and nothing else', async () => {
    const objects = await render();
    const role = one(objects, 'ClusterRole', `${RELEASE}-webhook`);
    expect(rulesOf(role)).toEqual([{ apiGroups: [''], resources: ['namespaces'], verbs: ['get', 'list', 'watch'] }]);
    // Nothing else is bound to the webhook's ServiceAccount (the webhook-certificates RBAC is the
    // operator's) but secure metrics' reviews, which read nothing (metrics-auth.test.ts).
    const boundToWebhook = objects
      .filter((o) => o.kind === 'ClusterRoleBinding' || o.kind === 'RoleBinding')
      .filter((b) => (b.subjects as { name: string }[]).some((s) => s.name === `${RELEASE}-webhook`))
      .map((b) => `${b.kind}/${b.metadata.name}`)
      .sort();
    expect(boundToWebhook).toEqual([
      `ClusterRoleBinding/${RELEASE}-webhook`,
      `ClusterRoleBinding/${RELEASE}-webhook-metrics-auth`,
    ]);
    expect(grants(one(objects, 'ClusterRole', `${RELEASE}-webhook-metrics-auth`))).toEqual({
      'authentication.k8s.io/tokenreviews': ['create'],
      'authorization.k8s.io/subjectaccessreviews': ['create'],
    });
  });

  test('the operator gets exactly the verbs its code uses', async () => {
    const objects = await render({ operator: { instanceGroups: INSTANCE_GROUPS } });
    expect(grants(one(objects, 'ClusterRole', `${RELEASE}-operator`))).toEqual({
      'apiextensions.k8s.io/customresourcedefinitions': sorted('list', 'watch'),
      'core/namespaces': sorted('get', 'list', 'watch', 'create', 'patch', 'delete'),
      'node.k8s.io/runtimeclasses': sorted('get', 'list', 'watch', 'create', 'update', 'delete'),
      'admissionregistration.k8s.io/validatingadmissionpolicies': sorted(
        'get',
        'list',
        'watch',
        'create',
        'update',
        'delete',
      ),
      'admissionregistration.k8s.io/validatingadmissionpolicybindings': sorted(
        'get',
        'list',
        'watch',
        'create',
        'update',
        'delete',
      ),
      'admissionregistration.k8s.io/mutatingadmissionpolicies': sorted(
        'get',
        'list',
        'watch',
        'create',
        'update',
        'delete',
      ),
      'admissionregistration.k8s.io/mutatingadmissionpolicybindings': sorted(
        'get',
        'list',
        'watch',
        'create',
        'update',
        'delete',
      ),
      'core/events': sorted('create', 'patch'),
      // The fail-open audit lists an isolated namespace's Pods and watches new ones; nothing else on Pods.
      'core/pods': sorted('list', 'watch'),
      // Exclusive pools (on by default): the one ExclusivePools object, cached, created, replaced by name.
      'isolation.kubeplus.io/exclusivepools': sorted('list', 'watch', 'create'),
      'isolation.kubeplus.io/exclusivepools[exclusive-pools]': ['update'],
      // Where Pods really run (issue 38): the audit's Node cache; no get.
      'core/nodes': sorted('list', 'watch'),
      // webhookCertificates: finding the labelled configurations; writing is granted by name below.
      'admissionregistration.k8s.io/mutatingwebhookconfigurations': sorted('list', 'watch'),
      // Compliance reports (reports.enabled, the default): its Reports, and a LIST of Sandboxes.
      'openreports.io/reports': sorted('list', 'create', 'update', 'delete'),
      // create: the settle probe's server-side dry run (issue 35); list: the compliance reports and
      // the stale warm Sandboxes (issue 36), delete: those (uid precondition).
      'agents.x-k8s.io/sandboxes': sorted('create', 'list', 'delete'),
    });
    // Instances: KubePlus's group read-only, then one rule per listed group, named resources only,
    // read + patch (only to remove the finalizer of releases up to 0.2.0: the operator never
    // otherwise writes an instance), no update/delete.
    const instances = one(objects, 'ClusterRole', `${RELEASE}-operator-instances`);
    expect(rulesOf(instances)).toEqual([
      KUBEPLUS_RULE,
      ...INSTANCE_GROUPS.map(({ group, resources }) => ({
        apiGroups: [group],
        resources,
        verbs: ['get', 'list', 'watch', 'patch'],
      })),
    ]);
    // Leader election: its own Lease only, in the release namespace.
    const lease = one(objects, 'Role', `${RELEASE}-operator-leader-election`);
    expect(lease.metadata.namespace).toBe(NAMESPACE);
    expect(grants(lease)).toEqual({
      'coordination.k8s.io/leases': ['create'],
      [`coordination.k8s.io/leases[${RELEASE}-operator]`]: sorted('get', 'update'),
    });
  });

  test('webhook certificates: the operator may write its webhook’s Secret and configuration, by name, and nothing else', async () => {
    const objects = await render();
    const role = one(objects, 'Role', WEBHOOK_CERTIFICATES);
    expect(role.metadata.namespace).toBe(NAMESPACE);
    expect(rulesOf(role)).toEqual([
      {
        apiGroups: [''],
        resources: ['secrets'],
        resourceNames: [`${RELEASE}-webhook-certs`],
        verbs: ['get', 'patch'],
      },
    ]);
    const clusterRole = one(objects, 'ClusterRole', WEBHOOK_CERTIFICATES);
    expect(rulesOf(clusterRole)).toEqual([
      {
        apiGroups: ['admissionregistration.k8s.io'],
        resources: ['mutatingwebhookconfigurations'],
        resourceNames: [one(objects, 'MutatingWebhookConfiguration').metadata.name],
        verbs: ['update'],
      },
    ]);
    const subject = [{ kind: 'ServiceAccount', name: `${RELEASE}-operator`, namespace: NAMESPACE }];
    const roleBinding = one(objects, 'RoleBinding', WEBHOOK_CERTIFICATES);
    expect(roleBinding.metadata.namespace).toBe(NAMESPACE);
    expect(roleBinding.roleRef).toEqual({
      apiGroup: 'rbac.authorization.k8s.io',
      kind: 'Role',
      name: WEBHOOK_CERTIFICATES,
    });
    expect(roleBinding.subjects).toEqual(subject);
    const clusterRoleBinding = one(objects, 'ClusterRoleBinding', WEBHOOK_CERTIFICATES);
    expect(clusterRoleBinding.roleRef).toEqual({
      apiGroup: 'rbac.authorization.k8s.io',
      kind: 'ClusterRole',
      name: WEBHOOK_CERTIFICATES,
    });
    expect(clusterRoleBinding.subjects).toEqual(subject);
  });

  test('webhook certificates: the names come from the subcharts’ own naming, whatever the overrides', async () => {
    const objects = await render(
      { webhook: { fullnameOverride: 'nodeiso' }, operator: { serviceAccount: { name: 'kpi-op-sa' } } },
      { release: 'team', namespace: 'isolation' },
    );
    const prefix = 'team-kubeplus-isolation-webhook-certificates';
    const secret = one(objects, 'Secret');
    expect(secret.metadata.name).toBe('nodeiso-certs');
    expect(rulesOf(one(objects, 'Role', prefix))[0]?.resourceNames).toEqual([secret.metadata.name]);
    expect(rulesOf(one(objects, 'ClusterRole', prefix))[0]?.resourceNames).toEqual([
      one(objects, 'MutatingWebhookConfiguration').metadata.name,
    ]);
    const operatorPod = (
      one(objects, 'Deployment', 'team-operator').spec as {
        template: { spec: { serviceAccountName: string } };
      }
    ).template.spec;
    for (const kind of ['RoleBinding', 'ClusterRoleBinding']) {
      expect(one(objects, kind, prefix).subjects).toEqual([
        { kind: 'ServiceAccount', name: operatorPod.serviceAccountName, namespace: 'isolation' },
      ]);
    }
    expect(operatorPod.serviceAccountName).toBe('kpi-op-sa');
  });

  test('no certificate RBAC in helm or cert-manager mode, nor with the webhook disabled or inactive', async () => {
    for (const values of [
      HELM_TLS,
      { webhook: { certManager: { enabled: true } } },
      { webhook: { enabled: false } },
      { global: { nodeIsolation: { engine: 'admissionPolicy' } } },
    ]) {
      const objects = await render(values);
      expect({ values, rbac: objects.filter((o) => o.metadata.name === WEBHOOK_CERTIFICATES) }).toEqual({
        values,
        rbac: [],
      });
      // The operator's read-only rule stays while operator.webhookCertificates.enabled (the default).
      expect(grants(one(objects, 'ClusterRole', `${RELEASE}-operator`))).toHaveProperty(
        ['admissionregistration.k8s.io/mutatingwebhookconfigurations'],
        sorted('list', 'watch'),
      );
    }
    // (With platformNamespace set: an empty one needs the list to find KubePlus, tested below.)
    const off = await render({
      ...HELM_TLS,
      operator: { webhookCertificates: { enabled: false }, platformNamespace: 'kubeplus' },
    });
    expect(rulesOf(one(off, 'ClusterRole', `${RELEASE}-operator`)).flatMap((r) => r.resources ?? [])).not.toContain(
      'mutatingwebhookconfigurations',
    );
  });

  test('tls.mode=operator without the operator (or its webhook certificates) is refused: nobody would issue the certificate', async () => {
    expect(await renderError({ operator: { enabled: false } })).toContain(
      "webhook.tls.mode=operator (the default) needs the operator to issue the webhook's certificate, but " +
        'operator.enabled=false: nobody would issue it. Set webhook.tls.mode=helm (Helm-generated certificate) ' +
        'or webhook.certManager.enabled=true (cert-manager)',
    );
    expect(await renderError({ operator: { webhookCertificates: { enabled: false } } })).toContain(
      "webhook.tls.mode=operator (the default) needs the operator to issue the webhook's certificate, but " +
        'operator.webhookCertificates.enabled=false: nobody would issue it.',
    );
    // Either way out renders, and so does a webhook that is not installed or not active.
    for (const values of [
      { ...HELM_TLS, operator: { enabled: false } },
      { webhook: { certManager: { enabled: true } }, operator: { enabled: false } },
      { webhook: { enabled: false }, operator: { enabled: false } },
      { global: { nodeIsolation: { engine: 'admissionPolicy' } }, operator: { enabled: false } },
    ]) {
      expect((await render(values)).length).toBeGreaterThan(0);
    }
  });

  test('reports.enabled=false takes away the Report access, and turns the flag off', async () => {
    const objects = await render({ operator: { reports: { enabled: false } } });
    const all = grants(one(objects, 'ClusterRole', `${RELEASE}-operator`));
    const granted = Object.keys(all);
    expect(granted).not.toContain('openreports.io/reports');
    // The settle probe's dry-run create and the stale warm Sandboxes' list and delete are left.
    expect(all['agents.x-k8s.io/sandboxes']).toEqual(sorted('create', 'list', 'delete'));
    expect(granted).toContain('core/pods');
    const deployment = one(objects, 'Deployment', `${RELEASE}-operator`) as K8sObject & {
      spec: { template: { spec: { containers: Array<{ args: string[] }> } } };
    };
    expect(deployment.spec.template.spec.containers[0]?.args).toContain('--reports=false');
  });

  test("by default the operator reads KubePlus's instances (every Kind of platformapi.kubeplus) and writes none", async () => {
    const instances = one(await render(), 'ClusterRole', `${RELEASE}-operator-instances`);
    expect(rulesOf(instances)).toEqual([KUBEPLUS_RULE]);
    expect(instances.aggregationRule).toBeUndefined();
  });

  test('with kubeplus.enabled=false and without instanceGroups the operator may touch no instance at all', async () => {
    const instances = one(
      await render({ operator: { kubeplus: { enabled: false } } }),
      'ClusterRole',
      `${RELEASE}-operator-instances`,
    );
    expect(rulesOf(instances)).toEqual([]);
  });

  test('platformNamespace empty (the default): the operator may list and watch MutatingWebhookConfigurations to find KubePlus, even without webhook certificates', async () => {
    const objects = await render({
      operator: { webhookCertificates: { enabled: false } },
      webhook: { tls: { mode: 'helm' } },
    });
    expect(
      grants(one(objects, 'ClusterRole', `${RELEASE}-operator`))[
        'admissionregistration.k8s.io/mutatingwebhookconfigurations'
      ],
    ).toEqual(sorted('list', 'watch'));
    const deployment = one(objects, 'Deployment', `${RELEASE}-operator`) as K8sObject & {
      spec: { template: { spec: { containers: Array<{ args: string[] }> } } };
    };
    expect(deployment.spec.template.spec.containers[0]?.args).toContain('--platform-namespace=');
    const named = await render({
      operator: { platformNamespace: 'kubeplus', webhookCertificates: { enabled: false } },
      webhook: { tls: { mode: 'helm' } },
    });
    expect(Object.keys(grants(one(named, 'ClusterRole', `${RELEASE}-operator`)))).not.toContain(
      'admissionregistration.k8s.io/mutatingwebhookconfigurations',
    );
  });

  test('instanceRoleAggregation turns the instance role into an aggregate fed by labeled ClusterRoles', async () => {
    const objects = await render({ operator: { instanceGroups: INSTANCE_GROUPS, instanceRoleAggregation: true } });
    const aggregate = one(objects, 'ClusterRole', `${RELEASE}-operator-instances`);
    expect(aggregate.rules).toBeUndefined();
    expect(aggregate.aggregationRule).toEqual({
      clusterRoleSelectors: [{ matchLabels: { 'isolation.kubeplus.io/aggregate-to-operator': 'true' } }],
    });
    const fed = one(objects, 'ClusterRole', `${RELEASE}-operator-instances-static`);
    expect(fed.metadata.labels?.['isolation.kubeplus.io/aggregate-to-operator']).toBe('true');
    expect(rulesOf(fed).map((r) => r.apiGroups)).toEqual([
      ['platformapi.kubeplus'],
      ['platformapi.kubeplus'],
      ['cloudark.io'],
    ]);
  });

  test('every binding binds a role of this chart to this chart’s own ServiceAccount', async () => {
    const objects = await render({ operator: { instanceGroups: INSTANCE_GROUPS } });
    const serviceAccounts = new Set(
      objects.filter((o) => o.kind === 'ServiceAccount').map((o) => `${o.metadata.namespace}/${o.metadata.name}`),
    );
    const helmTest = `${RELEASE}-kubeplus-isolation-helm-test`;
    expect(serviceAccounts).toEqual(
      new Set([`${NAMESPACE}/${RELEASE}-webhook`, `${NAMESPACE}/${RELEASE}-operator`, `${NAMESPACE}/${helmTest}`]),
    );
    const roleNames = new Set(roles(objects).map((r) => `${r.kind}/${r.metadata.name}`));
    const bindings = objects.filter((o) => o.kind === 'ClusterRoleBinding' || o.kind === 'RoleBinding');
    // 4 for the services, 2 for secure metrics' reviews (one each), 2 for the webhook certificates
    // (to the operator), the uninstall hook's (to the operator) and the helm test's.
    expect(bindings.length).toBe(10);
    for (const binding of bindings) {
      const ref = binding.roleRef as { kind: string; name: string };
      expect(roleNames).toContain(`${ref.kind}/${ref.name}`);
      const subjects = binding.subjects as { kind: string; name: string; namespace: string }[];
      expect(subjects).toHaveLength(1);
      const subject = subjects[0] as { kind: string; name: string; namespace: string };
      expect(subject.kind).toBe('ServiceAccount');
      expect(serviceAccounts).toContain(`${subject.namespace}/${subject.name}`);
      // The webhook's role goes to the webhook, the helm test's to the test, the operator's (the
      // uninstall hook's included: it runs as the operator; and the webhook certificates', which
      // the operator issues) to the operator.
      const owner =
        ref.name.endsWith('-webhook') || ref.name.endsWith('-webhook-metrics-auth')
          ? 'webhook'
          : ref.name.endsWith('helm-test')
            ? 'helm-test'
            : 'operator';
      expect(subject.name.endsWith(owner)).toBe(true);
    }
  });

  test('a disabled component brings no ServiceAccount and no RBAC', async () => {
    // Without the operator the certificate must come from Helm (or cert-manager).
    const withoutOperator = await render({ ...HELM_TLS, operator: { enabled: false } });
    expect(
      roles(withoutOperator)
        .map((r) => r.metadata.name)
        .sort(),
    ).toEqual([
      `${RELEASE}-kubeplus-isolation-metrics-reader`,
      // Issue 39: the guards' RBAC override (bound to nobody by default; tamper-protection.test.ts).
      `${RELEASE}-kubeplus-isolation-tamper-override`,
      `${RELEASE}-webhook`,
      `${RELEASE}-webhook-metrics-auth`,
    ]);
    const withoutWebhook = await render({ webhook: { enabled: false } });
    expect(roles(withoutWebhook).some((r) => r.metadata.name.includes('webhook'))).toBe(false);
    expect(withoutWebhook.some((o) => o.kind === 'MutatingWebhookConfiguration')).toBe(false);
  });

  test('the hooks get only what they do: uninstall scales the operator’s own Deployment, helm test creates Pods in its namespace', async () => {
    const objects = await render({ operator: { instanceGroups: INSTANCE_GROUPS } });
    const uninstall = one(objects, 'Role', `${RELEASE}-operator-uninstall`);
    expect(uninstall.metadata.annotations?.['helm.sh/hook']).toBe('pre-delete');
    expect(rulesOf(uninstall)).toEqual([
      { apiGroups: ['apps'], resources: ['deployments'], resourceNames: [`${RELEASE}-operator`], verbs: ['get'] },
      {
        apiGroups: ['apps'],
        resources: ['deployments/scale'],
        resourceNames: [`${RELEASE}-operator`],
        verbs: ['patch'],
      },
      { apiGroups: [''], resources: ['pods'], verbs: ['list'] },
    ]);
    const helmTest = one(objects, 'Role', `${RELEASE}-kubeplus-isolation-helm-test`);
    expect(helmTest.metadata.annotations?.['helm.sh/hook']).toBe('test');
    expect(helmTest.metadata.namespace).toBe(`${RELEASE}-kubeplus-isolation-helm-test`);
    expect(rulesOf(helmTest)).toEqual([{ apiGroups: [''], resources: ['pods'], verbs: ['create'] }]);
  });

  test('uninstall.cleanup=false and tests.enabled=false leave the hooks out', async () => {
    const objects = await render({
      operator: { instanceGroups: INSTANCE_GROUPS, uninstall: { cleanup: false } },
      tests: { enabled: false },
    });
    expect(objects.filter((o) => o.metadata.annotations?.['helm.sh/hook'] !== undefined)).toEqual([]);
  });
});
