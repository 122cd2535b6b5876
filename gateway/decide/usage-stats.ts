// Window statistics that one spike or one idle second cannot swing far. Which
// statistic each resource uses is the policy's choice; by default CPU takes the
// 95th percentile (nearest rank) and memory the maximum (memory is not
// compressible: the peak is what the node must hold).

export interface WindowPoint {
  /** Agent clock; the window is cut on the agent's own timeline so replays line up. */
  timestampMs: number;
  cpuMillicores: number;
  memoryBytes: number;
  /** PSI some avg10, percent; 0 where the kernel has no PSI. */
  cpuPressure: number;
  memoryPressure: number;
}

export type Statistic = 'p50' | 'p90' | 'p95' | 'p99' | 'max' | 'avg';
export const STATISTICS: readonly Statistic[] = ['p50', 'p90', 'p95', 'p99', 'max', 'avg'];

export interface UsageSummary {
  samples: number;
  spanMs: number;
  cpuP95Millicores: number;
  memoryMaxBytes: number;
}

export function percentile(values: ArrayLike<number>, p: number): number {
  if (values.length === 0) return 0;
  // A typed array sorts numerically without a comparator call per pair.
  const sorted = new Float64Array(values.length);
  for (let i = 0; i < values.length; i++) sorted[i] = values[i] ?? 0;
  sorted.sort();
  const rank = Math.ceil((p / 100) * sorted.length);
  return sorted[Math.min(sorted.length, Math.max(1, rank)) - 1] ?? 0;
}

export function statistic(values: ArrayLike<number>, which: Statistic): number {
  if (values.length === 0) return 0;
  switch (which) {
    case 'max': {
      let m = -Infinity;
      for (let i = 0; i < values.length; i++) if ((values[i] ?? 0) > m) m = values[i] ?? 0;
      return m;
    }
    case 'avg': {
      let sum = 0;
      for (let i = 0; i < values.length; i++) sum += values[i] ?? 0;
      return sum / values.length;
    }
    default:
      return percentile(values, PERCENT[which]);
  }
}

// One scratch buffer for the percentiles of decide(): decisions run one at a
// time, and a Float64Array per call (two per decision, then a sorted copy of
// each) was a third of a decision's time, mostly allocation.
let scratch = new Float64Array(256);

/** statistic() of one field of points[from..], with no allocation. */
export function windowStatistic(points: readonly WindowPoint[], from: number, field: 'cpuMillicores' | 'memoryBytes', which: Statistic): number {
  const n = points.length - from;
  if (n <= 0) return 0;
  if (which === 'max') {
    let m = -Infinity;
    for (let i = from; i < points.length; i++) if (points[i]![field] > m) m = points[i]![field];
    return m;
  }
  if (which === 'avg') {
    let sum = 0;
    for (let i = from; i < points.length; i++) sum += points[i]![field];
    return sum / n;
  }
  if (scratch.length < n) scratch = new Float64Array(Math.max(n, scratch.length * 2));
  for (let i = 0; i < n; i++) scratch[i] = points[from + i]![field];
  const rank = Math.ceil((PERCENT[which] / 100) * n);
  return select(scratch, n, Math.min(n, Math.max(1, rank)) - 1);
}

/** The k-th smallest (from 0) of a[0..n): what sorting and indexing gives, in linear time. Reorders a. */
function select(a: Float64Array, n: number, k: number): number {
  let lo = 0;
  let hi = n - 1;
  while (hi > lo) {
    const pivot = a[(lo + hi) >>> 1]!;
    let i = lo;
    let j = hi;
    while (i <= j) {
      while (a[i]! < pivot) i++;
      while (a[j]! > pivot) j--;
      if (i <= j) {
        const t = a[i]!;
        a[i++] = a[j]!;
        a[j--] = t;
      }
    }
    // [lo..j] <= pivot, [i..hi] >= pivot, and anything between equals it.
    if (k <= j) hi = j;
    else if (k >= i) lo = i;
    else return a[k]!;
  }
  return a[k]!;
}

const PERCENT: Record<Exclude<Statistic, 'max' | 'avg'>, number> = { p50: 50, p90: 90, p95: 95, p99: 99 };

/** The points of the last windowMs, on the timeline of the newest point. */
export function lastWindow(points: readonly WindowPoint[], windowMs: number): readonly WindowPoint[] {
  const i = windowStart(points, windowMs);
  return i === 0 ? points : points.slice(i);
}

/** Index of the first point of the last windowMs. */
export function windowStart(points: readonly WindowPoint[], windowMs: number): number {
  const newest = points[points.length - 1]?.timestampMs;
  if (newest === undefined) return 0;
  let i = points.length;
  while (i > 0 && (points[i - 1]?.timestampMs ?? 0) > newest - windowMs) i -= 1;
  return i;
}

export function summarize(window: readonly WindowPoint[]): UsageSummary {
  if (window.length === 0) return { samples: 0, spanMs: 0, cpuP95Millicores: 0, memoryMaxBytes: 0 };
  const first = window[0]?.timestampMs ?? 0;
  const last = window[window.length - 1]?.timestampMs ?? 0;
  const cpu = new Float64Array(window.length);
  let memoryMax = 0;
  for (let i = 0; i < window.length; i++) {
    const p = window[i]!;
    cpu[i] = p.cpuMillicores;
    if (p.memoryBytes > memoryMax) memoryMax = p.memoryBytes;
  }
  return { samples: window.length, spanMs: last - first, cpuP95Millicores: percentile(cpu, 95), memoryMaxBytes: memoryMax };
}
