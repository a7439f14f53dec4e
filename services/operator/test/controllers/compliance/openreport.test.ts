import { describe, expect, it } from '@jest/globals';
import type { UnisolatedPod } from '@kubeplus-isolation/spec';
import {
  buildReport,
  type ExistingReport,
  formatToleration,
  type InvalidAnnotation,
  isOwnReport,
  missingPlacementText,
  podResult,
  type Report,
  type ReportInput,
  reportable,
  reportChange,
  sandboxResult,
  shareResults,
} from '../../../src/controllers/compliance/openreport.js';

const DEDICATED = { key: 'dedicated', operator: 'Equal', value: 'pool-a', effect: 'NoSchedule' } as const;

function pod(name: string, over: Partial<UnisolatedPod> = {}): UnisolatedPod {
  return {
    name,
    uid: `uid-${name}`,
    missing: ['nodeSelector', 'tolerations'],
    missingNodeSelector: { pool: 'pool-a' },
    missingTolerations: [DEDICATED],
    ...over,
  };
}

const input = (over: Partial<ReportInput> = {}): ReportInput => ({
  namespace: 'team-a',
  pods: { checked: 5, unisolated: 2, pods: [pod('web-1'), pod('web-2')] },
  maxResults: 100,
  ...over,
});

/** What the API server gives back: the written object plus fields it owns. */
function asStored(report: Report, rv = '7'): ExistingReport {
  return {
    ...structuredClone(report),
    metadata: {
      ...structuredClone(report.metadata),
      resourceVersion: rv,
      // Added by the server or by others: never compared.
      labels: { ...report.metadata.labels, 'team.example.com/owner': 'a' },
      annotations: { ...report.metadata.annotations, 'kubectl.kubernetes.io/last-applied-configuration': '{}' },
      ...({ uid: 'r-1', creationTimestamp: '2026-01-01T00:00:00Z', generation: 3, managedFields: [{}] } as object),
    },
  };
}

describe('what a Pod lacks, named', () => {
  it('formats tolerations as taints read', () => {
    expect(formatToleration(DEDICATED)).toBe('dedicated=pool-a:NoSchedule');
    expect(formatToleration({ key: 'gpu', operator: 'Exists', effect: 'NoSchedule' })).toBe('gpu Exists:NoSchedule');
    expect(formatToleration({ operator: 'Exists' })).toBe('* Exists');
    expect(
      formatToleration({ key: 'k', operator: 'Equal', value: 'v', effect: 'NoExecute', tolerationSeconds: 30 }),
    ).toBe('k=v:NoExecute for 30s');
  });

  it('names every missing selector pair and toleration, and only those', () => {
    expect(
      missingPlacementText({
        missingNodeSelector: { pool: 'pool-a', zone: 'z1' },
        missingTolerations: [DEDICATED, { key: 'gpu', operator: 'Exists' }],
      }),
    ).toBe('nodeSelector pool=pool-a, zone=z1; tolerations dedicated=pool-a:NoSchedule, gpu Exists');
    expect(missingPlacementText({ missingNodeSelector: {}, missingTolerations: [DEDICATED] })).toBe(
      'toleration dedicated=pool-a:NoSchedule',
    );
    const result = podResult('team-a', pod('web-1', { missingTolerations: [], missing: ['nodeSelector'] }));
    expect(result).toMatchObject({
      source: 'kubeplus-isolation',
      policy: 'node-isolation',
      result: 'fail',
      properties: { missingNodeSelector: 'pool=pool-a' },
      resources: [{ apiVersion: 'v1', kind: 'Pod', namespace: 'team-a', name: 'web-1', uid: 'uid-web-1' }],
    });
    expect(result.properties.missingTolerations).toBeUndefined();
    expect(result.message).toMatch(/^Pod web-1 lacks the mandated node placement: nodeSelector pool=pool-a\. /);
  });

  it('says why a Sandbox is weak: unset, missing class, or a weaker handler', () => {
    const at = (s: Parameters<typeof sandboxResult>[3]) =>
      sandboxResult('team-a', 'agents.x-k8s.io/v1beta1', 'kata', s);
    expect(at({ name: 's1', runtimeClassName: '' }).message).toMatch(
      /^Sandbox s1 sets no runtimeClassName: weaker than the namespace's minimum kata\./,
    );
    expect(at({ name: 's2', runtimeClassName: 'gone' }).message).toContain(
      'names RuntimeClass "gone", which does not exist',
    );
    const weak = at({ name: 's3', uid: 'u3', runtimeClassName: 'fast', handler: 'runc', level: 'runc' });
    expect(weak).toMatchObject({
      policy: 'sandbox-isolation',
      result: 'fail',
      properties: { minimum: 'kata', runtimeClassName: 'fast', handler: 'runc', level: 'runc' },
      resources: [
        { apiVersion: 'agents.x-k8s.io/v1beta1', kind: 'Sandbox', namespace: 'team-a', name: 's3', uid: 'u3' },
      ],
    });
    expect(weak.message).toContain('runs RuntimeClass "fast" (handler runc, level runc)');
    expect(at({ name: 's4', runtimeClassName: 'odd', handler: 'odd' }).properties.level).toBe('unknown');
  });

  it('says when a compliant Sandbox runs a weaker Pod, naming both and what to do', () => {
    const r = sandboxResult('team-a', 'agents.x-k8s.io/v1beta1', 'kata', {
      name: 'agent-1',
      uid: 'u1',
      runtimeClassName: 'vm',
      handler: 'kata',
      level: 'kata',
      pod: { name: 'spare', runtimeClassName: 'fast', handler: 'runc', level: 'runc' },
    });
    expect(r.message).toBe(
      'Sandbox agent-1 asks for RuntimeClass "vm", but its Pod spare runs RuntimeClass "fast" (handler runc, level runc): ' +
        "weaker than the namespace's minimum kata. The Pod was not made from the Sandbox's template: the Sandbox " +
        'controller adopted an existing Pod as it was (before the minimum was raised, or before its Pod policy was in ' +
        "force), or the Pod names the Sandbox's UID as its controller under another kind; delete Pod spare and the " +
        'controller recreates it from the template.',
    );
    expect(r.properties).toEqual({
      minimum: 'kata',
      runtimeClassName: 'vm',
      handler: 'kata',
      level: 'kata',
      pod: 'spare',
      podRuntimeClassName: 'fast',
      podHandler: 'runc',
      podLevel: 'runc',
    });
    expect(r.resources).toEqual([
      { apiVersion: 'agents.x-k8s.io/v1beta1', kind: 'Sandbox', namespace: 'team-a', name: 'agent-1', uid: 'u1' },
      { apiVersion: 'v1', kind: 'Pod', namespace: 'team-a', name: 'spare' },
    ]);
  });

  it("says when a Sandbox's Pod started before its class got its current handler (issue 36)", () => {
    const own = 'kubeplus-sandbox-a';
    const r = sandboxResult('team-a', 'agents.x-k8s.io/v1beta1', 'kata', {
      name: 'warm-1',
      uid: 'u1',
      runtimeClassName: own,
      handler: 'kata',
      level: 'kata',
      pod: { name: 'warm-1', runtimeClassName: own, handler: 'kata', level: 'kata' },
      startedBeforeHandler: { runtimeClassName: own, since: '2026-12-07T06:00:00Z', createdAt: '2026-12-07T05:00:00Z' },
    });
    expect(r.message).toBe(
      `Sandbox warm-1's Pod warm-1 was created (2026-12-07T05:00:00Z) before RuntimeClass "${own}" got its current ` +
        "handler (2026-12-07T06:00:00Z): it may run the class's previous handler, weaker than the namespace's minimum " +
        'kata (RuntimeClass.handler is immutable: the class was deleted and created again, e.g. when the minimum was ' +
        'raised). Delete Pod warm-1 and the controller recreates it under the current handler.',
    );
    expect(r.properties).toMatchObject({
      reason: 'started-before-class-handler',
      classHandlerSince: '2026-12-07T06:00:00Z',
      createdAt: '2026-12-07T05:00:00Z',
      pod: 'warm-1',
    });
    expect(r.resources).toEqual([
      { apiVersion: 'agents.x-k8s.io/v1beta1', kind: 'Sandbox', namespace: 'team-a', name: 'warm-1', uid: 'u1' },
      { apiVersion: 'v1', kind: 'Pod', namespace: 'team-a', name: 'warm-1' },
    ]);
  });
});

describe('buildReport', () => {
  it('is one Report per namespace: scope, source, a fail result per finding, exact summary', () => {
    const report = buildReport(input());
    expect(report).toMatchObject({
      apiVersion: 'openreports.io/v1alpha1',
      kind: 'Report',
      metadata: {
        name: 'kubeplus-isolation',
        namespace: 'team-a',
        labels: { 'app.kubernetes.io/managed-by': 'kubeplus-isolation' },
        annotations: { 'kubeplus.io/report-results-omitted': '0' },
      },
      scope: { apiVersion: 'v1', kind: 'Namespace', name: 'team-a' },
      source: 'kubeplus-isolation',
      summary: { pass: 3, fail: 2, warn: 0, error: 0, skip: 0 },
    });
    expect(report.results.map((r) => r.resources[0]?.name)).toEqual(['web-1', 'web-2']);
    // Deterministic: nothing in it changes between audits of the same findings.
    expect(buildReport(input())).toEqual(report);
    expect(JSON.stringify(report)).not.toMatch(/timestamp|resourceVersion/i);
  });

  it('adds the Sandbox findings; a clean namespace has a Report with only passes', () => {
    const report = buildReport(
      input({
        sandboxes: {
          minimum: 'kata',
          apiVersion: 'agents.x-k8s.io/v1beta1',
          checked: 3,
          weakCount: 1,
          weak: [{ name: 'old', runtimeClassName: 'fast', handler: 'runc', level: 'runc' }],
        },
      }),
    );
    expect(report.summary).toEqual({ pass: 5, fail: 3, warn: 0, error: 0, skip: 0 });
    expect(report.results.map((r) => [r.policy, r.resources[0]?.name])).toEqual([
      ['node-isolation', 'web-1'],
      ['node-isolation', 'web-2'],
      ['sandbox-isolation', 'old'],
    ]);
    const clean = buildReport(input({ pods: { checked: 4, unisolated: 0, pods: [] } }));
    expect(clean.summary).toEqual({ pass: 4, fail: 0, warn: 0, error: 0, skip: 0 });
    expect(clean.results).toEqual([]);
  });

  it('caps the results, keeps the summary exact and says how many were left out', () => {
    const pods = Array.from({ length: 150 }, (_, i) => pod(`p-${i}`));
    const report = buildReport(input({ pods: { checked: 400, unisolated: 250, pods }, maxResults: 100 }));
    expect(report.results).toHaveLength(100);
    expect(report.results[0]?.resources[0]?.name).toBe('p-0');
    expect(report.summary).toMatchObject({ pass: 150, fail: 250 });
    expect(report.metadata.annotations['kubeplus.io/report-results-omitted']).toBe('150');
    expect(JSON.stringify(report).length).toBeLessThan(100 * 1024);
  });

  it('shares the cap between the policies', () => {
    expect(shareResults(300, 10, 100)).toEqual({ pods: 90, sandboxes: 10 });
    expect(shareResults(10, 300, 100)).toEqual({ pods: 10, sandboxes: 90 });
    expect(shareResults(300, 300, 100)).toEqual({ pods: 50, sandboxes: 50 });
    expect(shareResults(300, 300, 5)).toEqual({ pods: 3, sandboxes: 2 });
    expect(shareResults(3, 4, 100)).toEqual({ pods: 3, sandboxes: 4 });
    for (const [p, s, max] of [
      [0, 0, 1],
      [1, 0, 1],
      [7, 9, 10],
      [1000, 1, 1],
    ] as const) {
      const share = shareResults(p, s, max);
      expect(share.pods + share.sandboxes).toBe(Math.min(max, p + s));
    }
  });
});

describe('invalid annotations in the Report (issue 39)', () => {
  const bad: InvalidAnnotation = {
    instance: { apiVersion: 'cloudark.io/v1', kind: 'Agent', namespace: 'kubeplus', name: 'agent-b', uid: 'u-b' },
    annotation: 'kubeplus.io/node-isolation',
    policy: 'node-isolation',
    errors: ['tolerations[0].operator must be one of Exists, Equal'],
  };

  it("names the instance and its error as an error result of the annotation's policy, first; summary.error counts it", () => {
    const report = buildReport(input({ invalidAnnotations: [bad] }));
    expect(report.results[0]).toEqual({
      source: 'kubeplus-isolation',
      policy: 'node-isolation',
      result: 'error',
      message:
        'Agent kubeplus/agent-b: kubeplus.io/node-isolation is invalid: tolerations[0].operator must be one of Exists, Equal. ' +
        'The operator keeps the isolation it last applied from it (none if it never had a valid one); ' +
        'fix the annotation (`kubeplus-isolation validate` checks it before you merge).',
      properties: {
        annotation: 'kubeplus.io/node-isolation',
        errors: 'tolerations[0].operator must be one of Exists, Equal',
      },
      resources: [bad.instance],
    });
    expect(report.results.map((r) => r.result)).toEqual(['error', 'fail', 'fail']);
    expect(report.summary).toEqual({ pass: 3, fail: 2, warn: 0, error: 1, skip: 0 });
    expect(report.metadata.annotations['kubeplus.io/report-results-omitted']).toBe('0');
  });

  it('makes a namespace reportable on its own (nothing isolated there yet)', () => {
    const only = { namespace: 'team-b', pods: undefined, sandboxes: undefined, maxResults: 100 };
    expect(reportable(only)).toBe(false);
    expect(reportable({ ...only, invalidAnnotations: [bad] })).toBe(true);
    expect(buildReport({ ...only, invalidAnnotations: [bad] }).summary).toEqual({
      pass: 0,
      fail: 0,
      warn: 0,
      error: 1,
      skip: 0,
    });
  });

  it('shares the cap: errors first, the omitted count exact', () => {
    const report = buildReport(input({ invalidAnnotations: [bad, { ...bad, annotation: 'x' }], maxResults: 3 }));
    expect(report.results.map((r) => r.result)).toEqual(['error', 'error', 'fail']);
    expect(report.metadata.annotations['kubeplus.io/report-results-omitted']).toBe('1');
  });
});

describe('reportChange', () => {
  it('creates a missing Report', () => {
    const desired = buildReport(input());
    expect(reportChange(undefined, desired)).toEqual({ action: 'create', report: desired });
  });

  it('writes nothing when what the operator owns is unchanged, whatever the server or others added', () => {
    const desired = buildReport(input());
    expect(reportChange(asStored(desired), desired)).toEqual({ action: 'none' });
    // Key order does not matter either.
    const reordered = JSON.parse(
      JSON.stringify(asStored(desired), (_k, v) =>
        v && typeof v === 'object' && !Array.isArray(v) ? Object.fromEntries(Object.entries(v).reverse()) : v,
      ),
    ) as ExistingReport;
    expect(reportChange(reordered, desired)).toEqual({ action: 'none' });
  });

  it('replaces a Report whose findings, counts or own metadata changed, at the read resourceVersion, keeping others’ labels', () => {
    const before = buildReport(input());
    const stored = asStored(before, '42');
    // A Pod deleted: it leaves the results and the summary.
    const after = buildReport(input({ pods: { checked: 4, unisolated: 1, pods: [pod('web-2')] } }));
    const change = reportChange(stored, after);
    expect(change.action).toBe('update');
    if (change.action !== 'update') throw new Error('no update');
    expect(change.report.metadata.resourceVersion).toBe('42');
    expect(change.report.metadata.labels).toEqual({
      'app.kubernetes.io/managed-by': 'kubeplus-isolation',
      'team.example.com/owner': 'a',
    });
    expect(change.report.results.map((r) => r.resources[0]?.name)).toEqual(['web-2']);
    expect(change.report.summary).toMatchObject({ pass: 3, fail: 1 });
    // Only a count changes (a compliant Pod added): still a write.
    expect(
      reportChange(
        stored,
        buildReport(input({ pods: { checked: 6, unisolated: 2, pods: [pod('web-1'), pod('web-2')] } })),
      ).action,
    ).toBe('update');
    // Someone edited a result or removed the operator's annotation: put back.
    const edited = asStored(before);
    edited.results = (edited.results as Array<{ message: string }>).map((r) => ({ ...r, message: 'all fine' }));
    expect(reportChange(edited, before).action).toBe('update');
    const stripped = asStored(before);
    delete stripped.metadata?.annotations?.['kubeplus.io/report-results-omitted'];
    expect(reportChange(stripped, before).action).toBe('update');
  });

  it('tells the operator’s own Report from someone else’s', () => {
    expect(isOwnReport(asStored(buildReport(input())))).toBe(true);
    expect(isOwnReport({ metadata: { labels: { 'app.kubernetes.io/managed-by': 'kyverno' } } })).toBe(false);
    expect(isOwnReport({})).toBe(false);
  });
});

describe('where Pods really run (issue 38): placement results', () => {
  const misplaced = {
    name: 'web',
    uid: 'uid-web',
    offPool: { node: 'n1', missingNodeLabels: { pool: 'pool-a' } },
    beyondMandate: { tolerations: [{ operator: 'Exists' as const }], namespaces: ['team-b'] },
  };
  const withPlacement = buildReport({
    namespace: 'team-a',
    maxResults: 100,
    pods: {
      checked: 3,
      unisolated: 1,
      pods: [pod('down')],
      failingPods: 2,
      placement: { offPool: 1, beyondMandate: 1, pods: [misplaced], foreign: [{ node: 'n1', count: 2 }] },
    },
  });

  it('one result per finding, each with its stable rule; the summary counts findings as fail and clean Pods as pass', () => {
    expect(
      withPlacement.results.map((r) => [r.policy, r.rule ?? null, r.resources[0]?.kind, r.resources[0]?.name]),
    ).toEqual([
      ['node-isolation', null, 'Pod', 'down'],
      ['node-isolation', 'off-pool', 'Pod', 'web'],
      ['node-isolation', 'tolerates-beyond-mandate', 'Pod', 'web'],
      ['node-isolation', 'foreign-pods-on-pool', 'Node', 'n1'],
    ]);
    expect(withPlacement.summary).toEqual({ pass: 1, fail: 4, warn: 0, error: 0, skip: 0 });
    expect(withPlacement.metadata.annotations['kubeplus.io/report-results-omitted']).toBe('0');
  });

  it("names the node and the missing pairs, the tolerations, and how many foreign Pods: never another namespace's name", () => {
    const [, off, beyond, foreign] = withPlacement.results;
    expect(off?.properties).toEqual({ node: 'n1', missingNodeLabels: 'pool=pool-a' });
    expect(off?.message).toMatch(
      /^Pod web runs on node n1, outside the namespace's node pool: the node's labels lack pool=pool-a\./,
    );
    expect(beyond?.properties).toEqual({ tolerations: '* Exists' });
    expect(beyond?.message).toMatch(/^Pod web tolerates beyond its mandate: toleration \* Exists also tolerate/);
    expect(foreign?.properties).toEqual({ node: 'n1', foreignPods: '2' });
    expect(foreign?.message).toMatch(
      /^2 Pods of other namespaces run on node n1 of this namespace's dedicated node pool/,
    );
    expect(JSON.stringify(withPlacement)).not.toContain('team-b');
  });

  it('without placement findings the Report is what it was (no rule, same summary)', () => {
    const plain = buildReport({
      namespace: 'team-a',
      maxResults: 100,
      pods: { checked: 3, unisolated: 1, pods: [pod('down')] },
    });
    const judged = buildReport({
      namespace: 'team-a',
      maxResults: 100,
      pods: {
        checked: 3,
        unisolated: 1,
        pods: [pod('down')],
        failingPods: 1,
        placement: { offPool: 0, beyondMandate: 0, pods: [], foreign: [] },
      },
    });
    expect(judged).toEqual(plain);
  });
});
