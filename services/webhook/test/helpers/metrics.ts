import type { Registry } from 'prom-client';

/** Current value of one series (0 when absent). For histograms, pass the `_count` name. */
export async function metricValue(
  registry: Registry,
  name: string,
  labels: Record<string, string> = {},
): Promise<number> {
  const histogramSuffix = name.endsWith('_count') ? '_count' : undefined;
  const metricName = histogramSuffix ? name.slice(0, -histogramSuffix.length) : name;
  const metric = registry.getSingleMetric(metricName);
  if (metric === undefined) throw new Error(`no metric ${metricName}`);
  const data = await metric.get();
  const match = data.values.find(
    (v) =>
      (histogramSuffix === undefined || (v as { metricName?: string }).metricName === name) &&
      Object.entries(labels).every(([k, val]) => v.labels[k] === val) &&
      (histogramSuffix !== undefined || Object.keys(v.labels).length === Object.keys(labels).length),
  );
  return match?.value ?? 0;
}
