/**
 * The components' optional NetworkPolicies: nothing by default; when enabled, exactly the traffic
 * each component needs (the webhook's admission port from the API server's CIDRs only, metrics from
 * the monitoring peers, egress to the API server only), Pod selectors that select the Deployments'
 * Pods, named ports that exist on the containers, and a clear refusal without the API server's CIDRs.
 */
import { describe, expect, test } from '@jest/globals';
import { type K8sObject, render, renderError } from './helm.js';

interface PolicyPort {
  protocol: string;
  port: string | number;
}
interface Rule {
  ports: PolicyPort[];
  from?: unknown[];
  to?: unknown[];
}
interface NetworkPolicySpec {
  podSelector: { matchLabels: Record<string, string> };
  policyTypes: string[];
  ingress: Rule[];
  egress: Rule[];
}

const CIDRS = ['10.0.0.10/32', '10.0.0.11/32'];
const MONITORING = [{ namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'monitoring' } } }];

function one(objects: K8sObject[], kind: string, component: string): K8sObject {
  const found = objects.filter(
    (o) => o.kind === kind && o.metadata.labels?.['app.kubernetes.io/component'] === component,
  );
  expect(found).toHaveLength(1);
  return found[0] as K8sObject;
}

function containerPortNames(deployment: K8sObject): string[] {
  const spec = deployment.spec as { template: { spec: { containers: { ports?: { name: string }[] }[] } } };
  return spec.template.spec.containers.flatMap((c) => (c.ports ?? []).map((p) => p.name));
}

describe('NetworkPolicies', () => {
  test('none by default', async () => {
    expect((await render()).filter((o) => o.kind === 'NetworkPolicy')).toEqual([]);
  });

  test.each(['webhook', 'operator'] as const)(
    '%s: enabling it without the API server’s CIDRs fails with the reason',
    async (c) => {
      const stderr = await renderError({ [c]: { networkPolicy: { enabled: true } } });
      expect(stderr).toContain(`${c}.networkPolicy.apiServerCIDRs: list the`);
    },
  );

  test('webhook: admission port from the API server only, metrics from monitoring, egress to the API server only', async () => {
    const objects = await render({ webhook: { networkPolicy: { enabled: true, apiServerCIDRs: CIDRS } } });
    const policy = one(objects, 'NetworkPolicy', 'webhook').spec as NetworkPolicySpec;
    const deployment = one(objects, 'Deployment', 'webhook');
    const selector = (deployment.spec as { selector: { matchLabels: Record<string, string> } }).selector.matchLabels;
    expect(policy.podSelector.matchLabels).toEqual(selector);
    expect(policy.policyTypes).toEqual(['Ingress', 'Egress']);
    expect(policy.ingress).toEqual([
      { ports: [{ protocol: 'TCP', port: 'https' }], from: CIDRS.map((cidr) => ({ ipBlock: { cidr } })) },
      { ports: [{ protocol: 'TCP', port: 'metrics' }], from: MONITORING },
    ]);
    expect(policy.egress).toEqual([
      {
        ports: [
          { protocol: 'TCP', port: 443 },
          { protocol: 'TCP', port: 6443 },
        ],
        to: CIDRS.map((cidr) => ({ ipBlock: { cidr } })),
      },
    ]);
    for (const rule of policy.ingress)
      for (const p of rule.ports) expect(containerPortNames(deployment)).toContain(p.port);
  });

  test('operator: its one port from the monitoring peers only, egress to the API server only', async () => {
    const objects = await render({
      operator: { networkPolicy: { enabled: true, apiServerCIDRs: CIDRS, apiServerPorts: [6443] } },
    });
    const policy = one(objects, 'NetworkPolicy', 'operator').spec as NetworkPolicySpec;
    const deployment = one(objects, 'Deployment', 'operator');
    const selector = (deployment.spec as { selector: { matchLabels: Record<string, string> } }).selector.matchLabels;
    expect(policy.podSelector.matchLabels).toEqual(selector);
    expect(policy.ingress).toEqual([{ ports: [{ protocol: 'TCP', port: 'metrics' }], from: MONITORING }]);
    expect(policy.egress).toEqual([
      { ports: [{ protocol: 'TCP', port: 6443 }], to: CIDRS.map((cidr) => ({ ipBlock: { cidr } })) },
    ]);
    expect(containerPortNames(deployment)).toContain('metrics');
  });

  test('a CIDR that is not one is refused by the schema', async () => {
    const stderr = await renderError({ webhook: { networkPolicy: { enabled: true, apiServerCIDRs: ['apiserver'] } } });
    expect(stderr).toMatch(/apiServerCIDRs/);
  });
});
