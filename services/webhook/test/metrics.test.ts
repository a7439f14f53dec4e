import { describe, expect, it } from '@jest/globals';
import { ADMISSION_RESULTS } from '../src/admission/metric-labels.js';
import { createMetrics, DURATION_BUCKETS, recordAdmission } from '../src/metrics.js';
import { metricValue } from './helpers/metrics.js';

const NAME = 'kubeplus_webhook_admission_duration_seconds';
const HELP = 'Time from receiving a /mutate/pods request to sending its AdmissionReview response, by result.';

/** The scrape's lines of one series of the duration histogram: every bucket, then sum and count. */
function histogramLines(result: string, cumulative: readonly number[], sum: number): string[] {
  const les = [...DURATION_BUCKETS.map(String), '+Inf'];
  return [
    ...les.map((le, i) => `${NAME}_bucket{le="${le}",result="${result}"} ${cumulative[i]}`),
    `${NAME}_sum{result="${result}"} ${sum}`,
    `${NAME}_count{result="${result}"} ${cumulative[les.length - 1]}`,
  ];
}

describe('the admission duration histogram in the scrape', () => {
  it('has its name, help, type and every result series zeroed before any admission', async () => {
    const m = createMetrics({ defaultMetrics: false });
    const text = await m.registry.metrics();
    const zeros = new Array(DURATION_BUCKETS.length + 1).fill(0);
    const expected = [
      `# HELP ${NAME} ${HELP}`,
      `# TYPE ${NAME} histogram`,
      ...ADMISSION_RESULTS.flatMap((result) => histogramLines(result, zeros, 0)),
    ].join('\n');
    expect(text).toContain(`${expected}\n`);
  });

  it("counts a value equal to a bound in that bound's bucket, a value just above it in the next, cumulatively", async () => {
    const m = createMetrics({ defaultMetrics: false });
    // Every bound once, and once just above it (the last one past every bucket): two per bucket.
    for (const b of DURATION_BUCKETS) {
      recordAdmission(m, 'patched', b);
      recordAdmission(m, 'failopen', b * 1.001);
    }
    recordAdmission(m, 'failopen', 1234.5);
    const text = await m.registry.metrics();
    const lines = text.split('\n');
    const patched = [...DURATION_BUCKETS.map((_, i) => i + 1), DURATION_BUCKETS.length];
    const failopen = [0, ...DURATION_BUCKETS.map((_, i) => i + 1)];
    failopen[DURATION_BUCKETS.length] = DURATION_BUCKETS.length + 1;
    const bucketLines = (all: string[]) => all.filter((l) => !/_sum\{/.test(l));
    expect(lines).toEqual(expect.arrayContaining(bucketLines(histogramLines('patched', patched, 0))));
    expect(lines).toEqual(expect.arrayContaining(bucketLines(histogramLines('failopen', failopen, 0))));
    const sum = DURATION_BUCKETS.reduce((a, b) => a + b, 0);
    expect(await metricValue(m.registry, `${NAME}_count`, { result: 'patched' })).toBe(DURATION_BUCKETS.length);
    const sumLine = lines.find((l) => l.startsWith(`${NAME}_sum{result="patched"} `));
    expect(Number(sumLine?.split(' ')[1])).toBeCloseTo(sum, 12);
    expect(text).toContain(`${NAME}_bucket{le="+Inf",result="unchanged"} 0\n`);
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
