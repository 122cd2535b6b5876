// /proc/stat: cumulative CPU time in clock ticks since boot.

export interface CpuTimes {
  /** Ticks spent doing work: user, nice, system, irq, softirq (guest is inside user). */
  busy: number;
  /** busy + idle + iowait + steal. */
  total: number;
  /** Online logical CPUs (the cpuN lines). */
  cpus: number;
}

export function parseProcStat(text: string): CpuTimes {
  let busy = -1;
  let total = 0;
  let cpus = 0;
  for (const line of text.split('\n')) {
    if (!line.startsWith('cpu')) continue;
    if (line.startsWith('cpu ')) {
      const f = line.trim().split(/\s+/).slice(1).map(Number);
      const [user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0, steal = 0] = f;
      busy = user + nice + system + irq + softirq;
      total = busy + idle + iowait + steal;
    } else if (/^cpu\d+\s/.test(line)) {
      cpus += 1;
    }
  }
  if (busy < 0 || cpus === 0) {
    throw new Error('/proc/stat has no aggregate "cpu" line or no per-CPU lines; is --proc-root pointing at a procfs?');
  }
  return { busy, total, cpus };
}

/** Millicores used between two readings: busy share of elapsed ticks times the CPU count. */
export function cpuMillicoresBetween(prev: CpuTimes, next: CpuTimes): number {
  const elapsed = next.total - prev.total;
  if (elapsed <= 0) return 0;
  const share = Math.min(1, Math.max(0, (next.busy - prev.busy) / elapsed));
  return Math.round(share * next.cpus * 1000);
}
