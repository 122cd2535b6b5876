// Window statistics that one spike or one idle second cannot swing far. Which
// statistic each resource uses is the policy's choice; by default CPU takes the
// 95th percentile (nearest rank) and memory the maximum (memory is not
// compressible: the peak is what the node must hold).
import { COLUMN, type UsageWindow } from './usage-window.js';

export type Statistic = 'p50' | 'p90' | 'p95' | 'p99' | 'max' | 'avg';
export const STATISTICS: readonly Statistic[] = ['p50', 'p90', 'p95', 'p99', 'max', 'avg'];

export interface UsageSummary {
  samples: number;
  spanMs: number;
  cpuP95Millicores: number;
  memoryMaxBytes: number;
}

// One scratch buffer for the percentiles of decide(): decisions run one at a
// time, and a Float64Array per call (two per decision, then a sorted copy of
// each) was a third of a decision's time, mostly allocation.
let scratch = new Float64Array(256);

/** A statistic of one field of the points from index `from` on (percentiles by nearest rank), with no allocation. */
export function windowStatistic(window: UsageWindow, from: number, field: 'cpuMillicores' | 'memoryBytes', which: Statistic): number {
  const n = window.length - from;
  if (n <= 0) return 0;
  const column = COLUMN[field];
  if (which === 'max') {
    let m = -Infinity;
    for (let i = from; i < window.length; i++) {
      const v = window.get(i, column);
      if (v > m) m = v;
    }
    return m;
  }
  if (which === 'avg') {
    let sum = 0;
    for (let i = from; i < window.length; i++) sum += window.get(i, column);
    return sum / n;
  }
  if (scratch.length < n) scratch = new Float64Array(Math.max(n, scratch.length * 2));
  for (let i = 0; i < n; i++) scratch[i] = window.get(from + i, column);
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

/** Index of the first point of the last windowMs, on the timeline of the newest point. */
export function windowStart(window: UsageWindow, windowMs: number): number {
  const newest = window.newestMs();
  if (newest === undefined) return 0;
  const cut = newest - windowMs;
  // Points are sorted by time (the store keeps them so): a binary search, not
  // a scan, since every summary row and every decision finds this cut.
  let lo = 0;
  let hi = window.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (window.get(mid, COLUMN.timestampMs) > cut) hi = mid;
    else lo = mid + 1;
  }
  return lo;
}

/** The points from index `from` on, in the figures the query API shows. */
export function summarize(window: UsageWindow, from = 0): UsageSummary {
  const n = window.length - from;
  if (n <= 0) return { samples: 0, spanMs: 0, cpuP95Millicores: 0, memoryMaxBytes: 0 };
  return {
    samples: n,
    spanMs: window.get(window.length - 1, COLUMN.timestampMs) - window.get(from, COLUMN.timestampMs),
    cpuP95Millicores: windowStatistic(window, from, 'cpuMillicores', 'p95'),
    memoryMaxBytes: windowStatistic(window, from, 'memoryBytes', 'max'),
  };
}
