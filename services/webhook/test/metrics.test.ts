import { describe, expect, it } from '@jest/globals';
import { Histogram, Registry } from 'prom-client';
import { ADMISSION_RESULTS } from '../src/admission/reasons.js';
import { createMetrics, DURATION_BUCKETS, FixedLabelHistogram, recordAdmission } from '../src/metrics.js';
import { metricValue } from './helpers/metrics.js';

const NAME = 'kubeplus_webhook_admission_duration_seconds';
const HELP = 'Time from receiving a /mutate/pods request to sending its AdmissionReview response, by result.';

/** Every bound, just below and above it, zero, and values past the last bucket. */
const VALUES = [
  0,
  0.00001,
  ...DURATION_BUCKETS.flatMap((b) => [b * 0.999, b, b * 1.001]),
  2,
  1234.5,
  0.0003,
  0.0003,
  0.07,
];

function pair() {
  const theirs = new Registry();
  const ours = new Registry();
  const reference = new Histogram({
    name: NAME,
    help: HELP,
    labelNames: ['result'] as const,
    buckets: DURATION_BUCKETS,
    registers: [theirs],
  });
  for (const result of ADMISSION_RESULTS) reference.zero({ result });
  const fast = new FixedLabelHistogram({
    name: NAME,
    help: HELP,
    labelName: 'result',
    labelValues: ADMISSION_RESULTS,
    buckets: DURATION_BUCKETS,
    registers: [ours],
  });
  return { theirs, ours, reference, fast };
}

/** What a scrape or getMetricsAsJSON shows of a value (prom-client adds fields such as `exemplar`). */
function shown(values: Array<{ labels: object; value: number; metricName?: string }>) {
  return values.map(({ labels, value, metricName }) => ({ labels, value, metricName }));
}

describe('FixedLabelHistogram reads out exactly as prom-client’s Histogram', () => {
  it('zeroed, before any observation', async () => {
    const { theirs, ours, reference, fast } = pair();
    expect(await ours.metrics()).toBe(await theirs.metrics());
    expect(shown((await fast.get()).values)).toEqual(shown((await reference.get()).values));
  });

  it('after observations on and around every bucket bound, in several series', async () => {
    const { theirs, ours, reference, fast } = pair();
    for (const [i, v] of VALUES.entries()) {
      const result = i % 3 === 0 ? 'failopen' : 'patched';
      reference.observe({ result }, v);
      fast.series(result).observe(v);
    }
    expect(await ours.metrics()).toBe(await theirs.metrics());
    const got = await fast.get();
    const want = await reference.get();
    expect({ ...got, values: shown(got.values) }).toEqual({ ...want, values: shown(want.values) });
  });

  it('refuses what prom-client refuses: a value that is not a finite number', () => {
    const { reference, fast } = pair();
    for (const v of [Number.NaN, Number.POSITIVE_INFINITY]) {
      expect(() => reference.observe({ result: 'patched' }, v)).toThrow(TypeError);
      expect(() => fast.series('patched').observe(v)).toThrow(TypeError);
    }
  });

  it('has a series per declared label value only', () => {
    const { fast } = pair();
    expect(() => fast.series('other' as 'patched')).toThrow(/no series result="other"/);
  });

  it('reset() zeroes every series; recorders bound before keep recording', async () => {
    const { ours, fast } = pair();
    const patched = fast.series('patched');
    patched.observe(0.002);
    ours.resetMetrics();
    const zeroed = pair();
    expect(await ours.metrics()).toBe(await zeroed.ours.metrics());
    patched.observe(0.002);
    zeroed.fast.series('patched').observe(0.002);
    expect(await ours.metrics()).toBe(await zeroed.ours.metrics());
  });
});

describe('recordAdmission', () => {
  it('counts each admission once, however often the registry is read', async () => {
    const m = createMetrics({ defaultMetrics: false });
    const count = (result: string) => metricValue(m.registry, 'kubeplus_webhook_admissions_total', { result });
    for (let i = 0; i < 3; i++) recordAdmission(m, 'patched', 0.0004);
    recordAdmission(m, 'failopen', 0.2);
    expect(await count('patched')).toBe(3);
    expect(await count('patched')).toBe(3);
    await m.registry.metrics();
    recordAdmission(m, 'patched', 0.0004);
    expect(await m.registry.metrics()).toContain('kubeplus_webhook_admissions_total{result="patched"} 4\n');
    expect(await count('failopen')).toBe(1);
    expect(await count('unchanged')).toBe(0);
    expect(await metricValue(m.registry, `${NAME}_count`, { result: 'patched' })).toBe(4);
    expect(await m.registry.metrics()).toContain(`${NAME}_bucket{le="0.0005",result="patched"} 4\n`);
    expect(await m.registry.metrics()).toContain(`${NAME}_sum{result="failopen"} 0.2\n`);
  });
});
