// What a public trace (Bitbrains, Alibaba 2018) says about a workload, in one
// shape whatever the source: the pods with their requests where the trace has
// them, their usage as sampled, and the machines where the trace has them.
// The simulator replays this; the readers only translate units and say, in
// `notes`, whatever they had to infer.

/** CPU in millicores, memory in bytes (as the simulator's Quantities). */
export interface Resources {
  cpu: number;
  memory: number;
}

/**
 * Usage samples in time order, one per distinct time: seconds since the
 * workload's origin, CPU in millicores, memory in bytes. A sample holds until
 * the next one (step-hold): the traces give the mean or the reading of each
 * interval, not a line between readings.
 */
export interface UsageSeries {
  readonly t: Float64Array;
  readonly cpu: Float64Array;
  readonly memory: Float64Array;
}

/** Something that ran from `start` to `end` (seconds since the origin) with recorded usage. */
export interface Recorded {
  start: number;
  /** The last sample's time plus the workload's sampling interval: the last sample holds that long. */
  end: number;
  usage: UsageSeries;
}

export interface PublicPod extends Recorded {
  /** The VM's file name (Bitbrains) or the container_id (Alibaba). */
  id: string;
  /** What the pod asks the scheduler for; undefined when the trace does not give it. */
  request: Resources | undefined;
  /** Alibaba's cpu_limit in millicores, where given. */
  cpuLimit?: number;
  /** The machine the trace ran it on, where given (Alibaba). */
  machine?: string;
}

export interface PublicMachine extends Recorded {
  id: string;
  capacity: Resources;
}

export type PublicTraceFormat = 'bitbrains' | 'alibaba-2018';

export interface PublicWorkload {
  format: PublicTraceFormat;
  pods: PublicPod[];
  /** The trace's machines with their total usage; undefined when the trace has no hosts (Bitbrains). */
  machines: PublicMachine[] | undefined;
  /** Whether every pod's request comes from the trace. False: the policies cannot be compared on requests. */
  requestsKnown: boolean;
  /** What the reader inferred, skipped or could not know, one sentence each, for the report. */
  notes: string[];
  /** The trace's own time of t = 0 (epoch seconds for Bitbrains, trace seconds for Alibaba). */
  originSeconds: number;
  /** The most common gap between consecutive samples of a series. */
  sampleSeconds: number;
  /** From the origin to the last end of any pod or machine. */
  durationSeconds: number;
}

/** A file that is not in the format it was read as; the message names the file, the line and what was expected. */
export class TraceFormatError extends Error {
  override name = 'TraceFormatError';
}

const ZERO: Resources = { cpu: 0, memory: 0 };

/** Index of the last sample at or before t, or -1. */
function sampleAt(s: UsageSeries, t: number): number {
  let lo = 0;
  let hi = s.t.length - 1;
  let found = -1;
  while (lo <= hi) {
    const mid = (lo + hi) >> 1;
    if (s.t[mid]! <= t) {
      found = mid;
      lo = mid + 1;
    } else {
      hi = mid - 1;
    }
  }
  return found;
}

/** Usage at time t, step-hold: the last sample at or before t; nothing before `start` or from `end` on. */
export function usageAt(r: Recorded, t: number): Resources {
  if (t < r.start || t >= r.end) return ZERO;
  const i = sampleAt(r.usage, t);
  return i < 0 ? ZERO : { cpu: r.usage.cpu[i]!, memory: r.usage.memory[i]! };
}

/** The highest CPU and the highest memory over the whole series (each at its own time). */
export function peak(r: Recorded): Resources {
  let cpu = 0;
  let memory = 0;
  for (let i = 0; i < r.usage.t.length; i++) {
    if (r.usage.cpu[i]! > cpu) cpu = r.usage.cpu[i]!;
    if (r.usage.memory[i]! > memory) memory = r.usage.memory[i]!;
  }
  return { cpu, memory };
}

export interface Resampled {
  cpu: Float64Array;
  memory: Float64Array;
}

/**
 * Usage on the simulator's grid: step k covers [from + k*step, from + (k+1)*step)
 * and holds the highest step-hold value within it, so a coarser grid never hides
 * a peak; a finer grid repeats each sample. Zero where the pod does not run.
 */
export function resample(r: Recorded, from: number, stepSeconds: number, steps: number): Resampled {
  if (!(stepSeconds > 0) || !Number.isInteger(steps) || steps < 0) throw new RangeError(`resample: step ${stepSeconds} s and ${steps} steps: need a positive step and a whole number of steps`);
  const cpu = new Float64Array(steps);
  const memory = new Float64Array(steps);
  const s = r.usage;
  const n = s.t.length;
  if (n === 0) return { cpu, memory };
  let i = sampleAt(s, from);
  for (let k = 0; k < steps; k++) {
    const a = from + k * stepSeconds;
    const b = a + stepSeconds;
    const lo = Math.max(a, r.start);
    const hi = Math.min(b, r.end);
    if (lo >= hi) continue;
    while (i + 1 < n && s.t[i + 1]! <= lo) i += 1;
    // The sample holding at lo, then every sample starting before hi.
    let c = i >= 0 && s.t[i]! <= lo ? s.cpu[i]! : 0;
    let m = i >= 0 && s.t[i]! <= lo ? s.memory[i]! : 0;
    for (let j = i + 1; j < n && s.t[j]! < hi; j++) {
      if (s.cpu[j]! > c) c = s.cpu[j]!;
      if (s.memory[j]! > m) m = s.memory[j]!;
    }
    cpu[k] = c;
    memory[k] = m;
  }
  return { cpu, memory };
}

/**
 * Samples as they come from a file (any order, repeated times) made into a
 * UsageSeries: sorted by time, and one sample per time keeping the higher of
 * each resource, so a repeated reading never hides a peak.
 */
export class SeriesBuilder {
  private readonly t: number[] = [];
  private readonly cpu: number[] = [];
  private readonly memory: number[] = [];
  private sorted = true;
  /** Samples dropped because another had the same time. */
  duplicates = 0;
  /** Whether samples came out of time order. */
  unordered = false;

  get length(): number {
    return this.t.length;
  }

  add(t: number, cpu: number, memory: number): void {
    const n = this.t.length;
    if (n > 0 && t < this.t[n - 1]!) this.sorted = false;
    this.t.push(t);
    this.cpu.push(cpu);
    this.memory.push(memory);
  }

  /** Times shifted by -origin. */
  build(origin: number): UsageSeries {
    const n = this.t.length;
    let order: number[] | undefined;
    if (!this.sorted) {
      this.unordered = true;
      order = Array.from({ length: n }, (_, i) => i);
      order.sort((x, y) => this.t[x]! - this.t[y]! || x - y);
    }
    const at = (k: number) => (order ? order[k]! : k);
    const t: number[] = [];
    const cpu: number[] = [];
    const memory: number[] = [];
    for (let k = 0; k < n; k++) {
      const i = at(k);
      const last = t.length - 1;
      if (last >= 0 && t[last] === this.t[i]! - origin) {
        this.duplicates += 1;
        if (this.cpu[i]! > cpu[last]!) cpu[last] = this.cpu[i]!;
        if (this.memory[i]! > memory[last]!) memory[last] = this.memory[i]!;
        continue;
      }
      t.push(this.t[i]! - origin);
      cpu.push(this.cpu[i]!);
      memory.push(this.memory[i]!);
    }
    return { t: Float64Array.from(t), cpu: Float64Array.from(cpu), memory: Float64Array.from(memory) };
  }

  /** The earliest time added, or Infinity. */
  first(): number {
    let m = Number.POSITIVE_INFINITY;
    for (const x of this.t) if (x < m) m = x;
    return m;
  }
}

/** Counts of the gaps between consecutive samples, to find the trace's sampling interval. */
export class GapCounter {
  private readonly counts = new Map<number, number>();

  addSeries(s: UsageSeries): void {
    for (let i = 1; i < s.t.length; i++) {
      // Millisecond resolution: the traces' jitter must not split one interval into many.
      const gap = Math.round((s.t[i]! - s.t[i - 1]!) * 1000) / 1000;
      this.counts.set(gap, (this.counts.get(gap) ?? 0) + 1);
    }
  }

  /** The most common gap (the smaller on a tie), or undefined when no series has two samples. */
  mostCommon(): number | undefined {
    let best: number | undefined;
    let bestCount = 0;
    for (const [gap, count] of this.counts) {
      if (count > bestCount || (count === bestCount && best !== undefined && gap < best)) {
        best = gap;
        bestCount = count;
      }
    }
    return best;
  }
}

/** The interval each last sample holds for: given, or the most common gap, or an error saying what to give. */
export function samplingInterval(format: PublicTraceFormat, gaps: GapCounter, given: number | undefined): number {
  if (given !== undefined) {
    if (!(given > 0)) throw new TraceFormatError(`${format}: sampleSeconds must be a positive number of seconds, got ${given}`);
    return given;
  }
  const gap = gapOrUndefined(gaps);
  if (gap === undefined) throw new TraceFormatError(`${format}: every series has a single sample, so the sampling interval is unknown: give sampleSeconds`);
  return gap;
}

function gapOrUndefined(gaps: GapCounter): number | undefined {
  const g = gaps.mostCommon();
  return g !== undefined && g > 0 ? g : undefined;
}

/** A pod or machine from a built series: it runs from its first sample to its last plus one interval. */
export function recorded(usage: UsageSeries, sampleSeconds: number): Recorded {
  const n = usage.t.length;
  return n === 0 ? { start: 0, end: 0, usage } : { start: usage.t[0]!, end: usage.t[n - 1]! + sampleSeconds, usage };
}
