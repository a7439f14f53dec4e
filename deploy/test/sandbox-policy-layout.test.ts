/**
 * operator.sandboxPolicyLayout, as rendered: what each layout installs, what the operator is told
 * and the RBAC it gets. The layout's behaviour on a real API server is proven in e2e
 * (operator-sandbox-shared-policy.test.ts), from the same charts/operator/files/sandbox-isolation-crd.yaml.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, jest, test } from '@jest/globals';
import { load } from 'js-yaml';
import { byKind, CHART_DIR, type K8sObject, one, RELEASE, render, renderError } from './helm.js';

jest.setTimeout(60_000);

const CRD_FILE = join(CHART_DIR, 'charts', 'operator', 'files', 'sandbox-isolation-crd.yaml');
const layout = (name: string) => ({ operator: { sandboxPolicyLayout: name } });
const operatorArgs = (objects: K8sObject[]): string[] =>
  (
    one(objects, 'Deployment', `${RELEASE}-operator`).spec as {
      template: { spec: { containers: { args: string[] }[] } };
    }
  ).template.spec.containers[0]?.args ?? [];
const paramRules = (objects: K8sObject[]) =>
  (
    one(objects, 'ClusterRole', `${RELEASE}-operator`) as unknown as {
      rules: { apiGroups: string[]; resources: string[]; verbs: string[] }[];
    }
  ).rules.filter((r) => r.resources.includes('sandboxisolations'));

describe('operator.sandboxPolicyLayout', () => {
  test('per-instance (the default): no SandboxIsolation CRD, no rights on it, the operator told so', async () => {
    for (const objects of [await render(), await render(layout('per-instance'))]) {
      expect(byKind(objects, 'CustomResourceDefinition').map((c) => c.metadata.name)).not.toContain(
        'sandboxisolations.isolation.kubeplus.io',
      );
      expect(paramRules(objects)).toEqual([]);
      expect(operatorArgs(objects)).toContain('--sandbox-policy-layout=per-instance');
    }
  });

  test('shared: the CRD exactly as in files/ (cluster-scoped), exact verbs on it, the operator told so', async () => {
    const objects = await render(layout('shared'));
    const shipped = load(readFileSync(CRD_FILE, 'utf8')) as K8sObject & { spec: { scope: string } };
    expect(shipped.spec.scope).toBe('Cluster');
    expect(one(objects, 'CustomResourceDefinition', 'sandboxisolations.isolation.kubeplus.io')).toEqual(shipped);
    expect(paramRules(objects)).toEqual([
      {
        apiGroups: ['isolation.kubeplus.io'],
        resources: ['sandboxisolations'],
        verbs: ['get', 'list', 'watch', 'create', 'update', 'delete'],
      },
    ]);
    expect(operatorArgs(objects)).toContain('--sandbox-policy-layout=shared');
  });

  test('an unknown layout is refused by the schema, naming the choices', async () => {
    expect(await renderError(layout('per-tenant'))).toContain("value must be one of 'per-instance', 'shared'");
  });

  test('the subchart values file documents the default', () => {
    const values = load(readFileSync(join(CHART_DIR, 'charts', 'operator', 'values.yaml'), 'utf8')) as {
      sandboxPolicyLayout: string;
    };
    expect(values.sandboxPolicyLayout).toBe('per-instance');
  });
});
