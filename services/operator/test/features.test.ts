import { describe, expect, it } from '@jest/globals';
import { describeFeatures, operatorFeatures } from '../src/features.js';
import type { OperatorDeps } from '../src/operator.js';
import { FakeWorld } from './fake-world.js';
import { testConfig } from './operator-harness.js';
import { captureLogger, MemoryLease } from './runtime/fakes.js';

/** Everything the world can offer; the flags decide what is on. */
function deps(...argv: string[]): OperatorDeps {
  const world = new FakeWorld();
  return {
    config: testConfig(...argv),
    logger: captureLogger().logger,
    version: '0.0.0-test',
    identity: 'a',
    policyApis: { validating: true, mutatingVersion: 'admissionregistration.k8s.io/v1' },
    sources: world.informerSources(),
    clusterPort: (options) => world.port(options, []),
    eventSink: { create: async (_n, e) => e, patch: async () => ({ involvedObject: {}, metadata: {} }) },
    pods: world.podLister(),
    reports: world.reportIo(),
    leaseLock: new MemoryLease().view('a'),
    webhookCertificates: {
      configurations: world.informerSources().crds(undefined) as never,
      port: {} as never,
    },
    accessReviewer: {
      authenticate: async () => ({ authenticated: false, reason: 'test' }),
      authorize: async () => ({ allowed: false, reason: 'test' }),
    },
  };
}

describe('operatorFeatures: a part is on exactly when its group is present', () => {
  it('the defaults: audit with reports, webhook certificates, secure metrics, leader election', () => {
    const f = operatorFeatures(deps('--metrics-secure=true'));
    expect(f.audit).toMatchObject({ intervalMs: 300_000, namespaceMetricLimit: 20, reports: { maxResults: 100 } });
    expect(f.webhookCertificates?.policy).toEqual({
      caValidityMs: 43_800 * 3_600_000,
      certValidityMs: 2_160 * 3_600_000,
      propagationDelayMs: 120_000,
    });
    expect(f.secureMetrics).toEqual({ reviewer: expect.anything(), files: undefined });
    expect(f.leaderElection).toMatchObject({ leaseDurationMs: 15_000, renewDeadlineMs: 10_000, retryPeriodMs: 2_000 });
    expect(describeFeatures(deps(), f)).toMatchObject({
      auditInterval: '5m',
      reports: 'on (at most 100 results each)',
    });
  });

  it('secure metrics carry the certificate files when both are given', () => {
    const f = operatorFeatures(
      deps('--metrics-secure=true', '--metrics-tls-cert-file=/tls/tls.crt', '--metrics-tls-key-file=/tls/tls.key'),
    );
    expect(f.secureMetrics?.files).toEqual({ certFile: '/tls/tls.crt', keyFile: '/tls/tls.key' });
  });

  it('each flag turned off leaves its group out, though its I/O was given', () => {
    const f = operatorFeatures(
      deps('--audit-interval=0', '--webhook-certificates=false', '--metrics-secure=false', '--leader-elect=false'),
    );
    expect(f.audit).toBeUndefined();
    expect(f.webhookCertificates).toBeUndefined();
    expect(f.secureMetrics).toBeUndefined();
    expect(f.leaderElection).toBeUndefined();
    expect(describeFeatures(deps(), f)).toMatchObject({ auditInterval: 'disabled', reports: 'disabled' });
    expect(operatorFeatures(deps('--reports=false')).audit?.reports).toBeUndefined();
  });

  it('owns the served policy kinds, and the parameter kinds only when the flags have them written', () => {
    const kinds = (...argv: string[]) => operatorFeatures(deps(...argv)).instances.ownedResources.map((r) => r.kind);
    const policies = [
      'ValidatingAdmissionPolicy',
      'ValidatingAdmissionPolicyBinding',
      'MutatingAdmissionPolicy',
      'MutatingAdmissionPolicyBinding',
    ];
    expect(kinds()).toEqual(policies);
    expect(kinds('--node-isolation-engine=both', '--sandbox-policy-layout=shared')).toEqual([
      ...policies,
      'NodeIsolation',
      'SandboxIsolation',
    ]);
    // Refusal mode's policy reads the NodeIsolation parameter under the webhook engine too (issue 38).
    expect(kinds('--node-isolation-refusal=true')).toEqual([...policies, 'NodeIsolation']);
    expect(operatorFeatures(deps('--node-isolation-refusal=true')).instances.nodeIsolationParams).toBe(true);
  });

  it('refuses a part switched on without its I/O', () => {
    expect(() => operatorFeatures({ ...deps(), pods: undefined })).toThrow('operator: the audit needs a Pod lister');
    expect(() => operatorFeatures({ ...deps(), reports: undefined })).toThrow(
      'operator: the reports need a Report store',
    );
    expect(() => operatorFeatures({ ...deps(), leaseLock: undefined })).toThrow(
      'operator: leader election needs a lease lock',
    );
  });
});
