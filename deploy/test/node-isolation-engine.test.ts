/**
 * global.nodeIsolation.engine, as rendered: which objects each engine installs, what the operator
 * is told, the RBAC it gets and the tamper guard over the NodeIsolation parameters. The engine's
 * behaviour on a real API server is proven in e2e (node-isolation-engines.test.ts,
 * operator-node-isolation-policy.test.ts), from the same files/node-isolation-engine.yaml.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, jest, test } from '@jest/globals';
import { load, loadAll } from 'js-yaml';
import { byKind, CHART_DIR, type K8sObject, one, RELEASE, render, renderError } from './helm.js';

jest.setTimeout(60_000);

const PARAMS_GUARD = `${RELEASE}-kubeplus-isolation-node-isolation-params-guard`;
const ENGINE_FILE = join(CHART_DIR, 'files', 'node-isolation-engine.yaml');
const CRD_FILE = join(CHART_DIR, 'files', 'node-isolation-params-crd.yaml');

const engine = (name: string) => ({ global: { nodeIsolation: { engine: name } } });
const operatorArgs = (objects: K8sObject[]): string[] => {
  const spec = one(objects, 'Deployment', `${RELEASE}-operator`).spec as {
    template: { spec: { containers: { args: string[] }[] } };
  };
  return spec.template.spec.containers[0]?.args ?? [];
};
const operatorRules = (objects: K8sObject[]) =>
  (
    one(objects, 'ClusterRole', `${RELEASE}-operator`) as unknown as {
      rules: { apiGroups: string[]; resources: string[]; verbs: string[] }[];
    }
  ).rules;
const webhookObjects = (objects: K8sObject[]): string[] =>
  objects
    .filter(
      (o) => o.metadata.labels?.['app.kubernetes.io/name'] === 'webhook' || o.kind === 'MutatingWebhookConfiguration',
    )
    .map((o) => `${o.kind}/${o.metadata.name}`);

describe('global.nodeIsolation.engine', () => {
  test('admissionPolicy and both need Kubernetes 1.36 (MutatingAdmissionPolicy v1): older clusters get the reason, not helm\'s "no matches for kind"', async () => {
    for (const name of ['admissionPolicy', 'both']) {
      for (const version of ['1.30.14', '1.35.4']) {
        expect(await renderError(engine(name), { args: ['--kube-version', version] })).toContain(
          `global.nodeIsolation.engine=${name} needs MutatingAdmissionPolicy admissionregistration.k8s.io/v1 (Kubernetes 1.36 or later), which this cluster (Kubernetes v${version}) does not serve: use engine webhook (the default) on this cluster`,
        );
      }
      expect(
        byKind(await render(engine(name), { args: ['--kube-version', '1.36.0'] }), 'MutatingAdmissionPolicy'),
      ).toHaveLength(1);
    }
    // The default engine renders on the oldest supported minor.
    expect(
      byKind(await render({}, { args: ['--kube-version', '1.30.0'] }), 'MutatingWebhookConfiguration'),
    ).toHaveLength(1);
  });

  test('webhook (the default): the webhook, no policy engine, no NodeIsolation rights', async () => {
    for (const objects of [await render(), await render(engine('webhook'))]) {
      expect(byKind(objects, 'MutatingWebhookConfiguration')).toHaveLength(1);
      expect(
        byKind(objects, 'CustomResourceDefinition').filter((c) => c.metadata.name.startsWith('nodeisolations.')),
      ).toEqual([]);
      expect(byKind(objects, 'MutatingAdmissionPolicy')).toEqual([]);
      expect(objects.find((o) => o.metadata.name === PARAMS_GUARD)).toBeUndefined();
      expect(operatorArgs(objects)).toContain('--node-isolation-engine=webhook');
      expect(operatorRules(objects).flatMap((r) => r.resources)).not.toContain('nodeisolations');
    }
  });

  test('admissionPolicy: the CRD and one policy + binding exactly as in files/, and not a single webhook object', async () => {
    const objects = await render(engine('admissionPolicy'));
    expect(webhookObjects(objects)).toEqual([]);
    expect(byKind(objects, 'Deployment').map((d) => d.metadata.name)).toEqual([`${RELEASE}-operator`]);
    const shipped = [CRD_FILE, ENGINE_FILE].flatMap((f) =>
      (loadAll(readFileSync(f, 'utf8')) as K8sObject[]).filter(Boolean),
    );
    expect(shipped.map((o) => o.kind)).toContain('CustomResourceDefinition');
    for (const want of shipped) expect(one(objects, want.kind, want.metadata.name)).toEqual(want);
    // One NodeIsolation CRD (the ExclusivePools CRD of exclusive pools is another feature's).
    expect(
      byKind(objects, 'CustomResourceDefinition').filter((c) => c.metadata.name.startsWith('nodeisolations.')),
    ).toHaveLength(1);
    const binding = one(objects, 'MutatingAdmissionPolicyBinding', 'kubeplus-isolation-node-isolation').spec as {
      paramRef: { name: string; namespace?: string; parameterNotFoundAction: string };
    };
    // The parameter comes from the Pod's own namespace (no namespace in paramRef), named as the operator writes it.
    expect(binding.paramRef).toEqual({ name: 'node-isolation', parameterNotFoundAction: 'Allow' });
    expect(operatorArgs(objects)).toContain('--node-isolation-engine=admission-policy');
  });

  test('the policy engine bounds its CEL cost: a Deny policy (failurePolicy Fail) caps the tolerations of Pods in isolated namespaces', async () => {
    for (const name of ['admissionPolicy', 'both']) {
      const objects = await render(engine(name));
      const limits = one(objects, 'ValidatingAdmissionPolicy', 'kubeplus-isolation-node-isolation-limits').spec as {
        failurePolicy: string;
        matchConstraints: { resourceRules: { resources: string[]; operations: string[] }[] };
        variables: { name: string; expression: string }[];
        validations: { expression: string; messageExpression: string }[];
      };
      expect(limits.failurePolicy).toBe('Fail');
      expect(limits.matchConstraints.resourceRules).toEqual([
        expect.objectContaining({ resources: ['pods'], operations: ['CREATE'] }),
      ]);
      expect(limits.variables.find((v) => v.name === 'maxTolerations')?.expression).toBe('256');
      expect(limits.validations[0]?.messageExpression).toContain('at most');
      const binding = one(objects, 'ValidatingAdmissionPolicyBinding', 'kubeplus-isolation-node-isolation-limits')
        .spec as { validationActions: string[]; matchResources: unknown };
      expect(binding.validationActions).toEqual(['Deny']);
      const mutating = one(objects, 'MutatingAdmissionPolicyBinding', 'kubeplus-isolation-node-isolation').spec as {
        matchResources: unknown;
      };
      // The same namespaces as the mutating policy's.
      expect(binding.matchResources).toEqual(mutating.matchResources);
    }
    expect(
      (await render(engine('webhook'))).find((o) => o.metadata.name === 'kubeplus-isolation-node-isolation-limits'),
    ).toBeUndefined();
  });

  test('both: both engines, the operator writing the parameters', async () => {
    const objects = await render(engine('both'));
    expect(byKind(objects, 'MutatingWebhookConfiguration')).toHaveLength(1);
    expect(byKind(objects, 'MutatingAdmissionPolicy')).toHaveLength(1);
    expect(operatorArgs(objects)).toContain('--node-isolation-engine=both');
  });

  test('with the policy engine the operator may manage NodeIsolation objects, with exact verbs', async () => {
    for (const name of ['admissionPolicy', 'both']) {
      const rules = operatorRules(await render(engine(name))).filter((r) => r.resources.includes('nodeisolations'));
      expect(rules).toEqual([
        {
          apiGroups: ['isolation.kubeplus.io'],
          resources: ['nodeisolations'],
          verbs: ['get', 'list', 'watch', 'create', 'update', 'delete'],
        },
      ]);
    }
  });

  test('the tamper guard denies every NodeIsolation write except by the operator and admins', async () => {
    const objects = await render(engine('admissionPolicy'));
    const policy = one(objects, 'ValidatingAdmissionPolicy', PARAMS_GUARD).spec as {
      matchConstraints: { resourceRules: { apiGroups: string[]; resources: string[]; operations: string[] }[] };
      matchConditions: { expression: string }[];
      validations: { expression: string; messageExpression: string }[];
    };
    expect(policy.matchConstraints.resourceRules).toEqual([
      expect.objectContaining({
        apiGroups: ['isolation.kubeplus.io'],
        resources: ['nodeisolations'],
        operations: ['CREATE', 'UPDATE', 'DELETE'],
      }),
    ]);
    expect(policy.matchConditions[0]?.expression).toContain(
      `system:serviceaccount:kubeplus-system:${RELEASE}-operator`,
    );
    expect(policy.matchConditions[0]?.expression).toContain('system:masters');
    expect(policy.validations[0]?.expression).toBe('false || variables.rbacOverride');
    expect(one(objects, 'ValidatingAdmissionPolicyBinding', PARAMS_GUARD).spec).toMatchObject({
      policyName: PARAMS_GUARD,
      validationActions: ['Deny'],
    });
    // No guard without tamper protection.
    const off = await render({ ...engine('admissionPolicy'), tamperProtection: { enabled: false } });
    expect(off.find((o) => o.metadata.name === PARAMS_GUARD)).toBeUndefined();
  });

  test('an unknown engine is refused by the schema, naming the choices', async () => {
    expect(await renderError(engine('admission-policy'))).toContain(
      "value must be one of 'webhook', 'admissionPolicy', 'both'",
    );
  });

  test('the values file documents the engine value', () => {
    const values = load(readFileSync(join(CHART_DIR, 'values.yaml'), 'utf8')) as {
      global: { nodeIsolation: { engine: string } };
    };
    expect(values.global.nodeIsolation.engine).toBe('webhook');
  });
});
