/**
 * Refusal mode (global.nodeIsolation.refuseUnplaced, issue 38): what the chart renders for it, on
 * every supported minor and under every engine. Its behaviour on a real API server, through a
 * webhook outage, is proven by e2e/test/node-isolation-refusal.test.ts from the same files.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, test } from '@jest/globals';
import { load, loadAll } from 'js-yaml';
import { byKind, CHART_DIR, type K8sObject, one, RELEASE, render, renderError } from './helm.js';

const REFUSAL = 'kubeplus-isolation-node-isolation-refusal';
const PARAMS_GUARD = `${RELEASE}-kubeplus-isolation-node-isolation-params-guard`;
const file = (name: string): K8sObject[] =>
  (loadAll(readFileSync(join(CHART_DIR, 'files', name), 'utf8')) as K8sObject[]).filter(Boolean);
const values = (nodeIsolation: Record<string, unknown>) => ({ global: { nodeIsolation } });
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
  ).rules.filter((r) => r.resources.includes('nodeisolations'));

/** The NodeIsolation parameter's CRD (exclusive pools' ExclusivePools CRD is rendered by default, and is not refusal's). */
const nodeIsolationCrds = (objects: K8sObject[]) =>
  byKind(objects, 'CustomResourceDefinition').filter((c) => c.metadata.name.startsWith('nodeisolations.'));

describe('global.nodeIsolation.refuseUnplaced', () => {
  test('off (the default): the design’s fail-open, nothing of refusal rendered', async () => {
    for (const objects of [await render(), await render(values({ refuseUnplaced: false }))]) {
      expect(objects.find((o) => o.metadata.name === REFUSAL)).toBeUndefined();
      expect(nodeIsolationCrds(objects)).toEqual([]);
      expect(operatorArgs(objects)).toContain('--node-isolation-refusal=false');
    }
    const defaults = load(readFileSync(join(CHART_DIR, 'values.yaml'), 'utf8')) as {
      global: { nodeIsolation: { refuseUnplaced: boolean } };
    };
    expect(defaults.global.nodeIsolation.refuseUnplaced).toBe(false);
  });

  test('on, with the webhook engine on the oldest minor: the CRD, the policy and binding exactly as in files/, the params guard, the operator writing the parameters', async () => {
    const objects = await render(values({ refuseUnplaced: true }), { args: ['--kube-version', '1.30.0'] });
    for (const want of [...file('node-isolation-params-crd.yaml'), ...file('node-isolation-refusal.yaml')]) {
      expect(one(objects, want.kind, want.metadata.name)).toEqual(want);
    }
    expect(byKind(objects, 'MutatingWebhookConfiguration')).toHaveLength(1);
    expect(byKind(objects, 'MutatingAdmissionPolicy')).toEqual([]);
    expect(objects.find((o) => o.metadata.name === PARAMS_GUARD)).toBeDefined();
    expect(operatorArgs(objects)).toEqual(
      expect.arrayContaining(['--node-isolation-engine=webhook', '--node-isolation-refusal=true']),
    );
    expect(paramRules(objects)).toEqual([
      {
        apiGroups: ['isolation.kubeplus.io'],
        resources: ['nodeisolations'],
        verbs: ['get', 'list', 'watch', 'create', 'update', 'delete'],
      },
    ]);
  });

  test('on, with the policy engine: ONE CRD (no duplicate), both policies', async () => {
    for (const engine of ['admissionPolicy', 'both']) {
      const objects = await render(values({ engine, refuseUnplaced: true }));
      expect(nodeIsolationCrds(objects).map((o) => o.metadata.name)).toEqual(['nodeisolations.isolation.kubeplus.io']);
      expect(byKind(objects, 'MutatingAdmissionPolicy')).toHaveLength(1);
      expect(one(objects, 'ValidatingAdmissionPolicy', REFUSAL)).toBeDefined();
      expect(paramRules(objects)).toHaveLength(1);
    }
  });

  test('the policy: Pod CREATE in labelled namespaces, parameter from the Pod’s namespace, Deny when it is missing, failurePolicy Fail, the toleration cap', async () => {
    const objects = await render(values({ refuseUnplaced: true }));
    const policy = one(objects, 'ValidatingAdmissionPolicy', REFUSAL).spec as {
      failurePolicy: string;
      paramKind: unknown;
      matchConstraints: { resourceRules: { resources: string[]; operations: string[] }[] };
      variables: { name: string; expression: string }[];
      validations: { expression: string; messageExpression: string; reason: string }[];
    };
    expect(policy.failurePolicy).toBe('Fail');
    expect(policy.paramKind).toEqual({ apiVersion: 'isolation.kubeplus.io/v1alpha1', kind: 'NodeIsolation' });
    expect(policy.matchConstraints.resourceRules).toEqual([
      expect.objectContaining({ resources: ['pods'], operations: ['CREATE'] }),
    ]);
    expect(policy.variables.find((v) => v.name === 'maxTolerations')?.expression).toBe('256');
    // The comparison is skipped over the cap (its cost is bounded by it).
    expect(policy.variables.find((v) => v.name === 'missingTolerations')?.expression).toMatch(
      /^variables\.podTolerations > variables\.maxTolerations \? \[\] :/,
    );
    expect(policy.validations.map((v) => v.reason)).toEqual(['Forbidden', 'Forbidden']);
    expect(policy.validations[1]?.messageExpression).toContain('global.nodeIsolation.refuseUnplaced');
    const binding = one(objects, 'ValidatingAdmissionPolicyBinding', REFUSAL).spec;
    expect(binding).toEqual({
      policyName: REFUSAL,
      validationActions: ['Deny'],
      paramRef: { name: 'node-isolation', parameterNotFoundAction: 'Deny' },
      matchResources: {
        namespaceSelector: {
          matchExpressions: [{ key: 'kubeplus.io/node-isolation-enabled', operator: 'In', values: ['true'] }],
        },
      },
    });
  });

  test('the schema takes only a boolean', async () => {
    expect(await renderError(values({ refuseUnplaced: 'yes' }))).toContain('refuseUnplaced');
  });
});
