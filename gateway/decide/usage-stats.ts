// Window statistics that one spike or one idle second cannot swing far:
// CPU takes the 95th percentile (nearest rank), memory the maximum (memory is
// not compressible: the peak is what the node must hold).

export interface WindowPoint {
  /** Agent clock; the window is cut on the agent's own timeline so replays line up. */
  timestampMs: number;
  cpuMillicores: number;
  memoryBytes: number;
}

export interface UsageSummary {
  samples: number;
  spanMs: number;
  cpuP95Millicores: number;
  memoryMaxBytes: number;
}

export function percentile(values: readonly number[], p: number): number {
  if (values.length === 0) return 0;
  const sorted = [...values].sort((a, b) => a - b);
  const rank = Math.ceil((p / 100) * sorted.length);
  return sorted[Math.min(sorted.length, Math.max(1, rank)) - 1] ?? 0;
}

export function summarize(window: readonly WindowPoint[]): UsageSummary {
  if (window.length === 0) return { samples: 0, spanMs: 0, cpuP95Millicores: 0, memoryMaxBytes: 0 };
  let memoryMax = 0;
  for (const p of window) memoryMax = Math.max(memoryMax, p.memoryBytes);
  const first = window[0]?.timestampMs ?? 0;
  const last = window[window.length - 1]?.timestampMs ?? 0;
  return {
    samples: window.length,
    spanMs: last - first,
    cpuP95Millicores: percentile(window.map((p) => p.cpuMillicores), 95),
    memoryMaxBytes: memoryMax,
  };
}
