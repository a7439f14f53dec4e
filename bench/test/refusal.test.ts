import { describe, expect, test } from '@jest/globals';
import type { KubernetesObject } from '@kubernetes/client-node';
import { chartFileObjects } from '../src/chart-files.js';
import { benchRefusalObjects, REFUSAL_BENCH_LABEL, REFUSAL_POLICY, refusalStats } from '../src/refusal.js';
import type { Percentiles } from '../src/stats.js';

const pct = (p50: number, p99: number): Percentiles => ({ p50, p90: p99, p99, p999: p99, max: p99, count: 10 });

describe('bench section refusal', () => {
  test('the shipped policy as is; only the binding narrowed to the bench label', () => {
    const shipped = chartFileObjects('node-isolation-refusal.yaml');
    const objects = benchRefusalObjects(shipped);
    expect(objects.map((o) => `${o.kind}/${o.metadata?.name}`)).toEqual([
      `ValidatingAdmissionPolicy/${REFUSAL_POLICY}`,
      `ValidatingAdmissionPolicyBinding/${REFUSAL_POLICY}`,
    ]);
    expect(objects[0]).toBe(shipped[0]);
    const binding = objects[1] as KubernetesObject & {
      spec: { paramRef: unknown; matchResources: { namespaceSelector: unknown } };
    };
    expect(binding.spec.matchResources.namespaceSelector).toEqual({
      matchExpressions: [{ key: 'kubeplus.io/node-isolation-enabled', operator: 'In', values: ['true'] }],
      matchLabels: { [REFUSAL_BENCH_LABEL]: 'true' },
    });
    expect(binding.spec.paramRef).toEqual({ name: 'node-isolation', parameterNotFoundAction: 'Deny' });
    // The shipped objects are not changed.
    expect(JSON.stringify(shipped)).not.toContain(REFUSAL_BENCH_LABEL);
  });

  test('r/c ratios and plugin differences pair each round with the same round', () => {
    const rounds = {
      c: [pct(1, 10), pct(10, 100)],
      r: [pct(2, 10), pct(20, 300)],
    };
    const plugin = { c: [100, 400], r: [150, 500] };
    const stats = refusalStats(
      [1],
      (s) => rounds[s],
      (s) => plugin[s],
    );
    expect(stats.ratios[0]?.rcP50.median).toBe(2);
    expect(stats.ratios[0]?.rcP99.min).toBe(1);
    expect(stats.ratios[0]?.rcP99.max).toBe(3);
    expect(stats.policyPlugin[0]?.rMinusCUs.min).toBe(50);
    expect(stats.policyPlugin[0]?.rMinusCUs.max).toBe(100);
  });
});
