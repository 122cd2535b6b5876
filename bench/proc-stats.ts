// CPU and memory of a process, from /proc (what `top` reads), and of its cgroup.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

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

/** RSS by kind: anonymous (the heap and stacks), file-backed (the binary and libraries, shared with every process mapping them) and shared memory. */
export function rssPartsMiB(pid: number): { anon: number; file: number; shmem: number } {
  const text = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kib = (key: string) => Number(new RegExp(`${key}:\\s+(\\d+) kB`).exec(text)?.[1] ?? Number.NaN) / 1024;
  return { anon: kib('RssAnon'), file: kib('RssFile'), shmem: kib('RssShmem') };
}

/** Proportional set size: RSS with each shared page divided among the processes mapping it. */
export function pssMiB(pid: number): number {
  const m = /^Pss:\s+(\d+) kB/m.exec(readFileSync(`/proc/${pid}/smaps_rollup`, 'utf8'));
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


/**
 * The working set of pid's memory cgroup (usage minus inactive file, what the
 * kubelet reports for a container), cgroup v1 or v2.
 */
export function workingSetMiB(pid: number, mount = '/sys/fs/cgroup'): number {
  const lines = readFileSync(`/proc/${pid}/cgroup`, 'utf8').split('\n');
  const v1 = lines.find((l) => /^\d+:([^:]*,)?memory(,[^:]*)?:/.test(l));
  const stat = (dir: string) => readFileSync(join(dir, 'memory.stat'), 'utf8');
  const field = (text: string, key: string) => Number(new RegExp(`^${key} (\\d+)$`, 'm').exec(text)?.[1] ?? Number.NaN);
  if (v1) {
    const dir = join(mount, 'memory', v1.slice(v1.indexOf(':', v1.indexOf(':') + 1) + 1));
    const usage = Number(readFileSync(join(dir, 'memory.usage_in_bytes'), 'utf8'));
    return (usage - field(stat(dir), 'total_inactive_file')) / 1024 ** 2;
  }
  const v2 = lines.find((l) => l.startsWith('0::'));
  if (!v2) throw new Error(`/proc/${pid}/cgroup names no memory cgroup`);
  const dir = join(mount, v2.slice(3));
  const usage = Number(readFileSync(join(dir, 'memory.current'), 'utf8'));
  return (usage - field(stat(dir), 'inactive_file')) / 1024 ** 2;
}
