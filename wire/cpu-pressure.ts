// Which CPU pressure a sample's decision reads: the agent's contention line
// (runnable tasks beyond the CPUs, CFS throttling left out) when the agent
// measured it, else the kernel's PSI "some" (agents from before the line, or
// hosts without /proc/loadavg), which overstates it wherever pods are throttled.
import type { Pressure__Output } from '../proto/gen/oversell/v1/Pressure.js';

/** The fields of a sample the choice reads, by their row paths (a present message reads 1). */
export type CpuPressureField = 'pressure.cpuContention' | 'pressure.cpuContention.avg10' | 'pressure.cpuSome.avg10';

/** The avg10 CPU pressure (percent) a decision uses, from a kept sample (the store's record: no closure per sample on the ingest path). */
export function cpuPressureFrom(sample: { value(field: CpuPressureField): number }): number {
  return sample.value('pressure.cpuContention') ? sample.value('pressure.cpuContention.avg10') : sample.value('pressure.cpuSome.avg10');
}

/** The same for a decoded Pressure message. */
export function cpuPressureOf(p: Pressure__Output | null | undefined): number {
  if (!p) return 0;
  return p.cpuContention ? p.cpuContention.avg10 : (p.cpuSome?.avg10 ?? 0);
}
