/**
 * What the tamper guard is made of, as rendered. Its behaviour (who is denied what, with which
 * message) is proven against a real kube-apiserver in e2e/test/chart.test.ts; here: that it
 * guards the right keys and objects, exempts exactly the operator's ServiceAccount, the admin
 * groups and (issue 39) whoever RBAC allows `override` on tamperprotection.isolation.kubeplus.io
 * cluster-wide, never grants that verb to the operator, and follows the values.
 */
import { describe, expect, jest, test } from '@jest/globals';
import {
  COMPLIANCE_REPORT_NAME,
  FINALIZER,
  ISOLATION_SETTLED_LABEL,
  MANAGED_BY_LABEL,
  MANAGED_BY_VALUE,
  NAMESPACE_CREATED_FOR_ANNOTATION,
  NODE_ISOLATION_ANNOTATION,
  NODE_ISOLATION_ENABLED_LABEL,
  NODE_ISOLATION_RESOLVED_ANNOTATION,
  OWNER_ANNOTATION,
  OWNER_NAME_LABEL,
  OWNER_NAMESPACE_LABEL,
  OWNER_UID_LABEL,
  SANDBOX_ISOLATION_ANNOTATION,
} from '@kubeplus-isolation/spec';
import { type K8sObject, NAMESPACE, one, RELEASE, render, renderError } from './helm.js';

jest.setTimeout(60_000);

interface Policy {
  failurePolicy: string;
  matchConstraints: {
    resourceRules: { apiGroups: string[]; apiVersions?: string[]; resources: string[]; operations: string[] }[];
    objectSelector?: { matchLabels: Record<string, string> };
  };
  matchConditions: { name: string; expression: string }[];
  variables?: { name: string; expression: string }[];
  validations: { expression: string; messageExpression: string; reason: string }[];
}

const PREFIX = `${RELEASE}-kubeplus-isolation`;
const OPERATOR = `system:serviceaccount:${NAMESPACE}:${RELEASE}-operator`;
/** Issue 39: the RBAC check every guard ORs last into each validation (tamperProtection.rbacOverride). */
const OVERRIDE_CHECK =
  "authorizer.group('isolation.kubeplus.io').resource('tamperprotection').check('override').allowed()";
const OR_OVERRIDE = ' || variables.rbacOverride';
const OVERRIDE_ROLE = `${PREFIX}-tamper-override`;
/** Every guard policy (the confinement is no guard: it narrows the operator, never exempts). */
const GUARDS = [
  'namespace-guard',
  'owned-objects-guard',
  'report-guard',
  'instance-guard',
  'node-isolation-params-guard',
];
/** Values rendering every guard. */
const ALL_GUARDS = {
  operator: { instanceGroups: [{ group: 'platformapi.kubeplus', resources: ['wordpressservices'] }] },
  global: { nodeIsolation: { refuseUnplaced: true } },
};

function policy(objects: K8sObject[], suffix: string): Policy {
  return one(objects, 'ValidatingAdmissionPolicy', `${PREFIX}-${suffix}`).spec as Policy;
}

function variable(p: Policy, name: string): string {
  const found = p.variables?.find((v) => v.name === name);
  if (!found) throw new Error(`no variable ${name}`);
  return found.expression;
}

describe('tamper protection', () => {
  test('each policy has a Deny binding', async () => {
    const objects = await render();
    // The release's guards (the exclusive-pools policy, kubeplus-isolation-exclusive-pools, is not one).
    const policies = objects
      .filter((o) => o.kind === 'ValidatingAdmissionPolicy')
      .map((p) => p.metadata.name)
      .filter((n) => n.startsWith(PREFIX));
    expect(policies.sort()).toEqual(
      [
        `${PREFIX}-exclusive-pools-guard`,
        // KubePlus's group is covered by default (operator.kubeplus.enabled).
        `${PREFIX}-instance-guard`,
        `${PREFIX}-namespace-guard`,
        `${PREFIX}-operator-confinement`,
        `${PREFIX}-owned-objects-guard`,
        `${PREFIX}-report-guard`,
      ].sort(),
    );
    for (const name of policies) {
      const binding = one(objects, 'ValidatingAdmissionPolicyBinding', name).spec as {
        policyName: string;
        validationActions: string[];
      };
      expect(binding).toEqual({ policyName: name, validationActions: ['Deny'] });
      expect(policy(objects, name.slice(PREFIX.length + 1)).failurePolicy).toBe('Fail');
    }
  });

  test('the exempt identity is the operator’s own ServiceAccount, plus the admin groups', async () => {
    const objects = await render();
    const sa = one(objects, 'ServiceAccount', `${RELEASE}-operator`);
    expect(`system:serviceaccount:${sa.metadata.namespace}:${sa.metadata.name}`).toBe(OPERATOR);
    for (const suffix of ['namespace-guard', 'owned-objects-guard']) {
      const [condition] = policy(objects, suffix).matchConditions;
      expect(condition?.expression).toBe(
        `!(request.userInfo.username in ["${OPERATOR}"]) && ` +
          '!(has(request.userInfo.groups) && request.userInfo.groups.exists(g, g in ["system:masters"]))',
      );
    }
    expect(policy(objects, 'operator-confinement').matchConditions).toEqual([
      { name: 'is-operator', expression: `request.userInfo.username == "${OPERATOR}"` },
    ]);
  });

  test('a renamed operator ServiceAccount is the one exempted and confined', async () => {
    const objects = await render({ operator: { serviceAccount: { name: 'isolation-ctl' } } });
    const expected = `system:serviceaccount:${NAMESPACE}:isolation-ctl`;
    one(objects, 'ServiceAccount', 'isolation-ctl');
    expect(policy(objects, 'namespace-guard').matchConditions[0]?.expression).toContain(`["${expected}"]`);
    expect(policy(objects, 'operator-confinement').matchConditions[0]?.expression).toContain(`"${expected}"`);
  });

  test('Namespaces: the isolation label and annotation and the ownership markers are guarded', async () => {
    const guard = policy(await render(), 'namespace-guard');
    expect(guard.matchConstraints.resourceRules).toEqual([
      // The status and finalize subresources write labels and annotations too (issue 38).
      expect.objectContaining({
        apiGroups: [''],
        resources: ['namespaces', 'namespaces/status', 'namespaces/finalize'],
        operations: ['CREATE', 'UPDATE'],
      }),
    ]);
    expect(policy(await render(), 'operator-confinement').matchConstraints.resourceRules).toContainEqual(
      expect.objectContaining({
        apiGroups: [''],
        resources: ['namespaces', 'namespaces/status', 'namespaces/finalize'],
      }),
    );
    const labels = JSON.parse(variable(guard, 'changedLabels').split('.filter(')[0] as string) as string[];
    const annotations = JSON.parse(variable(guard, 'changedAnnotations').split('.filter(')[0] as string) as string[];
    // Every kubeplus.io/ label the operator writes on Namespaces: guarded from others, and the
    // confinement's list of what the operator itself may change (the settled label, issue 35, was
    // missing: the operator could never release the hold of a KubePlus namespace).
    expect(labels).toEqual([
      NODE_ISOLATION_ENABLED_LABEL,
      OWNER_NAME_LABEL,
      OWNER_NAMESPACE_LABEL,
      OWNER_UID_LABEL,
      ISOLATION_SETTLED_LABEL,
    ]);
    const confinement = policy(await render(), 'operator-confinement');
    expect(JSON.stringify(confinement.variables)).toContain(ISOLATION_SETTLED_LABEL);
    expect(annotations).toEqual([
      NODE_ISOLATION_RESOLVED_ANNOTATION,
      OWNER_ANNOTATION,
      NAMESPACE_CREATED_FOR_ANNOTATION,
    ]);
    // managed-by is guarded only for the value that marks the operator's ownership.
    expect(guard.validations.map((v) => v.expression).join('\n')).toContain(`'${MANAGED_BY_VALUE}'`);
    expect(variable(guard, 'oldManagedBy')).toContain(MANAGED_BY_LABEL);
    // Namespace deletion is never matched: the namespace controller and tenants keep deleting.
    expect(guard.matchConstraints.resourceRules.flatMap((r) => r.operations)).not.toContain('DELETE');
    for (const v of guard.validations) {
      expect(v.reason).toBe('Forbidden');
      expect(v.messageExpression).toContain(OPERATOR);
      expect(v.messageExpression).toContain('system:masters');
    }
  });

  test('operator-owned RuntimeClasses are guarded by their managed-by label', async () => {
    const guard = policy(await render(), 'owned-objects-guard');
    expect(guard.matchConstraints.objectSelector).toEqual({ matchLabels: { [MANAGED_BY_LABEL]: MANAGED_BY_VALUE } });
    expect(guard.matchConstraints.resourceRules).toEqual([
      expect.objectContaining({
        apiGroups: ['node.k8s.io'],
        resources: ['runtimeclasses'],
        operations: ['CREATE', 'UPDATE', 'DELETE'],
      }),
    ]);
    // Admission policies/bindings are deliberately absent: the API server never runs
    // API-registered admission on them (see README.md "Tamper protection").
    expect(JSON.stringify(guard.matchConstraints)).not.toContain('admissionpolicies');
  });

  test('admin groups and exempt users follow the values', async () => {
    const objects = await render({
      tamperProtection: { adminGroups: ['platform-admins', 'system:masters'], exemptUsers: ['kubeplus-saas'] },
    });
    const expression = policy(objects, 'namespace-guard').matchConditions[0]?.expression;
    expect(expression).toBe(
      `!(request.userInfo.username in ["${OPERATOR}","kubeplus-saas"]) && ` +
        '!(has(request.userInfo.groups) && request.userInfo.groups.exists(g, g in ["platform-admins","system:masters"]))',
    );
  });

  test('without the operator nothing is exempted but the admins, and nothing is confined', async () => {
    // Without the operator the webhook's certificate must come from Helm (tls.mode=operator is refused).
    const objects = await render({ operator: { enabled: false }, webhook: { tls: { mode: 'helm' } } });
    expect(policy(objects, 'namespace-guard').matchConditions[0]?.expression).toContain('username in []');
    expect(objects.some((o) => o.metadata.name === `${PREFIX}-operator-confinement`)).toBe(false);
  });

  test('staged rollout: Warn and Audit instead of Deny; Deny with Warn is refused', async () => {
    const objects = await render({
      tamperProtection: { validationActions: ['Warn', 'Audit'], failurePolicy: 'Ignore' },
    });
    for (const binding of objects.filter((o) => o.kind === 'ValidatingAdmissionPolicyBinding')) {
      expect((binding.spec as { validationActions: string[] }).validationActions).toEqual(['Warn', 'Audit']);
    }
    expect(policy(objects, 'namespace-guard').failurePolicy).toBe('Ignore');
    expect(await renderError({ tamperProtection: { validationActions: ['Deny', 'Warn'] } })).toContain(
      'tamperProtection.validationActions: Deny and Warn cannot be combined',
    );
  });

  test('tamperProtection.enabled=false removes every policy; confineOperator=false only the confinement', async () => {
    const off = await render({ tamperProtection: { enabled: false } });
    expect(
      off.filter((o) => o.kind.startsWith('ValidatingAdmissionPolicy') && o.metadata.name.startsWith(PREFIX)),
    ).toEqual([]);
    const unconfined = await render({ tamperProtection: { confineOperator: false } });
    expect(
      unconfined
        .filter((o) => o.kind === 'ValidatingAdmissionPolicy')
        .map((o) => o.metadata.name)
        .sort(),
    ).toEqual([
      `${PREFIX}-exclusive-pools-guard`,
      `${PREFIX}-instance-guard`,
      `${PREFIX}-namespace-guard`,
      `${PREFIX}-owned-objects-guard`,
      `${PREFIX}-report-guard`,
      'kubeplus-isolation-exclusive-pools',
    ]);
  });

  test("the operator's compliance Report is guarded by its own name; a namespace being deleted may delete it", async () => {
    const guard = policy(await render(), 'report-guard');
    expect(guard.matchConstraints.resourceRules).toEqual([
      expect.objectContaining({
        apiGroups: ['openreports.io'],
        resources: ['reports'],
        operations: ['CREATE', 'UPDATE', 'DELETE'],
      }),
    ]);
    // By the object's name, never request.name: a DELETE of a collection is admitted per Report
    // without one (the real API server refused a deletecollection with `no such key: name`).
    const byName = guard.matchConditions.find((c) => c.name === 'the-operators-report')?.expression ?? '';
    expect(byName).toContain(`object.metadata.name == '${COMPLIANCE_REPORT_NAME}'`);
    expect(byName).toContain(`oldObject.metadata.name == '${COMPLIANCE_REPORT_NAME}'`);
    expect(byName).not.toContain('request.name');
    expect(guard.matchConditions.at(-1)?.expression).toContain(OPERATOR);
    // The teardown exemption sits in the validation: matchConditions do not see namespaceObject.
    expect(JSON.stringify(guard.matchConditions)).not.toContain('namespaceObject');
    expect(guard.validations[0]?.expression).toBe(
      "(request.operation == 'DELETE' && namespaceObject != null && has(namespaceObject.metadata.deletionTimestamp))" +
        OR_OVERRIDE,
    );
    expect(guard.validations[0]?.messageExpression).toContain("compliance Report: ' +");
  });

  test('no report guard when the operator writes no Reports', async () => {
    const names = (objects: K8sObject[]) => objects.map((o) => o.metadata.name);
    expect(names(await render({ operator: { reports: { enabled: false } } }))).not.toContain(`${PREFIX}-report-guard`);
    expect(names(await render({ operator: { enabled: false }, webhook: { tls: { mode: 'helm' } } }))).not.toContain(
      `${PREFIX}-report-guard`,
    );
  });

  describe('instances: their isolation annotations and the operator’s finalizer', () => {
    const instanceGroups = [
      { group: 'platformapi.kubeplus', resources: ['wordpressservices'] },
      { group: 'cloudark.io', resources: ['agents'] },
    ];

    test('every resource of the instance groups is guarded on CREATE and UPDATE, never DELETE', async () => {
      const objects = await render({ operator: { instanceGroups } });
      const guard = policy(objects, 'instance-guard');
      expect(guard.failurePolicy).toBe('Fail');
      expect(guard.matchConstraints.resourceRules).toEqual([
        expect.objectContaining({
          apiGroups: ['platformapi.kubeplus', 'cloudark.io'],
          apiVersions: ['*'],
          resources: ['*'],
          operations: ['CREATE', 'UPDATE'],
        }),
      ]);
      expect(one(objects, 'ValidatingAdmissionPolicyBinding', `${PREFIX}-instance-guard`).spec).toEqual({
        policyName: `${PREFIX}-instance-guard`,
        validationActions: ['Deny'],
      });
      // The keys the operator obeys, and its own finalizer, exactly as packages/spec spells them.
      const annotations = JSON.parse(variable(guard, 'changedAnnotations').split('.filter(')[0] as string) as string[];
      expect(annotations).toEqual([NODE_ISOLATION_ANNOTATION, SANDBOX_ISOLATION_ANNOTATION]);
      const [, finalizerCheck] = guard.validations;
      expect(finalizerCheck?.expression).toBe(
        `(${JSON.stringify(FINALIZER)} in variables.newFinalizers) == (${JSON.stringify(FINALIZER)} in variables.oldFinalizers)${OR_OVERRIDE}`,
      );
      for (const v of guard.validations) {
        expect(v.reason).toBe('Forbidden');
        expect(v.messageExpression).toContain(OPERATOR);
        expect(v.messageExpression).toContain('system:masters');
      }
      expect(guard.matchConditions[0]?.expression).toBe(
        `!(request.userInfo.username in ["${OPERATOR}"]) && ` +
          '!(has(request.userInfo.groups) && request.userInfo.groups.exists(g, g in ["system:masters"]))',
      );
    });

    test('the platform’s own identities are exempted from the instance guard only', async () => {
      const objects = await render({
        operator: { instanceGroups },
        tamperProtection: {
          exemptUsers: ['kubeplus-saas'],
          instances: {
            exemptUsers: ['system:serviceaccount:kubeplus:kubeplus-saas-provider'],
            exemptGroups: ['system:serviceaccounts:kubeplus'],
          },
        },
      });
      const guard = policy(objects, 'instance-guard');
      expect(guard.matchConditions[0]?.expression).toBe(
        `!(request.userInfo.username in ["${OPERATOR}","kubeplus-saas","system:serviceaccount:kubeplus:kubeplus-saas-provider"]) && ` +
          '!(has(request.userInfo.groups) && request.userInfo.groups.exists(g, g in ["system:masters","system:serviceaccounts:kubeplus"]))',
      );
      expect(guard.validations[0]?.messageExpression).toContain(
        'users kubeplus-saas, system:serviceaccount:kubeplus:kubeplus-saas-provider or members of system:masters, system:serviceaccounts:kubeplus',
      );
      // The Namespace guard does not widen: KubePlus's identities still may not label namespaces.
      const namespaceGuard = policy(objects, 'namespace-guard');
      expect(namespaceGuard.matchConditions[0]?.expression).not.toContain('kubeplus-saas-provider');
      expect(namespaceGuard.matchConditions[0]?.expression).not.toContain('system:serviceaccounts:kubeplus');
    });

    test("KubePlus's group is guarded by default (operator.kubeplus.enabled); without it and without any group, there is none", async () => {
      const byDefault = policy(await render(), 'instance-guard');
      expect(byDefault.matchConstraints.resourceRules).toEqual([
        expect.objectContaining({
          apiGroups: ['platformapi.kubeplus'],
          resources: ['*'],
          operations: ['CREATE', 'UPDATE'],
        }),
      ]);
      const none = await render({ operator: { kubeplus: { enabled: false } } });
      expect(none.some((o) => o.metadata.name === `${PREFIX}-instance-guard`)).toBe(false);
    });

    test('extraGroups add groups; without any group, or disabled, there is no instance guard', async () => {
      const extra = policy(
        await render({
          operator: { instanceGroups },
          tamperProtection: { instances: { extraGroups: ['apps.example.com', 'cloudark.io'] } },
        }),
        'instance-guard',
      );
      expect(extra.matchConstraints.resourceRules[0]?.apiGroups).toEqual([
        'platformapi.kubeplus',
        'cloudark.io',
        'apps.example.com',
      ]);
      const none = await render({ operator: { kubeplus: { enabled: false } } });
      expect(none.some((o) => o.metadata.name === `${PREFIX}-instance-guard`)).toBe(false);
      const onlyExtra = policy(
        await render({
          operator: { kubeplus: { enabled: false } },
          tamperProtection: { instances: { extraGroups: ['apps.example.com'] } },
        }),
        'instance-guard',
      );
      expect(onlyExtra.matchConstraints.resourceRules[0]?.apiGroups).toEqual(['apps.example.com']);
      const off = await render({ operator: { instanceGroups }, tamperProtection: { instances: { enabled: false } } });
      expect(off.some((o) => o.metadata.name.startsWith(`${PREFIX}-instance-guard`))).toBe(false);
      expect(await renderError({ tamperProtection: { instances: { extraGroups: ['*'] } } })).toMatch(
        /tamperProtection\/instances\/extraGroups\/0/,
      );
    });
  });

  describe('cloud admins: the RBAC override (issue 39)', () => {
    test('every guard lets through whoever RBAC allows override on tamperprotection.isolation.kubeplus.io, cluster-wide', async () => {
      const objects = await render(ALL_GUARDS);
      for (const suffix of GUARDS) {
        const guard = policy(objects, suffix);
        // No namespace in the check: only a ClusterRoleBinding grants it (never a RoleBinding in a
        // tenant's namespace, even to cluster-admin).
        expect(variable(guard, 'rbacOverride')).toBe(OVERRIDE_CHECK);
        expect(variable(guard, 'rbacOverride')).not.toContain('.namespace(');
        // Last in every validation, and never in a matchCondition: variables are lazy, so only a
        // request the guard would otherwise refuse costs an authorization check.
        expect(guard.validations.length).toBeGreaterThan(0);
        for (const v of guard.validations) {
          expect(v.expression.endsWith(OR_OVERRIDE)).toBe(true);
          expect(v.messageExpression).toContain(
            `identities RBAC allows to override tamperprotection.isolation.kubeplus.io cluster-wide (a ClusterRoleBinding to cluster-admin or to ${OVERRIDE_ROLE})`,
          );
        }
        expect(JSON.stringify(guard.matchConditions)).not.toContain('authorizer');
        // The explicit lists stay.
        expect(guard.matchConditions.at(-1)?.expression).toContain('system:masters');
      }
    });

    test('the operator is never exempted through RBAC: its confinement asks no authorizer', async () => {
      const confinement = policy(await render(ALL_GUARDS), 'operator-confinement');
      expect(JSON.stringify(confinement)).not.toContain('authorizer');
      expect(JSON.stringify(confinement)).not.toContain('rbacOverride');
    });

    test('the chart ships a ClusterRole granting exactly that verb, bound only to the subjects given', async () => {
      const plain = await render(ALL_GUARDS);
      expect(one(plain, 'ClusterRole', OVERRIDE_ROLE).rules).toEqual([
        { apiGroups: ['isolation.kubeplus.io'], resources: ['tamperprotection'], verbs: ['override'] },
      ]);
      expect(plain.some((o) => o.kind === 'ClusterRoleBinding' && o.metadata.name === OVERRIDE_ROLE)).toBe(false);
      const subjects = [
        { kind: 'Group', name: 'platform-admins' },
        { kind: 'User', name: 'alice@example.com' },
      ];
      const bound = await render({ tamperProtection: { rbacOverride: { subjects } } });
      const binding = one(bound, 'ClusterRoleBinding', OVERRIDE_ROLE);
      expect(binding.roleRef).toEqual({
        apiGroup: 'rbac.authorization.k8s.io',
        kind: 'ClusterRole',
        name: OVERRIDE_ROLE,
      });
      expect(binding.subjects).toEqual(subjects);
      expect(
        await renderError({ tamperProtection: { rbacOverride: { subjects: [{ kind: 'Role', name: 'x' }] } } }),
      ).toMatch(/tamperProtection\/rbacOverride\/subjects\/0/);
    });

    test('no role of the chart but the override ClusterRole grants the verb, whatever is enabled', async () => {
      // A rule grants it when its group, resource and verb each match (a `*` would too).
      const grantsOverride = (rule: { apiGroups?: string[]; resources?: string[]; verbs?: string[] }): boolean =>
        (rule.apiGroups ?? []).some((g) => g === 'isolation.kubeplus.io' || g === '*') &&
        (rule.resources ?? []).some((r) => r === 'tamperprotection' || r === '*') &&
        (rule.verbs ?? []).some((v) => v === 'override' || v === '*');
      for (const values of [
        ALL_GUARDS,
        {
          ...ALL_GUARDS,
          operator: { ...ALL_GUARDS.operator, instanceRoleAggregation: true },
          global: { nodeIsolation: { engine: 'both', refuseUnplaced: true } },
          webhook: { autoscaling: { enabled: true } },
        },
      ]) {
        const objects = await render(values, { args: ['--kube-version', '1.36.0'] });
        const granting = objects
          .filter((o) => o.kind === 'ClusterRole' || o.kind === 'Role')
          .filter((r) => ((r.rules as Parameters<typeof grantsOverride>[0][] | undefined) ?? []).some(grantsOverride))
          .map((r) => `${r.kind}/${r.metadata.name}`);
        expect(granting).toEqual([`ClusterRole/${OVERRIDE_ROLE}`]);
        // ...and no binding of the chart gives that role to anyone (no subjects set).
        const toOverride = objects.filter(
          (o) =>
            (o.kind === 'ClusterRoleBinding' || o.kind === 'RoleBinding') &&
            (o.roleRef as { name: string }).name === OVERRIDE_ROLE,
        );
        expect(toOverride).toEqual([]);
      }
    });

    test('rbacOverride.enabled=false: only the explicit lists, no authorizer, no ClusterRole, and the messages say so', async () => {
      const objects = await render({ ...ALL_GUARDS, tamperProtection: { rbacOverride: { enabled: false } } });
      for (const suffix of GUARDS) {
        const guard = policy(objects, suffix);
        expect(JSON.stringify(guard)).not.toContain('authorizer');
        expect(JSON.stringify(guard)).not.toContain('rbacOverride');
        for (const v of guard.validations) expect(v.messageExpression).not.toContain('cluster-admin');
      }
      expect(policy(objects, 'owned-objects-guard').validations[0]?.expression).toBe('false');
      expect(objects.some((o) => o.metadata.name === OVERRIDE_ROLE)).toBe(false);
      const off = await render({ tamperProtection: { enabled: false } });
      expect(off.some((o) => o.metadata.name === OVERRIDE_ROLE)).toBe(false);
    });
  });

  test('principals that would break out of the CEL string literal are refused', async () => {
    expect(await renderError({ tamperProtection: { adminGroups: ['x"] || true || ["'] } })).toMatch(
      /tamperProtection\/adminGroups\/0/,
    );
  });
});
