// CPU and memory of a process, from /proc (what `top` reads).
import { readFileSync } from 'node:fs';

const CLK_TCK = 100;

/** Cumulative user+system CPU seconds of pid. */
export function cpuSeconds(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) / CLK_TCK; // utime, stime
}

export function rssMiB(pid: number): number {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m ? Number(m[1]) / 1024 : NaN;
}

/** The highest RSS pid has had (the kernel's VmHWM). */
export function peakRssMiB(pid: number): number {
  const m = /VmHWM:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m ? Number(m[1]) / 1024 : NaN;
}

/**
 * How often the kernel took the CPU from pid's main thread to run another
 * thread (its involuntary context switches so far).
 */
export function mainThreadPreemptions(pid: number): number {
  const m = /^nonvoluntary_ctxt_switches:\s+(\d+)/m.exec(readFileSync(`/proc/${pid}/task/${pid}/status`, 'utf8'));
  return m ? Number(m[1]) : NaN;
}

/** Watches a process: CPU over a window, RSS sampled every everyMs. */
export function watchProcess(pid: number, everyMs = 1000) {
  const startCpu = cpuSeconds(pid);
  const startAt = performance.now();
  const rss: number[] = [];
  const timer = setInterval(() => {
    try {
      rss.push(rssMiB(pid));
    } catch {
      // exited
    }
  }, everyMs);
  rss.push(rssMiB(pid));
  return {
    stop() {
      clearInterval(timer);
      const seconds = (performance.now() - startAt) / 1000;
      const cpu = cpuSeconds(pid) - startCpu;
      return { cpuSeconds: cpu, millicores: (cpu / seconds) * 1000, rssMaxMiB: Math.max(...rss), rssAvgMiB: rss.reduce((a, b) => a + b, 0) / rss.length, seconds };
    },
  };
}

