import { describe, expect, it } from '@jest/globals';
import { Registry } from 'prom-client';
import { registerAuditMetrics, topNamespaces } from '../../../src/controllers/audit/audit-metrics.js';

describe('topNamespaces', () => {
  it('keeps only namespaces with unisolated Pods, the most first (ties by name), at most `limit`', () => {
    const counts = new Map([
      ['clean', 0],
      ['b', 5],
      ['a', 5],
      ['big', 40],
      ['small', 1],
    ]);
    expect(topNamespaces(counts, 3)).toEqual([
      ['big', 40],
      ['a', 5],
      ['b', 5],
    ]);
    expect(topNamespaces(counts, 100).map(([ns]) => ns)).toEqual(['big', 'a', 'b', 'small']);
    expect(topNamespaces(counts, 0)).toEqual([]);
  });

  it('stays bounded however many tenants there are', () => {
    const many = new Map(Array.from({ length: 10_000 }, (_, i) => [`t-${i}`, (i % 7) + 1] as [string, number]));
    const top = topNamespaces(many, 20);
    expect(top).toHaveLength(20);
    expect(top.every(([, n]) => n === 7)).toBe(true);
  });
});

describe('the Pod watch catch-up counter', () => {
  it('has one series per fixed reason, from zero', async () => {
    const registry = new Registry();
    const metrics = registerAuditMetrics(registry, { get: () => undefined, list: () => [] });
    const series = async () =>
      (await registry.metrics()).split('\n').filter((l) => l.startsWith('kubeplus_operator_pod_watch_catch_ups_total'));
    expect(await series()).toEqual([
      'kubeplus_operator_pod_watch_catch_ups_total{reason="expired"} 0',
      'kubeplus_operator_pod_watch_catch_ups_total{reason="missing"} 0',
    ]);
    metrics.podWatchCatchUp('expired');
    expect(await series()).toContain('kubeplus_operator_pod_watch_catch_ups_total{reason="expired"} 1');
  });
});
