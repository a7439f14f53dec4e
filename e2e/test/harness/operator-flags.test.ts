/**
 * The launcher's flags (src/harness/operator.ts) against the operator's own flag parser: every
 * Lease preset is a combination the operator accepts (lease > renew deadline > 1.2 × retry;
 * shutdown > drain + renew deadline), and the flags say what the preset says.
 */
import { describe, expect, test } from '@jest/globals';
import { parseConfig } from '../../../services/operator/src/config.js';
import { LEASE_PRESETS, leaseFlags, operatorFlags } from '../../src/harness/operator.js';

const parse = (argv: readonly string[]) => parseConfig(argv, { env: {} });

describe('operator launcher flags', () => {
  test.each(Object.keys(LEASE_PRESETS) as (keyof typeof LEASE_PRESETS)[])(
    'the %s preset is accepted by the operator, with its timings',
    (preset) => {
      const result = parse(
        operatorFlags('/tmp/kubeconfig', { namespace: 'kpi-system', id: 'lease', identity: 'me', lease: preset }),
      );
      if (result.kind !== 'config') throw new Error(`refused: ${JSON.stringify(result)}`);
      const t = LEASE_PRESETS[preset];
      expect(result.config).toMatchObject({
        leaderElect: true,
        leaderElectionNamespace: 'kpi-system',
        leaderElectionId: 'lease',
        leaderElectionIdentity: 'me',
        leaseDurationMs: t.durationS * 1000,
        renewDeadlineMs: t.renewDeadlineS * 1000,
        retryPeriodMs: t.retryPeriodS * 1000,
        metricsPort: 0,
        bindAddress: '127.0.0.1',
      });
      if ('drainTimeoutS' in t) expect(result.config.drainTimeoutMs).toBe(t.drainTimeoutS * 1000);
      if ('shutdownTimeoutS' in t) expect(result.config.shutdownTimeoutMs).toBe(t.shutdownTimeoutS * 1000);
    },
  );

  test('default: no timing flags, the operator keeps its own', () => {
    expect(leaseFlags('default')).toEqual([]);
    expect(leaseFlags()).toEqual([]);
  });

  test('timings of a suite of its own are written as given', () => {
    expect(
      leaseFlags({ durationS: 60, renewDeadlineS: 45, retryPeriodS: 1, drainTimeoutS: 2, shutdownTimeoutS: 50 }),
    ).toEqual([
      '--lease-duration=60s',
      '--renew-deadline=45s',
      '--retry-period=1s',
      '--drain-timeout=2s',
      '--shutdown-timeout=50s',
    ]);
  });

  test('leader election off, or left to the operator', () => {
    expect(operatorFlags('/k', false)).toEqual([
      '--kubeconfig=/k',
      '--leader-elect=false',
      '--metrics-port=0',
      '--bind-address=127.0.0.1',
    ]);
    expect(operatorFlags('/k', undefined)).toEqual(['--kubeconfig=/k', '--metrics-port=0', '--bind-address=127.0.0.1']);
  });
});
