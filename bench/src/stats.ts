/** Small, exact statistics over samples (no binning): quantiles, medians, spreads. */

/** The q-quantile (0..1) of `sorted` (ascending), linear interpolation between closest ranks. */
export function quantileSorted(sorted: ArrayLike<number>, q: number): number {
  const n = sorted.length;
  if (n === 0) return Number.NaN;
  if (n === 1) return sorted[0] as number;
  const pos = Math.min(Math.max(q, 0), 1) * (n - 1);
  const lo = Math.floor(pos);
  const hi = Math.ceil(pos);
  const a = sorted[lo] as number;
  const b = sorted[hi] as number;
  return a + (b - a) * (pos - lo);
}

export function sortedCopy(values: ArrayLike<number>): Float64Array {
  return Float64Array.from(values).sort();
}

export function quantile(values: ArrayLike<number>, q: number): number {
  return quantileSorted(sortedCopy(values), q);
}

export function median(values: ArrayLike<number>): number {
  return quantile(values, 0.5);
}

/** Median with the spread of the repeated runs it summarizes. */
export interface Summary {
  median: number;
  min: number;
  max: number;
  /** Number of repeated runs. */
  n: number;
}

export function summarize(values: readonly number[]): Summary {
  const s = sortedCopy(values);
  return { median: quantileSorted(s, 0.5), min: s[0] ?? Number.NaN, max: s[s.length - 1] ?? Number.NaN, n: s.length };
}

export interface Percentiles {
  p50: number;
  p90: number;
  p99: number;
  p999: number;
  max: number;
  count: number;
}

export function percentiles(values: ArrayLike<number>): Percentiles {
  const s = sortedCopy(values);
  return {
    p50: quantileSorted(s, 0.5),
    p90: quantileSorted(s, 0.9),
    p99: quantileSorted(s, 0.99),
    p999: quantileSorted(s, 0.999),
    max: s[s.length - 1] ?? Number.NaN,
    count: s.length,
  };
}

/** `count` evenly spaced quantiles (0..1) of `values`: the points of an empirical CDF plot. */
export function cdfPoints(values: ArrayLike<number>, count = 200): { q: number; value: number }[] {
  const s = sortedCopy(values);
  if (s.length === 0) return [];
  const out: { q: number; value: number }[] = [];
  for (let i = 0; i <= count; i++) {
    // Denser towards the tail, where p99/p999 live.
    const q = 1 - (1 - i / count) ** 2;
    out.push({ q, value: quantileSorted(s, q) });
  }
  return out;
}

/** A cumulative Prometheus histogram: upper bound (le) → count of observations ≤ le. */
export type Buckets = Map<number, number>;

/** Per-bucket difference after − before (a histogram of what happened in between). */
export function bucketDelta(before: Buckets, after: Buckets): Buckets {
  const out: Buckets = new Map();
  for (const [le, count] of after) out.set(le, count - (before.get(le) ?? 0));
  return out;
}

/**
 * The q-quantile of a cumulative histogram, interpolated linearly inside the bucket that holds
 * it — what Prometheus' histogram_quantile() does. Resolution is the bucket layout's.
 */
export function histogramQuantile(buckets: Buckets, q: number): number {
  const les = [...buckets.keys()].sort((a, b) => a - b);
  const total = buckets.get(Number.POSITIVE_INFINITY) ?? buckets.get(les[les.length - 1] ?? 0) ?? 0;
  if (total <= 0) return Number.NaN;
  const rank = q * total;
  let prevLe = 0;
  let prevCount = 0;
  for (const le of les) {
    const count = buckets.get(le) ?? 0;
    if (count >= rank) {
      if (le === Number.POSITIVE_INFINITY) return prevLe; // beyond the last finite bucket
      const inBucket = count - prevCount;
      return inBucket <= 0 ? le : prevLe + ((le - prevLe) * (rank - prevCount)) / inBucket;
    }
    prevLe = le;
    prevCount = count;
  }
  return Number.NaN;
}

export function histogramCount(buckets: Buckets): number {
  return buckets.get(Number.POSITIVE_INFINITY) ?? 0;
}
