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
      return percentile(values, Number(which.slice(1)));
  }
}

/** The points of the last windowMs, on the timeline of the newest point. */
export function lastWindow(points: readonly WindowPoint[], windowMs: number): readonly WindowPoint[] {
  const newest = points[points.length - 1]?.timestampMs;
  if (newest === undefined) return points;
  let i = points.length;
  while (i > 0 && (points[i - 1]?.timestampMs ?? 0) > newest - windowMs) i -= 1;
  return i === 0 ? points : points.slice(i);
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
